package rules

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	promrules "github.com/prometheus/prometheus/rules"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	nlabels "github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
)

// BenchmarkGroupEval evaluates one group of recording rules over a real
// node holding sensor series (eight per device, as the sensor workload of
// the benchmarks lays them out), each rule aggregating one device's eight
// series, its result written back into the node. One op is one
// evaluation of the whole group.
func BenchmarkGroupEval(b *testing.B) {
	for _, c := range []struct {
		rules, series, concurrency int
		sync                       time.Duration
		perRule                    bool // one write per rule instead of one per evaluation
	}{{100, 1_000, 1, 0, true}, {1_000, 10_000, 1, 0, true}, {1_000, 10_000, 4, 0, true}, {1_000, 10_000, 16, 0, true}, {1_000, 10_000, 1, time.Second, true},
		{1_000, 10_000, 1, 0, false}, {1_000, 10_000, 4, 0, false}} {
		writes := "group"
		if c.perRule {
			writes = "rule"
		}
		b.Run(fmt.Sprintf("rules=%d/series=%d/concurrency=%d/wal-sync=%s/write-per=%s", c.rules, c.series, c.concurrency, syncName(c.sync), writes), func(b *testing.B) {
			benchGroupEval(b, c.rules, c.series, c.concurrency, c.sync, c.perRule)
		})
	}
}

func syncName(d time.Duration) string {
	if d == 0 {
		return "always"
	}
	return "interval:" + d.String()
}

// benchGroupEval: walSync 0 fsyncs every rule's write before it returns
// (the node's default), more lets the writes return before the fsync.
//
// perRule writes each rule's samples as it commits them; otherwise the
// group's samples are written together, as Manager does for a group whose
// rules read none of each other's results.
func benchGroupEval(b *testing.B, nRules, nSeries, concurrency int, walSync time.Duration, perRule bool) {
	n, err := node.Open(node.Options{DataDir: b.TempDir(), NodeID: "pi-1", WALSync: wal.SyncPolicy{Interval: walSync}})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	api, err := prom.New(n, &httpapi.Config{}, prom.Options{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	metrics := []string{"temperature", "humidity", "pressure", "voltage"}
	var batches []model.Batch
	for i := range nSeries {
		ls := nlabels.Labels{{Name: "__name__", Value: metrics[i%4]}, {Name: "device", Value: fmt.Sprintf("dev-%04d", i/8)},
			{Name: "sensor", Value: fmt.Sprintf("s%d", i%8)}}
		var ts []int64
		var vs []float64
		for k := range 10 {
			ts, vs = append(ts, now.Add(time.Duration(k-10)*15*time.Second).UnixMilli()), append(vs, float64(20+i%7+k))
		}
		batches = append(batches, model.Batch{Labels: ls, Ts: ts, Vs: vs})
	}
	if res, err := n.Write(context.Background(), batches); err != nil || res.Rejected > 0 {
		b.Fatal(err, res)
	}
	opts := &promrules.ManagerOptions{
		QueryFunc:  promrules.EngineQueryFunc(api.Engine(), api.Queryable()),
		Appendable: &appendable{b: n, max: DefaultMaxSamplesPerWrite},
		Queryable:  api.Queryable(),
		Context:    context.Background(),
		Logger:     slog.New(slog.DiscardHandler),
		Metrics:    promrules.NewGroupMetrics(nil),
		NotifyFunc: func(context.Context, string, ...*promrules.Alert) {},
		// As Manager sets them (MaxConcurrentEvals).
		ConcurrentEvalsEnabled: concurrency > 1,
		MaxConcurrentEvals:     int64(concurrency),
	}
	promrules.NewManager(opts) // fills in the concurrency and dependency controllers
	rs := make([]promrules.Rule, nRules)
	for i := range rs {
		expr, err := parser.ParseExpr(fmt.Sprintf(`avg by (device) (avg_over_time(%s{device="dev-%04d"}[1m]))`, metrics[i%4], i%(nSeries/8)))
		if err != nil {
			b.Fatal(err)
		}
		rs[i] = promrules.NewRecordingRule("device:reading:avg1m", expr, labels.EmptyLabels())
	}
	opts.RuleDependencyController.AnalyseRules(rs)
	g := promrules.NewGroup(promrules.GroupOptions{Name: "bench", File: "bench.yml", Interval: 15 * time.Second, Rules: rs, Opts: opts})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ctx := context.Background()
		gw := newGroupWrites(g, n, DefaultMaxSamplesPerWrite)
		if !perRule {
			if gw == nil {
				b.Fatal("the rules are not independent")
			}
			ctx = context.WithValue(ctx, groupWritesKey{}, gw)
		}
		g.Eval(ctx, now.Add(time.Duration(i)*time.Millisecond))
		if !perRule {
			if err := gw.flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	for _, r := range g.Rules() {
		if r.LastError() != nil {
			b.Fatalf("rule %s: %v", r.Name(), r.LastError())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9, "s/eval")
}
