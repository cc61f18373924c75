package store

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

const minuteMs = int64(time.Minute / time.Millisecond)

// Chunks of series 1 with one-hour partitions; series 0 and 2 share the
// partitions to catch leaks between neighbouring ids.
var testChunks = []ChunkMeta{
	{1, -2 * hourMs, -2*hourMs + 10*minuteMs}, // A: negative partition
	{1, -30 * minuteMs, -1},                   // B: ends just before 0
	{1, 0, 10 * minuteMs},                     // C
	{1, 20 * minuteMs, hourMs - 1},            // D: ends at the boundary
	{1, hourMs, hourMs + 30*minuteMs},         // E
	{1, 3 * hourMs, 3*hourMs + minuteMs},      // F: after an empty partition
	{0, 5 * minuteMs, 50 * minuteMs},          // neighbours
	{2, -90 * minuteMs, -80 * minuteMs},
	{2, 3 * hourMs, 3*hourMs + 2*minuteMs},
}

func chunkData(c ChunkMeta) string { return fmt.Sprintf("s%d@%d", c.SeriesID, c.MinT) }

func putChunks(t testing.TB, db *DB, cs []ChunkMeta) {
	t.Helper()
	write(t, db, func(b *Batch) {
		for _, c := range cs {
			b.PutChunk(c.SeriesID, c.MinT, c.MaxT, []byte(chunkData(c)))
		}
	})
}

func TestChunks_Overlap(t *testing.T) {
	a, b, c, d, e, f := testChunks[0], testChunks[1], testChunks[2], testChunks[3], testChunks[4], testChunks[5]
	tests := []struct {
		name       string
		minT, maxT int64
		want       []ChunkMeta
	}{
		{"everything", MinTimestampMs, MaxTimestampMs, []ChunkMeta{a, b, c, d, e, f}},
		{"beyond int64 range is clamped", -1 << 63, 1<<63 - 1, []ChunkMeta{a, b, c, d, e, f}},
		{"before everything", -10 * hourMs, -3 * hourMs, nil},
		{"inside one chunk", 5 * minuteMs, 6 * minuteMs, []ChunkMeta{c}},
		{"straddles two chunks and zero", -5 * minuteMs, 5 * minuteMs, []ChunkMeta{b, c}},
		{"touches a chunk's end", 10 * minuteMs, 15 * minuteMs, []ChunkMeta{c}},
		{"touches a chunk's start", 15 * minuteMs, 20 * minuteMs, []ChunkMeta{d}},
		{"gap between chunks", 11 * minuteMs, 19 * minuteMs, nil},
		{"across partitions and an empty one", 50 * minuteMs, 3 * hourMs, []ChunkMeta{d, e, f}},
		{"negative times only", -2 * hourMs, -hourMs, []ChunkMeta{a}},
		{"single instant", hourMs, hourMs, []ChunkMeta{e}},
		{"after everything", 4 * hourMs, 10 * hourMs, nil},
		{"inverted range", 5, 1, nil},
	}
	for _, flush := range []bool{false, true} {
		db := openTest(t, Options{PartitionDuration: time.Hour})
		putChunks(t, db, testChunks)
		if flush {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("flushed=%v/%s", flush, tt.name), func(t *testing.T) {
				got := collectChunks(t, db, 1, tt.minT, tt.maxT)
				var metas []ChunkMeta
				for _, g := range got {
					if g.data != chunkData(g.meta) {
						t.Errorf("chunk %+v has data %q", g.meta, g.data)
					}
					metas = append(metas, g.meta)
				}
				if !slices.Equal(metas, tt.want) {
					t.Fatalf("Chunks(1, %d, %d) =\n%+v\nwant\n%+v", tt.minT, tt.maxT, metas, tt.want)
				}
			})
		}
	}
}

func TestChunks_DeleteChunk(t *testing.T) {
	db := openTest(t, Options{PartitionDuration: time.Hour})
	putChunks(t, db, testChunks)
	write(t, db, func(b *Batch) {
		b.DeleteChunk(1, 0)          // C
		b.DeleteChunk(1, -2*hourMs)  // A
		b.DeleteChunk(1, 7*minuteMs) // no such chunk: a no-op
		b.DeleteChunk(99, 3*hourMs)  // no such series
	})
	got := collectChunks(t, db, 1, MinTimestampMs, MaxTimestampMs)
	var starts []int64
	for _, g := range got {
		starts = append(starts, g.meta.MinT)
	}
	want := []int64{-30 * minuteMs, 20 * minuteMs, hourMs, 3 * hourMs}
	if !slices.Equal(starts, want) {
		t.Fatalf("chunk starts after delete = %v, want %v", starts, want)
	}
}

func TestChunks_CallbackErrorStopsAndIsReturned(t *testing.T) {
	db := openTest(t, Options{PartitionDuration: time.Hour})
	putChunks(t, db, testChunks)
	stop := fmt.Errorf("stop")
	n := 0
	err := db.Chunks(1, MinTimestampMs, MaxTimestampMs, func(ChunkMeta, []byte) error { n++; return stop })
	if err != stop || n != 1 {
		t.Fatalf("Chunks returned %v after %d calls, want the callback's error after 1", err, n)
	}
}

func TestBatch_PutChunkAcrossPartitionPanics(t *testing.T) {
	db := openTest(t, Options{PartitionDuration: time.Hour})
	tests := []struct {
		name       string
		minT, maxT int64
	}{
		{"crosses boundary", 50 * minuteMs, hourMs},
		{"crosses zero", -1, 1},
		{"inverted", 10, 5},
		{"outside supported range", MaxTimestampMs + 1, MaxTimestampMs + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := db.NewBatch()
			defer b.Close()
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "BUG:") {
					t.Fatalf("recover() = %v, want a BUG panic", r)
				}
			}()
			b.PutChunk(1, tt.minT, tt.maxT, nil)
		})
	}
}

// TestChunks_MatchesNaiveOracle compares Chunks with a linear filter over
// random chunks of random series, including overlapping, negative and
// long chunks written in several batches.
func TestChunks_MatchesNaiveOracle(t *testing.T) {
	const seed = 42
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d", seed)
	w := 2 * hourMs
	db := openTest(t, Options{PartitionDuration: 2 * time.Hour})
	type key struct {
		id   uint64
		minT int64
	}
	all := map[key]ChunkMeta{}
	for batch := range 5 {
		var cs []ChunkMeta
		for range 200 {
			minT := rng.Int64N(20*w) - 10*w
			p := partitionStart(minT, w)
			maxSpan := min(p+w-1-minT, int64(batch+1)*10*minuteMs) // the span bound grows batch by batch
			c := ChunkMeta{SeriesID: uint64(rng.IntN(4)), MinT: minT, MaxT: minT + rng.Int64N(maxSpan+1)}
			cs = append(cs, c)
			all[key{c.SeriesID, c.MinT}] = c // a rewrite replaces
		}
		putChunks(t, db, cs)
		if batch == 2 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for q := range 500 {
		id := uint64(rng.IntN(4))
		lo := rng.Int64N(22*w) - 11*w
		hi := lo + rng.Int64N(3*w)
		var want []ChunkMeta
		for _, c := range all {
			if c.SeriesID == id && c.MinT <= hi && c.MaxT >= lo {
				want = append(want, c)
			}
		}
		slices.SortFunc(want, func(a, b ChunkMeta) int { return cmp.Compare(a.MinT, b.MinT) })
		var got []ChunkMeta
		for _, g := range collectChunks(t, db, id, lo, hi) {
			got = append(got, g.meta)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("query %d: Chunks(%d, %d, %d) =\n%+v\nwant\n%+v", q, id, lo, hi, got, want)
		}
	}
}

func TestRollups_Range(t *testing.T) {
	db := openTest(t, Options{})
	// Hourly buckets from -10 days to +20 days (crossing 8-day partitions
	// and zero), daily buckets from -400 to +400 days (128-day partitions).
	write(t, db, func(b *Batch) {
		for h := -10 * 24; h < 20*24; h++ {
			b.PutRollup(KindRollup1h, 1, int64(h)*hourMs, fmt.Appendf(nil, "h%d", h))
			b.PutRollup(KindRollup1h, 2, int64(h)*hourMs, []byte("other"))
		}
		for d := -400; d < 400; d++ {
			b.PutRollup(KindRollup1d, 1, int64(d)*dayMs, fmt.Appendf(nil, "d%d", d))
			b.PutRollup(KindRollup1d, 0, int64(d)*dayMs, []byte("other"))
		}
	})
	tests := []struct {
		name       string
		k          Kind
		start, end int64
		unit       int64
		from, to   int // expected bucket indexes, inclusive; from > to means none
		prefix     string
	}{
		{"1h inclusive bounds", KindRollup1h, 5 * hourMs, 8 * hourMs, hourMs, 5, 8, "h"},
		{"1h across partitions and zero", KindRollup1h, -9 * dayMs, 9 * dayMs, hourMs, -9 * 24, 9 * 24, "h"},
		{"1h unaligned bounds", KindRollup1h, 5*hourMs + 1, 8*hourMs - 1, hourMs, 6, 7, "h"},
		{"1h everything", KindRollup1h, MinTimestampMs, MaxTimestampMs, hourMs, -10 * 24, 20*24 - 1, "h"},
		{"1h before data", KindRollup1h, -100 * dayMs, -50 * dayMs, hourMs, 1, 0, "h"},
		{"1h inverted", KindRollup1h, 8 * hourMs, 5 * hourMs, hourMs, 1, 0, "h"},
		{"1d across partitions", KindRollup1d, -300 * dayMs, 300 * dayMs, dayMs, -300, 300, "d"},
		{"1d single bucket", KindRollup1d, 127 * dayMs, 127 * dayMs, dayMs, 127, 127, "d"},
		{"1d everything", KindRollup1d, MinTimestampMs, MaxTimestampMs, dayMs, -400, 399, "d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got, want []string
			for i := tt.from; i <= tt.to; i++ {
				want = append(want, fmt.Sprintf("%d:%s%d", int64(i)*tt.unit, tt.prefix, i))
			}
			err := db.Rollups(tt.k, 1, tt.start, tt.end, func(bucket int64, v []byte) error {
				got = append(got, fmt.Sprintf("%d:%s", bucket, v))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("Rollups = %d buckets %.200v, want %d buckets %.200v", len(got), got, len(want), want)
			}
		})
	}
}

// TestRollupsOfSeries_OneScanManySeries: RollupsOfSeries visits each
// series' buckets in range as Rollups does for one, and ErrNextSeries
// skips to the next series.
func TestRollupsOfSeries_OneScanManySeries(t *testing.T) {
	db := openTest(t, Options{})
	write(t, db, func(b *Batch) {
		for id := uint64(1); id <= 4; id++ {
			for h := -2 * 24; h < 12*24; h += int(id) * 24 { // every id days, across a partition
				b.PutRollup(KindRollup1h, id, int64(h)*hourMs, fmt.Appendf(nil, "%d", id))
			}
		}
	})
	for _, tc := range []struct {
		name string
		skip bool
		want []string
	}{
		{"all buckets", false, []string{"1@-1", "1@0", "1@1", "1@2", "1@3", "1@4", "1@5", "1@6", "1@7", "1@8", "1@9", "1@10", "2@0", "2@2", "2@4", "2@6", "2@8", "2@10", "4@2", "4@6", "4@10"}},
		{"first bucket of each", true, []string{"1@-1", "2@0", "4@2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := db.RollupsOfSeries(KindRollup1h, []uint64{1, 2, 4, 9}, -1*dayMs, 10*dayMs, func(id uint64, b int64, v []byte) error {
				if string(v) != fmt.Sprint(id) {
					t.Fatalf("series %d got %q", id, v)
				}
				got = append(got, fmt.Sprintf("%d@%d", id, b/dayMs))
				if tc.skip {
					return ErrNextSeries
				}
				return nil
			})
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("%v %v, want %v", got, err, tc.want)
			}
		})
	}
	stop := errors.New("stop")
	if err := db.RollupsOfSeries(KindRollup1h, []uint64{1, 2}, 0, dayMs, func(uint64, int64, []byte) error { return stop }); err != stop {
		t.Fatalf("callback error: %v", err)
	}
}

// TestRollup_PointRead: Rollup finds exactly the bucket Rollups visits for
// a one-bucket range, in the memtable and after a flush, and nothing for
// another bucket, series or tier.
func TestRollup_PointRead(t *testing.T) {
	db := openTest(t, Options{})
	day := time.Date(2024, 3, 9, 0, 0, 0, 0, time.UTC).UnixMilli()
	write(t, db, func(b *Batch) {
		b.PutRollup(KindRollup1h, 7, day, []byte("hourly pack"))
		b.PutRollup(KindRollup1d, 7, day-8*dayMs, []byte("daily pack"))
		b.PutRollup(KindRollup1h, 8, day+dayMs, []byte("other"))
	})
	for round := range 2 {
		for _, c := range []struct {
			k     Kind
			id    uint64
			start int64
			want  string // "" when absent
		}{
			{KindRollup1h, 7, day, "hourly pack"},
			{KindRollup1d, 7, day - 8*dayMs, "daily pack"},
			{KindRollup1h, 8, day + dayMs, "other"},
			{KindRollup1h, 7, day + hourMs, ""},
			{KindRollup1h, 8, day, ""},
			{KindRollup1d, 7, day, ""},
		} {
			val, found, err := db.Rollup(c.k, c.id, c.start)
			if err != nil || found != (c.want != "") || string(val) != c.want {
				t.Errorf("round %d: Rollup(%v, %d, %d) = %q, %v, %v; want %q", round, c.k, c.id, c.start, val, found, err, c.want)
			}
			var scanned string
			if err := db.Rollups(c.k, c.id, c.start, c.start, func(_ int64, v []byte) error {
				scanned = string(v)
				return nil
			}); err != nil || scanned != c.want {
				t.Errorf("round %d: Rollups over the bucket = %q, %v; want %q", round, scanned, err, c.want)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

// readerChunks reads series id's chunks in [minT, maxT] through r.
func readerChunks(t testing.TB, r *ChunkReader, id uint64, minT, maxT int64) []ChunkMeta {
	t.Helper()
	var out []ChunkMeta
	err := r.Chunks(id, minT, maxT, func(c ChunkMeta, data []byte) error {
		if string(data) != chunkData(c) {
			t.Errorf("chunk %+v has data %q", c, data)
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChunkReader_MatchesChunks: a reader reading several series in turn
// answers each read as DB.Chunks does, with one iterator while the store
// is not written, and sees a write (a new chunk, a deleted one, a dropped
// partition) made between two of its reads.
func TestChunkReader_MatchesChunks(t *testing.T) {
	db := openTest(t, Options{PartitionDuration: time.Hour})
	putChunks(t, db, testChunks)
	r := db.NewChunkReader()
	defer r.Close()
	check := func(what string) {
		t.Helper()
		for _, id := range []uint64{2, 1, 0, 1, 7} {
			for _, span := range [][2]int64{{MinTimestampMs, MaxTimestampMs}, {-5 * minuteMs, 5 * minuteMs}, {50 * minuteMs, 3 * hourMs}, {4 * hourMs, 10 * hourMs}} {
				var want []ChunkMeta
				for _, g := range collectChunks(t, db, id, span[0], span[1]) {
					want = append(want, g.meta)
				}
				if got := readerChunks(t, r, id, span[0], span[1]); !slices.Equal(got, want) {
					t.Fatalf("%s: reader read series %d [%d, %d] as\n%+v\nwant\n%+v", what, id, span[0], span[1], got, want)
				}
			}
		}
	}
	check("first reads")
	s := r.s
	check("more reads")
	if r.s != s {
		t.Fatal("the reader opened another iterator without a write in between")
	}
	putChunks(t, db, []ChunkMeta{{1, 2 * hourMs, 2*hourMs + minuteMs}, {7, 0, minuteMs}})
	check("after new chunks")
	if r.s == s {
		t.Fatal("the reader kept its iterator across a write")
	}
	write(t, db, func(b *Batch) { b.DeleteChunk(1, 0) })
	check("after a delete")
	if _, err := db.DropBefore(KindChunks, hourMs); err != nil {
		t.Fatal(err)
	}
	check("after dropped partitions")
	r.Close()
	r.Close() // twice is a no-op
	check("after Close")
}
