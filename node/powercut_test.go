package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/wal"
)

// TestNode_PowerCutLosesNoAcknowledgedPoint runs writers against a node
// whose WAL lives on a file system that forgets every unsynced byte (and
// keeps a random prefix of unsynced writes, as a torn write would) when the
// power is cut. After each cut the node is reopened; at the end every
// acknowledged point must be there.
func TestNode_PowerCutLosesNoAcknowledgedPoint(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	dir := t.TempDir()
	fs := vfs.NewCrashFS()
	// Cycles alternate the WAL format (versions 1 and 2), so each start
	// recovers torn tails of both kinds of record.
	format := uint8(2)
	opts := func() node.Options {
		return node.Options{
			WALFormat:        format,
			DataDir:          dir,
			WALFS:            fs,
			HeadChunkSamples: 16,
			FlushInterval:    5 * time.Millisecond,
			WALSegmentBytes:  8 << 10,
			WALSegmentAge:    20 * time.Millisecond,
			Logger:           slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
	}
	led := &ledger{acked: map[string]map[int64]float64{}}
	const writers = 3
	next := make([]int64, writers)
	start := time.Now().Add(-24 * time.Hour).UnixMilli() // room for ~40 M points a writer
	for w := range next {
		next[w] = start
	}
	for cycle := 0; cycle < 12; cycle++ {
		format = uint8(1 + cycle%2)
		n := mustOpen(t, opts())
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				name := fmt.Sprintf("w%d", w)
				for {
					select {
					case <-stop:
						return
					default:
					}
					ts := make([]int64, 20)
					vs := make([]float64, 20)
					for k := range ts {
						ts[k] = next[w]
						vs[k] = float64(next[w] % 1000)
						next[w] += 1 + int64(k%3) // some variety in intervals
					}
					res, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "cut", "writer", name), Ts: ts, Vs: vs}})
					if err != nil {
						continue // not acknowledged
					}
					if res.Accepted != int64(len(ts)) {
						t.Errorf("accepted %d of %d; first rejection: %+v", res.Accepted, len(ts), res.Rejections[0])
						return
					}
					led.add(name, ts, vs)
				}
			}(w)
		}
		time.Sleep(time.Duration(10+rng.IntN(60)) * time.Millisecond)
		fs = fs.CrashTorn(rand.New(rand.NewPCG(seed, uint64(cycle))))
		n.CrashForTest()
		close(stop)
		wg.Wait()
	}
	n := mustOpen(t, opts())
	defer n.Close()
	led.check(t, n, `cut`, start)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestNode_StoreNeverHoldsPointsTheWALLost writes under an interval WAL
// sync policy so long that only a flush to the store can make the WAL
// durable, lets the head flush, and cuts the power. Every point the node
// answers afterwards comes from the store or the WAL, and the WAL is what
// is shipped to the cloud: it must still hold at least as many points as
// the node answers.
func TestNode_StoreNeverHoldsPointsTheWALLost(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewCrashFS()
	opts := func() node.Options {
		return node.Options{
			DataDir:          dir,
			WALFS:            fs,
			WALSync:          wal.SyncPolicy{Interval: time.Hour},
			HeadChunkSamples: 16,
			FlushInterval:    5 * time.Millisecond,
			WALSegmentBytes:  64 << 20,
			WALSegmentAge:    time.Hour,
			WALRetention:     func() uint64 { return 1 }, // keep every segment
			Logger:           slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
	}
	n := mustOpen(t, opts())
	start := time.Now().Add(-time.Hour).UnixMilli()
	const batches, per = 100, 20
	for b := range batches {
		ts := make([]int64, per)
		vs := make([]float64, per)
		for k := range ts {
			ts[k] = start + int64(b*per+k)
			vs[k] = float64(k)
		}
		if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "walfirst", "writer", "w0"), Ts: ts, Vs: vs}}); err != nil {
			t.Fatal(err)
		}
	}
	// Let the flusher move the closed chunks to the store.
	deadline := time.Now().Add(5 * time.Second)
	for {
		stored, err := n.StoredPoints()
		if err != nil {
			t.Fatal(err)
		}
		if stored >= batches*per/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d points in the store after 5 s: the flush did not run", stored)
		}
		time.Sleep(5 * time.Millisecond)
	}
	fs = fs.Crash()
	n.CrashForTest()

	n = mustOpen(t, opts())
	defer n.Close()
	var answered int64
	if _, err := n.Query(context.Background(), model.Query{
		Matchers: sel(t, "walfirst"), Start: start, End: time.Now().UnixMilli(), Mode: model.ModeRaw,
	}, func(s model.Series) error {
		answered += int64(len(s.Ts))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var inWAL int64
	for _, s := range n.WALSegments() {
		inWAL += s.Points
	}
	if answered == 0 {
		t.Fatal("the node answers no point at all after the power cut: the store kept nothing")
	}
	if answered > inWAL {
		t.Fatalf("after the power cut the node answers %d points but its WAL holds only %d: the store outlived WAL records that were never durable", answered, inWAL)
	}
	t.Logf("%d points answered, %d in the WAL", answered, inWAL)
}
