package node_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
)

// TestSeriesInRange_FromHeadRollupsAndAfterRestart: the range listings keep
// the series with samples in the range, whether the samples are in the head
// or flushed, to the hour, after a restart too, and from the daily rollups
// once the hourly ones have expired.
func TestSeriesInRange_FromHeadRollupsAndAfterRestart(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir)
	o.Retention1h = 10 * 24 * time.Hour
	now := o.Now().UnixMilli()
	day1 := base.Add(24 * time.Hour).UnixMilli()
	at := func(d time.Duration) int64 { return day1 + d.Milliseconds() }
	write := func(n *node.Node, host string, ts ...int64) {
		t.Helper()
		vs := make([]float64, len(ts))
		res, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m", "host", host), Ts: ts, Vs: vs}})
		if err != nil || res.Rejected != 0 {
			t.Fatalf("write %s: %+v %v", host, res, err)
		}
	}
	n := mustOpen(t, o)
	write(n, "old", at(10*time.Hour), at(10*time.Hour+30*time.Minute))
	write(n, "mid", base.Add(20*24*time.Hour).UnixMilli())
	write(n, "both", at(10*time.Hour+5*time.Minute), now-10*60_000)
	write(n, "idle", at(-20*time.Hour))
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	write(n, "new", now-30*60_000) // head only

	type rng struct {
		name       string
		start, end int64
		want       []string
	}
	cases := []rng{
		{"last two hours", now - 2*3600_000, now, []string{"both", "new"}},
		{"hours around day 1's samples", at(9 * time.Hour), at(11 * time.Hour), []string{"both", "old"}},
		{"inside the hour's sample span", at(10*time.Hour + 20*time.Minute), at(10*time.Hour + 25*time.Minute), []string{"old"}},
		{"the next hour", at(11 * time.Hour), at(12 * time.Hour), nil},
		{"day 20", base.Add(19 * 24 * time.Hour).UnixMilli(), base.Add(21 * 24 * time.Hour).UnixMilli(), []string{"mid"}},
		{"everything", 0, now, []string{"both", "idle", "mid", "new", "old"}},
	}
	check := func(n *node.Node, when string) {
		t.Helper()
		for _, c := range cases {
			vals, err := n.LabelValuesInRange(context.Background(), "host", nil, c.start, c.end)
			if err != nil {
				t.Fatal(err)
			}
			series, err := n.SeriesInRange(context.Background(), sel(t, `{__name__="m"}`), c.start, c.end, 0)
			if err != nil {
				t.Fatal(err)
			}
			var hosts []string
			for _, ls := range series {
				hosts = append(hosts, ls.Get("host"))
			}
			if !slices.Equal(vals, c.want) || !slices.Equal(hosts, c.want) {
				t.Errorf("%s, %s: values %v, series %v, want %v", when, c.name, vals, hosts, c.want)
			}
			names, err := n.LabelNamesInRange(context.Background(), nil, c.start, c.end)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool][]string{true: nil, false: {"__name__", "host"}}[len(c.want) == 0]; !slices.Equal(names, want) {
				t.Errorf("%s, %s: names %v, want %v", when, c.name, names, want)
			}
		}
	}
	check(n, "before retention")
	n.ApplyRetention() // the hourly rollups of days 1 and 20 expire
	check(n, "hourly rollups expired")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = mustOpen(t, o)
	defer n.Close()
	check(n, "after restart")
	if got, err := n.SeriesInRange(context.Background(), nil, 0, now, 2); err != nil || len(got) != 2 {
		t.Fatalf("limit 2: %v %v", got, err)
	}
}

// BenchmarkNode_SeriesInRange: the cost of restricting a listing of
// 10,000 flushed series to the last hour (every series qualifies, so each
// is looked up).
func BenchmarkNode_SeriesInRange(b *testing.B) {
	o := testOptions(b, b.TempDir())
	n := mustOpen(b, o)
	defer n.Close()
	now := o.Now().UnixMilli()
	const series = 10_000
	batches := make([]model.Batch, series)
	for i := range batches {
		batches[i] = model.Batch{Labels: lbl("__name__", "m", "id", fmt.Sprint(i)), Ts: []int64{now - 30*60_000}, Vs: []float64{1}}
	}
	if _, err := n.Write(context.Background(), batches); err != nil {
		b.Fatal(err)
	}
	if err := n.Flush(); err != nil {
		b.Fatal(err)
	}
	ms := sel(b, `{__name__="m"}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := n.SeriesInRange(context.Background(), ms, now-3600_000, now, 0)
		if err != nil || len(got) != series {
			b.Fatalf("%d series, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*series), "ns/series")
}
