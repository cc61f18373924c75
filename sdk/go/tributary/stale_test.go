package tributary_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// MaxStaleness: 0 leaves max_staleness_ms unset (the coordinator's
// default), AlwaysFresh sends 0, a positive one its milliseconds rounded
// up; a negative one is refused here.
func TestQuery_MaxStalenessReachesTheRequest(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		d    time.Duration
		set  bool
		want int64
	}{
		{0, false, 0},
		{tributary.AlwaysFresh, true, 0},
		{30 * time.Second, true, 30_000},
		{1500 * time.Microsecond, true, 2},
	} {
		q := tributary.Raw("cpu", now.Add(-time.Hour), now)
		q.MaxStaleness = tc.d
		req, err := q.Request(now)
		if err != nil || (req.MaxStalenessMs != nil) != tc.set || req.GetMaxStalenessMs() != tc.want {
			t.Errorf("MaxStaleness %s: max_staleness_ms %v %v, want set %v to %d", tc.d, req.GetMaxStalenessMs(), err, tc.set, tc.want)
		}
	}
	q := tributary.Raw("cpu", now.Add(-time.Hour), now)
	q.MaxStaleness = -2 * time.Second
	if _, err := q.Request(now); err == nil || !strings.Contains(err.Error(), "max staleness -2s is negative") {
		t.Fatalf("negative MaxStaleness: %v", err)
	}
}

// A node ignores the allowance: its answer says nothing of freshness.
func TestQuery_NodeAnswerHasNoFreshness(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	ctx := context.Background()
	now := time.Now()
	if _, err := c.Write(ctx, tributary.Batch{Labels: tributary.Metric("cpu"), TimestampsMs: []int64{now.Add(-time.Minute).UnixMilli()}, Values: []float64{1}}); err != nil {
		t.Fatal(err)
	}
	q := tributary.Raw("cpu", now.Add(-time.Hour), now)
	q.MaxStaleness = 30 * time.Second
	it := c.Query(ctx, q)
	defer it.Close()
	n := 0
	for it.Next() {
		n++
	}
	if err := it.Err(); err != nil || n != 1 || !it.FreshThrough().IsZero() {
		t.Fatalf("%d series, err %v, fresh through %v", n, it.Err(), it.FreshThrough())
	}
}
