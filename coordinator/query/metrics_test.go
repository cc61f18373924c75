package query_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// readMetrics returns every data point by "name k=v k=v" (attributes in
// their set's order): counter values, histogram counts.
func readMetrics(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	key := func(name string, s attribute.Set) string {
		for _, kv := range s.ToSlice() {
			name += " " + string(kv.Key) + "=" + kv.Value.String()
		}
		return name
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Count)
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = float64(p.Count)
					out[key(m.Name+".sum", p.Attributes)] = float64(p.Sum)
				}
			}
		}
	}
	return out
}

func TestFrontend_MetricsCountCallsLegsHedgesAndGaps(t *testing.T) {
	f := theFleet
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	// c1 (e1's first replica) is slow: its legs are hedged to c2. e2 and
	// its replicas are down: its part is missing.
	ended := make(chan error, 8)
	fe := f.frontend(t, faults{block: "c1", ended: ended, down: []string{"c3"}, deadEdges: []string{"e2"}}, func(o *query.Options) {
		o.HedgeAfter, o.ReplicaTimeout, o.MeterProvider = time.Millisecond, time.Minute, mp
	})
	ctx := context.Background()
	before := readMetrics(t, reader)
	for _, name := range []string{"tributary.query.hedges", "tributary.query.partial", "tributary.query.edge.unreachable"} {
		if v, ok := before[name]; !ok || v != 0 {
			t.Errorf("%s before any query: %v (reported: %v), want 0", name, v, ok)
		}
	}

	host := func(h string) []*labels.Matcher { return []*labels.Matcher{must(t, labels.MatchEqual, "host", h)} }
	run := func(q model.Query) query.Coverage {
		_, cov, err := fe.QueryWithCoverage(ctx, q, func(model.Series) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return cov
	}
	end := t0.UnixMilli()
	// e2 is asked for series the catalog does not know yet: it is
	// missing from every answer.
	if cov := run(model.Query{Matchers: host("e1-0"), Start: f.start, End: end, Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncSum}); cov.Complete() {
		t.Fatalf("e1's query is complete with e2 down: %+v", cov)
	}
	if cov := run(model.Query{Matchers: []*labels.Matcher{must(t, labels.MatchRegexp, "host", "e2-.*")}, Start: f.start, End: end, Mode: model.ModeRaw}); cov.Complete() {
		t.Fatalf("e2's query is complete with e2 and c3 down: %+v", cov)
	}
	if _, err := fe.LabelNames(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := fe.Query(ctx, model.Query{Start: 1, End: 0, Mode: model.ModeRaw}, func(model.Series) error { return nil }); err == nil {
		t.Fatal("a query without matchers was accepted")
	}

	got := readMetrics(t, reader)
	atLeast := map[string]float64{
		"tributary.query.fanout.duration api=query kind=downsample outcome=partial": 1,
		"tributary.query.fanout.duration api=query kind=raw outcome=partial":        1,
		"tributary.query.fanout.duration api=query kind=raw outcome=error":          1,
		"tributary.query.fanout.duration api=label_names outcome=ok":                1,
		"tributary.query.fanout.legs api=query":                                     3,
		"tributary.query.fanout.legs.sum api=query":                                 3,
		"tributary.query.legs kind=replica outcome=ok":                              1,
		"tributary.query.legs kind=replica outcome=error":                           1,
		"tributary.query.legs kind=edge outcome=ok":                                 1,
		"tributary.query.hedges":                                                    1,
		"tributary.query.partial":                                                   1,
		"tributary.query.edge.unreachable":                                          1,
	}
	for name, min := range atLeast {
		if got[name] < min {
			t.Errorf("%s = %v, want at least %v", name, got[name], min)
		}
	}
	if got["tributary.query.partial"] != 2 {
		t.Errorf("partial answers %v, want 2", got["tributary.query.partial"])
	}
	if t.Failed() {
		t.Logf("reported: %v", got)
	}
}
