package mqttapi

import (
	"slices"
	"strings"
	"testing"
)

func TestFilter_MatchesAndCapturesLikeMQTT(t *testing.T) {
	cases := []struct {
		name, filter, topic string
		match               bool
		caps                string // name=value,...
		broker              string
	}{
		{"literal", "a/b", "a/b", true, "", "a/b"},
		{"literal mismatch", "a/b", "a/c", false, "", "a/b"},
		{"plus captures", "sensors/+site/+device", "sensors/north/t1", true, "site=north,device=t1", "sensors/+/+"},
		{"plus too few levels", "sensors/+site/+device", "sensors/north", false, "", "sensors/+/+"},
		{"plus too many levels", "sensors/+site", "sensors/north/t1", false, "", "sensors/+"},
		{"plus matches empty level", "a/+x/c", "a//c", true, "x=", "a/+/c"},
		{"hash matches rest", "tele/#rest", "tele/a/b/c", true, "rest=a/b/c", "tele/#"},
		{"hash matches parent", "tele/#rest", "tele", true, "rest=", "tele/#"},
		{"hash alone", "#", "x/y", true, "", "#"},
		{"plain plus", "a/+/c", "a/b/c", true, "", "a/+/c"},
		{"dollar topics skip wildcards", "#", "$SYS/broker/uptime", false, "", "#"},
		{"dollar topics skip plus", "+/broker", "$SYS/broker", false, "", "+/broker"},
		{"dollar topics match literal", "$SYS/#", "$SYS/broker", true, "", "$SYS/#"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := parseFilter(c.filter)
			if err != nil {
				t.Fatal(err)
			}
			if f.broker != c.broker {
				t.Errorf("broker filter %q, want %q", f.broker, c.broker)
			}
			caps, ok := f.match(c.topic, nil)
			if ok != c.match {
				t.Fatalf("match %v, want %v", ok, c.match)
			}
			if !ok {
				return
			}
			var got []string
			for _, cp := range caps {
				got = append(got, cp.name+"="+cp.value)
			}
			if s := strings.Join(got, ","); s != c.caps {
				t.Errorf("captures %q, want %q", s, c.caps)
			}
		})
	}
}

func TestParseFilter_RefusesWhatMQTTRefuses(t *testing.T) {
	for _, bad := range []string{"", "a/#/b", "a/b+", "a/+x+/c", "a/+1x", "a/+__name__", "a/+x/+x", "$share/g/a", "a\x00b"} {
		if _, err := parseFilter(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseTopic_SplitsAtTheLastEquals(t *testing.T) {
	s, err := ParseTopic("a=b/+x=json")
	if err != nil || s.Topic != "a=b/+x" || s.Format != FormatJSON {
		t.Fatalf("got %+v, %v", s, err)
	}
	if _, err := ParseTopic("no-format"); err == nil {
		t.Fatal("a topic without =FORMAT accepted")
	}
}

func TestReadConfig_IsStrict(t *testing.T) {
	good := `{"subscriptions":[{"topic":"s/+site","format":"json","json":{"metric":"t","value_fields":["v"]}},{"topic":"tg/#","format":"influx","db":"telegraf"}]}`
	subs, err := ReadConfig(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 || subs[0].JSON.Metric != "t" || !slices.Equal(subs[0].JSON.ValueFields, []string{"v"}) || subs[1].DB != "telegraf" {
		t.Fatalf("read %+v", subs)
	}
	for name, bad := range map[string]string{
		"unknown key":      `{"subscriptions":[{"topic":"a","format":"json","colour":"red"}]}`,
		"no subscriptions": `{"subscriptions":[]}`,
		"trailing data":    `{"subscriptions":[{"topic":"a","format":"json"}]} {}`,
		"not json":         `subscriptions: []`,
	} {
		if _, err := ReadConfig(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestOptionsValidate_NamesWhatIsWrong(t *testing.T) {
	ok := func() Options {
		return Options{Broker: "tcp://localhost", ClientID: "c", Subscriptions: []Subscription{{Topic: "a/#", Format: FormatLineProtocol}}}
	}
	o := ok()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"no broker", func(o *Options) { o.Broker = "" }, "broker URL is required"},
		{"bad scheme", func(o *Options) { o.Broker = "http://x" }, "scheme"},
		{"no client id", func(o *Options) { o.ClientID = "" }, "client id"},
		{"no subscriptions", func(o *Options) { o.Subscriptions = nil }, "no subscriptions"},
		{"bad format", func(o *Options) { o.Subscriptions[0].Format = "xml" }, `format "xml"`},
		{"db on json", func(o *Options) { o.Subscriptions[0].Format, o.Subscriptions[0].DB = FormatJSON, "x" }, "db and precision"},
		{"bad precision", func(o *Options) { o.Subscriptions[0].Precision = "fortnight" }, "precision"},
		{"two metric sources", func(o *Options) {
			o.Subscriptions[0] = Subscription{Topic: "a", Format: FormatJSON, JSON: &JSONMapping{Metric: "m", MetricField: "n"}}
		}, "at most one"},
		{"metric_topic not captured", func(o *Options) {
			o.Subscriptions[0] = Subscription{Topic: "a/+kind", Format: FormatJSON, JSON: &JSONMapping{MetricTopic: "type"}}
		}, "metric_topic"},
		{"time without unit", func(o *Options) {
			o.Subscriptions[0] = Subscription{Topic: "a", Format: FormatJSON, JSON: &JSONMapping{TimeField: "ts"}}
		}, "time_unit"},
		{"label field clashes with capture", func(o *Options) {
			o.Subscriptions[0] = Subscription{Topic: "a/+site", Format: FormatJSON, JSON: &JSONMapping{LabelFields: []string{"site"}}}
		}, "topic capture"},
		{"sparkplug captures", func(o *Options) { o.Subscriptions[0] = Subscription{Topic: "spBv1.0/+g/#", Format: FormatSparkplugB} }, "no +name"},
		{"bad static label", func(o *Options) { o.Subscriptions[0].Labels = map[string]string{"1x": "y"} }, "label"},
		{"receive maximum", func(o *Options) { o.ReceiveMaximum = 70000 }, "receive maximum"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := ok()
			c.edit(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
}
