package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// fillStore writes series 1..n with one chunk a day for days days and a
// rollup per day, flushes and closes the store.
func fillStore(t *testing.T, dir string, n, days int) {
	t.Helper()
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for id := uint64(1); id <= uint64(n); id++ {
		write(t, db, func(b *Batch) {
			b.PutSeries(id, labels.FromStrings("__name__", "m", "id", fmt.Sprint(id)))
			for d := range days {
				// Incompressible bytes, so the file has many blocks.
				data := make([]byte, 512)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				b.PutChunk(id, int64(d)*dayMs, int64(d)*dayMs+hourMs, data)
				b.PutRollup(KindRollup1h, id, int64(d)*dayMs, []byte("r"))
			}
		})
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// damage flips a byte every 1 KiB of path, so that every block fails.
func damage(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 512; i < len(b)-64; i += 1024 {
		b[i] ^= 0xFF
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileOf(t *testing.T, in Inspection, cf string) SSTFile {
	t.Helper()
	for _, f := range in.Files {
		if f.ColumnFamily == cf {
			return f
		}
	}
	t.Fatalf("no %s file in %+v", cf, in.Files)
	return SSTFile{}
}

func TestInspect_IntactStoreHasNoDamage(t *testing.T) {
	dir := t.TempDir()
	fillStore(t, dir, 20, 3)
	in, err := Inspect(Options{Dir: dir})
	if err != nil || in.OpenErr != nil {
		t.Fatal(err, in.OpenErr)
	}
	if len(in.Files) < 3 || len(in.Damaged()) != 0 {
		t.Fatalf("files %+v, damaged %+v", in.Files, in.Damaged())
	}
	f := fileOf(t, in, cfChunks)
	sp := f.Span(dayMs)
	if !sp.Timed || sp.Kind != KindChunks || sp.FromMs != 0 || sp.ToMs != 3*dayMs || sp.FirstSeries != 1 || sp.LastSeries != 20 {
		t.Fatalf("chunks span %+v", sp)
	}
	if f.Entries != 60 || f.Level < 0 {
		t.Fatalf("chunks file %+v: want 60 entries and a level from the manifest", f)
	}
}

func TestInspect_RefusesAStoreInUse(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, Options{Dir: dir})
	_ = db
	if _, err := Inspect(Options{Dir: dir}); !errors.Is(err, ErrInUse) {
		t.Fatalf("Inspect of an open store: %v, want ErrInUse", err)
	}
	if _, err := Repair(Options{Dir: dir}, filepath.Join(t.TempDir(), "q")); !errors.Is(err, ErrInUse) {
		t.Fatalf("Repair of an open store: %v, want ErrInUse", err)
	}
}

func TestRepair_QuarantinesTheDamagedFileAndKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	fillStore(t, dir, 50, 4)
	in, err := Inspect(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	bad := fileOf(t, in, cfChunks)
	damage(t, filepath.Join(dir, bad.Name))

	in, err = Inspect(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	dmg := in.Damaged()
	if len(dmg) != 1 || dmg[0].Name != bad.Name || dmg[0].ColumnFamily != cfChunks || !strings.Contains(dmg[0].Damage.Error(), "Corruption") {
		t.Fatalf("damaged %+v, want only %s (chunks) with a corruption", dmg, bad.Name)
	}

	q := filepath.Join(t.TempDir(), "quarantine")
	res, err := Repair(Options{Dir: dir}, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Quarantined) != 1 || res.Quarantined[0].Name != bad.Name {
		t.Fatalf("quarantined %+v", res.Quarantined)
	}
	if _, err := os.Stat(filepath.Join(q, bad.Name)); err != nil {
		t.Fatalf("the damaged file is not in quarantine: %v", err)
	}
	db := openTest(t, Options{Dir: dir})
	// The series and rollups are intact; the chunks are gone, not garbled.
	for id := uint64(1); id <= 50; id++ {
		ls, ok, err := db.SeriesLabels(id)
		if err != nil || !ok || ls.Get("id") != fmt.Sprint(id) {
			t.Fatalf("series %d: %v %v %v", id, ls, ok, err)
		}
		if got := collectChunks(t, db, id, 0, 4*dayMs); len(got) != 0 {
			t.Fatalf("series %d has %d chunks after its file was quarantined", id, len(got))
		}
		n := 0
		if err := db.Rollups(KindRollup1h, id, 0, 4*dayMs, func(int64, []byte) error { n++; return nil }); err != nil || n != 4 {
			t.Fatalf("series %d rollups: %d, %v", id, n, err)
		}
	}
	// The store takes writes again.
	write(t, db, func(b *Batch) { b.PutChunk(1, 5*dayMs, 5*dayMs+1, []byte("x")) })
	if got := collectChunks(t, db, 1, 5*dayMs, 6*dayMs); len(got) != 1 {
		t.Fatalf("new chunk: %+v", got)
	}
}

func TestRepair_OfALostLayoutWritesAWholePartitionSpan(t *testing.T) {
	dir := t.TempDir()
	fillStore(t, dir, 10, 2)
	in, err := Inspect(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	damage(t, filepath.Join(dir, fileOf(t, in, cfMeta).Name))
	if _, err := Open(Options{Dir: dir}); err == nil || Classify(err) != FaultCorruption {
		t.Fatalf("open with a damaged meta file: %v, want a corruption", err)
	}
	res, err := Repair(Options{Dir: dir}, filepath.Join(t.TempDir(), "q"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.LayoutRewritten {
		t.Fatalf("result %+v: want the layout rewritten", res)
	}
	db := openTest(t, Options{Dir: dir})
	if got := db.maxChunkSpanMs.Load(); got != dayMs {
		t.Fatalf("chunk span %d after repair, want a whole partition %d", got, dayMs)
	}
	// A chunk that starts before the query's range is still found.
	if got := collectChunks(t, db, 3, hourMs/2, hourMs/2); len(got) != 1 {
		t.Fatalf("chunk overlapping the query start: %+v", got)
	}
}

func TestRebuildPostings_MatchesTheSeriesDictionary(t *testing.T) {
	db := openTest(t, Options{})
	write(t, db, func(b *Batch) {
		b.PutSeries(1, labels.FromStrings("__name__", "m", "host", "a"))
		b.PutSeries(2, labels.FromStrings("__name__", "m", "host", "b"))
	})
	// A stale posting of a series the dictionary does not hold.
	write(t, db, func(b *Batch) {
		b.PutSeries(3, labels.FromStrings("__name__", "m", "host", "c"))
	})
	b := db.NewBatch()
	b.wb.DeleteCF(db.series, appendID(nil, 3))
	if err := db.Write(b); err != nil {
		t.Fatal(err)
	}
	b.Close()
	n, err := db.RebuildPostings()
	if err != nil || n != 2 {
		t.Fatalf("RebuildPostings = %d, %v", n, err)
	}
	ids, err := db.Postings("__name__", "m")
	if err != nil || fmt.Sprint(ids) != "[1 2]" {
		t.Fatalf("postings of m: %v %v", ids, err)
	}
}

func TestMaxSeriesID_SeesChunksOfSeriesTheDictionaryLacks(t *testing.T) {
	db := openTest(t, Options{})
	write(t, db, func(b *Batch) {
		b.PutSeries(3, labels.FromStrings("__name__", "m"))
		b.PutChunk(41, 0, 1, []byte("x"))            // partition 0
		b.PutChunk(7, 5*dayMs, 5*dayMs, []byte("x")) // a later partition
		b.PutRollup(KindRollup1h, 12, 0, []byte("r"))
	})
	got, err := db.MaxSeriesID()
	if err != nil || got != 41 {
		t.Fatalf("MaxSeriesID = %d, %v; want 41", got, err)
	}
}
