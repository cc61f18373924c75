package influxql

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
)

// lastPointRecorder is a backend that records the ends of the last-point
// reads it is asked.
type lastPointRecorder struct {
	backend.Backend
	mu   sync.Mutex
	ends []int64
}

func (r *lastPointRecorder) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	if q.Mode == model.ModeLastPoint {
		r.mu.Lock()
		r.ends = append(r.ends, q.End)
		r.mu.Unlock()
	}
	return r.Backend.Query(ctx, q, emit)
}

// TSBS's lastpoint (SELECT * … GROUP BY "hostname" ORDER BY time DESC
// LIMIT 1, no time range) reads each series' last point up to an hour
// past the clock when no point lies later, not up to InfluxQL's open end
// (2262), from which the node walks its rollup packs back. The answer is
// the newest row all the same: one a few minutes ahead of the clock, and
// one 200 days ahead (then the read goes to the open end). An explicit
// upper bound is kept as given.
func TestLastPoint_OpenEndBoundedNearTheClock(t *testing.T) {
	n, err := node.Open(node.Options{
		DataDir:          t.TempDir(),
		Now:              func() time.Time { return testNow },
		OutOfOrderWindow: 24 * time.Hour,
		FutureWindow:     400 * 24 * time.Hour,
		FlushInterval:    time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	rec := &lastPointRecorder{Backend: n}
	e := newTestEnvFor(t, n, rec, Options{})
	now := testNow.Unix()
	e.write("db", fmt.Sprintf("cpu,hostname=host_0,rack=1 usage_user=1,usage_idle=2 %d\ncpu,hostname=host_0,rack=1 usage_user=3,usage_idle=4 %d\ncpu,hostname=host_1,rack=2 usage_user=5,usage_idle=6 %d\n",
		now-3600, now+300, now-60))
	const q = `SELECT * from cpu group by "hostname" order by time desc limit 1`
	lastpoint := func() map[string]string {
		t.Helper()
		a := e.query("db", q, "s")
		if a.Err != "" || len(a.Results) != 1 || a.Results[0].Err != "" {
			t.Fatalf("answer: %s", a.raw)
		}
		got := map[string]string{}
		for _, s := range a.Results[0].Series {
			got[s.Tags["hostname"]] = fmt.Sprint(s.Columns, s.Values)
		}
		return got
	}
	checkEnds := func(want int64) {
		t.Helper()
		if len(rec.ends) == 0 {
			t.Fatal("no last-point read")
		}
		for _, end := range rec.ends {
			if end != want {
				t.Errorf("last-point read ends at %d, want %d", end, want)
			}
		}
		rec.ends = nil
	}

	want := map[string]string{
		"host_0": fmt.Sprintf("[time rack usage_idle usage_user] [[%d 1 4 3]]", now+300),
		"host_1": fmt.Sprintf("[time rack usage_idle usage_user] [[%d 2 6 5]]", now-60),
	}
	if got := lastpoint(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("lastpoint answered\n%v\nwant\n%v", got, want)
	}
	checkEnds(testNow.Add(lastPointNear).UnixMilli())

	// A point far ahead of the clock: the read goes to the open end.
	future := now + 200*24*3600
	e.write("db", fmt.Sprintf("cpu,hostname=host_1,rack=2 usage_user=7,usage_idle=8 %d\n", future))
	want["host_1"] = fmt.Sprintf("[time rack usage_idle usage_user] [[%d 2 8 7]]", future)
	if got := lastpoint(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("with a point 200 days ahead, lastpoint answered\n%v\nwant\n%v", got, want)
	}
	for _, end := range rec.ends {
		if end <= future*1000 {
			t.Errorf("last-point read ends at %d, before the point at %d", end, future*1000)
		}
	}
	rec.ends = nil

	far := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	a := e.query("db", fmt.Sprintf(`SELECT usage_user from cpu where time < '%s' group by "hostname" order by time desc limit 1`, far.Format(time.RFC3339)), "s")
	if len(a.Results) != 1 || len(a.Results[0].Series) != 2 {
		t.Fatalf("with an upper bound: %s", a.raw)
	}
	checkEnds(far.UnixMilli() - 1)
}
