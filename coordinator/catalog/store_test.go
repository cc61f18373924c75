package catalog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/tributarydb/tributary/node/labels"
)

func TestSeriesStore_PacksLabelsAcrossChunks(t *testing.T) {
	var s seriesStore
	var want []labels.Labels
	// 3 labels do not divide a chunk: the chunks' tails are left unused.
	for i := range 2*labelChunk/3 + 100 {
		ls := labels.FromStrings("__name__", "m"+strconv.Itoa(i%7), "host", strconv.Itoa(i), "x", strconv.Itoa(i%3))
		if i%5 == 0 {
			ls = ls[:1+i%3]
		}
		want = append(want, ls)
		if id := s.add(ls); id != uint64(i+1) {
			t.Fatalf("series %d got id %d", i+1, id)
		}
	}
	if len(s.chunks) < 2 {
		t.Fatalf("%d chunks: the test does not cross a chunk", len(s.chunks))
	}
	for i, w := range want {
		got := s.at(uint64(i + 1))
		if !labels.Equal(got, w) {
			t.Fatalf("series %d: got %v, want %v", i+1, got, w)
		}
		if cap(got) != len(got) {
			t.Fatalf("series %d: capacity %d past its %d labels", i+1, cap(got), len(got))
		}
	}
	n := 0
	s.each(func(id uint64, ls labels.Labels) {
		if n++; id != uint64(n) || !labels.Equal(ls, want[n-1]) {
			t.Fatalf("each: series %d as %d: %v", n, id, ls)
		}
	})
	if n != len(want) || s.len() != len(want) {
		t.Fatalf("each visited %d, len %d, want %d", n, s.len(), len(want))
	}
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestFSM_SeriesShareLabelStrings(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1", "pi-2")
	for i, e := range []string{"pi-1", "pi-2"} {
		applyOK(t, f, uint64(10+i), RegisterSeries{Edge: e, Series: []labels.Labels{
			series("__name__", "temp", "site", "north", "sensor", e),
			series("__name__", "temp", "site", "north", "sensor", e+"b"),
		}})
	}
	check := func(f *FSM) {
		t.Helper()
		first, _ := f.Series(1)
		for id := uint64(2); id <= 4; id++ {
			ls, _ := f.Series(id)
			for i, l := range ls {
				if !sameString(l.Name, first[i].Name) {
					t.Fatalf("series %d: name %q is a copy", id, l.Name)
				}
				if l.Name != "sensor" && !sameString(l.Value, first[i].Value) {
					t.Fatalf("series %d: value %s=%q is a copy", id, l.Name, l.Value)
				}
			}
		}
	}
	check(f)
	g := New()
	if err := g.Restore(f.Snapshot()); err != nil {
		t.Fatal(err)
	}
	check(g)
	if !bytes.Equal(g.Snapshot(), f.Snapshot()) {
		t.Fatal("restored catalog snapshots differently")
	}
}

// TestFSM_KeyHashCollisions runs the catalog with a hash that collides
// for every series of a key length: series are still found by their
// labels, registered once, restored and checked.
func TestFSM_KeyHashCollisions(t *testing.T) {
	defer func(h func([]byte) uint64) { keyHash = h }(keyHash)
	keyHash = func(b []byte) uint64 { return uint64(len(b)) }
	f := newCatalogWithEdges(t, "pi-1", "pi-2")
	var batch []labels.Labels
	for i := range 50 {
		batch = append(batch, series("__name__", "m"+strconv.Itoa(i%5), "host", fmt.Sprintf("h%02d", i)))
	}
	r := applyOK(t, f, 10, RegisterSeries{Edge: "pi-1", Series: batch}).(RegisterSeriesResult)
	if r.Created != 50 || len(f.st.collided) == 0 {
		t.Fatalf("created %d, %d collided", r.Created, len(f.st.collided))
	}
	again := applyOK(t, f, 11, RegisterSeries{Edge: "pi-2", Series: batch}).(RegisterSeriesResult)
	if again.Created != 0 || !slices.Equal(again.IDs, r.IDs) {
		t.Fatalf("registered again: %+v, first %v", again, r.IDs)
	}
	for i, ls := range batch {
		if id, ok := f.Lookup(ls); !ok || id != r.IDs[i] {
			t.Fatalf("lookup %v: %d %v, want %d", ls, id, ok, r.IDs[i])
		}
	}
	if id, ok := f.Lookup(series("__name__", "m0", "host", "h99")); ok {
		t.Fatalf("an unknown series found as %d", id)
	}
	if got := f.Unlisted("pi-2", batch); len(got) != 0 {
		t.Fatalf("unlisted: %v", got)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	snap := f.Snapshot()
	g := New()
	if err := g.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.Snapshot(), snap) {
		t.Fatal("restored catalog snapshots differently")
	}
	for i, ls := range batch {
		if id, ok := g.Lookup(ls); !ok || id != r.IDs[i] {
			t.Fatalf("restored lookup %v: %d %v, want %d", ls, id, ok, r.IDs[i])
		}
	}
	// A colliding duplicate in a snapshot is refused.
	s, err := decodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	dup := s.series.at(7)
	s.series.add(dup)
	s.seriesKeyBytes += keyStringLen(dup.AppendKey(nil))
	if err := g.Restore(s.appendSnapshot(nil)); err == nil {
		t.Fatal("a snapshot with a duplicate series restored")
	}
}

// TestFSM_SnapshotWritesLongKeys snapshots series whose keys need a
// length of more than one byte, around the one-byte limit.
func TestFSM_SnapshotWritesLongKeys(t *testing.T) {
	f := newCatalogWithEdges(t, "pi-1")
	var batch []labels.Labels
	for n := 100; n < 140; n++ {
		batch = append(batch, series("__name__", "m", "v", strings.Repeat("x", n)))
	}
	batch = append(batch, series("__name__", "m", "v", strings.Repeat("y", 1000)), series("__name__", "short"))
	if r := applyOK(t, f, 10, RegisterSeries{Edge: "pi-1", Series: batch}).(RegisterSeriesResult); r.Created != len(batch) {
		t.Fatalf("created %d of %d: %v", r.Created, len(batch), r.Rejected)
	}
	snap := f.Snapshot()
	s, err := decodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	for i, ls := range batch {
		if got := s.series.at(uint64(i + 1)); !labels.Equal(got, ls) {
			t.Fatalf("series %d differs after a restore", i+1)
		}
	}
	var want []byte
	for _, ls := range batch {
		key := ls.AppendKey(nil)
		want = append(binary.AppendUvarint(want, uint64(len(key))), key...)
	}
	if !bytes.Contains(snap, want) {
		t.Fatal("the snapshot does not hold the series keys as strings")
	}
}
