package store

import (
	"bytes"
	"fmt"
	"testing"
)

func TestTickers(t *testing.T) {
	dump := "rocksdb.block.cache.miss COUNT : 7\n" +
		"rocksdb.block.cache.hit COUNT : 12\n" +
		"rocksdb.block.cache.hit.extra COUNT : 99\n" +
		"rocksdb.db.get.micros P50 : 1.000000 P95 : 2.000000 COUNT : 3 SUM : 4\n"
	if h, m := tickers(dump, "rocksdb.block.cache.hit", "rocksdb.block.cache.miss"); h != 12 || m != 7 {
		t.Fatalf("tickers = %d, %d; want 12, 7", h, m)
	}
	if h, m := tickers("", "a", "b"); h != 0 || m != 0 {
		t.Fatalf("tickers of an empty dump = %d, %d", h, m)
	}
}

// TestGauges_BlockCacheCountsLookups checks that statistics are on: reads
// of stored chunks count block cache hits or misses.
func TestGauges_BlockCacheCountsLookups(t *testing.T) {
	db := openTest(t, Options{})
	b := db.NewBatch()
	b.PutMeta("k", []byte("v"))
	err := db.Write(b)
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	before, err := db.Gauges()
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := db.GetMeta("k"); err != nil {
			t.Fatal(err)
		}
	}
	after, err := db.Gauges()
	if err != nil {
		t.Fatal(err)
	}
	if looked := (after.BlockCacheHits + after.BlockCacheMisses) - (before.BlockCacheHits + before.BlockCacheMisses); looked < 1 {
		t.Fatalf("block cache lookups moved by %d after 3 reads of a compacted key", looked)
	}
	if after.SSTBytes[cfMeta] == 0 {
		t.Fatalf("SST bytes of %s = 0 after a compaction: %v", cfMeta, after.SSTBytes)
	}
	db.Close()
	if _, err := db.Gauges(); err == nil {
		t.Fatal("Gauges on a closed store succeeded")
	}
}

// TestGauges_WriteBytesByWriter checks the store's write counters: a
// logged write counts in WALWriteBytes, a flush in FlushWriteBytes, a
// compaction of two level-0 files in CompactionWriteBytes.
func TestGauges_WriteBytesByWriter(t *testing.T) {
	db := openTest(t, Options{})
	for i := range 2 {
		b := db.NewBatch()
		b.PutMeta(fmt.Sprintf("k%d", i), bytes.Repeat([]byte{'v'}, 1000))
		err := db.Write(b)
		b.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	mid, err := db.Gauges()
	if err != nil {
		t.Fatal(err)
	}
	if mid.WALWriteBytes < 2000 || mid.FlushWriteBytes < 1 || mid.CompactionWriteBytes != 0 {
		t.Fatalf("after two logged writes and flushes: wal %d, flush %d, compaction %d bytes; want ≥ 2000, > 0, 0",
			mid.WALWriteBytes, mid.FlushWriteBytes, mid.CompactionWriteBytes)
	}
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	after, err := db.Gauges()
	if err != nil {
		t.Fatal(err)
	}
	if after.CompactionWriteBytes < 1 {
		t.Fatalf("compaction write bytes %d after compacting two files", after.CompactionWriteBytes)
	}
}
