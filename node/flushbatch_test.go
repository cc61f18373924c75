package node_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
)

// writeNoisySeries writes series series of perSeries samples each (random
// values, so that chunks take several bytes a sample) within one hour and
// returns how many points it wrote.
func writeNoisySeries(t *testing.T, n *node.Node, series, perSeries int) int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Hour).UnixMilli()
	var batches []model.Batch
	for i := range series {
		b := model.Batch{Labels: lbl("__name__", "noisy", "series", fmt.Sprint(i))}
		for j := range perSeries {
			b.Ts = append(b.Ts, start+int64(j)*1000)
			b.Vs = append(b.Vs, rng.Float64()*1e6)
		}
		batches = append(batches, b)
	}
	res, err := n.Write(context.Background(), batches)
	if err != nil || res.Rejected != 0 {
		t.Fatalf("write: %v, %d rejected", err, res.Rejected)
	}
	return int64(series * perSeries)
}

// TestFlush_WritesTheStoreInBoundedBatches: a flush of a large head goes
// to the store in several batches of whole series, not one batch the size
// of the head, and stores every point once.
func TestFlush_WritesTheStoreInBoundedBatches(t *testing.T) {
	n := mustOpen(t, node.Options{DataDir: t.TempDir(), FlushInterval: time.Hour, IdleFlush: -1, HeadMaxBytes: 64 << 20})
	defer n.Close()
	// About 3.5 KiB a chunk: 2,000 chunks are about 7 MiB.
	points := writeNoisySeries(t, n, 2000, 480)
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := n.FlushBatchesForTest(); got < 4 {
		t.Errorf("the flush wrote %d store batches, want several (about 1 MiB each)", got)
	}
	if st := n.Status(); st.HeadSamples != 0 {
		t.Errorf("after the flush the head holds %d samples", st.HeadSamples)
	}
	if stored, err := n.StoredPoints(); err != nil || stored != points {
		t.Errorf("stored points %d (%v), want %d", stored, err, points)
	}
}

// TestFlush_AFailedBatchKeepsTheRestInTheHead: when a store batch fails
// midway through a flush, the series of the batches already written leave
// the head and the others stay; the next flush stores them, and every
// point is stored exactly once.
func TestFlush_AFailedBatchKeepsTheRestInTheHead(t *testing.T) {
	n := mustOpen(t, node.Options{DataDir: t.TempDir(), FlushInterval: time.Hour, IdleFlush: -1, HeadMaxBytes: 64 << 20})
	defer n.Close()
	points := writeNoisySeries(t, n, 2000, 480)
	var calls atomic.Int64
	n.SetStoreFaultForTest(func() error {
		if calls.Add(1) == 3 {
			return errors.New("injected: disk full")
		}
		return nil
	})
	if err := n.Flush(); err == nil {
		t.Fatal("the flush with a failing batch succeeded")
	}
	st := n.Status()
	if st.HeadSamples <= 0 || st.HeadSamples >= points {
		t.Fatalf("after the failed batch the head holds %d of %d samples; want the unwritten part", st.HeadSamples, points)
	}
	n.SetStoreFaultForTest(nil)
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if stored, err := n.StoredPoints(); err != nil || stored != points {
		t.Errorf("stored points %d (%v), want %d", stored, err, points)
	}
	var got int64
	_, err := n.Query(context.Background(), model.Query{Matchers: sel(t, `{__name__="noisy"}`), Start: 0, End: time.Now().UnixMilli(), Mode: model.ModeRaw}, func(s model.Series) error {
		got += int64(len(s.Ts))
		return nil
	})
	if err != nil || got != points {
		t.Errorf("query returned %d points (%v), want %d", got, err, points)
	}
}
