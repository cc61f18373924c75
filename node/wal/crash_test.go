package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
)

// crashPayload is the payload of record id: the id, then id-dependent
// filler, so that a replayed record can be checked byte for byte.
func crashPayload(id uint64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, id)
	for i := range int(id*7919) % 300 {
		b = append(b, byte(id)+byte(i))
	}
	return b
}

// TestLog_CrashKeepsEverySyncedRecord runs concurrent writers against a
// CrashFS, cuts the power at a random moment (sometimes while the log is
// closing, sometimes while a checkpointer removes old segments), reopens,
// and checks that every record whose Sync returned nil is replayed, in
// order, exactly once; that nothing never appended appears; that nothing
// once recovered is lost by a later crash; and that sequence numbers never
// go back.
func TestLog_CrashKeepsEverySyncedRecord(t *testing.T) {
	seed := *crashSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -wal.crashseed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x7761))

	cfs := vfs.NewCrashFS()
	opts := Options{
		Dir:             "/data/wal",
		NodeID:          "crash-node",
		MaxSegmentBytes: 4 << 10,
		Logger:          slog.New(slog.DiscardHandler),
	}
	var (
		mu            sync.Mutex            // guards everything below
		issued        uint64                // ids handed out so far
		acked         = map[uint64]uint64{} // id → segment, for records whose Sync returned nil
		recovered     = map[uint64]uint64{} // id → segment, replayed after the previous crash
		removedBefore uint64                // segments below this may have been removed on purpose
		maxSealed     uint64                // highest sequence ever reported sealed
	)
	noteSealed := func(l *Log) {
		for _, s := range l.Segments() {
			if s.Sealed {
				mu.Lock()
				maxSealed = max(maxSealed, s.Seq)
				mu.Unlock()
			}
		}
	}
	check := func(cycle int) {
		opts.FS = cfs
		l, err := Open(opts)
		if err != nil {
			t.Fatalf("cycle %d: Open: %v\n%s", cycle, err, cfs)
		}
		mu.Lock()
		defer mu.Unlock()
		if open := l.OpenSeq(); open <= maxSealed {
			t.Fatalf("cycle %d: reopened at sequence %d, but %d was sealed before", cycle, open, maxSealed)
		}
		got := map[uint64]uint64{}
		var last uint64
		err = l.Replay(0, func(seq uint64, r Record) error {
			if len(r.Data) < 8 {
				return fmt.Errorf("short record %x", r.Data)
			}
			id := binary.LittleEndian.Uint64(r.Data)
			if id == 0 || id > issued {
				return fmt.Errorf("record %d was never appended (%d issued)", id, issued)
			}
			if string(r.Data) != string(crashPayload(id)) || r.MinT != int64(id) || r.MaxT != int64(id) || r.Points != 1 {
				return fmt.Errorf("record %d came back different", id)
			}
			if id <= last {
				return fmt.Errorf("record %d replayed after record %d", id, last)
			}
			last = id
			got[id] = seq
			return nil
		})
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("cycle %d: Close: %v", cycle, err)
		}
		for _, want := range []struct {
			what string
			ids  map[uint64]uint64
		}{{"acknowledged", acked}, {"recovered after the previous crash", recovered}} {
			for id, seq := range want.ids {
				if _, ok := got[id]; !ok && seq >= removedBefore {
					t.Fatalf("cycle %d: record %d of segment %d, %s, lost (%d replayed, segments before %d removed)",
						cycle, id, seq, want.what, len(got), removedBefore)
				}
			}
		}
		recovered = got
	}

	const writers = 8
	cycles := 150
	if testing.Short() {
		cycles = 30
	}
	for cycle := range cycles {
		check(cycle)
		opts.FS = cfs
		l, err := Open(opts)
		if err != nil {
			t.Fatalf("cycle %d: Open: %v", cycle, err)
		}
		crashAt := int64(1 + rng.IntN(300))
		checkpointer := rng.IntN(2) == 0
		closing := rng.IntN(4) == 0
		var (
			callerMu sync.Mutex // the caller's lock across MaybeCut → Append
			appended atomic.Int64
			wg       sync.WaitGroup
			crashed  = make(chan struct{})
			once     sync.Once
			stop     = make(chan struct{})
			closeErr = make(chan error, 1)
		)
		// crash cuts the power, from the writer whose append reached
		// crashAt, so that the others get no time to run on.
		crash := func() {
			noteSealed(l)
			if closing {
				go func() { closeErr <- l.Close() }()
				runtime.Gosched()
			}
			if rng.IntN(3) == 0 {
				cfs = cfs.Crash()
			} else {
				cfs = cfs.CrashTorn(rng)
			}
			close(crashed)
		}
		for range writers {
			wg.Go(func() {
				for {
					callerMu.Lock()
					_, _, err := l.MaybeCut()
					var pos Position
					mu.Lock()
					id := issued + 1
					mu.Unlock()
					if err == nil {
						pos, err = l.Append(Record{Data: crashPayload(id), MinT: int64(id), MaxT: int64(id), Points: 1})
					}
					if err == nil {
						mu.Lock()
						issued = id
						mu.Unlock()
					}
					callerMu.Unlock()
					if err == nil && appended.Add(1) == crashAt {
						once.Do(crash)
					}
					if err == nil {
						err = l.Sync(pos)
					}
					if err != nil {
						if !errors.Is(err, vfs.ErrCrashed) && !errors.Is(err, ErrClosed) {
							t.Errorf("cycle %d: writer failed with %v", cycle, err)
						}
						return
					}
					mu.Lock()
					acked[id] = pos.Seq
					mu.Unlock()
				}
			})
		}
		if checkpointer {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Microsecond):
					}
					noteSealed(l)
					seq := l.OpenSeq()
					if seq <= 3 {
						continue
					}
					mu.Lock()
					removedBefore = max(removedBefore, seq-3)
					mu.Unlock()
					if err := l.RemoveBefore(seq - 3); err != nil {
						return
					}
				}
			})
		}
		<-crashed
		close(stop)
		wg.Wait()
		if !closing {
			closeErr <- l.Close()
		}
		if err := <-closeErr; err != nil && !errors.Is(err, vfs.ErrCrashed) {
			t.Fatalf("cycle %d: Close around the crash = %v, want nil or ErrCrashed", cycle, err)
		}
	}
	check(cycles)
	t.Logf("%d records appended, %d acknowledged, %d replayed at the end", issued, len(acked), len(recovered))
}

// TestLog_GroupCommitSharesFsyncs: concurrent writers on a slow disk are
// acknowledged with far fewer fsyncs than records.
func TestLog_GroupCommitSharesFsyncs(t *testing.T) {
	cfs := vfs.NewCrashFS()
	cfs.SetFault(func(op vfs.Op, _ string) error {
		if op == vfs.OpSync || op == vfs.OpSyncDir {
			time.Sleep(200 * time.Microsecond)
		}
		return nil
	})
	l := mustOpen(t, Options{Dir: "/wal", NodeID: "n", FS: cfs, Logger: testLogger(t)})
	defer mustClose(t, l)
	before := l.Stats().Fsyncs
	const writers, each = 32, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				pos, err := l.Append(testRecord(w*each + i))
				if err == nil {
					err = l.Sync(pos)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	fsyncs := l.Stats().Fsyncs - before
	t.Logf("%d records acknowledged with %d fsyncs", writers*each, fsyncs)
	if fsyncs*4 > writers*each {
		t.Fatalf("%d fsyncs for %d records: group commit is not sharing fsyncs", fsyncs, writers*each)
	}
}

// TestLog_FsyncFailureFailsLog injects a failure into each kind of
// persisting call and checks that the failure reaches Sync, that the Log
// refuses everything afterwards until it recovers (not within this test:
// its retry interval is an hour), and that the failed call is not retried.
func TestLog_FsyncFailureFailsLog(t *testing.T) {
	tests := []struct {
		name string
		op   vfs.Op
		file string // suffix of the path to fail
	}{
		{"fsync of the segment", vfs.OpSync, segmentSuffix},
		{"write of the segment", vfs.OpWrite, segmentSuffix},
		{"fsync of the directory", vfs.OpSyncDir, "wal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfs := vfs.NewCrashFS()
			var failing atomic.Bool
			var failures atomic.Int64
			cfs.SetFault(func(op vfs.Op, path string) error {
				if failing.Load() && op == tt.op && strings.HasSuffix(path, tt.file) {
					failures.Add(1)
					return syscall.EIO
				}
				return nil
			})
			opts := Options{Dir: "/wal", NodeID: "n", FS: cfs, Logger: testLogger(t), RetryInterval: time.Hour}
			l := mustOpen(t, opts)
			good := appendSynced(t, l, 0, 3)

			failing.Store(true)
			if tt.op == vfs.OpSyncDir {
				// A directory sync happens after a segment is created.
				if _, _, err := l.MaybeCut(); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Cut(); err != nil && !errors.Is(err, syscall.EIO) {
					t.Fatal(err)
				}
			}
			pos, err := l.Append(testRecord(3))
			if err == nil {
				err = l.Sync(pos)
			}
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("Append+Sync = %v, want EIO", err)
			}
			if _, err := l.Append(testRecord(4)); !errors.Is(err, syscall.EIO) {
				t.Fatalf("Append after the failure = %v, want EIO", err)
			}
			if err := l.Sync(pos); !errors.Is(err, syscall.EIO) {
				t.Fatalf("Sync after the failure = %v, want EIO", err)
			}
			if _, _, err := l.MaybeCut(); !errors.Is(err, syscall.EIO) {
				t.Fatalf("MaybeCut after the failure = %v, want EIO", err)
			}
			if _, err := l.Cut(); !errors.Is(err, syscall.EIO) {
				t.Fatalf("Cut after the failure = %v, want EIO", err)
			}
			if err := l.RemoveBefore(100); !errors.Is(err, syscall.EIO) {
				t.Fatalf("RemoveBefore after the failure = %v, want EIO", err)
			}
			if err := l.Close(); !errors.Is(err, syscall.EIO) {
				t.Fatalf("Close after the failure = %v, want EIO", err)
			}
			if n := failures.Load(); n != 1 {
				t.Fatalf("the failing call was made %d times, want once (no retry)", n)
			}

			failing.Store(false)
			l = mustOpen(t, opts)
			defer mustClose(t, l)
			got := records(replayAll(t, l, 0))
			if len(got) < len(good) || !equalRecords(got[:len(good)], good) {
				t.Fatalf("after reopening: %d records, want the %d acknowledged first", len(got), len(good))
			}
		})
	}
}
