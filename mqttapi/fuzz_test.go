package mqttapi

import (
	"math"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// checkResult holds every decoder to the result's contract, whatever the
// input: bounded points, valid label sets within the limits, finite
// values, counts that add up.
func checkResult(t *testing.T, r *result, o *Options) {
	t.Helper()
	n := 0
	for _, b := range r.batches {
		if len(b.Ts) != len(b.Vs) || len(b.Ts) == 0 {
			t.Fatalf("batch %v: %d timestamps, %d values", b.Labels, len(b.Ts), len(b.Vs))
		}
		if _, err := labels.New(b.Labels, o.Limits); err != nil {
			t.Fatalf("invalid series %v: %v", b.Labels, err)
		}
		for _, l := range b.Labels {
			if err := checkLabelValue(l.Name, l.Value); err != nil {
				t.Fatalf("series %v: %v", b.Labels, err)
			}
		}
		if name := labels.Labels(b.Labels).Get(labels.MetricName); sanitizeName(name) != name {
			t.Fatalf("metric name %q is not a name", name)
		}
		for _, v := range b.Vs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("value %v stored", v)
			}
		}
		n += len(b.Ts)
	}
	if n != r.points || n > o.MaxPointsPerMessage {
		t.Fatalf("%d points held, %d counted, limit %d", n, r.points, o.MaxPointsPerMessage)
	}
	if r.full && n != 0 {
		t.Fatalf("refused whole but holds %d points", n)
	}
}

func fuzzDecoder(f *testing.F, sub Subscription, topic string) func(t *testing.T, payload []byte) {
	o := Options{Broker: "tcp://x", ClientID: "c", Subscriptions: []Subscription{sub}, MaxPointsPerMessage: 100,
		Limits: labels.Limits{MaxLabels: 8, MaxNameBytes: 32, MaxValueBytes: 64}}
	if err := o.Validate(); err != nil {
		f.Fatal(err)
	}
	c, err := compile(&o.Subscriptions[0], &o, nil)
	if err != nil {
		f.Fatal(err)
	}
	return func(t *testing.T, payload []byte) {
		caps, _ := c.filter.match(topic, nil)
		skip := ""
		if c.JSON != nil {
			skip = c.JSON.MetricTopic
		}
		r := &result{}
		r.reset(o.Limits, o.MaxPointsPerMessage, c.baseLabels(caps, skip))
		c.dec.decode(&inbound{topic: topic, payload: payload, caps: caps, receivedMs: receivedMs}, r)
		checkResult(t, r, &o)
	}
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"t": 21.5, "hum": 40, "ok": true}`,
		`[{"name":"cpu","value":0.5,"host":"pi","ts":"2023-11-14T22:13:20Z"}]`,
		`{"a":{"b":{"c":1e308,"d":-1e-308}},"s":"x"}`,
		`{"value": 1, "name": "", "ts": 1e30}`,
		`[1, {"value": true}, null]`,
		`{"value": 1` + "\x00",
	} {
		f.Add([]byte(s))
	}
	all := fuzzDecoder(f, Subscription{Topic: "s/+site", Format: FormatJSON}, "s/north")
	mapped := fuzzDecoder(f, Subscription{Topic: "s/+site", Format: FormatJSON, Labels: map[string]string{"src": "m"}, JSON: &JSONMapping{
		MetricField: "name", ValueFields: []string{"value"}, LabelFields: []string{"host", "site2"}, TimeField: "ts", TimeUnit: "rfc3339"}}, "s/north")
	f.Fuzz(func(t *testing.T, payload []byte) {
		all(t, payload)
		mapped(t, payload)
	})
}

func FuzzLineProtocol(f *testing.F) {
	for _, s := range []string{
		"cpu,core=0 usage=12.5,idle=80i 1700000000000\ncpu usage=1",
		"bad line\n# comment\nm,t=\\ x v=1u",
		"m v=\"str\" 1",
	} {
		f.Add([]byte(s))
	}
	dec := fuzzDecoder(f, Subscription{Topic: "t/+host", Format: FormatLineProtocol, Precision: "ms", DB: "d"}, "t/pi")
	f.Fuzz(dec)
}

func FuzzSparkplug(f *testing.F) {
	f.Add([]byte("spBv1.0/g/NBIRTH/e"), spPayload(1700000000000,
		spM{name: "Temp", alias: 1, hasAlias: true, dt: spDouble, dbl: ptr(20.5)},
		spM{name: "Level", alias: 2, hasAlias: true, dt: spInt8, int32v: ptr(uint32(0xff))}))
	f.Add([]byte("spBv1.0/g/NDATA/e"), spPayload(1, spM{alias: 1, hasAlias: true, dbl: ptr(1.0)}))
	f.Add([]byte("spBv1.0/g/DBIRTH/e/d"), spPayload(0, spM{name: "S", dt: 12, str: ptr("x")}, spM{name: "F", dt: spFloat, flt: ptr(float32(1))}))
	f.Add([]byte("spBv1.0/g/NDATA/e"), []byte{0x12, 0x80, 0x80, 0x80, 0x80, 0x10})
	o := Options{Broker: "tcp://x", ClientID: "c", Subscriptions: []Subscription{{Topic: "spBv1.0/#", Format: FormatSparkplugB}},
		MaxPointsPerMessage: 100, MaxAliasBytes: 4096}
	if err := o.Validate(); err != nil {
		f.Fatal(err)
	}
	c, err := compile(&o.Subscriptions[0], &o, nil)
	if err != nil {
		f.Fatal(err)
	}
	aliases := c.dec.(*sparkplugDecoder).aliases
	f.Fuzz(func(t *testing.T, topic, payload []byte) {
		r := &result{}
		r.reset(o.Limits, o.MaxPointsPerMessage, nil)
		c.dec.decode(&inbound{topic: string(topic), payload: payload, receivedMs: receivedMs}, r)
		checkResult(t, r, &o)
		if aliases.bytes > aliases.maxBytes || aliases.bytes < 0 {
			t.Fatalf("alias tables hold %d bytes, budget %d", aliases.bytes, aliases.maxBytes)
		}
	})
}

func FuzzTopicFilter(f *testing.F) {
	f.Add("sensors/+site/+device", "sensors/a/b")
	f.Add("tele/#rest", "tele")
	f.Add("$SYS/#", "$SYS/x")
	f.Add("a/+/#", "a//b/c")
	f.Fuzz(func(t *testing.T, filterText, topic string) {
		fl, err := parseFilter(filterText)
		if err != nil {
			return
		}
		caps, ok := fl.match(topic, nil)
		if !ok && len(caps) > 0 {
			t.Fatalf("no match but %d captures", len(caps))
		}
		if ok {
			// The captures put back in their levels rebuild the topic.
			if n := len(caps); n > len(fl.levels) {
				t.Fatalf("%d captures from %d levels", n, len(fl.levels))
			}
		}
	})
}

func FuzzLimitConn(f *testing.F) {
	f.Add([]byte{0x30, 0x05, 1, 2, 3, 4, 5, 0x20, 0x02, 0, 0}, uint16(100))
	f.Add([]byte{0x30, 0xff, 0xff, 0xff, 0x7f}, uint16(100))
	f.Fuzz(func(t *testing.T, stream []byte, max uint16) {
		// Judged byte by byte or whole, the stream gets the same verdict.
		whole := &limitConn{max: uint32(max)}
		errWhole := whole.scan(stream)
		split := &limitConn{max: uint32(max)}
		var errSplit error
		for i := range stream {
			if errSplit = split.scan(stream[i : i+1]); errSplit != nil {
				break
			}
		}
		if (errWhole == nil) != (errSplit == nil) {
			t.Fatalf("whole: %v, byte by byte: %v", errWhole, errSplit)
		}
		if errWhole == nil && (whole.state != split.state || whole.remaining != split.remaining) {
			t.Fatalf("states differ: %+v vs %+v", whole, split)
		}
	})
}
