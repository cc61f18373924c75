package node_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

func lbl(nv ...string) []labels.Label {
	var out []labels.Label
	for i := 0; i < len(nv); i += 2 {
		out = append(out, labels.Label{Name: nv[i], Value: nv[i+1]})
	}
	return out
}

func TestWrite_BadInputIsRejectedPerPointAndTheRestKept(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.OutOfOrderWindow = time.Hour
	o.MaxSeries = 3
	n := mustOpen(t, o)
	defer n.Close()
	now := o.Now().UnixMilli()
	// Establish a newest sample for the out-of-order window.
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "ok", "id", "1"), Ts: []int64{now}, Vs: []float64{1}}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name        string
		batch       model.Batch
		accepted    int64
		rejected    int64
		reason      model.RejectReason
		msgFragment string
	}{
		{"valid", model.Batch{Labels: lbl("__name__", "ok", "id", "1"), Ts: []int64{now + 1, now + 2}, Vs: []float64{1, 2}}, 2, 0, 0, ""},
		{"no metric name", model.Batch{Labels: lbl("id", "1"), Ts: []int64{now}, Vs: []float64{1}}, 0, 1, model.RejectInvalidSeries, "missing metric name"},
		{"bad label name", model.Batch{Labels: lbl("__name__", "ok", "a b", "1"), Ts: []int64{now}, Vs: []float64{1}}, 0, 1, model.RejectInvalidSeries, `"a b"`},
		{"length mismatch", model.Batch{Labels: lbl("__name__", "ok"), Ts: []int64{now, now + 1}, Vs: []float64{1}}, 0, 2, model.RejectLengthMismatch, "2 timestamps but 1 values"},
		{"future point among good ones", model.Batch{Labels: lbl("__name__", "ok", "id", "1"), Ts: []int64{now + 3, now + int64(time.Hour/time.Millisecond), now + 4}, Vs: []float64{1, 2, 3}}, 2, 1, model.RejectTooFarInFuture, "point 1"},
		{"outside out-of-order window", model.Batch{Labels: lbl("__name__", "ok", "id", "1"), Ts: []int64{now - 2*3600_000, now - 60_000}, Vs: []float64{1, 2}}, 1, 1, model.RejectTooOld, "out-of-order window"},
		{"older than retention", model.Batch{Labels: lbl("__name__", "ok", "id", "2"), Ts: []int64{now - 400*24*3600_000}, Vs: []float64{1}}, 0, 1, model.RejectTooOld, "retention"},
		{"NaN and Inf are values", model.Batch{Labels: lbl("__name__", "ok", "id", "1"), Ts: []int64{now + 5, now + 6}, Vs: []float64{math.NaN(), math.Inf(1)}}, 2, 0, 0, ""},
		{"series limit", model.Batch{Labels: lbl("__name__", "ok", "id", "3"), Ts: []int64{now}, Vs: []float64{1}}, 1, 0, 0, ""},
		{"series limit exceeded", model.Batch{Labels: lbl("__name__", "ok", "id", "4"), Ts: []int64{now}, Vs: []float64{1}}, 0, 1, model.RejectLimitExceeded, "limit of 3 series"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each case rides along with a valid batch, which must be kept.
			good := model.Batch{Labels: lbl("__name__", "ok", "id", "0"), Ts: []int64{now}, Vs: []float64{9}}
			res, err := n.Write(context.Background(), []model.Batch{good, c.batch})
			if err != nil {
				t.Fatal(err)
			}
			if res.Accepted != c.accepted+1 || res.Rejected != c.rejected {
				t.Fatalf("accepted %d rejected %d, want %d and %d: %+v", res.Accepted, res.Rejected, c.accepted+1, c.rejected, res.Rejections)
			}
			if c.rejected > 0 {
				r := res.Rejections[0]
				if r.Reason != c.reason || r.BatchIndex != 1 || !strings.Contains(r.Message, c.msgFragment) {
					t.Fatalf("rejection %+v, want reason %d in batch 1 mentioning %q", r, c.reason, c.msgFragment)
				}
				if res.RejectedBy[c.reason] != c.rejected {
					t.Fatalf("RejectedBy[%s] = %d, want %d", c.reason, res.RejectedBy[c.reason], c.rejected)
				}
			}
		})
	}
	st := n.Status()
	var sum int64
	for _, c := range st.RejectedBy {
		sum += c
	}
	if sum != st.Rejected || st.RejectedBy[model.RejectTooOld] != 2 || st.RejectedBy[model.RejectInvalidSeries] != 2 {
		t.Fatalf("status counts rejections %d by reason %v", st.Rejected, st.RejectedBy)
	}
	got := query(t, n, model.Query{Matchers: sel(t, `ok{id="1"}`), Start: now - 3600_000, End: now + 3600_000, Mode: model.ModeRaw})
	if s := got[""]; len(s.Ts) != 8 { // now, +1..+6 except the future one, and now-60s
		t.Fatalf("series id=1 has %d points: %v", len(s.Ts), s.Ts)
	}
}

func TestQuery_BadRequestsAreErrors(t *testing.T) {
	n := mustOpen(t, testOptions(t, t.TempDir()))
	defer n.Close()
	for name, q := range map[string]model.Query{
		"no matchers":         {Mode: model.ModeRaw, End: 1},
		"only empty-matching": {Matchers: sel(t, `{a!="x"}`), Mode: model.ModeRaw, End: 1},
		"end before start":    {Matchers: sel(t, `m`), Start: 10, End: 1, Mode: model.ModeRaw},
		"no step":             {Matchers: sel(t, `m`), End: 1, Mode: model.ModeDownsample},
		"unknown function":    {Matchers: sel(t, `m`), End: 1, Step: 10, Mode: model.ModeDownsample, Downsample: rollup.FuncLast + 1},
		"unknown aggregate":   {Matchers: sel(t, `m`), End: 1, Mode: model.ModeRaw, Aggregate: 42},
		"too many buckets":    {Matchers: sel(t, `m`), End: math.MaxInt64 / 2, Step: 1, Mode: model.ModeDownsample, Downsample: rollup.FuncAvg},
	} {
		_, err := n.Query(context.Background(), q, func(model.Series) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "bad query") {
			t.Errorf("%s: err=%v, want a bad query error", name, err)
		}
	}
}

func TestQuery_GroupedAggregateAndLastPoint(t *testing.T) {
	o := testOptions(t, t.TempDir())
	n := mustOpen(t, o)
	defer n.Close()
	t0 := base.UnixMilli()
	var batches []model.Batch
	for i, v := range []struct{ site, dev string }{{"a", "1"}, {"a", "2"}, {"b", "3"}} {
		batches = append(batches, model.Batch{
			Labels: lbl("__name__", "temp", "site", v.site, "dev", v.dev),
			Ts:     []int64{t0, t0 + 60_000, t0 + 120_000},
			Vs:     []float64{float64(i), float64(i) + 10, float64(i) + 20},
		})
	}
	if _, err := n.Write(context.Background(), batches); err != nil {
		t.Fatal(err)
	}
	var groups []model.Series
	_, err := n.Query(context.Background(), model.Query{Matchers: sel(t, `temp`), Start: t0, End: t0 + 180_000,
		Mode: model.ModeDownsample, Step: 120_000, Downsample: rollup.FuncAvg, GroupBy: []string{"site", "site"}, Aggregate: rollup.FuncMax}, func(s model.Series) error { groups = append(groups, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 || groups[0].Labels.String() != `{site="a"}` || groups[1].Labels.Get("site") != "b" {
		t.Fatalf("groups %+v", groups)
	}
	// site a: devices 0 and 1; bucket t0 avg = (0+10)/2=5 and (1+11)/2=6 → max 6; bucket t0+120s: 20, 21 → 21.
	if want := []float64{6, 21}; groups[0].Vs[0] != want[0] || groups[0].Vs[1] != want[1] {
		t.Fatalf("site a values %v want %v", groups[0].Vs, want)
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	last := query(t, n, model.Query{Matchers: sel(t, `temp{dev="3"}`), End: t0 + 3600_000, Mode: model.ModeLastPoint})
	if s := last[""]; len(s.Ts) != 1 || s.Ts[0] != t0+120_000 || s.Vs[0] != 22 {
		t.Fatalf("last point %+v", s)
	}
}

func TestOpen_DataDirKeepsItsNodeID(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir)
	o.NodeID = "pi-7"
	mustOpen(t, o).Close()
	o.NodeID = ""
	n := mustOpen(t, o)
	if got := n.Status().NodeID; got != "pi-7" {
		t.Fatalf("node id %q, want the stored pi-7", got)
	}
	n.Close()
	o.NodeID = "pi-8"
	if _, err := node.Open(o); err == nil || !strings.Contains(err.Error(), `belongs to node "pi-7"`) {
		t.Fatalf("opening with another id: %v", err)
	}
}

func TestClose_LeavesNothingToReplay(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(t, dir)
	n := mustOpen(t, o)
	now := o.Now().UnixMilli()
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m"), Ts: []int64{now - 2, now - 1}, Vs: []float64{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n = mustOpen(t, o)
	defer n.Close()
	if st := n.Status(); st.HeadSamples != 0 {
		t.Fatalf("reopened node replayed %d samples that were already flushed", st.HeadSamples)
	}
	if got := query(t, n, model.Query{Matchers: sel(t, `m`), Start: now - 10, End: now, Mode: model.ModeRaw}); len(got[""].Ts) != 2 {
		t.Fatalf("points after reopen: %+v", got)
	}
}

func TestRetention_DropsWholePartitionsPerTier(t *testing.T) {
	dir := t.TempDir()
	var clock atomic.Int64 // the flush and retention loops read it
	clock.Store(base.UnixNano())
	o := testOptions(t, dir)
	o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	o.RetentionRaw = 2 * 24 * time.Hour
	o.Retention1h = 10 * 24 * time.Hour
	o.Retention1d = 365 * 24 * time.Hour
	o.OutOfOrderWindow = time.Hour
	n := mustOpen(t, o)
	defer func() { n.Close() }()
	// One sample an hour for 6 days, written as time passes.
	t0 := base.UnixMilli()
	for h := int64(0); h < 6*24; h++ {
		clock.Store(base.Add(time.Duration(h) * time.Hour).UnixNano())
		if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m"), Ts: []int64{t0 + h*3600_000}, Vs: []float64{float64(h)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	clock.Store(base.Add(6 * 24 * time.Hour).UnixNano())
	n.ApplyRetention()
	end := t0 + 6*24*3600_000
	raw := query(t, n, model.Query{Matchers: sel(t, `m`), Start: t0, End: end, Mode: model.ModeRaw})[""]
	// Raw keeps whole days from the cut (now - 2 days) on: days 4 and 5.
	if len(raw.Ts) != 48 || raw.Ts[0] != t0+4*24*3600_000 {
		t.Fatalf("raw after retention: %d samples from %d", len(raw.Ts), raw.Ts[0])
	}
	daily := query(t, n, model.Query{Matchers: sel(t, `m`), Start: t0, End: end, Mode: model.ModeDownsample, Step: 24 * 3600_000, Downsample: rollup.FuncCount})[""]
	if len(daily.Ts) != 6 || daily.Vs[0] != 24 {
		t.Fatalf("daily rollups must all survive: %v %v", daily.Ts, daily.Vs)
	}
}

func TestWrite_StalledFlushGivesRetryableErrorThenRecovers(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.HeadMaxBytes = 1 << 20
	n := mustOpen(t, o)
	defer n.Close()
	resume := n.PauseFlushForTest()
	now := o.Now().UnixMilli()
	var err error
	written := 0
	for i := 0; i < 10_000 && err == nil; i++ {
		ts := make([]int64, 1000)
		vs := make([]float64, 1000)
		for k := range ts {
			ts[k] = now - 3_000_000 + int64(k)
			vs[k] = float64(i*k) * 1.0001 // incompressible-ish values fill the head fast
		}
		_, err = n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m", "i", fmt.Sprint(i)), Ts: ts, Vs: vs}})
		written++
	}
	if !errors.Is(err, model.ErrOverloaded) {
		t.Fatalf("after %d writes with flushing stalled: err=%v, want ErrOverloaded", written, err)
	}
	resume()
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m"), Ts: []int64{now}, Vs: []float64{1}}}); err != nil {
		t.Fatalf("write after the flush caught up: %v", err)
	}
}

func TestWrite_RejectionPointIndexIsTheClientsEvenAfterEarlierRejections(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.OutOfOrderWindow = time.Hour
	n := mustOpen(t, o)
	defer n.Close()
	now := o.Now().UnixMilli()
	ls := lbl("__name__", "idx")
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: ls, Ts: []int64{now}, Vs: []float64{1}}}); err != nil {
		t.Fatal(err)
	}
	// Point 0 is too far in the future (rejected first, in the fast path);
	// point 2 is outside the out-of-order window and must be reported as
	// point 2, not as its index among the points left.
	far := now + int64(time.Hour/time.Millisecond)
	old := now - 2*int64(time.Hour/time.Millisecond)
	res, err := n.Write(context.Background(), []model.Batch{{Labels: ls, Ts: []int64{far, now + 1, old, now + 2}, Vs: []float64{1, 2, 3, 4}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 2 || res.Rejected != 2 || len(res.Rejections) != 2 {
		t.Fatalf("result %+v", res)
	}
	got := map[model.RejectReason]int{}
	for _, r := range res.Rejections {
		got[r.Reason] = r.PointIndex
		if !strings.Contains(r.Message, fmt.Sprintf("point %d:", r.PointIndex)) {
			t.Errorf("message %q does not name point %d", r.Message, r.PointIndex)
		}
	}
	if got[model.RejectTooFarInFuture] != 0 || got[model.RejectTooOld] != 2 {
		t.Fatalf("point indexes by reason: %v", got)
	}
}
