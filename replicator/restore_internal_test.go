package replicator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node"
)

func restoreOptions(dir string) RestoreOptions {
	return RestoreOptions{Targets: []string{"127.0.0.1:1"}, Insecure: true, Node: node.Options{DataDir: dir, NodeID: "pi"}}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

// A directory holding anything is refused before a coordinator is asked,
// and left as it was.
func TestRestore_RefusesANonEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Restore(context.Background(), restoreOptions(dir))
	if !errors.Is(err, ErrNotEmpty) || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("restore into a directory with a file: %v, want ErrNotEmpty naming the file", err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"notes.txt"}) {
		t.Fatalf("the directory holds %v after a refused restore", got)
	}
	// A cursor elsewhere that exists is refused too.
	empty := filepath.Join(t.TempDir(), "data")
	o := restoreOptions(empty)
	o.CursorPath = filepath.Join(dir, "notes.txt")
	if _, err := Restore(context.Background(), o); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("restore over an existing cursor: %v, want ErrNotEmpty", err)
	}
}

// An interrupted restore leaves its marker: the node refuses to start on
// the directory, and the next restore removes what it wrote and starts
// over, unless the directory holds something a restore does not write.
func TestRestore_InterruptedStartsOver(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	// Nobody listens on the target: the restore fails after marking.
	_, err := Restore(context.Background(), restoreOptions(dir))
	if err == nil {
		t.Fatal("restore without a coordinator succeeded")
	}
	if err := CheckRestored(dir); !errors.Is(err, ErrRestoreIncomplete) {
		t.Fatalf("after a failed restore: %v, want ErrRestoreIncomplete", err)
	}
	// What an interrupted run leaves: a WAL, a store, a cursor.
	for _, d := range []string{"wal", "db"} {
		if err := os.MkdirAll(filepath.Join(dir, d, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "replication.cursor"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	started, err := prepareRestoreDir(dir, filepath.Join(dir, "replication.cursor"))
	if err != nil || !started {
		t.Fatalf("prepare over an interrupted restore: %v, %v; want it started over", started, err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{RestoreMarker}) {
		t.Fatalf("after starting over the directory holds %v, want only the marker", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := prepareRestoreDir(dir, filepath.Join(dir, "replication.cursor")); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("an interrupted restore beside a foreign file: %v, want ErrNotEmpty", err)
	}
	if err := removeMarker(dir); err != nil {
		t.Fatal(err)
	}
	if err := CheckRestored(dir); err != nil {
		t.Fatalf("without the marker: %v", err)
	}
}

func TestRestoreOptions_Validate(t *testing.T) {
	cases := map[string]func(*RestoreOptions){
		"no node id":     func(o *RestoreOptions) { o.Node.NodeID = "" },
		"no data dir":    func(o *RestoreOptions) { o.Node.DataDir = "" },
		"no targets":     func(o *RestoreOptions) { o.Targets = nil },
		"tiny files":     func(o *RestoreOptions) { o.MaxFileBytes = 1024 },
		"tls and plain":  func(o *RestoreOptions) { o.Insecure = false },
		"huge files":     func(o *RestoreOptions) { o.MaxFileBytes = 1 << 30 },
		"node id of 256": func(o *RestoreOptions) { o.Node.NodeID = strings.Repeat("p", 256) },
	}
	for name, edit := range cases {
		o := restoreOptions(t.TempDir())
		edit(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	o := restoreOptions("/d")
	if err := o.validate(); err != nil || o.CursorPath != "/d/replication.cursor" || o.MaxFileBytes != DefaultRestoreFileBytes {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
}
