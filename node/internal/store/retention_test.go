package store

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// retentionItems returns, for partitions -3..3 of k, two items per series
// (at the partition start and in its middle), as the times they are stored
// under.
func putRetentionData(t *testing.T, db *DB, k Kind, series int) []int64 {
	t.Helper()
	w := db.widthMs(k)
	var times []int64
	for i := int64(-3); i <= 3; i++ {
		times = append(times, i*w, i*w+w/2)
	}
	write(t, db, func(b *Batch) {
		for id := range uint64(series) {
			for _, at := range times {
				if k == KindChunks {
					b.PutChunk(id, at, at+1, []byte("c"))
				} else {
					b.PutRollup(k, id, at, []byte("r"))
				}
			}
		}
	})
	return times
}

// storedTimes returns the start times of everything series id holds in k.
func storedTimes(t *testing.T, db *DB, k Kind, id uint64) []int64 {
	t.Helper()
	var got []int64
	var err error
	if k == KindChunks {
		err = db.Chunks(id, MinTimestampMs, MaxTimestampMs, func(c ChunkMeta, _ []byte) error {
			got = append(got, c.MinT)
			return nil
		})
	} else {
		err = db.Rollups(k, id, MinTimestampMs, MaxTimestampMs, func(b int64, _ []byte) error {
			got = append(got, b)
			return nil
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestDropBefore_DropsExactlyTheWholePartitionsBefore(t *testing.T) {
	tests := []struct {
		name string
		t    func(w int64) int64
		want int // partitions dropped of -3..3
	}{
		{"before all data", func(w int64) int64 { return -10 * w }, 0},
		{"end of first partition", func(w int64) int64 { return -2 * w }, 1},
		{"at zero", func(int64) int64 { return 0 }, 3},
		{"inside a partition", func(w int64) int64 { return w / 2 }, 3},
		{"one ms before a partition ends", func(w int64) int64 { return w - 1 }, 3},
		{"exactly at a partition end", func(w int64) int64 { return w }, 4},
		{"after all data", func(w int64) int64 { return 10 * w }, 7},
		{"max int64", func(int64) int64 { return 1<<63 - 1 }, 7},
	}
	for _, k := range kinds {
		for _, compacted := range []bool{false, true} {
			for _, tt := range tests {
				t.Run(fmt.Sprintf("%v/compacted=%v/%s", k, compacted, tt.name), func(t *testing.T) {
					db := openTest(t, Options{PartitionDuration: 2 * time.Hour})
					times := putRetentionData(t, db, k, 3)
					for _, other := range kinds { // must be left alone
						if other != k {
							putRetentionData(t, db, other, 1)
						}
					}
					if compacted {
						if err := db.CompactAll(); err != nil { // moves data below L0, where files can be deleted
							t.Fatal(err)
						}
					}
					w := db.widthMs(k)
					n, err := db.DropBefore(k, tt.t(w))
					if err != nil || n != tt.want {
						t.Fatalf("DropBefore = %d, %v, want %d", n, err, tt.want)
					}
					var wantParts []int64
					for i := int64(-3 + tt.want); i <= 3; i++ {
						wantParts = append(wantParts, i*w)
					}
					check := func() {
						t.Helper()
						if got, err := db.Partitions(k); err != nil || !slices.Equal(got, wantParts) {
							t.Fatalf("Partitions = %v, %v, want %v", got, err, wantParts)
						}
						for id := range uint64(3) {
							if got := storedTimes(t, db, k, id); !slices.Equal(got, times[2*tt.want:]) {
								t.Fatalf("series %d holds %v, want %v", id, got, times[2*tt.want:])
							}
						}
						for _, other := range kinds {
							if got, err := db.Partitions(other); other != k && (err != nil || len(got) != 7) {
								t.Fatalf("%v partitions = %v, %v, want all 7", other, got, err)
							}
						}
					}
					check()
					// Nothing comes back when the tombstones meet the data.
					if err := db.CompactAll(); err != nil {
						t.Fatal(err)
					}
					check()
				})
			}
		}
	}
}

// TestDropBefore_CostDoesNotDependOnSeriesCount drops partitions holding 10
// and 10,000 series and checks that both write the same constant number of
// RocksDB records (range tombstones, no point deletes), and that with many
// series whole SST files are deleted at once.
func TestDropBefore_CostDoesNotDependOnSeriesCount(t *testing.T) {
	// Incompressible chunks, so that SST files hold as much as was written.
	rng := rand.New(rand.NewPCG(7, 7))
	payload := func(id uint64) []byte {
		b := binary.BigEndian.AppendUint64(make([]byte, 0, 2048), id)
		for len(b) < cap(b) {
			b = binary.LittleEndian.AppendUint64(b, rng.Uint64())
		}
		return b
	}
	var entries []int64
	for _, series := range []int{10, 10000} {
		t.Run(fmt.Sprintf("series=%d", series), func(t *testing.T) {
			db := openTest(t, Options{PartitionDuration: time.Hour})
			for p := range int64(3) {
				write(t, db, func(b *Batch) {
					for id := range uint64(series) {
						b.PutChunk(id, p*hourMs, p*hourMs+10, payload(id))
					}
				})
			}
			if err := db.CompactAll(); err != nil {
				t.Fatal(err)
			}
			before, err := db.Stats()
			if err != nil {
				t.Fatal(err)
			}
			n, err := db.DropBefore(KindChunks, 2*hourMs)
			if err != nil || n != 2 {
				t.Fatalf("DropBefore = %d, %v, want 2", n, err)
			}
			cf := db.timeCFs[KindChunks]
			got := db.intProperty("rocksdb.num-entries-active-mem-table", cf)
			if dels := db.intProperty("rocksdb.num-deletes-active-mem-table", cf); dels != 0 {
				t.Fatalf("%d point deletes in the memtable, want none", dels)
			}
			entries = append(entries, got)
			after, err := db.Stats()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("memtable entries %d; SST bytes %d -> %d", got, before.SSTBytes, after.SSTBytes)
			if series == 10000 && after.SSTBytes > before.SSTBytes*2/3 {
				t.Errorf("SST bytes %d -> %d: no whole file of the dropped partitions was deleted", before.SSTBytes, after.SSTBytes)
			}
			// The kept partition is intact.
			for _, id := range []uint64{0, uint64(series) / 2, uint64(series) - 1} {
				err := db.Chunks(id, MinTimestampMs, MaxTimestampMs, func(c ChunkMeta, data []byte) error {
					if c.MinT != 2*hourMs || len(data) != 2048 || binary.BigEndian.Uint64(data) != id {
						t.Errorf("series %d: unexpected chunk %+v", id, c)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if len(entries) == 2 && entries[0] != entries[1] {
		t.Fatalf("DropBefore wrote %d records for 10 series and %d for 10,000", entries[0], entries[1])
	}
}

func TestPartitions_ListsOnlyPartitionsWithData(t *testing.T) {
	db := openTest(t, Options{PartitionDuration: 24 * time.Hour})
	write(t, db, func(b *Batch) {
		for _, d := range []int64{-400, -1, 0, 5, 5, 900} {
			b.PutChunk(1, d*dayMs+7, d*dayMs+8, nil)
			b.PutChunk(2, d*dayMs+9, d*dayMs+10, nil)
			b.PutRollup(KindRollup1d, 1, d*dayMs, nil)
		}
	})
	tests := []struct {
		k    Kind
		want []int64
	}{
		{KindChunks, []int64{-400 * dayMs, -dayMs, 0, 5 * dayMs, 900 * dayMs}},
		{KindRollup1h, nil},
		{KindRollup1d, []int64{-512 * dayMs, -128 * dayMs, 0, 896 * dayMs}},
	}
	for _, tt := range tests {
		t.Run(tt.k.String(), func(t *testing.T) {
			got, err := db.Partitions(tt.k)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("Partitions(%v) = %v, %v, want %v", tt.k, got, err, tt.want)
			}
		})
	}
}
