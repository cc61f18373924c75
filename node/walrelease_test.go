package node_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
)

// TestNode_CrashAfterWALReleaseLosesNoAcknowledgedPoint writes until the
// node has flushed its store and released WAL segments several times, with
// more flushed to the store (without RocksDB's WAL) since, then crashes:
// the WAL's file system forgets unsynced bytes and RocksDB's memtables are
// dropped unflushed. Every acknowledged point must be back after reopening.
func TestNode_CrashAfterWALReleaseLosesNoAcknowledgedPoint(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewCrashFS()
	opts := func() node.Options {
		return node.Options{
			DataDir:            dir,
			WALFS:              fs,
			HeadChunkSamples:   16,
			FlushInterval:      5 * time.Millisecond,
			WALSegmentBytes:    8 << 10,
			WALSegmentAge:      20 * time.Millisecond,
			StoreFlushWALBytes: 32 << 10,
			Logger:             slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}
	}
	led := &ledger{acked: map[string]map[int64]float64{}}
	start := time.Now().Add(-2 * time.Hour).UnixMilli()
	next := start
	for cycle := range 3 {
		n := mustOpen(t, opts())
		flushesAtOpen := n.Status().StoreFlushes
		deadline := time.Now().Add(20 * time.Second)
		for n.Status().StoreFlushes < flushesAtOpen+3 || n.Status().FlushedChunks == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: %d store flushes after 20 s of writes: the WAL is never released", cycle, n.Status().StoreFlushes)
			}
			writeRun(t, n, led, &next, 50)
		}
		// More samples in the store's memtables than any store flush
		// covers: the crash must not lose them.
		for range 20 {
			writeRun(t, n, led, &next, 50)
		}
		segs := n.WALSegments()
		if len(segs) == 0 || segs[0].Seq <= 1 {
			t.Fatalf("cycle %d: WAL segments %v: none released", cycle, segs)
		}
		fs = fs.Crash()
		n.CrashForTest()
	}
	n := mustOpen(t, opts())
	defer n.Close()
	led.check(t, n, `released`, start)
}

func writeRun(t *testing.T, n *node.Node, led *ledger, next *int64, per int) {
	t.Helper()
	for _, name := range []string{"a", "b"} {
		ts := make([]int64, per)
		vs := make([]float64, per)
		for k := range ts {
			ts[k] = *next + int64(k)
			vs[k] = float64(ts[k] % 997)
		}
		res, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "released", "writer", name), Ts: ts, Vs: vs}})
		if err != nil || res.Accepted != int64(per) {
			t.Fatalf("write: %v (%+v)", err, res)
		}
		led.add(name, ts, vs)
	}
	*next += int64(per)
}

// emptyStoreWALBytes is the size of a RocksDB WAL file without writes:
// with WAL compression on, its one record names the compression (a 7-byte
// record header and 4 bytes).
const emptyStoreWALBytes = 11

// TestNode_CloseLeavesNoStoreLogBehind: a clean shutdown flushes RocksDB's
// memtables, so no RocksDB WAL file holds data a restart would replay.
func TestNode_CloseLeavesNoStoreLogBehind(t *testing.T) {
	dir := t.TempDir()
	n := mustOpen(t, node.Options{DataDir: dir, HeadChunkSamples: 16})
	ts := make([]int64, 1000)
	vs := make([]float64, 1000)
	start := time.Now().Add(-time.Hour).UnixMilli()
	for i := range ts {
		ts[i], vs[i] = start+int64(i), float64(i)
	}
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m"), Ts: ts, Vs: vs}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	var logBytes int64
	var logs []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		logs = append(logs, path)
		logBytes += max(0, info.Size()-emptyStoreWALBytes)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if logBytes != 0 {
		t.Fatalf("after Close the data dir holds %d bytes of RocksDB log records %v", logBytes, logs)
	}
	t.Logf("log files after close: %v", logs)
	n = mustOpen(t, node.Options{DataDir: dir, HeadChunkSamples: 16})
	defer n.Close()
	if got, err := n.StoredPoints(); err != nil || got != int64(len(ts)) {
		t.Fatalf("stored points after reopen: %d, %v; want %d", got, err, len(ts))
	}
}
