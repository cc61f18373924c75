package store

import "testing"

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
