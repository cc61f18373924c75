package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

const dir = "/raft"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func open(t testing.TB, fsys vfs.FS, segBytes int64) *Log {
	t.Helper()
	l, err := Open(Options{Dir: dir, FS: fsys, SegmentBytes: segBytes, Logger: quiet})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func ent(index, term uint64, data string) raftpb.Entry {
	e := raftpb.Entry{Index: index, Term: term}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func ents(from, to, term uint64) []raftpb.Entry {
	var out []raftpb.Entry
	for i := from; i <= to; i++ {
		out = append(out, ent(i, term, fmt.Sprintf("e%d-t%d", i, term)))
	}
	return out
}

// model is a deliberately naive raft log: what the Log must hold.
type model struct {
	hs    raftpb.HardState
	snap  raftpb.Snapshot
	dummy raftpb.Entry
	ents  []raftpb.Entry
}

func (m model) clone() model {
	m.ents = slices.Clone(m.ents)
	return m
}

func (m *model) last() uint64 { return m.dummy.Index + uint64(len(m.ents)) }

func (m *model) append(es []raftpb.Entry) {
	for _, e := range es {
		if e.Index <= m.dummy.Index {
			continue
		}
		m.ents = append(m.ents[:e.Index-m.dummy.Index-1], e)
	}
}

func (m *model) term(i uint64) uint64 {
	if i == m.dummy.Index {
		return m.dummy.Term
	}
	return m.ents[i-m.dummy.Index-1].Term
}

func (m *model) compact(i uint64) {
	t := m.term(i)
	m.ents = slices.Clone(m.ents[i-m.dummy.Index:])
	m.dummy = raftpb.Entry{Index: i, Term: t}
}

func (m *model) applySnapshot(s raftpb.Snapshot) {
	m.snap = s
	m.dummy = raftpb.Entry{Index: s.Metadata.Index, Term: s.Metadata.Term}
	m.ents = nil
	m.hs.Commit = max(m.hs.Commit, s.Metadata.Index)
}

// diff says how l differs from m ("" if it does not).
func diff(l *Log, m model) string {
	hs, cs, _ := l.InitialState()
	if !raft.IsEmptyHardState(m.hs) || !raft.IsEmptyHardState(hs) {
		if hs != m.hs {
			return fmt.Sprintf("hard state %+v, want %+v", hs, m.hs)
		}
	}
	if !confStateEqual(cs, m.snap.Metadata.ConfState) {
		return fmt.Sprintf("conf state %+v, want %+v", cs, m.snap.Metadata.ConfState)
	}
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if first != m.dummy.Index+1 || last != m.last() {
		return fmt.Sprintf("entries [%d,%d], want [%d,%d]", first, last, m.dummy.Index+1, m.last())
	}
	if t, err := l.Term(m.dummy.Index); err != nil || t != m.dummy.Term {
		return fmt.Sprintf("term of dummy %d = %d, %v; want %d", m.dummy.Index, t, err, m.dummy.Term)
	}
	if last >= first {
		got, err := l.Entries(first, last+1, 1<<62)
		if err != nil {
			return err.Error()
		}
		for i, e := range got {
			w := m.ents[i]
			if e.Index != w.Index || e.Term != w.Term || e.Type != w.Type || !bytes.Equal(e.Data, w.Data) {
				return fmt.Sprintf("entry %d = %d/%d %q, want %d/%d %q", i, e.Index, e.Term, e.Data, w.Index, w.Term, w.Data)
			}
		}
	}
	s, err := l.Snapshot()
	if err != nil {
		return err.Error()
	}
	if s.Metadata.Index != m.snap.Metadata.Index || s.Metadata.Term != m.snap.Metadata.Term || !bytes.Equal(s.Data, m.snap.Data) {
		return fmt.Sprintf("snapshot %d/%d %q, want %d/%d %q", s.Metadata.Index, s.Metadata.Term, s.Data,
			m.snap.Metadata.Index, m.snap.Metadata.Term, m.snap.Data)
	}
	return ""
}

func TestLog_ReopenKeepsEverythingSynced(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := open(t, fsys, 0)
	if l.Boot() != 1 {
		t.Fatalf("first boot = %d", l.Boot())
	}
	var m model
	hs := raftpb.HardState{Term: 3, Vote: 2, Commit: 4}
	es := append(ents(1, 5, 1), raftpb.Entry{Index: 6, Term: 3, Type: raftpb.EntryConfChangeV2, Data: []byte{1, 2}})
	if err := l.Save(hs, es, raftpb.Snapshot{}, true); err != nil {
		t.Fatal(err)
	}
	m.hs = hs
	m.append(es)
	if d := diff(l, m); d != "" {
		t.Fatal(d)
	}
	fsys = fsys.Crash()
	l = open(t, fsys, 0)
	if d := diff(l, m); d != "" {
		t.Fatalf("after crash: %s", d)
	}
	if l.Boot() != 2 {
		t.Fatalf("second boot = %d", l.Boot())
	}
}

func TestLog_ConflictingSuffixIsReplaced(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := open(t, fsys, 0)
	var m model
	steps := [][]raftpb.Entry{ents(1, 10, 1), ents(6, 8, 2), ents(9, 9, 2), ents(3, 3, 3)}
	for _, es := range steps {
		if err := l.Append(es); err != nil {
			t.Fatal(err)
		}
		m.append(es)
	}
	if last, _ := l.LastIndex(); last != 3 {
		t.Fatalf("last %d, want 3 (the overwrite at 3 drops 4..9)", last)
	}
	if d := diff(l, m); d != "" {
		t.Fatal(d)
	}
	l = open(t, fsys.Crash(), 0)
	if d := diff(l, m); d != "" {
		t.Fatalf("after crash: %s", d)
	}
	// A gap is a caller bug, refused without failing the log.
	if err := l.Append(ents(9, 9, 3)); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("gap: %v", err)
	}
	if err := l.Append(ents(4, 4, 3)); err != nil {
		t.Fatal(err)
	}
}

func TestLog_CompactionDeletesSegmentsAndSurvivesCrash(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := open(t, fsys, 4<<10)
	var m model
	big := strings.Repeat("x", 500)
	for i := uint64(1); i <= 200; i++ {
		e := ent(i, 1, big)
		if err := l.Save(raftpb.HardState{Term: 1, Commit: i}, []raftpb.Entry{e}, raftpb.Snapshot{}, true); err != nil {
			t.Fatal(err)
		}
		m.append([]raftpb.Entry{e})
		m.hs = raftpb.HardState{Term: 1, Commit: i}
	}
	before := len(l.Segments())
	if before < 20 {
		t.Fatalf("only %d segments for 100 KB with 4 KiB segments", before)
	}
	cs := raftpb.ConfState{Voters: []uint64{1, 2, 3}}
	if err := l.CreateSnapshot(180, cs, []byte("state@180")); err != nil {
		t.Fatal(err)
	}
	if err := l.Compact(190); err == nil {
		t.Fatal("compaction past the snapshot accepted")
	}
	if err := l.Compact(170); err != nil {
		t.Fatal(err)
	}
	m.snap = raftpb.Snapshot{Data: []byte("state@180"), Metadata: raftpb.SnapshotMetadata{Index: 180, Term: 1, ConfState: cs}}
	m.compact(170)
	if after := len(l.Segments()); after > 6 {
		t.Fatalf("%d segments left after compacting 170 of 200 entries (had %d)", after, before)
	}
	if _, err := l.Entries(170, 175, 1<<30); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("entries below the first index: %v", err)
	}
	if _, err := l.Term(160); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("term below the dummy: %v", err)
	}
	if err := l.Compact(170); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("compacting again: %v", err)
	}
	if d := diff(l, m); d != "" {
		t.Fatal(d)
	}
	for range 3 {
		fsys = fsys.CrashTorn(rand.New(rand.NewPCG(1, 2)))
		l = open(t, fsys, 4<<10)
		if d := diff(l, m); d != "" {
			t.Fatalf("after crash: %s", d)
		}
	}
	// Only the latest snapshot file is kept.
	var snaps []string
	for _, f := range fsys.Files() {
		if strings.HasPrefix(f, filepath.Join(dir, "snap")) {
			snaps = append(snaps, f)
		}
	}
	if len(snaps) != 1 {
		t.Fatalf("snapshot files %v", snaps)
	}
}

func TestLog_InstalledSnapshotReplacesTheLog(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := open(t, fsys, 0)
	var m model
	if err := l.Append(ents(1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	snap := raftpb.Snapshot{Data: []byte("leader state"), Metadata: raftpb.SnapshotMetadata{Index: 50, Term: 4,
		ConfState: raftpb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{3}}}}
	hs := raftpb.HardState{Term: 4, Commit: 50}
	es := ents(51, 52, 4)
	if err := l.Save(hs, es, snap, true); err != nil {
		t.Fatal(err)
	}
	m.applySnapshot(snap)
	m.append(es)
	m.hs = hs
	if d := diff(l, m); d != "" {
		t.Fatal(d)
	}
	if err := l.ApplySnapshot(snap); !errors.Is(err, raft.ErrSnapOutOfDate) {
		t.Fatalf("older snapshot: %v", err)
	}
	l = open(t, fsys.Crash(), 0)
	if d := diff(l, m); d != "" {
		t.Fatalf("after crash: %s", d)
	}
}

func TestLog_TornTailIsCut(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := open(t, fsys, 0)
	if err := l.Append(ents(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	// Unsynced commit-only change, then a crash that keeps part of it.
	if err := l.Save(raftpb.HardState{Term: 1, Commit: 3}, nil, raftpb.Snapshot{}, false); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, segName(l.Segments()[len(l.Segments())-1]))
	full, _ := fsys.ReadFile(seg)
	fsys = fsys.Crash()
	synced, _ := fsys.ReadFile(seg)
	// Put back a torn half of the lost record.
	torn := full[:len(synced)+(len(full)-len(synced))/2]
	if err := fsys.WriteFile(seg, torn); err != nil {
		t.Fatal(err)
	}
	l = open(t, fsys, 0)
	if last, _ := l.LastIndex(); last != 3 {
		t.Fatalf("last %d after torn tail", last)
	}
	if got, _ := fsys.ReadFile(seg); len(got) != len(synced) {
		t.Fatalf("torn tail not cut: %d bytes, want %d", len(got), len(synced))
	}
}

func TestLog_DamagedRecordBeforeAValidOneInTheNewestSegmentIsCorruption(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := open(t, fsys, 0)
	if err := l.Append(ents(1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ents(6, 8, 1)); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, segName(l.Segments()[len(l.Segments())-1]))
	l.Close()
	data, _ := fsys.ReadFile(seg)
	// Flip a byte inside the body of the third record (an entry); valid
	// records follow it.
	off := headerSize
	for range 2 {
		off += 8 + int(binary.LittleEndian.Uint32(data[off:]))
	}
	data[off+8+2] ^= 0xff
	if err := fsys.WriteFile(seg, data); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir, FS: fsys, Logger: quiet})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Path != seg {
		t.Fatalf("got %v, want a CorruptionError in %s (not a torn tail cut)", err, seg)
	}
	if got, _ := fsys.ReadFile(seg); len(got) != len(data) {
		t.Fatalf("the segment was cut to %d bytes of %d", len(got), len(data))
	}
}

func TestLog_DamageBeforeTheTailIsCorruption(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := open(t, fsys, 0)
	if err := l.Append(ents(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, segName(l.Segments()[0]))
	l.Close()
	open(t, fsys, 0).Close() // a newer segment now follows
	data, _ := fsys.ReadFile(seg)
	data[len(data)-3] ^= 0xff
	if err := fsys.WriteFile(seg, data); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir, FS: fsys, Logger: quiet})
	var ce *CorruptionError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) || ce.Path != seg {
		t.Fatalf("got %v, want a CorruptionError in %s", err, seg)
	}
}

func TestLog_MissingSnapshotFileIsCorruption(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := open(t, fsys, 0)
	if err := l.Append(ents(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.CreateSnapshot(2, raftpb.ConfState{Voters: []uint64{1}}, []byte("s")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := fsys.WriteFile(filepath.Join(dir, "snap", snapName(2, 1)), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir, FS: fsys, Logger: quiet}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged snapshot file: %v", err)
	}
}

func TestLog_FailedSyncFailsTheLogForGood(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := open(t, fsys, 0)
	boom := errors.New("disk on fire")
	fsys.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync {
			return boom
		}
		return nil
	})
	if err := l.Append(ents(1, 1, 1)); !errors.Is(err, boom) {
		t.Fatalf("append: %v", err)
	}
	fsys.SetFault(nil)
	if err := l.Append(ents(1, 1, 1)); !errors.Is(err, boom) {
		t.Fatalf("append after failure: %v", err)
	}
	l = open(t, fsys.Crash(), 0)
	if last, _ := l.LastIndex(); last != 0 {
		t.Fatalf("unsynced entry survived: last %d", last)
	}
}

func TestLog_EntriesRespectsMaxSize(t *testing.T) {
	l := open(t, vfs.NewCrashFS(), 0)
	if err := l.Append(ents(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	e1 := ent(1, 1, "e1-t1")
	one := uint64(e1.Size())
	for _, tc := range []struct{ max, want uint64 }{{0, 1}, {one, 1}, {2*one + 1, 2}, {1 << 30, 10}} {
		got, err := l.Entries(1, 11, tc.max)
		if err != nil || uint64(len(got)) != tc.want {
			t.Fatalf("maxSize %d: %d entries, %v; want %d", tc.max, len(got), err, tc.want)
		}
	}
	if _, err := l.Entries(5, 12, 1<<30); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("past the end: %v", err)
	}
	got, _ := l.Entries(1, 3, 1<<30)
	_ = append(got, ent(99, 9, "x")) // callers may append
	if again, _ := l.Entries(1, 4, 1<<30); again[2].Index != 3 {
		t.Fatal("an append by the caller corrupted the log")
	}
}

// TestLog_RandomCrashes drives random operations against the naive model,
// crashing (with torn writes) at random points: after reopening, the log
// must equal the model at the last sync or at one of the unsynced steps
// after it.
func TestLog_RandomCrashes(t *testing.T) {
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomCrashRun(t, seed) })
	}
}

func randomCrashRun(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 99))
	fsys := vfs.NewCrashFS()
	segBytes := int64(4<<10) << r.IntN(3)
	l := open(t, fsys, segBytes)
	var m model
	candidates := []model{m.clone()}
	term := uint64(1)
	for step := range 300 {
		switch op := r.IntN(20); {
		case op < 10: // append, sometimes overwriting an uncommitted suffix
			from := m.last() + 1
			if floor := max(m.hs.Commit, m.dummy.Index); r.IntN(4) == 0 && m.last() > floor {
				from = floor + 1 + uint64(r.IntN(int(m.last()-floor)))
				term++
			}
			es := ents(from, from+uint64(r.IntN(8)), term)
			hs := m.hs
			hs.Term = max(hs.Term, term)
			hs.Commit = max(hs.Commit, min(from-1, m.last()))
			if err := l.Save(hs, es, raftpb.Snapshot{}, true); err != nil {
				t.Fatal(err)
			}
			m.append(es)
			m.hs = hs
			candidates = []model{m.clone()}
		case op < 13: // commit-only change, not synced
			hs := m.hs
			hs.Commit = m.last()
			if err := l.Save(hs, nil, raftpb.Snapshot{}, false); err != nil {
				t.Fatal(err)
			}
			m.hs = hs
			candidates = append(candidates, m.clone())
		case op < 15: // snapshot and compaction
			if m.hs.Commit <= m.snap.Metadata.Index || m.hs.Commit <= m.dummy.Index {
				continue
			}
			at := m.snap.Metadata.Index + 1 + uint64(r.IntN(int(m.hs.Commit-m.snap.Metadata.Index)))
			cs := raftpb.ConfState{Voters: []uint64{1, uint64(2 + r.IntN(3))}}
			data := []byte(fmt.Sprintf("state@%d/%d", at, step))
			if err := l.CreateSnapshot(at, cs, data); err != nil {
				t.Fatal(err)
			}
			m.snap = raftpb.Snapshot{Data: data, Metadata: raftpb.SnapshotMetadata{Index: at, Term: m.term(at), ConfState: cs}}
			if c := at - min(at, uint64(r.IntN(5))); c > m.dummy.Index {
				if err := l.Compact(c); err != nil {
					t.Fatal(err)
				}
				m.compact(c)
			}
			candidates = []model{m.clone()}
		case op < 16: // a snapshot from the leader
			at := m.last() + uint64(r.IntN(20)) + 1
			term++
			snap := raftpb.Snapshot{Data: []byte(fmt.Sprintf("leader@%d", at)), Metadata: raftpb.SnapshotMetadata{Index: at, Term: term,
				ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}
			hs := raftpb.HardState{Term: term, Commit: at, Vote: m.hs.Vote}
			if err := l.Save(hs, nil, snap, true); err != nil {
				t.Fatal(err)
			}
			m.applySnapshot(snap)
			m.hs = hs
			candidates = []model{m.clone()}
		default: // crash and reopen
			torn := r.IntN(2) == 0
			if torn {
				fsys = fsys.CrashTorn(r)
			} else {
				fsys = fsys.Crash()
			}
			l = open(t, fsys, segBytes)
			found := -1
			for i, c := range candidates {
				if diff(l, c) == "" {
					found = i
				}
			}
			if found < 0 {
				t.Fatalf("step %d: recovered log matches none of %d candidates; vs last synced: %s", step, len(candidates), diff(l, candidates[0]))
			}
			m = candidates[found].clone()
			candidates = []model{m.clone()}
		}
	}
}
