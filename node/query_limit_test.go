package node_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/rollup"
)

func TestQuery_CrossSeriesAggregationOverRawSamplesIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1.2 M points")
	}
	o := testOptions(t, t.TempDir())
	n := mustOpen(t, o)
	defer n.Close()
	// Two series whose timestamps never coincide: grouping them keeps one
	// cell per sample, 1.2 M in all, over the bound.
	const per = 600_000
	start := o.Now().UnixMilli() - 3*per
	for s, off := range []int64{0, 1} {
		ts := make([]int64, per)
		vs := make([]float64, per)
		for i := range ts {
			ts[i] = start + 2*int64(i) + off
			vs[i] = float64(i)
		}
		id := []string{"a", "b"}[s]
		if res, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "agg", "id", id), Ts: ts, Vs: vs}}); err != nil || res.Rejected != 0 {
			t.Fatalf("write: %v %+v", err, res.Rejections)
		}
	}
	q := model.Query{Matchers: sel(t, "agg"), Start: start, End: start + 2*per, Mode: model.ModeRaw, Aggregate: rollup.FuncSum}
	_, err := n.Query(context.Background(), q, func(model.Series) error { return nil })
	if !errors.Is(err, model.ErrBadQuery) {
		t.Fatalf("raw aggregation over 1.2 M cells: %v, want a bad-query error", err)
	}
	// Downsampled first, the same aggregation is fine.
	q.Mode, q.Step, q.Downsample = model.ModeDownsample, 60_000, rollup.FuncMax
	var got int
	if _, err := n.Query(context.Background(), q, func(s model.Series) error { got += len(s.Ts); return nil }); err != nil || got == 0 {
		t.Fatalf("downsampled aggregation: %d points, %v", got, err)
	}
}
