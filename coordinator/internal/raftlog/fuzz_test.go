package raftlog

import (
	"path/filepath"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// FuzzOpen: whatever bytes follow a valid segment header, Open never
// panics, and a log it opens is usable and reopens to the same state.
func FuzzOpen(f *testing.F) {
	fsys := vfs.NewCrashFS()
	l := open(f, fsys, 0)
	_ = l.Save(raftpb.HardState{Term: 2, Vote: 1, Commit: 2}, ents(1, 3, 2), raftpb.Snapshot{}, true)
	_ = l.CreateSnapshot(2, raftpb.ConfState{Voters: []uint64{1, 2}}, []byte("s"))
	_ = l.Compact(1)
	_ = l.Append(ents(3, 4, 3))
	seg, _ := fsys.ReadFile(filepath.Join(dir, segName(l.Segments()[len(l.Segments())-1])))
	f.Add(seg[headerSize:])
	f.Add(appendRecord(nil, recEntry, encodeEntry(nil, ent(1, 1, "x"))))
	f.Fuzz(func(t *testing.T, body []byte) {
		fsys := vfs.NewCrashFS()
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile(filepath.Join(dir, segName(1)), append(appendHeader(nil, 1), body...)); err != nil {
			t.Fatal(err)
		}
		l, err := Open(Options{Dir: dir, FS: fsys, Logger: quiet})
		if err != nil {
			return
		}
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		if last >= first {
			if _, err := l.Entries(first, last+1, 1<<30); err != nil {
				t.Fatalf("entries [%d,%d]: %v", first, last, err)
			}
		}
		hs, _, _ := l.InitialState()
		if err := l.Append(ents(last+1, last+1, hs.Term+1)); err != nil {
			t.Fatal(err)
		}
		l.Close()
		l2, err := Open(Options{Dir: dir, FS: fsys, Logger: quiet})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if l2last, _ := l2.LastIndex(); l2last != last+1 {
			t.Fatalf("reopened last %d, want %d", l2last, last+1)
		}
	})
}

// FuzzReplayRecords frames the input as records with valid checksums
// (each: type byte, length byte, payload), so that mutations reach the
// replay rules rather than the checksum: Open never panics, and a log it
// opens serves every entry it claims and reopens to the same state.
func FuzzReplayRecords(f *testing.F) {
	rec := func(typ byte, payload []byte) []byte { return append([]byte{typ, byte(len(payload))}, payload...) }
	var seed []byte
	seed = append(seed, rec(recBoot, []byte{3})...)
	seed = append(seed, rec(recEntry, encodeEntry(nil, ent(1, 1, "a")))...)
	seed = append(seed, rec(recEntry, encodeEntry(nil, ent(2, 1, "b")))...)
	seed = append(seed, rec(recHardState, encodeHardState(nil, raftpb.HardState{Term: 1, Commit: 2}))...)
	seed = append(seed, rec(recCompact, encodeCompact(nil, 1, 1))...)
	f.Add(seed)
	f.Fuzz(func(t *testing.T, in []byte) {
		var body []byte
		for len(in) >= 2 {
			typ, n := in[0], int(in[1])
			in = in[2:]
			n = min(n, len(in))
			body = appendRecord(body, typ, in[:n])
			in = in[n:]
		}
		fsys := vfs.NewCrashFS()
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile(filepath.Join(dir, segName(1)), append(appendHeader(nil, 1), body...)); err != nil {
			t.Fatal(err)
		}
		l, err := Open(Options{Dir: dir, FS: fsys, Logger: quiet})
		if err != nil {
			return
		}
		first, _ := l.FirstIndex()
		last, _ := l.LastIndex()
		if _, err := l.Term(first - 1); err != nil {
			t.Fatalf("term of the dummy %d: %v", first-1, err)
		}
		if last >= first {
			if _, err := l.Entries(first, last+1, 1<<30); err != nil {
				t.Fatalf("entries [%d,%d]: %v", first, last, err)
			}
		}
		hs := l.HardState()
		l.Close()
		l2, err := Open(Options{Dir: dir, FS: fsys, Logger: quiet})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if l2last, _ := l2.LastIndex(); l2last != last || l2.HardState() != hs {
			t.Fatalf("reopened to last %d %+v, want %d %+v", l2last, l2.HardState(), last, hs)
		}
	})
}
