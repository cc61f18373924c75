package wal

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
)

// waitResumed appends record i until Append and Sync succeed, and returns
// the record.
func waitResumed(t *testing.T, l *Log, i int) Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := testRecord(i)
		pos, err := l.Append(r)
		if err == nil {
			err = l.Sync(pos)
		}
		if err == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log did not take writes again within 10 s: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLog_ResumesAfterFailure fails each kind of persisting call with
// ENOSPC, checks that writes are refused while it lasts, that the log takes
// writes again by itself once it stops, that a record whose Sync failed is
// reported lost rather than durable afterwards, and that after a power cut
// exactly the acknowledged records are replayed.
func TestLog_ResumesAfterFailure(t *testing.T) {
	tests := []struct {
		name string
		op   vfs.Op
		file string
	}{
		{"fsync of the segment", vfs.OpSync, segmentSuffix},
		{"write of the segment", vfs.OpWrite, segmentSuffix},
		{"fsync of the directory", vfs.OpSyncDir, "wal"},
		{"every write and fsync", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfs := vfs.NewCrashFS()
			var failing atomic.Bool
			cfs.SetFault(func(op vfs.Op, path string) error {
				if !failing.Load() {
					return nil
				}
				if tt.op == "" && (op == vfs.OpWrite || op == vfs.OpSync || op == vfs.OpSyncDir) ||
					op == tt.op && strings.HasSuffix(path, tt.file) {
					return syscall.ENOSPC
				}
				return nil
			})
			opts := Options{Dir: "/wal", NodeID: "n", FS: cfs, Logger: testLogger(t),
				RetryInterval: 20 * time.Millisecond, MaxSegmentBytes: 4 << 10}
			l := mustOpen(t, opts)
			acked := appendSynced(t, l, 0, 40) // several segments
			seqBefore := l.OpenSeq()

			failing.Store(true)
			if tt.op == vfs.OpSyncDir {
				// A directory sync follows a segment's creation.
				if _, err := l.Cut(); err != nil && !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
			}
			pos, err := l.Append(testRecord(40))
			if err == nil {
				err = l.Sync(pos)
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Append+Sync while failing = %v, want ENOSPC", err)
			}
			// Still refused while the fault lasts, across several retries.
			time.Sleep(100 * time.Millisecond)
			if p, err := l.Append(testRecord(41)); err == nil {
				if err := l.Sync(p); err == nil {
					t.Fatal("a write succeeded while every retry must fail")
				}
			}

			failing.Store(false)
			acked = append(acked, waitResumed(t, l, 42))
			if pos.Seq == 0 {
				// Refused by Append (the log had failed in Cut): nothing to ask.
			} else if err := l.Sync(pos); !errors.Is(err, ErrLost) {
				t.Fatalf("Sync of the record that failed, after recovery = %v, want ErrLost", err)
			}
			if seq := l.OpenSeq(); seq <= seqBefore {
				t.Fatalf("open segment %d after recovery, want a fresh one after %d", seq, seqBefore)
			}
			if _, err := l.AppendIn(seqBefore, testRecord(99)); !errors.Is(err, ErrSegmentChanged) {
				t.Fatalf("AppendIn(segment %d) after recovery = %v, want ErrSegmentChanged", seqBefore, err)
			}
			acked = append(acked, appendSynced(t, l, 43, 80)...)
			segs := l.Segments()
			for i, s := range segs {
				if i > 0 && s.Seq <= segs[i-1].Seq {
					t.Fatalf("segments out of order: %+v", segs)
				}
				if i < len(segs)-1 && !s.Sealed {
					t.Fatalf("segment %d not sealed after recovery", s.Seq)
				}
			}
			// Sealed segments still read back verified (the shipper's path).
			for _, s := range segs[:len(segs)-1] {
				if _, _, err := l.ReadSealed(s.Seq); err != nil {
					t.Fatalf("ReadSealed(%d): %v", s.Seq, err)
				}
			}
			if err := l.RemoveBefore(segs[1].Seq); err != nil {
				t.Fatalf("RemoveBefore after recovery: %v", err)
			}
			// Power cut without Close: exactly the acknowledged records
			// are left, whatever was removed by RemoveBefore aside.
			opts.FS = cfs.Crash()
			l.Close() // stops the syncer; the crashed file system fails the rest
			l2 := mustOpen(t, opts)
			defer mustClose(t, l2)
			got := records(replayAll(t, l2, 0))
			kept := acked[len(acked)-len(got):]
			if len(got) == 0 || !equalRecords(got, kept) {
				t.Fatalf("replayed %d records after the power cut; want the last %d acknowledged exactly", len(got), len(got))
			}
			for _, r := range got {
				if string(r.Data) == string(testRecord(40).Data) || string(r.Data) == string(testRecord(41).Data) {
					t.Fatalf("a record that was never acknowledged was replayed: %q", r.Data)
				}
			}
			if got[len(got)-1].MinT != testRecord(79).MinT {
				t.Fatalf("the last replayed record is %q, want record 79", got[len(got)-1].Data)
			}
		})
	}
}

// TestLog_ResumeUnderConcurrentWriters flips a write fault on and off
// while writers append and sync, then cuts the power: every acknowledged
// record is replayed once, in order, and nothing never appended appears.
func TestLog_ResumeUnderConcurrentWriters(t *testing.T) {
	cfs := vfs.NewCrashFS()
	var failing atomic.Bool
	cfs.SetFault(func(op vfs.Op, path string) error {
		if failing.Load() && (op == vfs.OpWrite || op == vfs.OpSync) && strings.HasSuffix(path, segmentSuffix) {
			return syscall.ENOSPC
		}
		return nil
	})
	opts := Options{Dir: "/wal", NodeID: "n", FS: cfs, Logger: testLogger(t),
		RetryInterval: 10 * time.Millisecond, MaxSegmentBytes: 8 << 10}
	l := mustOpen(t, opts)

	var (
		mu       sync.Mutex
		ackedIDs = map[uint64]bool{}
		next     atomic.Uint64
		lost     atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := next.Add(1)
				l.MaybeCut()
				pos, err := l.Append(Record{Data: crashPayload(id), MinT: int64(id), MaxT: int64(id), Points: 1})
				if err == nil {
					err = l.Sync(pos)
				}
				if errors.Is(err, ErrLost) {
					lost.Add(1)
				}
				if err == nil {
					mu.Lock()
					ackedIDs[id] = true
					mu.Unlock()
				}
			}
		}()
	}
	for range 10 {
		time.Sleep(15 * time.Millisecond)
		failing.Store(true)
		time.Sleep(30 * time.Millisecond)
		failing.Store(false)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()

	opts.FS = cfs.Crash()
	l.Close()
	l2 := mustOpen(t, opts)
	defer mustClose(t, l2)
	seen := map[uint64]bool{}
	for _, r := range records(replayAll(t, l2, 0)) {
		id := uint64(r.MinT)
		if id == 0 || id > next.Load() || string(r.Data) != string(crashPayload(id)) {
			t.Fatalf("replayed a record that was never appended: id %d", id)
		}
		if seen[id] {
			t.Fatalf("record %d replayed twice", id)
		}
		seen[id] = true
	}
	missing := 0
	for id := range ackedIDs {
		if !seen[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records were not replayed", missing, len(ackedIDs))
	}
	if len(ackedIDs) == 0 {
		t.Fatal("no write was acknowledged")
	}
	t.Logf("%d appended, %d acknowledged, %d replayed, %d reported lost", next.Load(), len(ackedIDs), len(seen), lost.Load())
}
