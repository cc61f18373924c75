package store

import (
	"os"
	"syscall"
	"testing"
)

// TestDB_UnloggedWritesNeedAFlush: a crash (Abandon) loses what
// WriteUnlogged wrote since the last Flush and keeps logged writes and
// everything flushed; Close keeps everything.
func TestDB_UnloggedWritesNeedAFlush(t *testing.T) {
	dir := t.TempDir()
	open := func() *DB {
		db, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	put := func(db *DB, logged bool, minT int64) {
		b := db.NewBatch()
		defer b.Close()
		b.PutChunk(1, minT, minT+1, []byte("c"))
		b.PutRollup(KindRollup1h, 1, minT, []byte("r"))
		write := db.WriteUnlogged
		if logged {
			write = db.Write
		}
		if err := write(b); err != nil {
			t.Fatal(err)
		}
	}
	has := func(db *DB, minT int64) (chunk, rollup bool) {
		chunk = len(collectChunks(t, db, 1, minT, minT)) == 1
		if err := db.Rollups(KindRollup1h, 1, minT, minT, func(int64, []byte) error { rollup = true; return nil }); err != nil {
			t.Fatal(err)
		}
		return chunk, rollup
	}

	db := open()
	put(db, false, 1*hourMs) // flushed below
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	put(db, false, 2*hourMs) // only in memtables
	put(db, true, 3*hourMs)  // in RocksDB's WAL
	db.Abandon()

	db = open()
	for _, tc := range []struct {
		name string
		minT int64
		want bool
	}{{"flushed", 1 * hourMs, true}, {"unlogged, not flushed", 2 * hourMs, false}, {"logged", 3 * hourMs, true}} {
		if c, r := has(db, tc.minT); c != tc.want || r != tc.want {
			t.Errorf("%s: after a crash chunk %v rollup %v, want %v", tc.name, c, r, tc.want)
		}
	}
	put(db, false, 4*hourMs)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	defer db.Close()
	if c, r := has(db, 4*hourMs); !c || !r {
		t.Errorf("unlogged write before a clean Close: chunk %v rollup %v, want both", c, r)
	}
}

// TestDB_NoPreallocatedBlocks: an open store with a little data occupies
// little disk — no WAL file or MANIFEST preallocated by megabytes.
func TestDB_NoPreallocatedBlocks(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, Options{Dir: dir})
	write(t, db, func(b *Batch) { b.PutMeta("k", []byte("v")) })
	var blocks int64
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			blocks += st.Blocks * 512
			if st.Blocks*512 > 512<<10 {
				t.Errorf("%s occupies %d bytes on disk for %d bytes of content", e.Name(), st.Blocks*512, info.Size())
			}
		}
	}
	t.Logf("store directory occupies %d bytes", blocks)
}
