package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"

	"github.com/tributarydb/tributary/node/labels"
)

const (
	hourMs = int64(time.Hour / time.Millisecond)
	dayMs  = 24 * hourMs
)

// openTest opens a store in a fresh directory, closed when the test ends.
func openTest(t testing.TB, o Options) *DB {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	db, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// write applies the puts of fill in one batch.
func write(t testing.TB, db *DB, fill func(b *Batch)) {
	t.Helper()
	b := db.NewBatch()
	defer b.Close()
	fill(b)
	if err := db.Write(b); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

type chunkRec struct {
	meta ChunkMeta
	data string
}

func collectChunks(t testing.TB, db *DB, id uint64, minT, maxT int64) []chunkRec {
	t.Helper()
	var got []chunkRec
	err := db.Chunks(id, minT, maxT, func(c ChunkMeta, data []byte) error {
		got = append(got, chunkRec{c, string(data)})
		return nil
	})
	if err != nil {
		t.Fatalf("Chunks(%d, %d, %d): %v", id, minT, maxT, err)
	}
	return got
}

func TestOptions_Validate(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string // a substring; "" means valid
	}{
		{"defaults filled", Options{Dir: "d"}, ""},
		{"no dir", Options{}, "Dir"},
		{"partition not whole hours", Options{Dir: "d", PartitionDuration: 90 * time.Minute}, "PartitionDuration"},
		{"partition negative", Options{Dir: "d", PartitionDuration: -time.Hour}, "PartitionDuration"},
		{"partition 2h", Options{Dir: "d", PartitionDuration: 2 * time.Hour}, ""},
		{"cache negative", Options{Dir: "d", BlockCacheBytes: -1}, "BlockCacheBytes"},
		{"write buffer tiny", Options{Dir: "d", WriteBufferBytes: 1024}, "WriteBufferBytes"},
		{"few open files", Options{Dir: "d", MaxOpenFiles: 5}, "MaxOpenFiles"},
		{"background jobs negative", Options{Dir: "d", MaxBackgroundJobs: -1}, "MaxBackgroundJobs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			err := o.Validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Validate() = %v, want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if o.PartitionDuration <= 0 || o.BlockCacheBytes <= 0 || o.WriteBufferBytes <= 0 ||
				o.MaxOpenFiles <= 0 || o.MaxBackgroundJobs <= 0 || o.Logger == nil {
				t.Fatalf("defaults not filled: %+v", o)
			}
		})
	}
}

func TestDB_ReopenPersists(t *testing.T) {
	tests := []struct {
		name  string
		flush bool // false: the data comes back from RocksDB's WAL
	}{
		{"from sst", true},
		{"from wal", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Dir: dir, PartitionDuration: 2 * time.Hour}
			db, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			ls := labels.FromStrings("__name__", "cpu", "host", "pi-7")
			write(t, db, func(b *Batch) {
				b.PutSeries(7, ls)
				b.PutChunk(7, -100, -5, []byte("chunk"))
				b.PutRollup(KindRollup1h, 7, 3*hourMs, []byte("r1h"))
				b.PutRollup(KindRollup1d, 7, dayMs, []byte("r1d"))
				b.PutMeta("checkpoint", []byte{1, 2, 3})
			})
			if err := db.SyncWAL(); err != nil {
				t.Fatal(err)
			}
			if tt.flush {
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			db = openTest(t, o)
			got, found, err := db.SeriesLabels(7)
			if err != nil || !found || !labels.Equal(got, ls) {
				t.Fatalf("SeriesLabels = %v, %v, %v", got, found, err)
			}
			if ids, err := db.Postings("host", "pi-7"); err != nil || fmt.Sprint(ids) != "[7]" {
				t.Fatalf("Postings = %v, %v", ids, err)
			}
			if cs := collectChunks(t, db, 7, -10, -10); len(cs) != 1 || cs[0].data != "chunk" || cs[0].meta != (ChunkMeta{7, -100, -5}) {
				t.Fatalf("Chunks = %+v", cs)
			}
			for _, r := range []struct {
				k    Kind
				at   int64
				want string
			}{{KindRollup1h, 3 * hourMs, "r1h"}, {KindRollup1d, dayMs, "r1d"}} {
				var vals []string
				if err := db.Rollups(r.k, 7, r.at, r.at, func(_ int64, v []byte) error { vals = append(vals, string(v)); return nil }); err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(vals) != "["+r.want+"]" {
					t.Fatalf("Rollups(%v) = %v", r.k, vals)
				}
			}
			if v, found, err := db.GetMeta("checkpoint"); err != nil || !found || !bytes.Equal(v, []byte{1, 2, 3}) {
				t.Fatalf("GetMeta = %v, %v, %v", v, found, err)
			}
		})
	}
}

func TestDB_ReopenWithOtherPartitionDurationIsRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir, PartitionDuration: 2 * time.Hour})
	if err == nil || !strings.Contains(err.Error(), "PartitionDuration") {
		t.Fatalf("Open with another PartitionDuration = %v, want an error naming PartitionDuration", err)
	}
}

func TestDB_MissingChunkSpanFallsBackToWholePartitions(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	write(t, db, func(b *Batch) { b.PutChunk(1, 0, 10*hourMs, []byte("long")) })
	// Simulate a store that lost the record: reading from the partition
	// start must still find the long chunk.
	if err := db.rdb.DeleteCF(db.writeOpts, db.meta, []byte(metaMaxChunkSpan)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, Options{Dir: dir})
	if got := collectChunks(t, db, 1, 9*hourMs, 9*hourMs); len(got) != 1 {
		t.Fatalf("Chunks = %+v, want the long chunk", got)
	}
}

func TestDB_CallsAfterCloseFail(t *testing.T) {
	db, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	defer b.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	calls := map[string]func() error{
		"Write":      func() error { return db.Write(b) },
		"SyncWAL":    db.SyncWAL,
		"Flush":      db.Flush,
		"CompactAll": db.CompactAll,
		"GetMeta":    func() error { _, _, err := db.GetMeta("k"); return err },
		"Postings":   func() error { _, err := db.Postings("a", "b"); return err },
		"Chunks":     func() error { return db.Chunks(1, 0, 1, nil) },
		"DropBefore": func() error { _, err := db.DropBefore(KindChunks, 0); return err },
		"Stats":      func() error { _, err := db.Stats(); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func TestBatch_ReservedMetaKeyPanics(t *testing.T) {
	db := openTest(t, Options{})
	b := db.NewBatch()
	defer b.Close()
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "BUG:") {
			t.Fatalf("recover() = %v, want a BUG panic", r)
		}
	}()
	b.PutMeta(metaLayout, nil)
}

func TestBatch_LenAndReset(t *testing.T) {
	db := openTest(t, Options{})
	b := db.NewBatch()
	defer b.Close()
	b.PutSeries(1, labels.FromStrings("__name__", "m", "a", "b")) // series + 2 postings
	b.PutMeta("k", nil)
	if b.Len() != 4 {
		t.Fatalf("Len = %d, want 4", b.Len())
	}
	before := b.Bytes()
	b.PutChunk(1, 1000, 2000, make([]byte, 10_000))
	if grown := b.Bytes() - before; grown < 10_000 || grown > 10_100 {
		t.Fatalf("a 10,000-byte chunk grew Bytes by %d", grown)
	}
	b.Reset()
	if b.Len() != 0 || b.Bytes() != 0 {
		t.Fatalf("Len, Bytes after Reset = %d, %d", b.Len(), b.Bytes())
	}
}

// TestOptions_ColdColumnFamiliesUseTheDenseCodecAtEveryLevel: the OPTIONS
// file RocksDB writes shows each column family's codecs; level 0 (what a
// memtable flush writes) of chunks uses the dense one, rollups the cheap
// one everywhere.
func TestOptions_ColdColumnFamiliesUseTheDenseCodecAtEveryLevel(t *testing.T) {
	comp := chooseCompressions()
	if comp.hot != grocksdb.LZ4Compression || comp.cold != grocksdb.ZSTDCompression {
		t.Skipf("librocksdb lacks lz4 or zstd (%s, %s)", compressionName(comp.hot), compressionName(comp.cold))
	}
	dir := t.TempDir()
	openTest(t, Options{Dir: dir})
	names, err := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no OPTIONS file in the store directory (%v)", err)
	}
	text, err := os.ReadFile(names[len(names)-1])
	if err != nil {
		t.Fatal(err)
	}
	// The CFOptions section of each column family, as name -> value.
	sections := map[string]map[string]string{}
	var cur map[string]string
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "[CFOptions \""); ok {
			cur = map[string]string{}
			sections[strings.TrimSuffix(name, "\"]")] = cur
			continue
		}
		if strings.HasPrefix(line, "[") {
			cur = nil
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok && cur != nil {
			cur[k] = v
		}
	}
	for _, tt := range []struct{ cf, want string }{
		{cfChunks, "kZSTD"},
		{cfSeries, "kZSTD"},
		{cfRollup1h, "kLZ4Compression"},
		{cfRollup1d, "kLZ4Compression"},
	} {
		opts := sections[tt.cf]
		if opts == nil {
			t.Fatalf("no CFOptions section for %s", tt.cf)
		}
		if opts["compression"] != tt.want || opts["bottommost_compression"] != tt.want {
			t.Errorf("%s: compression %q, bottommost_compression %q; want %s for both",
				tt.cf, opts["compression"], opts["bottommost_compression"], tt.want)
		}
	}
}

func TestStats_Sane(t *testing.T) {
	db := openTest(t, Options{PartitionDuration: time.Hour})
	write(t, db, func(b *Batch) {
		for id := uint64(1); id <= 100; id++ {
			b.PutSeries(id, labels.FromStrings("__name__", "m", "id", fmt.Sprint(id)))
			for h := int64(-2); h < 3; h++ {
				b.PutChunk(id, h*hourMs, h*hourMs+10, bytes.Repeat([]byte{byte(id)}, 100))
			}
			b.PutRollup(KindRollup1h, id, 0, []byte("x"))
		}
	})
	s, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.MemtableBytes <= 0 {
		t.Errorf("MemtableBytes = %d before flush, want > 0", s.MemtableBytes)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if s, err = db.Stats(); err != nil {
		t.Fatal(err)
	}
	if s.SSTBytes <= 0 {
		t.Errorf("SSTBytes = %d after flush, want > 0", s.SSTBytes)
	}
	if s.BlockCacheBytes < 0 || s.BlockCacheBytes > 2*DefaultBlockCacheBytes {
		t.Errorf("BlockCacheBytes = %d", s.BlockCacheBytes)
	}
	if s.PendingCompactionBytes < 0 {
		t.Errorf("PendingCompactionBytes = %d", s.PendingCompactionBytes)
	}
	want := map[string]int{"chunks": 5, "rollup_1h": 1, "rollup_1d": 0}
	if fmt.Sprint(s.Partitions) != fmt.Sprint(want) {
		t.Errorf("Partitions = %v, want %v", s.Partitions, want)
	}
}

// TestDB_ConcurrentUseAndClose runs writers and readers against each other,
// then closes the DB under the readers; under -race it checks the package's
// locking.
func TestDB_ConcurrentUseAndClose(t *testing.T) {
	db, err := Open(Options{Dir: t.TempDir(), PartitionDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var writers, readers sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		writers.Go(func() {
			b := db.NewBatch()
			defer b.Close()
			for i := int64(0); ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b.Reset()
				b.PutChunk(uint64(w), i*1000, i*1000+int64(w)*100, []byte("c"))
				if err := db.Write(b); err != nil {
					t.Errorf("Write: %v", err)
					return
				}
			}
		})
	}
	for range 4 {
		readers.Go(func() {
			for {
				err := db.Chunks(0, 0, 1<<40, func(ChunkMeta, []byte) error { return nil })
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Chunks: %v", err)
					return
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	writers.Wait()
	// Readers are mid-call: Close must wait for them and turn their next
	// calls into ErrClosed.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	readers.Wait()
}

// TestWrite_RocksDBWALCompressed checks that the logged writes (the series
// dictionary and postings) reach RocksDB's WAL zstd-compressed when zstd
// is linked: 64 KiB of one repeated byte must take far less on disk.
func TestWrite_RocksDBWALCompressed(t *testing.T) {
	if chooseCompressions().cold != grocksdb.ZSTDCompression {
		t.Skip("librocksdb without zstd: the WAL stays uncompressed")
	}
	dir := t.TempDir()
	db := openTest(t, Options{Dir: dir})
	write(t, db, func(b *Batch) { b.PutMeta("k", bytes.Repeat([]byte{'v'}, 64<<10)) })
	if err := db.SyncWAL(); err != nil {
		t.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no RocksDB WAL file in %s (%v)", dir, err)
	}
	var size int64
	for _, l := range logs {
		fi, err := os.Stat(l)
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	if size > 8<<10 {
		t.Fatalf("RocksDB WAL holds %d bytes after a 64 KiB write of one repeated byte: not compressed", size)
	}
}
