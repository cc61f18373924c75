package selfmon

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

func TestSelfMonitor_SeriesShapeAndLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "demo_gauge"}, []string{"instance", "kind"})
	g.WithLabelValues("elsewhere", "a").Set(1.5)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "demo_seconds", Buckets: []float64{0.1, 1}})
	h.Observe(0.05)
	h.Observe(0.5)
	h.Observe(5)
	reg.MustRegister(g, h)

	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "pi-2"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	clock := time.UnixMilli(1_700_000_000_000)
	m, err := newMonitor(Options{Writer: n, Metrics: reg, Instance: n.NodeID(), Interval: time.Second, MaxSeries: 100,
		Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	batches, err := m.collect()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, b := range batches {
		got[labels.Labels(b.Labels).String()] = b.Vs[0]
		if len(b.Ts) != 1 || b.Ts[0] != 1_700_000_000_000 {
			t.Errorf("%v: timestamps %v", b.Labels, b.Ts)
		}
	}
	want := map[string]float64{
		labels.FromStrings("__name__", "demo_gauge", "exported_instance", "elsewhere", "kind", "a", "instance", "pi-2", "job", "tributary").String(): 1.5,
		labels.FromStrings("__name__", "demo_seconds_bucket", "le", "0.1", "instance", "pi-2", "job", "tributary").String():                          1,
		labels.FromStrings("__name__", "demo_seconds_bucket", "le", "1", "instance", "pi-2", "job", "tributary").String():                            2,
		labels.FromStrings("__name__", "demo_seconds_bucket", "le", "+Inf", "instance", "pi-2", "job", "tributary").String():                         3,
		labels.FromStrings("__name__", "demo_seconds_sum", "instance", "pi-2", "job", "tributary").String():                                          5.55,
		labels.FromStrings("__name__", "demo_seconds_count", "instance", "pi-2", "job", "tributary").String():                                        3,
	}
	if len(got) != len(want) {
		t.Fatalf("series:\n got %v\nwant %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g < v-1e-9 || g > v+1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	clock = time.Now() // within the node's retention
	m.once()
	if m.lastFailed || n.Status().Accepted != 6 {
		t.Fatalf("once: failed %v, %d points accepted", m.lastFailed, n.Status().Accepted)
	}

	// The limit: the first series are kept, sample after sample; new ones
	// are skipped.
	small, err := newMonitor(Options{Writer: n, Metrics: reg, Instance: n.NodeID(), Interval: time.Second, MaxSeries: 2})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := small.collect()
	g.WithLabelValues("elsewhere", "b").Set(2)
	second, _ := small.collect()
	if len(first) != 2 || len(second) != 2 || !small.overLimit {
		t.Fatalf("limit 2: %d then %d series, over limit %v", len(first), len(second), small.overLimit)
	}
	for i := range first {
		if !labels.Equal(first[i].Labels, second[i].Labels) {
			t.Errorf("series %d changed: %v then %v", i, first[i].Labels, second[i].Labels)
		}
	}
}

func TestOptions_Validate(t *testing.T) {
	reg := prometheus.NewRegistry()
	good := Options{Writer: nopWriter{}, Metrics: reg, Instance: "pi-1", Interval: time.Second}
	if err := good.Validate(); err != nil || good.MaxSeries != DefaultMaxSeries || good.Now == nil || good.Logger == nil {
		t.Fatalf("defaults: %+v, %v", good, err)
	}
	for name, o := range map[string]Options{
		"no writer":       {Metrics: reg, Instance: "pi-1", Interval: time.Second},
		"no instance":     {Writer: nopWriter{}, Metrics: reg, Interval: time.Second},
		"no interval":     {Writer: nopWriter{}, Metrics: reg, Instance: "pi-1"},
		"negative series": {Writer: nopWriter{}, Metrics: reg, Instance: "pi-1", Interval: time.Second, MaxSeries: -1},
	} {
		if err := o.Validate(); err == nil || !strings.HasPrefix(err.Error(), "self-monitoring options: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Run(ctx, good); err != context.Canceled {
		t.Errorf("Run after cancel = %v", err)
	}
}

type nopWriter struct{}

func (nopWriter) Write(context.Context, []model.Batch) (model.WriteResult, error) {
	return model.WriteResult{}, nil
}
