package powerfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mount mounts a fresh FS over a backing directory holding seed files
// (durable at mount) and unmounts it when the test ends.
func mount(t *testing.T, o Options, seed map[string]string) *FS {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("powerfs needs FUSE: %v", err)
	}
	dir := t.TempDir()
	backing := filepath.Join(dir, "backing")
	if err := os.MkdirAll(backing, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range seed {
		p := filepath.Join(backing, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Mount(backing, filepath.Join(dir, "mnt"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Unmount(); err != nil {
			t.Error(err)
		}
	})
	return f
}

func (f *FS) p(name string) string { return filepath.Join(f.Mountpoint, name) }

// cut cuts the power and remounts.
func cut(t *testing.T, f *FS) CutStats {
	t.Helper()
	cs, err := f.Cut()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Remount(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut: %v", cs)
	return cs
}

func write(t *testing.T, path, s string, sync bool) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := fh.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func want(t *testing.T, path, content string) {
	t.Helper()
	got, ok := read(t, path)
	if !ok {
		t.Fatalf("%s: missing after the cut, want %q", filepath.Base(path), content)
	}
	if got != content {
		t.Fatalf("%s after the cut: %q, want %q", filepath.Base(path), got, content)
	}
}

func wantGone(t *testing.T, path string) {
	t.Helper()
	if got, ok := read(t, path); ok {
		t.Fatalf("%s survived the cut with %q; want it gone", filepath.Base(path), got)
	}
}

func TestUnsyncedWriteIsForgotten(t *testing.T) {
	f := mount(t, Options{}, map[string]string{"a": "durable"})
	write(t, f.p("a"), "+lost", false)
	want(t, f.p("a"), "durable+lost") // visible before the cut
	cs := cut(t, f)
	want(t, f.p("a"), "durable")
	if cs.Reverted != 1 || cs.DroppedBytes != 5 {
		t.Errorf("stats %+v: want 1 file reverted, 5 bytes dropped", cs)
	}
}

func TestSyncedWriteIsKept(t *testing.T) {
	f := mount(t, Options{}, map[string]string{"a": "x"})
	write(t, f.p("a"), "+kept", true)
	write(t, f.p("a"), "+lost", false)
	cut(t, f)
	want(t, f.p("a"), "x+kept")
}

func TestNewFileNeedsItsDirectorySynced(t *testing.T) {
	f := mount(t, Options{}, nil)
	write(t, f.p("unsynced-dir"), "data", true) // the file is synced, its entry is not
	cut(t, f)
	wantGone(t, f.p("unsynced-dir"))

	write(t, f.p("both"), "data", true)
	syncDir(t, f.Mountpoint)
	cut(t, f)
	want(t, f.p("both"), "data")

	// A durable entry whose contents were never synced is empty.
	write(t, f.p("entry-only"), "data", false)
	syncDir(t, f.Mountpoint)
	cut(t, f)
	want(t, f.p("entry-only"), "")
}

func TestRenameWithoutDirectorySyncIsReverted(t *testing.T) {
	f := mount(t, Options{}, map[string]string{"old": "v1"})
	if err := os.Rename(f.p("old"), f.p("new")); err != nil {
		t.Fatal(err)
	}
	cs := cut(t, f)
	want(t, f.p("old"), "v1")
	wantGone(t, f.p("new"))
	if cs.Forgotten != 1 || cs.Resurrected != 1 {
		t.Errorf("stats %+v: want 1 entry forgotten (new), 1 resurrected (old)", cs)
	}

	// Renamed and synced: the new name, with the contents it had.
	if err := os.Rename(f.p("old"), f.p("new")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Mountpoint)
	cut(t, f)
	wantGone(t, f.p("old"))
	want(t, f.p("new"), "v1")
}

func TestAtomicReplaceByRename(t *testing.T) {
	// The classic pattern: write tmp, fsync, rename over, fsync dir.
	f := mount(t, Options{}, map[string]string{"cursor": "old"})
	write(t, f.p("cursor.tmp"), "new", true)
	if err := os.Rename(f.p("cursor.tmp"), f.p("cursor")); err != nil {
		t.Fatal(err)
	}
	cut(t, f) // before the directory sync: the old file is back
	want(t, f.p("cursor"), "old")
	wantGone(t, f.p("cursor.tmp"))

	write(t, f.p("cursor.tmp"), "new", true)
	if err := os.Rename(f.p("cursor.tmp"), f.p("cursor")); err != nil {
		t.Fatal(err)
	}
	syncDir(t, f.Mountpoint)
	cut(t, f)
	want(t, f.p("cursor"), "new")
}

func TestUnlinkWithoutDirectorySyncIsReverted(t *testing.T) {
	f := mount(t, Options{}, map[string]string{"a": "keep", "b": "gone"})
	os.Remove(f.p("a"))
	os.Remove(f.p("b"))
	syncDir(t, f.Mountpoint) // b's removal is durable, then a is recreated unsynced
	write(t, f.p("a"), "other", true)
	cut(t, f)
	wantGone(t, f.p("a")) // its removal was synced, the new a's entry was not
	wantGone(t, f.p("b"))
}

func TestNewDirectoryAndNesting(t *testing.T) {
	f := mount(t, Options{}, map[string]string{"sub/a": "x"})
	if err := os.Mkdir(f.p("new"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, f.p("new/f"), "data", true)
	syncDir(t, f.p("new"))
	cut(t, f) // new's own entry in the root was never synced
	wantGone(t, f.p("new"))
	want(t, f.p("sub/a"), "x")

	os.Mkdir(f.p("new"), 0o755)
	write(t, f.p("new/f"), "data", true)
	syncDir(t, f.p("new"))
	syncDir(t, f.Mountpoint)
	write(t, f.p("sub/a"), "y", true)
	cut(t, f)
	want(t, f.p("new/f"), "data")
	want(t, f.p("sub/a"), "xy")
	d := f.Durable()
	if d["new/f"] != 4 || d["sub/a"] != 2 || len(d) != 2 {
		t.Errorf("Durable() = %v, want new/f:4 sub/a:2", d)
	}
}

func TestTruncateWithoutSyncIsReverted(t *testing.T) {
	f := mount(t, Options{}, map[string]string{"a": "0123456789"})
	if err := os.Truncate(f.p("a"), 3); err != nil {
		t.Fatal(err)
	}
	cut(t, f)
	want(t, f.p("a"), "0123456789")
}

func TestTornTailKeepsAPrefixOfUnsyncedAppends(t *testing.T) {
	lengths := map[int]bool{}
	for seed := range uint64(20) {
		f := mount(t, Options{TornTail: true, Seed: seed + 1}, map[string]string{"wal": "head"})
		write(t, f.p("wal"), "-0123456789", false)
		cs := cut(t, f)
		got, _ := read(t, f.p("wal"))
		if !strings.HasPrefix("head-0123456789", got) || len(got) < len("head") {
			t.Fatalf("seed %d: %q is not a prefix of the appends after the synced head", seed, got)
		}
		if int64(len(got)-4) != cs.TornKept {
			t.Errorf("seed %d: %q kept, stats say %d torn bytes", seed, got, cs.TornKept)
		}
		lengths[len(got)] = true
		f.Unmount()
	}
	if len(lengths) < 3 {
		t.Errorf("torn tails of only %d lengths over 20 seeds: %v", len(lengths), slices.Collect(func(yield func(int) bool) {
			for l := range lengths {
				yield(l)
			}
		}))
	}
	// An overwrite inside the synced part is not an append: no torn tail.
	f := mount(t, Options{TornTail: true, Seed: 7}, map[string]string{"a": "abc"})
	fh, err := os.OpenFile(f.p("a"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteAt([]byte("XYZW"), 0)
	fh.Close()
	cut(t, f)
	want(t, f.p("a"), "abc")
}

func TestCutOfUnmountedFSFails(t *testing.T) {
	f := mount(t, Options{}, nil)
	if _, err := f.Cut(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Cut(); err == nil || !strings.Contains(err.Error(), "not mounted") {
		t.Fatalf("second Cut: %v, want a not-mounted error", err)
	}
	if _, err := Mount(filepath.Join(t.TempDir(), "missing"), t.TempDir(), Options{}); err == nil {
		t.Fatal("Mount of a missing backing directory succeeded")
	}
}
