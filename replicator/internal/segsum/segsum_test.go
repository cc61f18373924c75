package segsum

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
)

func open(t *testing.T, path, node string) (*File, string) {
	t.Helper()
	f, note, err := Open(vfs.OS{}, path, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, note
}

func TestFile_SurvivesReopenAndChains(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summaries")
	f, note := open(t, path, "pi-7")
	if note != "" || f.Len() != 0 {
		t.Fatalf("new file: note %q, %d summaries", note, f.Len())
	}
	sums := []Summary{
		{Seq: 3, PrevSeq: 1, Points: 100, MinT: 10, MaxT: 20},
		{Seq: 4, PrevSeq: 3, Points: 50, MinT: 15, MaxT: 30},
		{Seq: 7, PrevSeq: 4, Points: 7, MinT: 31, MaxT: 31},
	}
	if err := f.Add(sums...); err != nil {
		t.Fatal(err)
	}
	if err := f.Add(sums[0]); err != nil { // again: nothing appended
		t.Fatal(err)
	}
	f.Close()
	g, note := open(t, path, "pi-7")
	if note != "" || g.Len() != 3 || g.entries != 3 {
		t.Fatalf("reopened: note %q, %d summaries, %d entries", note, g.Len(), g.entries)
	}
	if got, ok := g.Chain(1, 7); !ok || !reflect.DeepEqual(got, sums) {
		t.Fatalf("Chain(1, 7) = %+v, %v", got, ok)
	}
	if got, ok := g.Chain(3, 4); !ok || !reflect.DeepEqual(got, sums[1:2]) {
		t.Fatalf("Chain(3, 4) = %+v, %v", got, ok)
	}
	for _, r := range [][2]uint64{{0, 7}, {2, 7}, {1, 5}, {1, 6}} {
		if got, ok := g.Chain(r[0], r[1]); ok {
			t.Errorf("Chain(%d, %d) = %+v; want no chain (a link is missing or overshoots)", r[0], r[1], got)
		}
	}
}

func TestFile_TornTailIsCutAndAppendsGoOn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summaries")
	f, _ := open(t, path, "pi-7")
	if err := f.Add(Summary{Seq: 1, Points: 1, MinT: 1, MaxT: 1}, Summary{Seq: 2, PrevSeq: 1, Points: 2, MinT: 2, MaxT: 3},
		Summary{Seq: 3, PrevSeq: 2, Points: 2, MinT: 2, MaxT: 3}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A crash during an append: half an entry; and a flipped bit in the
	// one before it: only the first entry stands.
	b = b[:len(b)-entryBytes/2]
	b[len(b)-entryBytes/2-3] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	g, note := open(t, path, "pi-7")
	if note != "" || g.Len() != 1 {
		t.Fatalf("after a torn tail: note %q, %d summaries; want the first entry", note, g.Len())
	}
	if err := g.Add(Summary{Seq: 5, PrevSeq: 1, Points: 9, MinT: 4, MaxT: 8}); err != nil {
		t.Fatal(err)
	}
	g.Close()
	h, _ := open(t, path, "pi-7")
	if _, ok := h.Get(5); !ok || h.Len() != 2 {
		t.Fatalf("append after a torn tail lost: %d summaries", h.Len())
	}
}

func TestFile_ForeignOrDamagedFileIsReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summaries")
	f, _ := open(t, path, "pi-7")
	if err := f.Add(Summary{Seq: 1, Points: 1, MinT: 1, MaxT: 1}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if g, note := open(t, path, "pi-8"); note == "" || g.Len() != 0 {
		t.Fatalf("another node's file: note %q, %d summaries", note, g.Len())
	}
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g, note := open(t, path, "pi-7"); note == "" || g.Len() != 0 {
		t.Fatalf("garbage: note %q, %d summaries", note, g.Len())
	}
}

func TestFile_DropThroughCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summaries")
	f, _ := open(t, path, "pi-7")
	for seq := uint64(1); seq <= 600; seq++ {
		if err := f.Add(Summary{Seq: seq, PrevSeq: seq - 1, Points: 1, MinT: int64(seq), MaxT: int64(seq)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.DropThrough(500); err != nil {
		t.Fatal(err)
	}
	if f.Len() != 100 || f.entries != 100 {
		t.Fatalf("after DropThrough: %d summaries, %d entries in the file", f.Len(), f.entries)
	}
	if err := f.Add(Summary{Seq: 601, PrevSeq: 600, Points: 1, MinT: 601, MaxT: 601}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	st, err := os.Stat(path)
	if err != nil || st.Size() != headerBytes("pi-7")+101*entryBytes {
		t.Fatalf("compacted file: %v, %v", st, err)
	}
	g, _ := open(t, path, "pi-7")
	if _, ok := g.Chain(500, 601); !ok || g.Len() != 101 {
		t.Fatalf("after compaction and reopen: %d summaries", g.Len())
	}
}

// TestFile_FailedCompactionKeepsLaterAppends: when the directory fsync
// of a compaction fails, the rename may be undone by a power cut; the next
// Add must make it durable before it returns, or what it appended to the
// new file would be lost with it.
func TestFile_FailedCompactionKeepsLaterAppends(t *testing.T) {
	fsys := vfs.NewCrashFS()
	if err := fsys.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	f, _, err := Open(fsys, "/data/summaries", "pi-7")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for seq := uint64(1); seq <= 300; seq++ {
		if err := f.Add(Summary{Seq: seq, PrevSeq: seq - 1, Points: 1, MinT: int64(seq), MaxT: int64(seq)}); err != nil {
			t.Fatal(err)
		}
	}
	fsys.SetFault(func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncDir {
			return syscall.EIO
		}
		return nil
	})
	if err := f.DropThrough(200); !errors.Is(err, syscall.EIO) {
		t.Fatalf("DropThrough with a failing directory fsync = %v, want EIO", err)
	}
	fsys.SetFault(nil)
	added := Summary{Seq: 301, PrevSeq: 300, Points: 5, MinT: 301, MaxT: 302}
	if err := f.Add(added); err != nil {
		t.Fatal(err)
	}
	g, note, err := Open(fsys.Crash(), "/data/summaries", "pi-7")
	if err != nil || note != "" {
		t.Fatalf("reopen after the power cut: %q, %v", note, err)
	}
	if got, ok := g.Get(301); !ok || got != added {
		t.Fatalf("summary 301 after the power cut: %+v, %v; want %+v", got, ok, added)
	}
	if _, ok := g.Chain(200, 301); !ok {
		t.Fatal("summaries 201..301 do not chain after the power cut")
	}
}

// FuzzDecode: any bytes decode without panicking, and the summaries
// decoded from them encode to a file that decodes to the same summaries.
func FuzzDecode(f *testing.F) {
	good := appendHeader(nil, "pi-7")
	good = appendEntry(good, Summary{Seq: 3, PrevSeq: 1, Points: 9, MinT: -5, MaxT: 7})
	f.Add(good)
	f.Add([]byte{})
	f.Add(good[:len(good)-3])
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &File{nodeID: "pi-7", sums: map[uint64]Summary{}}
		n, note := s.decode(b)
		if note != "" {
			return
		}
		if n < len(s.sums) {
			t.Fatalf("%d entries hold %d summaries", n, len(s.sums))
		}
		again := appendHeader(nil, "pi-7")
		for _, e := range s.sums {
			again = appendEntry(again, e)
		}
		s2 := &File{nodeID: "pi-7", sums: map[uint64]Summary{}}
		if m, note := s2.decode(again); note != "" || m != len(s.sums) || !reflect.DeepEqual(s2.sums, s.sums) {
			t.Fatalf("summaries do not round-trip: %q, %d of %d", note, m, len(s.sums))
		}
	})
}
