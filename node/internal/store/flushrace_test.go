package store

import (
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node/labels"
)

// stressDuration is how long TestFlushRace hammers the store: a few
// seconds, or TRIBUTARY_STRESS seconds (TRIBUTARY_STRESS=1: 5 minutes).
func stressDuration(t *testing.T) time.Duration {
	v := os.Getenv("TRIBUTARY_STRESS")
	switch {
	case v == "":
		return 3 * time.Second
	case v == "1":
		return 5 * time.Minute
	}
	s, err := strconv.Atoi(v)
	if err != nil || s <= 0 {
		t.Fatalf("TRIBUTARY_STRESS=%q: want 1 or a number of seconds", v)
	}
	return time.Duration(s) * time.Second
}

// TestFlushRace hammers every way a memtable flush of the store is asked
// for while others may be pending: writers filling small memtables of
// several column families (RocksDB's own flushes for a full memtable, the
// DB-wide write buffer and the WAL budget), explicit Flushes, CompactIdle
// started and cut short by its busy function, by stop and by Close, and
// Close itself while writers and compactions run. With atomic flush,
// RocksDB 7.x keeps a flush's reason on each column family; a flush
// request that covers fewer column families than one still queued gives
// the queued one mixed reasons, which fails an assertion and aborts a
// process linked with a RocksDB built with assertions (Debian's). The test
// fails by that abort (within a second when the store's flushes and a
// manual compaction's are not kept apart), or by a lost write: after every round the store is
// reopened and every acknowledged write read back.
func TestFlushRace(t *testing.T) {
	if testing.Short() {
		t.Skip("races flushes for seconds")
	}
	total := stressDuration(t)
	dir := t.TempDir()
	// 64 KiB memtables fill every few batches. With two of them per
	// column family (the default), RocksDB makes a manual flush of a
	// column family whose older memtable is still queued wait for it. With
	// more, a Flush (one column family per request) still mixes reasons
	// with RocksDB's own flush of a full memtable: not covered here.
	o := Options{Dir: dir, WriteBufferBytes: minWriteBufferBytes, MaxBackgroundJobs: 2}
	deadline := time.Now().Add(total)
	var rounds, flushes, compactions, cut atomic.Int64
	// acked: the series of the round before, written and then flushed by
	// a Flush that returned.
	var acked sync.Map
	for round := 0; time.Now().Before(deadline); round++ {
		db, err := Open(o)
		if err != nil {
			t.Fatalf("round %d: Open: %v", round, err)
		}
		checkAcked(t, db, &acked)
		if t.Failed() {
			db.Close()
			return
		}
		acked.Clear()
		roundEnd := time.Now().Add(time.Duration(200+rand.IntN(800)) * time.Millisecond)
		if roundEnd.After(deadline) {
			roundEnd = deadline
		}
		var wg sync.WaitGroup
		stopWriters := make(chan struct{})
		// A Batch must not be used once its DB is closed: writers build
		// and write theirs under gate, which Close takes first.
		var gate sync.RWMutex
		closing := false
		// Writers: logged and unlogged batches over every column family
		// but meta, big enough to fill 64 KiB memtables every few
		// batches. Each writer flushes now and then and records what the
		// flush made durable.
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				var pending []uint64
				for n := 0; ; n++ {
					select {
					case <-stopWriters:
						return
					default:
					}
					gate.RLock()
					if closing {
						gate.RUnlock()
						return
					}
					b := db.NewBatch()
					base := uint64(round)<<32 | uint64(w)<<24 | uint64(n)<<8
					for k := range uint64(8) {
						id := base | k
						b.PutSeries(id, labels.FromStrings("__name__", "m", "id", strconv.FormatUint(id, 10)))
						data := make([]byte, 512+rng.IntN(2048))
						for i := range data {
							data[i] = byte(rng.Uint32())
						}
						t0 := int64(rng.IntN(72)) * hourMs
						b.PutChunk(id, t0, t0+1000, data)
						b.PutRollup(KindRollup1h, id, t0, data[:64])
						b.PutRollup(KindRollup1d, id, t0-t0%dayMs, data[:32])
					}
					var err error
					if rng.IntN(2) == 0 {
						err = db.WriteUnlogged(b)
					} else {
						err = db.Write(b)
					}
					b.Close()
					gate.RUnlock()
					if err != nil {
						t.Errorf("write: %v", err)
						return
					}
					for k := range uint64(8) {
						pending = append(pending, base|k)
					}
					if rng.IntN(6) == 0 {
						err := db.Flush()
						if errors.Is(err, ErrClosed) {
							return
						}
						if err != nil {
							t.Errorf("Flush: %v", err)
							return
						}
						flushes.Add(1)
						for _, id := range pending {
							acked.Store(id, struct{}{})
						}
						pending = pending[:0]
					}
				}
			}()
		}
		// Idle compactions, cut short by busy after a random while, by
		// stop, or by the round's Close; and now and then a full one.
		stopCompact := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(round), 99))
			for i := 0; ; i++ {
				select {
				case <-stopCompact:
					return
				default:
				}
				var err error
				if i%5 == 4 {
					err = db.CompactAll()
				} else {
					until := time.Now().Add(time.Duration(rng.IntN(300)) * time.Millisecond)
					var res IdleCompaction
					res, err = db.CompactIdle(stopCompact, func() bool { return time.Now().After(until) })
					if res.Aborted {
						cut.Add(1)
					}
				}
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("compaction: %v", err)
					return
				}
				compactions.Add(1)
			}
		}()
		time.Sleep(time.Until(roundEnd))
		// Close while writers and the compaction still run, most rounds;
		// otherwise stop them first.
		if rand.IntN(4) == 0 {
			close(stopWriters)
			close(stopCompact)
			wg.Wait()
			if err := db.Close(); err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
		} else {
			gate.Lock()
			closing = true
			gate.Unlock()
			if err := db.Close(); err != nil {
				t.Fatalf("round %d: Close: %v", round, err)
			}
			close(stopWriters)
			close(stopCompact)
			wg.Wait()
		}
		rounds.Add(1)
		if t.Failed() {
			return
		}
	}
	db, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	checkAcked(t, db, &acked)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: %d rounds, %d flushes, %d compactions (%d cut short)",
		total, rounds.Load(), flushes.Load(), compactions.Load(), cut.Load())
	if flushes.Load() == 0 || compactions.Load() == 0 {
		t.Fatal("no flush or no compaction ran: the test does not test")
	}
}

// checkAcked fails t unless every series in acked is stored with its
// chunks.
func checkAcked(t *testing.T, db *DB, acked *sync.Map) {
	t.Helper()
	missing := 0
	acked.Range(func(k, _ any) bool {
		id := k.(uint64)
		ls, found, err := db.SeriesLabels(id)
		if err != nil {
			t.Fatalf("series %d: %v", id, err)
		}
		chunks := 0
		err = db.Chunks(id, 0, 72*hourMs, func(ChunkMeta, []byte) error { chunks++; return nil })
		if err != nil {
			t.Fatalf("chunks of series %d: %v", id, err)
		}
		if !found || ls.Get("id") != strconv.FormatUint(id, 10) || chunks != 1 {
			missing++
			if missing <= 3 {
				t.Errorf("series %d: flushed, after reopening found %v labels %v, %d chunks", id, found, ls, chunks)
			}
		}
		return true
	})
	if missing > 0 {
		t.Errorf("%d flushed series lost", missing)
	}
}
