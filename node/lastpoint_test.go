package node_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
)

// TestLastPoint_MatchesRawLastSample: the last-point read (the head's
// newest sample found chunk by chunk, then the rollups) returns the last
// sample of a raw read of the same window, over data written in and out of
// order with rewritten timestamps, in closed and open head chunks, out of
// order in the head, and flushed.
func TestLastPoint_MatchesRawLastSample(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	o := testOptions(t, t.TempDir())
	n := mustOpen(t, o)
	defer n.Close()
	t0 := o.Now().Add(-3 * time.Hour).UnixMilli()
	const span = 2 * 3600_000
	for round := range 40 {
		var batches []model.Batch
		for s := range 3 {
			b := model.Batch{Labels: lbl("__name__", "m", "s", seriesName(s))}
			for range 1 + rng.IntN(30) {
				ts := t0 + rng.Int64N(span)/1000*1000
				if rng.IntN(3) > 0 { // mostly in order, after the series' newest
					ts = t0 + int64(round)*span/40 + rng.Int64N(span/40)/1000*1000
				}
				b.Ts, b.Vs = append(b.Ts, ts), append(b.Vs, float64(rng.IntN(1000)))
			}
			batches = append(batches, b)
		}
		if _, err := n.Write(context.Background(), batches); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(8) == 0 {
			if err := n.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		for range 10 {
			lo := t0 - 60_000 + rng.Int64N(span+120_000)
			hi := lo + rng.Int64N(span/2)
			if rng.IntN(4) == 0 {
				lo, hi = lo/1000*1000, hi/1000*1000
			}
			checkLastPoint(t, n, lo, hi)
		}
	}
}

func checkLastPoint(t *testing.T, n interface {
	Query(context.Context, model.Query, func(model.Series) error) (model.QueryInfo, error)
}, lo, hi int64) {
	t.Helper()
	last := map[string][2]float64{}
	_, err := n.Query(context.Background(), model.Query{Matchers: sel(t, `m`), Start: lo, End: hi, Mode: model.ModeRaw}, func(s model.Series) error {
		last[s.Labels.String()] = [2]float64{float64(s.Ts[len(s.Ts)-1]), s.Vs[len(s.Vs)-1]}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]float64{}
	_, err = n.Query(context.Background(), model.Query{Matchers: sel(t, `m`), Start: lo, End: hi, Mode: model.ModeLastPoint}, func(s model.Series) error {
		got[s.Labels.String()] = [2]float64{float64(s.Ts[0]), s.Vs[0]}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(last) {
		t.Fatalf("[%d, %d]: last point of %d series, raw read has %d", lo, hi, len(got), len(last))
	}
	for k, want := range last {
		if got[k] != want {
			t.Fatalf("[%d, %d] %s: last point %v, raw read ends with %v", lo, hi, k, got[k], want)
		}
	}
}
