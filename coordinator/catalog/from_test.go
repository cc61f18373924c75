package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"slices"
	"testing"
)

// froms returns the placement of edge as replica -> ReplicaFrom.
func froms(t *testing.T, f *FSM, edge string) map[string]ReplicaFrom {
	t.Helper()
	p, ok := f.Placement(edge)
	if !ok {
		t.Fatalf("no placement of %s", edge)
	}
	if len(p.From) != len(p.Replicas) {
		t.Fatalf("%s: %d replicas, %d froms", edge, len(p.Replicas), len(p.From))
	}
	m := map[string]ReplicaFrom{}
	for i, r := range p.Replicas {
		m[r] = p.From[i]
		if got := p.FromSeq(r); got != p.From[i].FromSeq {
			t.Fatalf("FromSeq(%s) = %d, want %d", r, got, p.From[i].FromSeq)
		}
	}
	if p.FromSeq("nobody") != 0 {
		t.Fatal("FromSeq of a coordinator that is no replica is not 0")
	}
	return m
}

func wantFroms(t *testing.T, f *FSM, edge string, want map[string]ReplicaFrom) {
	t.Helper()
	if got := froms(t, f, edge); !mapsEqual(got, want) {
		t.Fatalf("%s: replicas %+v, want %+v", edge, got, want)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func mapsEqual(a, b map[string]ReplicaFrom) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func rf(fromSeq, index uint64, lacksMs int64) ReplicaFrom {
	return ReplicaFrom{FromSeq: fromSeq, LacksThroughMs: lacksMs, Index: index}
}

func whole(index uint64) ReplicaFrom { return rf(1, index, math.MinInt64) }

func rec(edge string, first, last, epoch uint64) RecordHeld {
	return RecordHeld{Edge: edge, Epoch: epoch, Ranges: []HeldRange{{FirstSeq: first, LastSeq: last, Points: 10,
		MinTimeMs: int64(first * 100), MaxTimeMs: int64(last*100 + 99)}}}
}

// twoCoordinatorsOneEdge: c1 and c2 (indexes 1, 2), edge pi-1 placed on
// both at index 3, segments 1..10 recorded at 4.
func twoCoordinatorsOneEdge(t *testing.T) *FSM {
	f := New()
	addCoordinator(t, f, 1, "c1", 1)
	addCoordinator(t, f, 2, "c2", 2)
	applyOK(t, f, 3, RegisterNode{ID: "pi-1", Role: RoleEdge})
	applyOK(t, f, 4, rec("pi-1", 1, 10, 3))
	wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c2": whole(3)})
	return f
}

func TestReplicaFrom_CoordinatorLeavesReplacementStartsAfterHistory(t *testing.T) {
	f := twoCoordinatorsOneEdge(t)
	addCoordinator(t, f, 5, "c3", 3) // balanced already (1 edge): nothing moves
	wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c2": whole(3)})
	applyOK(t, f, 6, RemoveNode{ID: "c2"})
	wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c3": rf(11, 6, 1099)})
	// Segments stored on the current placement count for c3.
	applyOK(t, f, 7, rec("pi-1", 11, 12, 6))
	wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c3": rf(11, 6, 1099)})
}

func TestReplicaFrom_CoordinatorJoinsAndTakesAReplica(t *testing.T) {
	f := New()
	addCoordinator(t, f, 1, "c1", 1)
	addCoordinator(t, f, 2, "c2", 2)
	for i, e := range []string{"pi-1", "pi-2", "pi-3"} {
		applyOK(t, f, uint64(3+2*i), RegisterNode{ID: e, Role: RoleEdge})
		applyOK(t, f, uint64(4+2*i), rec(e, 1, 5, 0))
	}
	addCoordinator(t, f, 20, "c3", 3) // loads 3,3,0: two replicas move to c3
	moved := 0
	for _, e := range []string{"pi-1", "pi-2", "pi-3"} {
		for r, fr := range froms(t, f, e) {
			switch {
			case r == "c3" && fr != rf(6, 20, 599):
				t.Fatalf("%s: moved replica %+v, want from 6 at 20", e, fr)
			case r == "c3":
				moved++
			case fr.FromSeq != 1:
				t.Fatalf("%s: kept replica %s %+v", e, r, fr)
			}
		}
	}
	if moved != 2 {
		t.Fatalf("%d replicas moved to c3, want 2", moved)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestReplicaFrom_CountsHeldRunsAboveAckedThroughAndGaps(t *testing.T) {
	f := twoCoordinatorsOneEdge(t)
	applyOK(t, f, 5, rec("pi-1", 15, 16, 3)) // out of order: 11..14 in flight
	addCoordinator(t, f, 6, "c3", 3)
	applyOK(t, f, 7, SetPlacement{Edge: "pi-1", Replicas: []string{"c1", "c3"}})
	wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c3": rf(17, 7, 1699)})

	g := twoCoordinatorsOneEdge(t)
	applyOK(t, g, 5, RecordGap{Edge: "pi-1", Gaps: []GapRange{{AfterSeq: 10, ThroughSeq: 20, Reason: GapDropped, Points: -1}}})
	addCoordinator(t, g, 6, "c3", 3)
	applyOK(t, g, 7, SetPlacement{Edge: "pi-1", Replicas: []string{"c3"}})
	wantFroms(t, g, "pi-1", map[string]ReplicaFrom{"c3": rf(21, 7, 1099)})
}

// A segment stored on the old replicas and recorded after the change is
// not on the new replica.
func TestReplicaFrom_StoredBeforeRecordedAfterMovesFromSeq(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch uint64 // the placement the segment 11..14 was stored on
		want  uint64 // c3's FromSeq after it is recorded
		lacks int64  // and its LacksThroughMs
	}{
		{"stored on the old placement", 3, 15, 1499},
		{"epoch unknown", 0, 15, 1499},
		{"epoch from the future", 99, 15, 1499},
		{"stored on the current placement", 6, 11, 1099},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := twoCoordinatorsOneEdge(t)
			addCoordinator(t, f, 5, "c3", 3)
			applyOK(t, f, 6, SetPlacement{Edge: "pi-1", Replicas: []string{"c1", "c3"}})
			wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c3": rf(11, 6, 1099)})
			applyOK(t, f, 7, rec("pi-1", 11, 14, tc.epoch))
			wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c3": rf(tc.want, 6, tc.lacks)})
			// A replay of an old range never moves it back.
			applyOK(t, f, 8, rec("pi-1", 1, 10, 6))
			wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c3": rf(tc.want, 6, tc.lacks)})
		})
	}
}

func TestReplicaFrom_EdgeRegisteredBeforeCoordinators(t *testing.T) {
	f := New()
	applyOK(t, f, 1, RegisterNode{ID: "pi-1", Role: RoleEdge})
	addCoordinator(t, f, 2, "c1", 1)
	// Nothing was recorded (nothing can be stored without replicas):
	// the first replica holds the whole history.
	wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(2)})
	applyOK(t, f, 3, rec("pi-1", 1, 4, 2))
	wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(2)})
}

func TestReplicaFrom_RemovedAndReaddedStartsOver(t *testing.T) {
	f := twoCoordinatorsOneEdge(t)
	applyOK(t, f, 5, SetPlacement{Edge: "pi-1", Replicas: []string{"c1"}})
	applyOK(t, f, 6, rec("pi-1", 11, 20, 5))
	applyOK(t, f, 7, SetPlacement{Edge: "pi-1", Replicas: []string{"c1", "c2"}})
	// c2 lacks 11..20, though it held 1..10: it counts from 21.
	wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c2": rf(21, 7, 2099)})
}

func TestReplicaFrom_CheckRejectsBadFroms(t *testing.T) {
	f := twoCoordinatorsOneEdge(t)
	for name, mod := range map[string]func(p *Placement){
		"from 0":             func(p *Placement) { p.From[0].FromSeq = 0 },
		"past the history":   func(p *Placement) { p.From[0].FromSeq = 12 },
		"placed after epoch": func(p *Placement) { p.From[1].Index = p.Epoch + 1 },
		"missing":            func(p *Placement) { p.From = p.From[:1] },
	} {
		s, err := decodeSnapshot(f.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		mod(s.placement["pi-1"])
		if err := s.check(); err == nil {
			t.Fatalf("%s: Check passed", name)
		}
		if name == "missing" {
			continue // cannot be written
		}
		if err := New().Restore(s.appendSnapshot(nil)); !errors.Is(err, ErrCorruptSnapshot) {
			t.Fatalf("%s: restore: %v", name, err)
		}
	}
}

// snapshotV2 writes s as a version 2 snapshot: placements without
// ReplicaFrom.
func snapshotV2(t testing.TB, s *state) []byte {
	t.Helper()
	v3 := s.appendSnapshot(nil)
	out := append([]byte(nil), v3[:5]...)
	out[4] = 2
	d := &decoder{b: v3[:len(v3)-4], off: 5, what: "test"}
	out = appendUvarint(out, d.uvarint())
	for d.err == nil && d.remaining() > 0 {
		tag := d.byte()
		body := d.bytes("section")
		if tag == secPlacements {
			body = appendUvarint(nil, uint64(len(s.placement)))
			for _, e := range sortedKeys(s.placement) {
				p := s.placement[e]
				body = appendString(body, p.Edge)
				body = appendUvarint(body, p.Epoch)
				body = appendBool(body, p.Pinned)
				body = appendUvarint(body, uint64(len(p.Replicas)))
				for _, r := range p.Replicas {
					body = appendString(body, r)
				}
			}
		}
		out = appendSection(out, tag, body)
	}
	if d.err != nil {
		t.Fatal(d.err)
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

func TestSnapshot_FromRoundTripsAndOlderVersionsHoldEverything(t *testing.T) {
	f := twoCoordinatorsOneEdge(t)
	applyOK(t, f, 5, RemoveNode{ID: "c2"}) // no other coordinator: c1 alone
	addCoordinator(t, f, 6, "c3", 3)       // fills: c3 from 11
	wantFroms(t, f, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c3": rf(11, 6, 1099)})
	snap := f.Snapshot()
	if snap[4] != 3 {
		t.Fatalf("snapshot version %d", snap[4])
	}
	g := New()
	if err := g.Restore(snap); err != nil {
		t.Fatal(err)
	}
	wantFroms(t, g, "pi-1", map[string]ReplicaFrom{"c1": whole(3), "c3": rf(11, 6, 1099)})
	if !bytes.Equal(g.Snapshot(), snap) {
		t.Fatal("snapshot does not round-trip")
	}

	// Version 2: every replica holds the whole history, placed at 0.
	s, _ := decodeSnapshot(snap)
	h := New()
	if err := h.Restore(snapshotV2(t, s)); err != nil {
		t.Fatal(err)
	}
	wantFroms(t, h, "pi-1", map[string]ReplicaFrom{"c1": whole(0), "c3": whole(0)})
	// Such a replica is never moved by a segment of unknown placement.
	applyOK(t, h, 7, rec("pi-1", 11, 12, 0))
	wantFroms(t, h, "pi-1", map[string]ReplicaFrom{"c1": whole(0), "c3": whole(0)})

	// Version 1 likewise.
	v1, err := os.ReadFile("testdata/snapshot-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	k := New()
	if err := k.Restore(v1); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range k.Placements() {
		for _, fr := range p.From {
			n++
			if fr != wholeHistory {
				t.Fatalf("version 1 %s: %+v", p.Edge, p.From)
			}
		}
	}
	if n == 0 {
		t.Fatal("version 1 test data has no replicas")
	}
}

func TestCommand_RecordHeldEpochEncoding(t *testing.T) {
	c := rec("pi-1", 1, 2, 0)
	without := EncodeCommand(c)
	c.Epoch = 300
	with := EncodeCommand(c)
	if len(with) != len(without)+2 {
		t.Fatalf("epoch 300 takes %d bytes", len(with)-len(without))
	}
	got, err := DecodeCommand(with)
	if err != nil || got.(RecordHeld).Epoch != 300 {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	// Epoch 0 is left out, never written.
	zero := append(slices.Clone(without), 0)
	if _, err := DecodeCommand(zero); err == nil {
		t.Fatal("a written epoch 0 decoded")
	}
	if _, err := DecodeCommand(append(slices.Clone(with), 1)); err == nil {
		t.Fatal("trailing bytes after the epoch decoded")
	}
}

// Members that apply the same placement changes with segments recorded in
// between reach the same ReplicaFroms, directly or through a restore.
func TestReplicaFrom_Deterministic(t *testing.T) {
	cmds := randomCommands(21, 400)
	a, b := New(), New()
	applyStream(t, a, cmds, 1)
	applyStream(t, b, cmds[:200], 1)
	c := New()
	if err := c.Restore(b.Snapshot()); err != nil {
		t.Fatal(err)
	}
	applyStream(t, b, cmds[200:], 201)
	applyStream(t, c, cmds[200:], 201)
	if !bytes.Equal(a.Snapshot(), b.Snapshot()) || !bytes.Equal(a.Snapshot(), c.Snapshot()) {
		t.Fatal("snapshots differ")
	}
	late := 0
	for _, p := range a.Placements() {
		for _, fr := range p.From {
			if fr.FromSeq > 1 {
				late++
			}
		}
	}
	if late == 0 {
		t.Fatal("the stream places no replica late; the test proves nothing")
	}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestReplicaFrom_Covers(t *testing.T) {
	if !wholeHistory.Covers(math.MinInt64+1) || !wholeHistory.Covers(0) {
		t.Fatal("the whole history does not cover everything")
	}
	late := rf(11, 6, 1099)
	if late.Covers(1099) || late.Covers(-5) || !late.Covers(1100) {
		t.Fatal("a late replica covers the wrong times")
	}
}
