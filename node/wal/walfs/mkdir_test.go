package walfs

import (
	"os"
	"path/filepath"
	"slices"
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
