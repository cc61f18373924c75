package store

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node/labels"
)

// fillRounds writes rounds batches of the same keys (series, a small
// chunk, its hourly rollup rewritten, and a daily rollup of dataBytes
// random bytes at a new key each round, the bulk of it), each flushed to
// its own level-0 files, as a load's store flushes leave them. The daily
// rollups make what CompactIdle merges (the chunks it leaves alone) as
// large as a test needs.
func fillRounds(t *testing.T, db *DB, rounds, series, dataBytes int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	for r := range rounds {
		for id := uint64(1); id <= uint64(series); id++ {
			write(t, db, func(b *Batch) {
				b.PutSeries(id, labels.FromStrings("__name__", "m", "id", fmt.Sprint(id)))
				data := make([]byte, dataBytes)
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				// Each round a new chunk and daily value; the rollup of
				// the hour rewritten.
				b.PutChunk(id, int64(r)*hourMs, int64(r)*hourMs+1000, []byte(fmt.Sprintf("chunk %d", r)))
				b.PutRollup(KindRollup1h, id, 0, []byte(fmt.Sprintf("round %d", r)))
				b.PutRollup(KindRollup1d, id, int64(r)*dayMs, data)
			})
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

func levelsUsed(per [NumLevels]int) (levels, files int) {
	for _, n := range per {
		if n > 0 {
			levels++
			files += n
		}
	}
	return levels, files
}

// TestCompactIdle_LeavesWhatAFullCompactionLeaves: after flushes that
// each left level-0 files, CompactIdle leaves no level-0 file and every
// column family in one level, the rewritten rollups kept once and
// readable, except the chunks, whose level-0 files it leaves as they are;
// a second call finds nothing to do.
func TestCompactIdle_LeavesWhatAFullCompactionLeaves(t *testing.T) {
	db := openTest(t, Options{})
	fillRounds(t, db, 3, 50, 256)
	before, err := db.LevelFiles()
	if err != nil {
		t.Fatal(err)
	}
	if before[cfRollup1h][0] < 2 || before[cfChunks][0] < 2 {
		t.Fatalf("setup: level files %v; want several level-0 files", before)
	}
	res, err := db.CompactIdle(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ColumnFamilies == 0 || res.Aborted || res.WrittenBytes <= 0 {
		t.Fatalf("CompactIdle = %+v; want some column families compacted, bytes written, not aborted", res)
	}
	after, err := db.LevelFiles()
	if err != nil {
		t.Fatal(err)
	}
	for cf, per := range after {
		if cf == cfChunks {
			if per != before[cf] {
				t.Errorf("chunks after CompactIdle: files by level %v, before %v; want them left alone", per, before[cf])
			}
			continue
		}
		if levels, _ := levelsUsed(per); per[0] != 0 || levels > 1 {
			t.Errorf("column family %s after CompactIdle: files by level %v; want none in level 0, one level", cf, per)
		}
	}
	for _, cf := range []string{cfChunks, cfRollup1h, cfSeries} {
		if _, files := levelsUsed(after[cf]); files == 0 {
			t.Errorf("column family %s holds no file after CompactIdle", cf)
		}
	}
	var got []string
	if err := db.Rollups(KindRollup1h, 7, 0, hourMs, func(bucket int64, v []byte) error {
		got = append(got, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "round 2" {
		t.Errorf("rollups of series 7 after CompactIdle: %q; want the last write only", got)
	}
	if res, err := db.CompactIdle(nil, nil); err != nil || res.ColumnFamilies != 0 {
		t.Errorf("second CompactIdle = %+v, %v; want nothing to do", res, err)
	}
}

// fastCompactPoll makes CompactIdle ask whether to give way every 2 ms
// for the rest of the test: on a fast disk its 96 MiB compact in a few
// hundred milliseconds, so a cut found at the default 100 ms poll could
// come after the last column family.
func fastCompactPoll(t *testing.T) {
	prev := compactPollInterval
	compactPollInterval = 2 * time.Millisecond
	t.Cleanup(func() { compactPollInterval = prev })
}

// waitIdleCompacting waits until a CompactIdle on db has flushed and is
// compacting, the moment a test cuts it short (a fixed sleep let a fast
// machine finish it first).
func waitIdleCompacting(t *testing.T, db *DB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !db.idleCompacting.Load() {
		if time.Now().After(deadline) {
			t.Fatal("CompactIdle did not start compacting within 10s")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// TestCompactIdle_StopsPromptly: closing stop, or busy turning true, cuts
// a long compaction short; Close during one does not wait for it to end.
func TestCompactIdle_StopsPromptly(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 MiB")
	}
	fastCompactPoll(t)
	for _, how := range []string{"stop", "busy", "close"} {
		t.Run(how, func(t *testing.T) {
			db, err := Open(Options{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// Random bytes: every compaction step reads, tries to
			// compress and writes them all.
			fillRounds(t, db, 6, 4096, 4096)
			stop := make(chan struct{})
			var busy atomic.Bool
			type result struct {
				res IdleCompaction
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := db.CompactIdle(stop, busy.Load)
				done <- result{res, err}
			}()
			waitIdleCompacting(t, db)
			cut := time.Now()
			switch how {
			case "stop":
				close(stop)
			case "busy":
				busy.Store(true)
			case "close":
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
			}
			r := <-done
			took := time.Since(cut)
			t.Logf("%s: returned %v after the cut: %+v", how, took.Round(time.Millisecond), r.res)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !r.res.Aborted {
				t.Fatalf("CompactIdle = %+v: it ended before the cut, the test does not test", r.res)
			}
			if took > 2*time.Second {
				t.Errorf("CompactIdle returned %v after the %s; want promptly", took, how)
			}
			if how == "close" {
				return
			}
			// Manual compactions work again, and finish the job.
			res, err := db.CompactIdle(nil, nil)
			if err != nil || res.Aborted || res.ColumnFamilies == 0 {
				t.Fatalf("CompactIdle after the cut = %+v, %v; want it to finish what is left", res, err)
			}
			per, err := db.LevelFiles()
			if err != nil {
				t.Fatal(err)
			}
			if per[cfRollup1d][0] != 0 {
				t.Errorf("daily rollups by level after the second CompactIdle: %v", per[cfRollup1d])
			}
		})
	}
}

// TestCompactIdle_WritesGoOn: writes during an idle compaction return
// without waiting for it.
func TestCompactIdle_WritesGoOn(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 MiB")
	}
	db := openTest(t, Options{})
	fillRounds(t, db, 6, 4096, 4096)
	done := make(chan struct{})
	var compacting time.Duration
	go func() {
		defer close(done)
		start := time.Now()
		if _, err := db.CompactIdle(nil, nil); err != nil {
			t.Error(err)
		}
		compacting = time.Since(start)
	}()
	time.Sleep(50 * time.Millisecond)
	var slowest time.Duration
	writes := 0
	for id := uint64(1); ; id++ {
		select {
		case <-done:
			t.Logf("%d writes during a compaction of %v, the slowest %v", writes, compacting, slowest)
			if writes < 10 {
				t.Fatalf("only %d writes during the compaction: it was too short to test", writes)
			}
			if slowest > compacting/4 {
				t.Errorf("a write took %v during a compaction of %v: it waited", slowest, compacting)
			}
			return
		default:
		}
		start := time.Now()
		b := db.NewBatch()
		b.PutRollup(KindRollup1d, id, 0, []byte("w"))
		if err := db.WriteUnlogged(b); err != nil {
			t.Fatal(err)
		}
		b.Close()
		slowest = max(slowest, time.Since(start))
		writes++
		time.Sleep(time.Millisecond)
	}
}

// TestInfoLog_KeptSmall: RocksDB's LOG holds warnings and errors, not a
// line per flush and compaction.
func TestInfoLog_KeptSmall(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, Options{Dir: dir})
	fillRounds(t, db, 3, 50, 256)
	if _, err := db.CompactIdle(nil, nil); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(dir, "LOG"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "[default] [JOB") || strings.Contains(line, "EVENT_LOG_v1") {
			t.Fatalf("LOG (%d bytes) logs flushes and compactions: %q", len(log), line)
		}
	}
	t.Logf("LOG after 3 flushes and a compaction: %d bytes", len(log))
}

// TestCompactIdle_LeavesASmallWriteToRocksDB: a small flush over a large
// compacted column family is not merged at idle (it would rewrite the
// overlapping bottom files for a few bytes); a large one is.
func TestCompactIdle_LeavesASmallWriteToRocksDB(t *testing.T) {
	db := openTest(t, Options{})
	fillRounds(t, db, 1, 2000, 1024)
	if err := db.CompactAll(); err != nil {
		t.Fatal(err)
	}
	write(t, db, func(b *Batch) { b.PutRollup(KindRollup1d, 5, 0, []byte("small")) })
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CompactIdle(nil, nil); err != nil {
		t.Fatal(err)
	}
	files, err := db.LevelFiles()
	if err != nil {
		t.Fatal(err)
	}
	if files[cfRollup1d][0] != 1 {
		t.Fatalf("daily rollups by level after a small write: %v; want its level-0 file left", files[cfRollup1d])
	}
	fillRounds(t, db, 1, 2000, 1024) // as much again, over the same keys
	if _, err := db.CompactIdle(nil, nil); err != nil {
		t.Fatal(err)
	}
	if files, err = db.LevelFiles(); err != nil {
		t.Fatal(err)
	}
	if levels, _ := levelsUsed(files[cfRollup1d]); files[cfRollup1d][0] != 0 || levels != 1 {
		t.Errorf("daily rollups by level after a large write: %v; want one level, none in level 0", files[cfRollup1d])
	}
}

// TestCompactIdle_GivesWayToFlush: a flush of the store asked for during
// an idle compaction (the node's, after a write) makes the compaction
// give way instead of waiting for it to end.
func TestCompactIdle_GivesWayToFlush(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 96 MiB")
	}
	fastCompactPoll(t)
	db := openTest(t, Options{})
	fillRounds(t, db, 6, 4096, 4096)
	type result struct {
		res IdleCompaction
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := db.CompactIdle(nil, nil)
		done <- result{res, err}
	}()
	waitIdleCompacting(t, db)
	write(t, db, func(b *Batch) { b.PutRollup(KindRollup1d, 1, 0, []byte("late")) })
	start := time.Now()
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	r := <-done
	t.Logf("Flush took %v during the compaction: %+v", took.Round(time.Millisecond), r.res)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.res.Aborted {
		t.Fatalf("CompactIdle = %+v: it ended before the flush, the test does not test", r.res)
	}
	if took > 2*time.Second {
		t.Errorf("Flush waited %v for the idle compaction; want it to give way", took)
	}
}

// TestFlush_BesideManualCompactions: flushes of the store running beside
// idle and full compactions, with unlogged writes between them, as a node
// with --idle-compact does them. RocksDB's atomic flush asserts (and
// aborts the process) when two flushes of different reasons overlap; the
// store runs them one at a time.
func TestFlush_BesideManualCompactions(t *testing.T) {
	if testing.Short() {
		t.Skip("races flushes with compactions for seconds")
	}
	db := openTest(t, Options{})
	fillRounds(t, db, 2, 256, 1024)
	deadline := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for id := uint64(1); time.Now().Before(deadline); id++ {
			b := db.NewBatch()
			for k := range uint64(64) {
				b.PutChunk(id*64+k, int64(id)*1000, int64(id)*1000+999, []byte("chunk bytes"))
				b.PutRollup(KindRollup1h, id*64+k, 0, []byte("r"))
			}
			if err := db.WriteUnlogged(b); err != nil {
				t.Error(err)
			}
			b.Close()
			if err := db.Flush(); err != nil {
				t.Error(err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; time.Now().Before(deadline); i++ {
			var err error
			if i%4 == 3 {
				err = db.CompactAll()
			} else {
				_, err = db.CompactIdle(nil, nil)
			}
			if err != nil {
				t.Error(err)
			}
		}
	}()
	wg.Wait()
}

// TestChunksL0Trigger: the chunks column family keeps up to
// chunksL0Trigger-1 level-0 files unmerged (its files hold no key twice,
// a merge would only rewrite them), while the rollups, rewritten by every
// store flush, are merged at RocksDB's default of 4.
func TestChunksL0Trigger(t *testing.T) {
	db := openTest(t, Options{})
	const rounds = 6
	fillRounds(t, db, rounds, 5, 64)
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy := false
		for _, h := range db.handles {
			busy = busy || db.intProperty("rocksdb.compaction-pending", h) != 0 ||
				db.intProperty("rocksdb.num-running-compactions", h) != 0
		}
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("RocksDB's compactions still pending after 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	files, err := db.LevelFiles()
	if err != nil {
		t.Fatal(err)
	}
	if got := files[cfChunks][0]; got != rounds {
		t.Errorf("chunks: %d level-0 files after %d store flushes, want %d (levels %v)", got, rounds, rounds, files[cfChunks])
	}
	if got := files[cfRollup1h][0]; got >= 4 {
		t.Errorf("rollup_1h: %d level-0 files after %d store flushes, want them merged (levels %v)", got, rounds, files[cfRollup1h])
	}
}
