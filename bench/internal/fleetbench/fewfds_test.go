package fleetbench

import (
	"os"
	"path/filepath"
	"testing"
)

// openFDsTo counts this process's descriptors open on path.
func openFDsTo(t *testing.T, path string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// TestFewFDs_AppendFileHoldsNoDescriptorBetweenSyncs: a .segments file
// opened for appending is written and read as an ordinary file, but holds
// its descriptor only from a write to the sync after it.
func TestFewFDs_AppendFileHoldsNoDescriptorBetweenSyncs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "edge.cursor.segments")
	f, err := fewFDs{}.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if n := openFDsTo(t, path); n != 0 {
		t.Fatalf("%d descriptors open after OpenFile, want 0", n)
	}
	for _, s := range []string{"one\n", "two\n"} {
		if _, err := f.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if n := openFDsTo(t, path); n != 1 {
			t.Fatalf("%d descriptors open after Write, want 1", n)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if n := openFDsTo(t, path); n != 0 {
			t.Fatalf("%d descriptors open after Sync, want 0", n)
		}
	}
	if size, err := f.Size(); err != nil || size != 8 {
		t.Fatalf("Size = %d, %v; want 8", size, err)
	}
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openFDsTo(t, path); n != 0 {
		t.Fatalf("%d descriptors open after Close, want 0", n)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "one\n" {
		t.Fatalf("file holds %q, %v; want the first line (appended, then truncated)", b, err)
	}
	// The first open's O_CREATE|O_TRUNC is not repeated by later opens.
	f, err = fewFDs{}.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("three\n")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, _ := os.ReadFile(path); string(b) != "one\nthree\n" {
		t.Fatalf("file holds %q after a reopen, want the append", b)
	}
	// Other files are the real file system's.
	if _, err := (fewFDs{}).OpenFile(filepath.Join(t.TempDir(), "missing", "x.segments"), os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		t.Error("opening a file in a missing directory succeeded")
	}
	other := filepath.Join(t.TempDir(), "edge.cursor.tmp")
	g, err := fewFDs{}.OpenFile(other, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, ok := g.(*reopened); ok {
		t.Error("a file that is not segment summaries was wrapped")
	}
}
