package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"syscall"
	"testing"
)

func mustWrite(t *testing.T, f File, s string) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func contents(t *testing.T, c *CrashFS, name string) string {
	t.Helper()
	b, err := c.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCrashFS_Crash(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, c *CrashFS)
		want  map[string]string // path → contents after Crash
	}{
		{
			name: "unsynced bytes are dropped",
			setup: func(t *testing.T, c *CrashFS) {
				f, _ := c.OpenFile("/d/a", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				mustWrite(t, f, "synced")
				f.Sync()
				c.SyncDir("/d")
				mustWrite(t, f, "-lost")
			},
			want: map[string]string{"/d/a": "synced"},
		},
		{
			name: "a file whose entry was never synced is gone",
			setup: func(t *testing.T, c *CrashFS) {
				f, _ := c.OpenFile("/d/a", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
				mustWrite(t, f, "data")
				f.Sync()
			},
			want: map[string]string{"/d/a": "<missing>"},
		},
		{
			name: "an unsynced removal is undone",
			setup: func(t *testing.T, c *CrashFS) {
				c.WriteFile("/d/a", []byte("kept"))
				c.Remove("/d/a")
			},
			want: map[string]string{"/d/a": "kept"},
		},
		{
			name: "a synced removal sticks",
			setup: func(t *testing.T, c *CrashFS) {
				c.WriteFile("/d/a", []byte("gone"))
				c.Remove("/d/a")
				c.SyncDir("/d")
			},
			want: map[string]string{"/d/a": "<missing>"},
		},
		{
			name: "an unsynced rename is undone",
			setup: func(t *testing.T, c *CrashFS) {
				c.WriteFile("/d/a", []byte("x"))
				c.Rename("/d/a", "/d/b")
			},
			want: map[string]string{"/d/a": "x", "/d/b": "<missing>"},
		},
		{
			name: "a rename synced in one directory only leaves two names",
			setup: func(t *testing.T, c *CrashFS) {
				c.WriteFile("/d/a", []byte("x"))
				c.Rename("/d/a", "/d/q/a")
				c.SyncDir("/d/q")
			},
			want: map[string]string{"/d/a": "x", "/d/q/a": "x"},
		},
		{
			name: "truncation below the synced size is undone",
			setup: func(t *testing.T, c *CrashFS) {
				c.WriteFile("/d/a", []byte("0123456789"))
				f, _ := c.OpenFile("/d/a", os.O_WRONLY|os.O_APPEND, 0)
				f.Truncate(4)
				mustWrite(t, f, "xyz")
			},
			want: map[string]string{"/d/a": "0123456789"},
		},
		{
			name: "truncation made durable by Sync",
			setup: func(t *testing.T, c *CrashFS) {
				c.WriteFile("/d/a", []byte("0123456789"))
				f, _ := c.OpenFile("/d/a", os.O_WRONLY|os.O_APPEND, 0)
				f.Truncate(4)
				mustWrite(t, f, "xyz")
				f.Sync()
			},
			want: map[string]string{"/d/a": "0123xyz"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCrashFS()
			if err := c.MkdirAll("/d/q", 0o755); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, c)
			after := c.Crash()
			for name, want := range tt.want {
				if got := contents(t, after, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestCrashFS_OldViewIsDead(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d", 0o755)
	f, _ := c.OpenFile("/d/a", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	after := c.Crash()
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write through a file of the crashed view = %v", err)
	}
	if err := f.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("sync = %v", err)
	}
	if _, err := c.OpenFile("/d/b", os.O_WRONLY|os.O_CREATE, 0o644); !errors.Is(err, ErrCrashed) {
		t.Fatalf("open through the crashed view = %v", err)
	}
	if err := c.Remove("/d/a"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("remove through the crashed view = %v", err)
	}
	if _, err := after.OpenFile("/d/b", os.O_WRONLY|os.O_CREATE, 0o644); err != nil {
		t.Fatalf("open after reboot: %v", err)
	}
}

func TestCrashFS_CrashTornKeepsAPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]bool{}
	for range 200 {
		c := NewCrashFS()
		c.MkdirAll("/d", 0o755)
		f, _ := c.OpenFile("/d/a", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		mustWrite(t, f, "sync")
		f.Sync()
		c.SyncDir("/d")
		mustWrite(t, f, "0123456789")
		got := contents(t, c.CrashTorn(rng), "/d/a")
		full := "sync0123456789"
		if len(got) < 4 || got != full[:len(got)] {
			t.Fatalf("after a torn crash: %q, want a prefix of %q keeping %q", got, full, "sync")
		}
		seen[len(got)] = true
	}
	if len(seen) < 5 {
		t.Fatalf("torn crashes kept only lengths %v", seen)
	}
}

func TestCrashFS_Files(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d/sub", 0o755)
	c.WriteFile("/d/b", nil)
	c.WriteFile("/d/a", []byte("x"))
	names, err := c.ReadDir("/d")
	if err != nil || !slices.Equal(names, []string{"a", "b", "sub"}) {
		t.Fatalf("ReadDir = %v, %v", names, err)
	}
	if _, err := c.ReadDir("/nope"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadDir of a missing directory = %v", err)
	}
	if _, err := c.OpenFile("/d/a", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL on an existing file = %v", err)
	}
	f, _ := c.OpenFile("/d/a", os.O_RDONLY, 0)
	if _, err := f.Write([]byte("y")); err == nil {
		t.Fatal("wrote through a read-only file")
	}
	buf := make([]byte, 4)
	if n, err := f.ReadAt(buf, 0); n != 1 || err != io.EOF {
		t.Fatalf("ReadAt = %d, %v", n, err)
	}
	if got := c.Files(); !slices.Equal(got, []string{"/d/a", "/d/b"}) {
		t.Fatalf("Files = %v", got)
	}
}

func TestCrashFS_Fault(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d", 0o755)
	f, _ := c.OpenFile("/d/a", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	mustWrite(t, f, "abc")
	c.SetFault(func(op Op, path string) error {
		if op == OpSync && path == "/d/a" {
			return syscall.EIO
		}
		return nil
	})
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync = %v, want EIO", err)
	}
	c.SyncDir("/d")
	if got := contents(t, c.Crash(), "/d/a"); got != "" {
		t.Fatalf("a failed Sync made %q durable", got)
	}
}

// TestOS_SyncDir exercises the real implementation's directory sync.
func TestOS_SyncDir(t *testing.T) {
	dir := t.TempDir()
	var fsys FS = OS{}
	f, err := fsys.OpenFile(dir+"/a", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "abc")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Size(); n != 3 || err != nil {
		t.Fatalf("Size = %d, %v", n, err)
	}
	f.Close()
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if names, err := fsys.ReadDir(dir); err != nil || !slices.Equal(names, []string{"a"}) {
		t.Fatalf("ReadDir = %v, %v", names, err)
	}
}

func TestCrashFS_SkippedSyncReportsSuccessAndKeepsNothing(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d", 0o755)
	c.SetFault(func(op Op, path string) error {
		if op == OpSync || op == OpSyncDir {
			return ErrSkipSync
		}
		return nil
	})
	f, _ := c.OpenFile("/d/a", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	mustWrite(t, f, "abc")
	if err := f.Sync(); err != nil {
		t.Fatalf("skipped Sync = %v, want success", err)
	}
	if err := c.SyncDir("/d"); err != nil {
		t.Fatalf("skipped SyncDir = %v, want success", err)
	}
	if got := contents(t, c.Crash(), "/d/a"); got != "<missing>" {
		t.Fatalf("after skipped syncs the crash kept %q", got)
	}
	// Any other operation fails with it.
	c2 := NewCrashFS()
	c2.MkdirAll("/d", 0o755)
	c2.SetFault(func(op Op, path string) error { return ErrSkipSync })
	if _, err := c2.OpenFile("/d/a", os.O_WRONLY|os.O_CREATE, 0o644); !errors.Is(err, ErrSkipSync) {
		t.Fatalf("open under ErrSkipSync = %v", err)
	}
}

func TestCrashFS_FaultMayCrashMidOperation(t *testing.T) {
	c := NewCrashFS()
	c.MkdirAll("/d", 0o755)
	c.WriteFile("/d/a", []byte("old"))
	var after *CrashFS
	c.SetFault(func(op Op, path string) error {
		if op == OpRename {
			after = c.Crash()
		}
		return nil
	})
	if err := c.Rename("/d/a", "/d/b"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("rename during the crash = %v, want ErrCrashed", err)
	}
	if got := contents(t, after, "/d/a"); got != "old" {
		t.Fatalf("after a crash before the rename: %q", got)
	}
}
