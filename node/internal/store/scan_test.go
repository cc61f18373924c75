package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/linxGnu/grocksdb"
	"github.com/tributarydb/tributary/node/labels"
)

// scanOp opens one window of a scan.
type scanOp struct {
	kind  string // "seek", "resume" or "last"
	key   []byte // seek only
	limit []byte // nil: none
	max   int    // 0: any number
}

type kv struct{ key, val string }

// runScan runs ops on a batched scan with a batch buffer of bufBytes (0:
// the default) and returns the entries of each window.
func runScan(t *testing.T, db *DB, cf *grocksdb.ColumnFamilyHandle, mode scanMode, upper []byte, bufBytes int, ops []scanOp) [][]kv {
	t.Helper()
	s := db.openScan(cf, mode, upper)
	defer s.close()
	if bufBytes > 0 {
		s.buf = make([]byte, bufBytes)
	}
	var out [][]kv
	for _, op := range ops {
		switch op.kind {
		case "seek":
			s.seek(op.key, op.limit, op.max)
		case "resume":
			s.resume(op.limit, op.max)
		case "last":
			s.seekLast()
		}
		var got []kv
		for k, v, ok := s.next(); ok; k, v, ok = s.next() {
			got = append(got, kv{string(k), string(v)})
		}
		if s.err != nil {
			t.Fatalf("scan: %v", s.err)
		}
		out = append(out, got)
	}
	return out
}

// oracleScan runs ops on grocksdb's Iterator, one cgo call per step: the
// read path the batched scan replaced, kept here as its oracle.
func oracleScan(t *testing.T, db *DB, cf *grocksdb.ColumnFamilyHandle, mode scanMode, upper []byte, ops []scanOp) [][]kv {
	t.Helper()
	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy() // after it.Close: the iterator points at the options
	if mode == scanPrefix {
		ro.SetPrefixSameAsStart(true)
	} else {
		ro.SetTotalOrderSeek(true)
	}
	if upper != nil {
		ro.SetIterateUpperBound(upper)
	}
	it := db.rdb.NewIteratorCF(ro, cf)
	defer it.Close()
	var out [][]kv
	for _, op := range ops {
		switch {
		case op.kind == "last":
			it.SeekToLast()
			op.max = 1
		case op.kind == "seek" && len(op.key) == 0:
			it.SeekToFirst()
		case op.kind == "seek":
			it.Seek(op.key)
		}
		var got []kv
		for ; it.Valid() && (op.max == 0 || len(got) < op.max); it.Next() {
			k := it.Key().Data()
			if op.limit != nil && bytes.Compare(k, op.limit) >= 0 {
				break
			}
			got = append(got, kv{string(k), string(it.Value().Data())})
		}
		if err := it.Err(); err != nil {
			t.Fatalf("oracle: %v", err)
		}
		out = append(out, got)
	}
	return out
}

func TestCPtr_GrocksdbLayoutIsAsAssumed(t *testing.T) {
	// cPtr reads the first word of these structs; an upgrade that moves
	// the C pointer must fail here, by name, before anything reads garbage.
	for _, tt := range []struct {
		typ  reflect.Type
		elem string
	}{
		{reflect.TypeFor[grocksdb.DB](), "rocksdb_t"},
		{reflect.TypeFor[grocksdb.ColumnFamilyHandle](), "rocksdb_column_family_handle_t"},
	} {
		f := tt.typ.Field(0)
		if f.Offset != 0 || f.Type.Kind() != reflect.Pointer || !strings.HasSuffix(f.Type.Elem().Name(), "_"+tt.elem) {
			t.Errorf("grocksdb.%s starts with %s %v at offset %d, want *C.%s at 0: fix cPtr",
				tt.typ.Name(), f.Name, f.Type, f.Offset, tt.elem)
		}
	}

	db := openTest(t, Options{})
	write(t, db, func(b *Batch) { b.PutMeta("k", []byte("v")) }) // a sequence number > 0
	db.checkNative()
	seen := map[any]string{cPtr(db.rdb): "db"}
	for i, h := range db.handles {
		p := cPtr(h)
		if other, dup := seen[p]; dup {
			t.Fatalf("column family %s has the same C pointer as %s", cfSpecs[i].name, other)
		}
		seen[p] = cfSpecs[i].name
	}

	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "BUG:") {
			t.Fatalf("cPtr of a destroyed handle: recover() = %v, want a BUG panic", r)
		}
	}()
	cPtr(&grocksdb.ColumnFamilyHandle{}) // what Destroy leaves behind
}

// TestScan_MatchesGrocksdbIterator compares random scans with the same
// reads through grocksdb's Iterator: in prefix and total order, with and
// without an upper bound, with limits and entry counts, resuming and seeking
// to the last key, over data in memtables and SST files, with buffers from
// smaller than one entry to the default.
func TestScan_MatchesGrocksdbIterator(t *testing.T) {
	const seed = 7
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	db := openTest(t, Options{PartitionDuration: time.Hour})

	var chunkKeys, metaKeys [][]byte
	for round := range 3 {
		write(t, db, func(b *Batch) {
			for range 300 {
				id, minT := uint64(rng.IntN(5)), rng.Int64N(6*hourMs)-3*hourMs
				maxT := min(minT+rng.Int64N(minuteMs), partitionStart(minT, hourMs)+hourMs-1)
				b.PutChunk(id, minT, maxT, randomBytes(rng, rng.IntN(400)))
				chunkKeys = append(chunkKeys, appendTimeKey(nil, partitionStart(minT, hourMs), id, minT))
				if rng.IntN(10) == 0 {
					b.DeleteChunk(id, minT)
				}
			}
			for i := range 30 {
				b.PutSeries(uint64(round*100+i), labels.Labels{{Name: "a", Value: fmt.Sprint(rng.IntN(5))}, {Name: "b", Value: fmt.Sprint(i % 3)}})
			}
		})
		for range 100 {
			k := randomBytes(rng, 1+rng.IntN(12))
			v := randomBytes(rng, rng.IntN(64))
			if rng.IntN(20) == 0 {
				v = randomBytes(rng, scanBufBytes+rng.IntN(scanBufBytes)) // larger than a batch
			}
			if err := db.rdb.PutCF(db.writeOpts, db.meta, k, v); err != nil {
				t.Fatal(err)
			}
			metaKeys = append(metaKeys, k)
		}
		if round < 2 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// near returns one of keys, or a key next to one.
	near := func(keys [][]byte) []byte {
		k := slices.Clone(keys[rng.IntN(len(keys))])
		switch rng.IntN(4) {
		case 0:
			k = append(k, 0)
		case 1:
			k[len(k)-1]++
		case 2:
			if len(k) > 1 {
				k = k[:len(k)-1]
			}
		}
		return k
	}
	cases := []struct {
		name    string
		cf      *grocksdb.ColumnFamilyHandle
		mode    scanMode
		keys    [][]byte
		upper   bool
		canLast bool
	}{
		{"chunks prefix", db.timeCFs[KindChunks], scanPrefix, chunkKeys, false, false},
		{"chunks total", db.timeCFs[KindChunks], scanTotal, chunkKeys, true, true},
		{"meta total", db.meta, scanTotal, metaKeys, true, true},
		{"postings total", db.postings, scanTotal, nil, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			keys := tc.keys
			if keys == nil {
				keys = [][]byte{appendTerminated(nil, "a"), appendTerminated(nil, "b"), appendPostingsValuePrefix(nil, "a", "3")}
			}
			entries := 0
			for trial := range 150 {
				var upper []byte
				if tc.upper && rng.IntN(2) == 0 {
					upper = near(keys)
				}
				var ops []scanOp
				for i := range 1 + rng.IntN(4) {
					op := scanOp{kind: "seek", key: near(keys), max: []int{0, 0, 1, 2, 5}[rng.IntN(5)]}
					if tc.mode == scanPrefix {
						op.key = op.key[:min(len(op.key), timeKeyLen)]
						op.key = append(op.key, make([]byte, max(0, seriesPrefixLen-len(op.key)))...)
					}
					switch r := rng.IntN(6); {
					case r == 0 && i > 0:
						op.kind, op.key = "resume", nil
					case r == 1 && tc.canLast:
						op = scanOp{kind: "last"}
					case r == 2 && tc.mode == scanTotal:
						op.key = nil // the first key
					}
					if op.kind != "last" && rng.IntN(2) == 0 {
						op.limit = near(keys)
					}
					ops = append(ops, op)
				}
				want := oracleScan(t, db, tc.cf, tc.mode, upper, ops)
				for _, bufBytes := range []int{1, 100, 1000, 0} {
					if got := runScan(t, db, tc.cf, tc.mode, upper, bufBytes, ops); !reflect.DeepEqual(got, want) {
						t.Fatalf("trial %d, buffer %d bytes, upper %x, ops %+v:\nscan   %d entries %.300q\noracle %d entries %.300q",
							trial, bufBytes, upper, ops, countKV(got), got, countKV(want), want)
					}
				}
				entries += countKV(want)
			}
			if entries < 1000 {
				t.Fatalf("the trials compared only %d entries", entries)
			}
			t.Logf("compared %d entries", entries)
		})
	}
}

func countKV(windows [][]kv) (n int) {
	for _, w := range windows {
		n += len(w)
	}
	return n
}

func TestScan_Windows(t *testing.T) {
	db := openTest(t, Options{})
	big := strings.Repeat("B", 3*scanBufBytes+7) // three initial buffers and then some
	const kb = 1 << 10
	kilo := strings.Repeat("k", kb)
	var all []kv
	for i := range 100 {
		all = append(all, kv{fmt.Sprintf("k%03d", i), kilo}) // 100 KiB: several batches
	}
	all = slices.Insert(all, 51, kv{"k050big", big})
	for _, e := range all {
		if err := db.rdb.PutCF(db.writeOpts, db.meta, []byte(e.key), []byte(e.val)); err != nil {
			t.Fatal(err)
		}
	}
	// meta also holds the store's own keys, after "k…".
	metaKeys := runScan(t, db, db.meta, scanTotal, []byte("l"), 0, []scanOp{{kind: "seek"}})[0]
	if !slices.Equal(metaKeys, all) {
		t.Fatalf("setup: meta holds %d entries below \"l\", want %d", len(metaKeys), len(all))
	}
	span := func(from, to int) []kv { return all[from:to] } // entries [from, to) of all
	b := []byte("")

	tests := []struct {
		name  string
		cf    *grocksdb.ColumnFamilyHandle
		upper []byte
		ops   []scanOp
		want  [][]kv
	}{
		{"empty column family", db.handles[0], nil,
			[]scanOp{{kind: "seek"}, {kind: "last"}}, [][]kv{nil, nil}},
		{"empty range between keys", db.meta, nil,
			[]scanOp{{kind: "seek", key: []byte("k010a"), limit: []byte("k011")}}, [][]kv{nil}},
		{"empty limit", db.meta, nil,
			[]scanOp{{kind: "seek", key: b, limit: b}}, [][]kv{nil}},
		{"limit at the seek key", db.meta, nil,
			[]scanOp{{kind: "seek", key: []byte("k010"), limit: []byte("k010")}}, [][]kv{nil}},
		{"exactly one entry by limit", db.meta, nil,
			[]scanOp{{kind: "seek", key: []byte("k010"), limit: []byte("k010\x00")}}, [][]kv{span(10, 11)}},
		{"exactly one entry by count", db.meta, nil,
			[]scanOp{{kind: "seek", key: []byte("k009\x00"), max: 1}}, [][]kv{span(10, 11)}},
		{"seek key inclusive, limit exclusive", db.meta, nil,
			[]scanOp{{kind: "seek", key: []byte("k010"), limit: []byte("k013")}}, [][]kv{span(10, 13)}},
		{"upper bound exclusive", db.meta, []byte("k020"),
			[]scanOp{{kind: "seek", key: []byte("k015")}}, [][]kv{span(15, 20)}},
		{"upper bound below the limit wins", db.meta, []byte("k020"),
			[]scanOp{{kind: "seek", key: []byte("k015"), limit: []byte("k030")}}, [][]kv{span(15, 20)}},
		{"seek past the upper bound", db.meta, []byte("k020"),
			[]scanOp{{kind: "seek", key: []byte("k025")}}, [][]kv{nil}},
		{"entry larger than the buffer", db.meta, nil,
			[]scanOp{{kind: "seek", key: []byte("k050"), max: 3}}, [][]kv{span(50, 53)}},
		{"many batches", db.meta, []byte("l"),
			[]scanOp{{kind: "seek"}}, [][]kv{all}},
		{"resume after a count, then a limit", db.meta, nil,
			[]scanOp{{kind: "seek", key: []byte("k048"), max: 2}, {kind: "resume", limit: []byte("k052")}, {kind: "resume", max: 1}},
			[][]kv{span(48, 50), span(50, 53), span(53, 54)}},
		{"seek drops the rest of a window", db.meta, nil,
			[]scanOp{{kind: "seek", key: []byte("k000"), max: 1}, {kind: "seek", key: []byte("k090"), limit: []byte("k092")}},
			[][]kv{span(0, 1), span(91, 93)}},
		{"last key under the upper bound", db.meta, []byte("k050"),
			[]scanOp{{kind: "last"}, {kind: "resume"}}, [][]kv{span(49, 50), nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, bufBytes := range []int{0, 1, 5000} {
				got := runScan(t, db, tt.cf, scanTotal, tt.upper, bufBytes, tt.ops)
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("buffer %d: windows of %v entries, want %v", bufBytes, windowSizes(got), windowSizes(tt.want))
				}
			}
		})
	}
}

func windowSizes(ws [][]kv) []int {
	var n []int
	for _, w := range ws {
		n = append(n, len(w))
	}
	return n
}

func TestScan_ResumeWithUnreadEntriesPanics(t *testing.T) {
	db := openTest(t, Options{})
	write(t, db, func(b *Batch) { b.PutMeta("a", nil); b.PutMeta("b", nil) })
	s := db.openScan(db.meta, scanTotal, nil)
	defer s.close()
	s.seek(nil, nil, 0)
	if _, _, ok := s.next(); !ok {
		t.Fatal("no entry")
	}
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "BUG:") {
			t.Fatalf("recover() = %v, want a BUG panic", r)
		}
	}()
	s.resume(nil, 0)
}

// TestRollups_ManyBatchesAndLargeValues reads rollups that take several
// batches per partition, one of them larger than a batch buffer, with the
// documented inclusive bounds.
func TestRollups_ManyBatchesAndLargeValues(t *testing.T) {
	db := openTest(t, Options{})
	const hours = 1000 // five 8-day partitions
	bigAt := int64(500) * hourMs
	val := func(id uint64, bucket int64) []byte {
		n := 200
		if bucket == bigAt {
			n = 2 * scanBufBytes
		}
		return bytes.Repeat(fmt.Appendf(nil, "%d@%d;", id, bucket), n/8)
	}
	write(t, db, func(b *Batch) {
		for id := range uint64(3) {
			for h := range int64(hours) {
				b.PutRollup(KindRollup1h, id, h*hourMs, val(id, h*hourMs))
			}
		}
	})
	w := rollup1hWidthMs
	tests := []struct {
		name       string
		start, end int64
		from, to   int64 // expected buckets, in hours, inclusive; from > to: none
	}{
		{"everything", MinTimestampMs, MaxTimestampMs, 0, hours - 1},
		{"one bucket", 7 * hourMs, 7 * hourMs, 7, 7},
		{"the large bucket alone", bigAt, bigAt, 500, 500},
		{"around the large bucket", bigAt - hourMs, bigAt + hourMs, 499, 501},
		{"ends just before the large bucket", 0, bigAt - 1, 0, 499},
		{"starts just after the large bucket", bigAt + 1, MaxTimestampMs, 501, hours - 1},
		{"one whole partition", w, 2*w - 1, w / hourMs, 2*w/hourMs - 1},
		{"partition boundary inclusive", w - hourMs, w, w/hourMs - 1, w / hourMs},
		{"between buckets", hourMs + 1, 2*hourMs - 1, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := tt.from
			err := db.Rollups(KindRollup1h, 1, tt.start, tt.end, func(bucket int64, v []byte) error {
				if bucket != next*hourMs || !bytes.Equal(v, val(1, bucket)) {
					return fmt.Errorf("got bucket %d (%d bytes), want %d", bucket, len(v), next*hourMs)
				}
				next++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if next != max(tt.from, tt.to+1) {
				t.Fatalf("read up to bucket %d, want up to %d", next-1, tt.to)
			}
		})
	}
}

// TestScan_NestedScansKeepTheirOwnBuffers reads the store from inside a
// callback: the data of the outer scan must stay intact.
func TestScan_NestedScansKeepTheirOwnBuffers(t *testing.T) {
	db := openTest(t, Options{PartitionDuration: time.Hour})
	putChunks(t, db, testChunks)
	n := 0
	err := db.Chunks(1, MinTimestampMs, MaxTimestampMs, func(c ChunkMeta, data []byte) error {
		inner := collectChunks(t, db, 2, MinTimestampMs, MaxTimestampMs)
		if len(inner) != 2 {
			return fmt.Errorf("inner scan read %d chunks, want 2", len(inner))
		}
		if string(data) != chunkData(c) {
			return fmt.Errorf("chunk %+v has data %q after a nested scan", c, data)
		}
		n++
		return nil
	})
	if err != nil || n != 6 {
		t.Fatalf("Chunks = %v after %d chunks, want 6", err, n)
	}
}

// TestScan_IteratorErrorIsReturned corrupts a data block of an SST file:
// RocksDB's checksum error must reach the caller, after the chunks before
// the block.
func TestScan_IteratorErrorIsReturned(t *testing.T) {
	const chunks = 2000
	o := Options{Dir: t.TempDir(), PartitionDuration: time.Hour}
	db, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	write(t, db, func(b *Batch) {
		for i := range int64(chunks) {
			b.PutChunk(1, i*1000, i*1000+999, randomBytes(rng, 1000))
		}
	})
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	var sst string
	for _, f := range db.rdb.GetLiveFilesMetaData() {
		if f.ColumnFamilyName == cfChunks {
			sst = filepath.Join(o.Dir, f.Name)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if sst == "" {
		t.Fatal("no SST file of the chunks column family")
	}
	f, err := os.OpenFile(sst, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	// Data blocks come first; the index and filter the open reads, last.
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, 64), st.Size()/3); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, o)
	n := 0
	err = db.Chunks(1, MinTimestampMs, MaxTimestampMs, func(ChunkMeta, []byte) error { n++; return nil })
	if err == nil || !strings.Contains(err.Error(), "Corruption") {
		t.Fatalf("Chunks over a corrupt block = %v, want RocksDB's corruption error", err)
	}
	if n == 0 || n >= chunks {
		t.Fatalf("Chunks read %d chunks before the error, want some but not all %d", n, chunks)
	}
	t.Logf("after %d chunks: %v", n, err)
}
