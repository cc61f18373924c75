package node_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
)

// TestNode_WALFullRefusesThenResumes fails every WAL write and fsync with
// ENOSPC while a writer goes on: writes must fail quickly with an error
// naming the cause, never succeed, and succeed again by themselves once
// the space is back. After a power cut every acknowledged point is there,
// and nothing the writer never sent.
func TestNode_WALFullRefusesThenResumes(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewCrashFS()
	var full atomic.Bool
	fs.SetFault(func(op vfs.Op, path string) error {
		if full.Load() && (op == vfs.OpWrite || op == vfs.OpSync || op == vfs.OpSyncDir) &&
			(strings.HasSuffix(path, ".seg") || strings.HasSuffix(path, "wal")) {
			return syscall.ENOSPC
		}
		return nil
	})
	opts := func() node.Options {
		return node.Options{
			DataDir:          dir,
			WALFS:            fs,
			HeadChunkSamples: 16,
			FlushInterval:    5 * time.Millisecond,
			WALSegmentBytes:  8 << 10,
			WALSegmentAge:    50 * time.Millisecond,
			Logger:           slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError})),
		}
	}
	n := mustOpen(t, opts())
	led := &ledger{acked: map[string]map[int64]float64{}}
	start := time.Now().Add(-time.Hour).UnixMilli()
	next := start
	sent := map[int64]bool{}
	write := func() error {
		ts := make([]int64, 10)
		vs := make([]float64, 10)
		for k := range ts {
			ts[k], vs[k] = next, float64(next%1000)
			sent[next] = true
			next++
		}
		res, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "full", "writer", "w0"), Ts: ts, Vs: vs}})
		if err == nil {
			if res.Accepted != int64(len(ts)) {
				t.Fatalf("accepted %d of %d", res.Accepted, len(ts))
			}
			led.add("w0", ts, vs)
		}
		return err
	}
	for range 50 {
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}

	full.Store(true)
	fullAt := time.Now()
	refused := 0
	for time.Since(fullAt) < 2500*time.Millisecond { // spans retries that fail
		at := time.Now()
		err := write()
		if err == nil {
			t.Fatalf("a write succeeded %v after the WAL's disk filled", time.Since(fullAt))
		}
		if d := time.Since(at); d > time.Second {
			t.Fatalf("a write failed only after %v, want within 1 s", d)
		}
		if refused == 0 && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("first refusal: %v, want one wrapping ENOSPC", err)
		}
		refused++
		time.Sleep(10 * time.Millisecond)
	}

	full.Store(false)
	freedAt := time.Now()
	for {
		if err := write(); err == nil {
			break
		}
		if time.Since(freedAt) > 5*time.Second {
			t.Fatal("the node took no write within 5 s after the space came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	resumed := time.Since(freedAt)
	for range 50 {
		if err := write(); err != nil {
			t.Fatalf("write after recovery: %v", err)
		}
	}
	// The shipper's view: every segment but the open one sealed and
	// readable.
	segs := n.WALSegments()
	for _, s := range segs[:len(segs)-1] {
		if !s.Sealed {
			continue // cut moments ago; its footer is on the way
		}
		if _, _, err := n.ReadWALSegment(s.Seq); err != nil {
			t.Fatalf("read sealed segment %d after recovery: %v", s.Seq, err)
		}
	}
	t.Logf("%d writes refused while full; writes resumed %v after the space came back", refused, resumed.Round(time.Millisecond))

	fs = fs.Crash()
	n.CrashForTest()
	n = mustOpen(t, opts())
	defer n.Close()
	led.check(t, n, "full", start)
	if _, err := n.Query(context.Background(), model.Query{
		Matchers: sel(t, "full"), Start: start, End: time.Now().UnixMilli(), Mode: model.ModeRaw,
	}, func(s model.Series) error {
		for _, ts := range s.Ts {
			if !sent[ts] {
				t.Errorf("point %d answered but never written", ts)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
