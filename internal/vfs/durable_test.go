package vfs

import (
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// syncRecorder is the OS file system, recording SyncDir calls.
type syncRecorder struct {
	OS
	synced []string
}

func (s *syncRecorder) SyncDir(dir string) error {
	s.synced = append(s.synced, dir)
	return s.OS.SyncDir(dir)
}

func TestMkdirAllDurableSyncsTheParentOfEveryNewDirectory(t *testing.T) {
	root := t.TempDir()
	fsys := &syncRecorder{}
	dir := filepath.Join(root, "a", "b", "c")
	if err := MkdirAllDurable(fsys, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	want := []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b")}
	if !slices.Equal(fsys.synced, want) {
		t.Fatalf("synced %q, want %q", fsys.synced, want)
	}
	if _, err := fsys.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	// An existing directory: nothing to sync.
	fsys.synced = nil
	if err := MkdirAllDurable(fsys, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if len(fsys.synced) != 0 {
		t.Fatalf("synced %q for an existing directory", fsys.synced)
	}
	// A path through a regular file fails.
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAllDurable(fsys, filepath.Join(file, "x"), 0o755); err == nil {
		t.Fatal("MkdirAllDurable through a regular file succeeded")
	}
}

func TestMkdirAllDurable_SurvivesAPowerCut(t *testing.T) {
	c := NewCrashFS()
	if err := MkdirAllDurable(c, "/data/a/b", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(c, "/data/a/b/f", 0o644, []byte("x")); err != nil {
		t.Fatal(err)
	}
	after := c.Crash()
	if got := contents(t, after, "/data/a/b/f"); got != "x" {
		t.Fatalf("after a power cut: %q", got)
	}
}

func TestWriteFileAtomic_ReplacesTheFileDurably(t *testing.T) {
	for _, fsys := range []struct {
		name string
		fs   FS
		dir  string
	}{
		{"crashfs", NewCrashFS(), "/d"},
		{"os", OS{}, t.TempDir()},
	} {
		t.Run(fsys.name, func(t *testing.T) {
			if err := fsys.fs.MkdirAll(fsys.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(fsys.dir, "f")
			if err := WriteFileAtomic(fsys.fs, name, 0o644, []byte("first, long")); err != nil {
				t.Fatal(err)
			}
			if err := WriteFileAtomic(fsys.fs, name, 0o644, []byte("sec"), nil, []byte("ond")); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFile(fsys.fs, name, 100)
			if err != nil || string(got) != "second" {
				t.Fatalf("ReadFile = %q, %v; want %q", got, err, "second")
			}
			names, err := fsys.fs.ReadDir(fsys.dir)
			if err != nil || !slices.Equal(names, []string{"f"}) {
				t.Fatalf("directory holds %q (%v), want only the file", names, err)
			}
			if c, ok := fsys.fs.(*CrashFS); ok {
				if got := contents(t, c.Crash(), name); got != "second" {
					t.Fatalf("after a power cut: %q", got)
				}
			}
		})
	}
}

// TestWriteFileAtomic_PowerCutKeepsOldOrNew cuts the power at every
// operation of a replacement, with and without torn writes, and requires
// the old contents or the new ones whole; once WriteFileAtomic returned
// nil, only the new ones.
func TestWriteFileAtomic_PowerCutKeepsOldOrNew(t *testing.T) {
	const oldData, newData = "old contents", "new contents, longer than the old"
	rng := rand.New(rand.NewPCG(7, 7))
	for cut := 0; ; cut++ {
		c := NewCrashFS()
		c.MkdirAll("/d", 0o755)
		c.WriteFile("/d/f", []byte(oldData))
		c.WriteFile("/d/f"+TempSuffix, []byte("a leftover"))
		var after *CrashFS
		ops := 0
		c.SetFault(func(Op, string) error {
			if ops++; ops > cut && after == nil {
				after = c.CrashTorn(rng)
			}
			return nil
		})
		err := WriteFileAtomic(c, "/d/f", 0o644, []byte(newData))
		if after == nil {
			if err != nil {
				t.Fatal(err)
			}
			after = c.CrashTorn(rng)
			if got := contents(t, after, "/d/f"); got != newData {
				t.Fatalf("after a successful write and a power cut: %q", got)
			}
			if cut < 5 {
				t.Fatalf("the write took only %d operations", cut)
			}
			return
		}
		if !errors.Is(err, ErrCrashed) {
			t.Fatalf("cut at operation %d: WriteFileAtomic = %v, want ErrCrashed", cut, err)
		}
		if got := contents(t, after, "/d/f"); got != oldData && got != newData {
			t.Fatalf("cut at operation %d: %q, want the old or the new contents whole", cut, got)
		}
	}
}

// TestWriteFileAtomic_ErrorsNameTheStep fails each step in turn.
func TestWriteFileAtomic_ErrorsNameTheStep(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		want string
	}{
		{OpOpen, "create /d/f.tmp"},
		{OpWrite, "write /d/f.tmp"},
		{OpSync, "fsync /d/f.tmp"},
		{OpRename, "rename /d/f.tmp"},
		{OpSyncDir, "fsync directory /d"},
	} {
		c := NewCrashFS()
		c.MkdirAll("/d", 0o755)
		c.SetFault(func(op Op, _ string) error {
			if op == tc.op {
				return syscall.EIO
			}
			return nil
		})
		err := WriteFileAtomic(c, "/d/f", 0o644, []byte("x"))
		if !errors.Is(err, syscall.EIO) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("failing %s: %v, want EIO and a message starting %q", tc.op, err, tc.want)
		}
	}
}

func TestReadFile_RefusesAFileOverItsBound(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d", 0o755)
	c.WriteFile("/d/f", []byte("12345"))
	if _, err := ReadFile(c, "/d/f", 4); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFile over the bound = %v, want ErrTooLarge", err)
	}
	if b, err := ReadFile(c, "/d/f", 5); err != nil || string(b) != "12345" {
		t.Fatalf("ReadFile at the bound = %q, %v", b, err)
	}
	c.WriteFile("/d/empty", nil)
	if b, err := ReadFile(c, "/d/empty", math.MaxInt); err != nil || len(b) != 0 {
		t.Fatalf("ReadFile of an empty file = %q, %v", b, err)
	}
	if _, err := ReadFile(c, "/d/none", 5); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFile of a missing file = %v", err)
	}
}
