package influx

import (
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// TestMetricName_MatchesTheParser: the names the InfluxQL API looks
// series up by are the ones the parser stores them under, for names that
// need escaping and sanitising.
func TestMetricName_MatchesTheParser(t *testing.T) {
	for _, tc := range []struct{ line, measurement, field, tag string }{
		{`cpu,host=a usage_user=1 1`, "cpu", "usage_user", "host"},
		{`cpu\ load,host\ name=a used\ pct=1 1`, "cpu load", "used pct", "host name"},
		{`1st,9tag=a héllo=1 1`, "1st", "héllo", "9tag"},
		{`m.x:y-z,a.b=c f-1=1 1`, "m.x:y-z", "f-1", "a.b"},
	} {
		p := NewParser(Options{})
		res, err := p.ParseReader(strings.NewReader(tc.line), "db", Nanosecond, 0)
		if err != nil || len(res.Batches) != 1 {
			t.Fatalf("%s: %v %+v", tc.line, err, res)
		}
		ls := labels.Labels(res.Batches[0].Labels)
		if got, want := ls.Get(labels.MetricName), MetricName(tc.measurement, tc.field); got != want {
			t.Errorf("%s: stored as %q, MetricName says %q", tc.line, got, want)
		}
		if got := MeasurementName(tc.measurement) + "_" + FieldName(tc.field); got != ls.Get(labels.MetricName) {
			t.Errorf("%s: MeasurementName_FieldName %q", tc.line, got)
		}
		if ls.Get(LabelName(tc.tag)) != "a" && ls.Get(LabelName(tc.tag)) != "c" {
			t.Errorf("%s: tag %q is not label %q: %v", tc.line, tc.tag, LabelName(tc.tag), ls)
		}
		if ls.Get(DatabaseLabel) != "db" {
			t.Errorf("%s: no %s label: %v", tc.line, DatabaseLabel, ls)
		}
	}
}
