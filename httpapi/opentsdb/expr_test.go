package opentsdb

import (
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node/labels"
)

func TestParseM(t *testing.T) {
	cases := []struct {
		m       string
		want    string // mustJSON of the subQuery
		wantErr string
	}{
		{"sum:sys.cpu", `{"aggregator":"sum","metric":"sys.cpu","rate":false,"explicitTags":false,"index":0}`, ""},
		{"avg:1h-avg:sys.cpu{host=web01}", `{"aggregator":"avg","metric":"sys.cpu","downsample":"1h-avg","rate":false,"filters":[{"type":"literal_or","tagk":"host","filter":"web01","groupBy":true}],"explicitTags":false,"index":0}`, ""},
		{"sum:rate{counter,1000,5}:explicit_tags:m{host=*}{dc=regexp(l:a{1,2})}",
			`{"aggregator":"sum","metric":"m","rate":true,"rateOptions":{"counter":true,"counterMax":1000,"resetValue":5,"dropResets":false},"filters":[{"type":"wildcard","tagk":"host","filter":"*","groupBy":true},{"type":"regexp","tagk":"dc","filter":"l:a{1,2}","groupBy":false}],"explicitTags":true,"index":0}`, ""},
		{"max:1m-max-zero:rate:m{}{h=a|b,k=not_key()}", `{"aggregator":"max","metric":"m","downsample":"1m-max-zero","rate":true,"filters":[{"type":"literal_or","tagk":"h","filter":"a|b","groupBy":false},{"type":"not_key","tagk":"k","filter":"","groupBy":false}],"explicitTags":false,"index":0}`, ""},
		{"sum", "", "want <aggregator>"},
		{"sum:", "", "missing metric name"},
		{"sum:{h=a}", "", "missing metric name"},
		{"sum:1m-avg:5m-avg:m", "", "more than one downsampler"},
		{"sum:percentiles[99]:m", "", "percentiles are not supported"},
		{"sum:bogus:m", "", "unexpected part"},
		{"sum:rate{sometimes}:m", "", "counter or dropcounter"},
		{"sum:rate{counter,a}:m", "", "is not a number"},
		{"sum:m{h}", "", "want key=value"},
		{"sum:m{h=a}{k=b}{l=c}", "", "after the filters"},
		{"sum:m{h=a}x", "", "after the metric"},
	}
	for _, c := range cases {
		sq, err := parseM(c.m)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: error %v, want %q", c.m, err, c.wantErr)
			}
			continue
		}
		if err != nil || mustJSON(t, sq) != c.want {
			t.Errorf("%q:\n got %s (%v)\nwant %s", c.m, mustJSON(t, sq), err, c.want)
		}
	}
}

func TestCompile_GroupByAndFilters(t *testing.T) {
	sq, err := parseM("sum:1m-avg:m{host=*,rack/row=r1}{dc=lga}")
	if err != nil {
		t.Fatal(err)
	}
	sq.Tags = map[string]string{"zone": "iliteral_or(EU|us)"}
	p, err := compile(sq)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.groupBy, ","); got != "host,rack_row,zone" {
		t.Fatalf("group by %q", got)
	}
	match := func(tags ...string) bool {
		ls := labels.FromStrings(append([]string{labels.MetricName, "m"}, tags...)...)
		for _, m := range p.matchers {
			if !m.Matches(ls.Get(m.Name)) {
				return false
			}
		}
		return true
	}
	if !match("host", "x", "rack_row", "r1", "dc", "lga", "zone", "eu") {
		t.Fatal("a matching series does not match")
	}
	for _, bad := range [][]string{
		{"rack_row", "r1", "dc", "lga", "zone", "eu"},                // no host: a group-by wildcard needs the tag
		{"host", "x", "rack_row", "r2", "dc", "lga", "zone", "eu"},   // other rack
		{"host", "x", "rack_row", "r1", "dc", "lga", "zone", "asia"}, // other zone
		{"host", "x", "rack_row", "r1", "dc", "LGA", "zone", "eu"},   // literal_or is case sensitive
	} {
		if match(bad...) {
			t.Errorf("%v matches", bad)
		}
	}
}

func TestFilterMatchers(t *testing.T) {
	cases := []struct {
		f        filterSpec
		match    []string
		notMatch []string // "" is a series without the tag
	}{
		{filterSpec{Type: "literal_or", Filter: "a|b"}, []string{"a", "b"}, []string{"", "A", "ab", "a|b"}},
		{filterSpec{Type: "literal_or", Filter: "a.b"}, []string{"a.b"}, []string{"axb"}},
		{filterSpec{Type: "iliteral_or", Filter: "web|DB"}, []string{"WEB", "db"}, []string{"", "web1"}},
		{filterSpec{Type: "not_literal_or", Filter: "a|b"}, []string{"c", "A"}, []string{"", "a", "b"}},
		{filterSpec{Type: "not_iliteral_or", Filter: "a"}, []string{"b"}, []string{"", "A"}},
		{filterSpec{Type: "wildcard", Filter: "web*.ex*"}, []string{"web1.example", "web.ex"}, []string{"", "Web1.example", "xweb1.ex"}},
		{filterSpec{Type: "wildcard", Filter: "*"}, []string{"x"}, []string{""}},
		{filterSpec{Type: "iwildcard", Filter: "WEB*"}, []string{"web01"}, []string{"", "xweb"}},
		{filterSpec{Type: "regexp", Filter: "web[0-9]"}, []string{"web1", "myweb2x"}, []string{"", "web"}},
		{filterSpec{Type: "regexp", Filter: "^web[0-9]$"}, []string{"web1"}, []string{"myweb2", "web12"}},
		{filterSpec{Type: "regexp", Filter: ".*"}, []string{"x"}, []string{""}},
		{filterSpec{Type: "not_key", Filter: ""}, []string{""}, []string{"x"}},
	}
	for _, c := range cases {
		c.f.Tagk = "host"
		ms, err := c.f.matchers()
		if err != nil {
			t.Fatalf("%+v: %v", c.f, err)
		}
		matches := func(v string) bool {
			for _, m := range ms {
				if !m.Matches(v) {
					return false
				}
			}
			return true
		}
		for _, v := range c.match {
			if !matches(v) {
				t.Errorf("%s(%s) does not match %q", c.f.Type, c.f.Filter, v)
			}
		}
		for _, v := range c.notMatch {
			if matches(v) {
				t.Errorf("%s(%s) matches %q", c.f.Type, c.f.Filter, v)
			}
		}
	}
}

func TestParseDownsample(t *testing.T) {
	cases := []struct {
		s       string
		step    int64
		fn      string
		fill    fillPolicy
		all     bool
		wantErr string
	}{
		{"1m-avg", 60_000, "avg", fillNone, false, ""},
		{"500ms-sum-nan", 500, "sum", fillNaN, false, ""},
		{"1.5s-max-null", 1500, "max", fillNull, false, ""},
		{"100.00000000000001ms-min-zero", 100, "min", fillZero, false, ""},
		{"1h-zimsum-", 3600_000, "zimsum", fillNone, false, ""},
		{"1dc-count-none", 86_400_000, "count", fillNone, false, ""},
		{"2w-first", 14 * 86_400_000, "first", fillNone, false, ""},
		{"1n-last", 30 * 86_400_000, "last", fillNone, false, ""},
		{"0all-mimmax", 0, "mimmax", fillNone, true, ""},
		{"1wc-avg", 0, "", 0, false, "calendar alignment is supported for ms, s, m, h and d only"},
		{"1m", 0, "", 0, false, "want <interval>-<aggregator>"},
		{"1m-none", 0, "", 0, false, `aggregator "none" is not supported`},
		{"1m-p95", 60_000, "p95", fillNone, false, ""},
		{"1m-p98", 0, "", 0, false, `aggregator "p98" is not supported`},
		{"0m-avg", 0, "", 0, false, "out of range"},
		{"0.1ms-avg", 0, "", 0, false, "out of range"},
		{"m-avg", 0, "", 0, false, "invalid duration"},
		{"1m-avg-nan-x", 0, "", 0, false, "want <interval>"},
	}
	for _, c := range cases {
		ds, err := parseDownsample(c.s)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: error %v, want %q", c.s, err, c.wantErr)
			}
			continue
		}
		if err != nil || ds.stepMs != c.step || ds.agg.name != c.fn || ds.fill != c.fill || ds.all != c.all {
			t.Errorf("%q: %+v %v", c.s, ds, err)
		}
	}
}

func TestParseTime(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	cases := []struct {
		s       string
		loc     *time.Location
		want    int64
		wantErr string
	}{
		{"now", time.UTC, nowMs(), ""},
		{"1h-ago", time.UTC, nowMs() - 3600_000, ""},
		{"30m-ago", time.UTC, nowMs() - 1800_000, ""},
		{"2d-ago", time.UTC, nowMs() - 2*86_400_000, ""},
		{"1w-ago", time.UTC, nowMs() - 7*86_400_000, ""},
		{"1709294400", time.UTC, 1709294400_000, ""},
		{"1709294400123", time.UTC, 1709294400123, ""},
		{"1709294400.5", time.UTC, 1709294400500, ""},
		{"86400", time.UTC, 86400_000, ""},
		{"2024/03/01-12:00:00", time.UTC, nowMs(), ""},
		{"2024/03/01 12:00:00", time.UTC, nowMs(), ""},
		{"2024/03/01-12:00", time.UTC, nowMs(), ""},
		{"2024/03/01", time.UTC, nowMs() - 12*3600_000, ""},
		{"2024/03/01-13:00:00", paris, nowMs(), ""},
		{"2024/03/01-12:00:00.250", time.UTC, nowMs() + 250, ""},
		{"-1", time.UTC, 0, "negative"},
		{"yesterday", time.UTC, 0, "want a Unix timestamp"},
		{"2024/13/45", time.UTC, 0, "want yyyy/MM/dd"},
		{"99999999999999", time.UTC, 0, "too large"},
		{"100000y-ago", time.UTC, 0, "before the epoch"},
		{"1x-ago", time.UTC, 0, "invalid duration"},
		{"", time.UTC, 0, "empty"},
	}
	for _, c := range cases {
		got, err := parseTime(c.s, now, c.loc)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %d %v, want error %q", c.s, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %d %v, want %d", c.s, got, err, c.want)
		}
	}
}

func TestLabelName(t *testing.T) {
	cases := map[string]string{
		"host": "host", "rack/slot": "rack_slot", "température": "temp_rature", "9lives": "_9lives",
		"-x": "_-x", ".x": "_.x", "_x": "_x", "ä": "_", "a-b.c_d": "a-b.c_d",
	}
	for in, want := range cases {
		got, err := queryLabelName(in)
		if err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
		if _, err := labels.New([]labels.Label{{Name: labels.MetricName, Value: "m"}, {Name: got, Value: "v"}}, labels.Limits{}); err != nil {
			t.Errorf("%q maps to %q, which the node refuses: %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "a b", "a:b", "a=b", "a\x00", "\xff", "__name__", "a,b", "😀"} {
		if got, err := queryLabelName(bad); err == nil {
			t.Errorf("%q accepted as %q", bad, got)
		}
	}
}
