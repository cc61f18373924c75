package wal

import (
	"strings"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
)

// A log initialised at a sequence starts there, after a power cut too, its
// first segment naming next-1 as the one before it; numbers keep growing
// after a restart.
func TestInitSequence_FirstSegmentStartsThere(t *testing.T) {
	c := vfs.NewCrashFS()
	e := env{name: "crashfs", fs: c, dir: "/data/wal", cfs: c}
	if err := InitSequence(c, e.dir, 42); err != nil {
		t.Fatal(err)
	}
	e.fs = c.Crash() // only what was synced survives
	l, err := Open(e.options(t))
	if err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if len(segs) != 1 || segs[0].Seq != 42 || segs[0].PrevSeq != 41 {
		t.Fatalf("segments after init at 42: %+v, want one open segment 42 after 41", segs)
	}
	if _, err := l.Append(Record{Data: []byte("x"), MinT: 1, MaxT: 1, Points: 1}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, err = Open(e.options(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	segs = l.Segments()
	if len(segs) != 2 || segs[0].Seq != 42 || !segs[0].Sealed || segs[1].Seq != 43 || segs[1].PrevSeq != 42 {
		t.Fatalf("segments after a restart: %+v, want 42 sealed, then 43 after 42", segs)
	}
}

// A directory with anything in it keeps its own numbers.
func TestInitSequence_RefusesAUsedDirectory(t *testing.T) {
	for _, e := range envs(t) {
		t.Run(e.name, func(t *testing.T) {
			l, err := Open(e.options(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			err = InitSequence(e.fs, e.dir, 7)
			if err == nil || !strings.Contains(err.Error(), "not empty") {
				t.Fatalf("init of a used directory: %v, want a refusal saying it is not empty", err)
			}
			if err := InitSequence(e.fs, e.dir+"-new", 0); err == nil {
				t.Fatal("init at sequence 0 accepted")
			}
		})
	}
}
