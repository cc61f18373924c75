package node_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/wal"
)

// healthOptions flush every 20 ms and close a chunk every 16 samples, so
// that every write soon reaches the store.
func healthOptions(t *testing.T, dir string) node.Options {
	o := testOptions(t, dir)
	// A clock that moves, for the health thresholds.
	start, at := time.Now(), o.Now()
	o.Now = func() time.Time { return at.Add(time.Since(start)) }
	o.FlushInterval = 20 * time.Millisecond
	o.FailuresBeforeUnhealthy = 3
	o.FailingBeforeUnhealthy = 200 * time.Millisecond
	return o
}

// ackLedger is what a test had acknowledged, per series.
type ackLedger map[string]map[int64]float64

// writeRun writes points t0, t0+step, ... of series name and records them
// when acknowledged.
func (l ackLedger) writeRun(n *node.Node, name string, t0, step int64, points int) error {
	b := model.Batch{Labels: lbl("__name__", "h", "series", name)}
	for i := range points {
		t := t0 + int64(i)*step
		b.Ts = append(b.Ts, t)
		b.Vs = append(b.Vs, float64(t%1000)+0.5)
	}
	res, err := n.Write(context.Background(), []model.Batch{b})
	if err != nil {
		return err
	}
	if res.Rejected != 0 {
		return fmt.Errorf("rejected: %+v", res.Rejections)
	}
	if l[name] == nil {
		l[name] = map[int64]float64{}
	}
	for i, t := range b.Ts {
		l[name][t] = b.Vs[i]
	}
	return nil
}

func (l ackLedger) points() (n int) {
	for _, s := range l {
		n += len(s)
	}
	return n
}

// stored reads every raw point of metric h.
func stored(t *testing.T, n *node.Node) ackLedger {
	t.Helper()
	out := ackLedger{}
	_, err := n.Query(context.Background(), model.Query{Matchers: sel(t, `h`), Mode: model.ModeRaw,
		Start: math.MinInt64 / 4, End: math.MaxInt64 / 4}, func(s model.Series) error {
		m := map[int64]float64{}
		for i, ts := range s.Ts {
			m[ts] = s.Vs[i]
		}
		out[s.Labels.Get("series")] = m
		return nil
	})
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	return out
}

// missing counts the acknowledged points absent from got (or with
// another value).
func (l ackLedger) missing(got ackLedger) (n int) {
	for name, pts := range l {
		for ts, v := range pts {
			if gv, ok := got[name][ts]; !ok || gv != v {
				n++
			}
		}
	}
	return n
}

// waitNotReady polls Ready until it fails, for at most limit.
func waitNotReady(t *testing.T, n *node.Node, limit time.Duration) (*node.StoreError, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		if err := n.Ready(); err != nil {
			var se *node.StoreError
			if !errors.As(err, &se) || !errors.Is(err, model.ErrStoreUnavailable) {
				t.Fatalf("Ready = %v, want a *StoreError", err)
			}
			return se, time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("still ready %v after the store started failing", limit)
	return nil, 0
}

func TestHealth_CorruptionMakesTheNodeNotReadyAtOnceAndUntilRepaired(t *testing.T) {
	dir := t.TempDir()
	o := healthOptions(t, dir)
	n := mustOpen(t, o)
	now := o.Now().UnixMilli()
	acked := ackLedger{}
	if err := acked.writeRun(n, "a", now-3600_000, 1000, 40); err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(); err != nil {
		t.Fatalf("a healthy node is not ready: %v", err)
	}
	n.SetStoreFaultForTest(func() error { return errors.New("Corruption: block checksum mismatch (injected)") })
	if err := acked.writeRun(n, "a", now-3000_000, 1000, 40); err != nil {
		t.Fatalf("write to an existing series while the store first fails: %v", err)
	}
	se, took := waitNotReady(t, n, 5*time.Second)
	t.Logf("not ready %v after the fault: %v", took.Round(time.Millisecond), se)
	if se.Reason != node.ReasonCorruption || !strings.Contains(se.Error(), "tributary node repair") {
		t.Fatalf("readiness error %q: want reason corruption and the repair command", se)
	}
	if h := n.StoreHealth(); h.Healthy || !h.Damaged || h.Reason != node.ReasonCorruption {
		t.Fatalf("StoreHealth = %+v", h)
	}
	if _, err := os.Stat(filepath.Join(dir, "store.damaged")); err != nil {
		t.Fatalf("no damage record: %v", err)
	}
	// Writes to existing series are still taken (the WAL has room) ...
	if err := acked.writeRun(n, "a", now-2000_000, 1000, 10); err != nil {
		t.Fatalf("write to an existing series within the bounds: %v", err)
	}
	// ... a new series is refused, retryably, with the reason.
	err := acked.writeRun(n, "new", now, 1000, 1)
	if !errors.Is(err, model.ErrStoreUnavailable) || !strings.Contains(err.Error(), "corruption") || !strings.Contains(err.Error(), "new series") {
		t.Fatalf("write of a new series: %v, want a store error naming the corruption", err)
	}
	// SIGTERM: the final flush fails, nothing acknowledged is lost.
	if err := n.Close(); err != nil {
		t.Fatalf("Close of a node whose store cannot flush: %v", err)
	}

	n = mustOpen(t, o)
	if err := n.Ready(); !errors.Is(err, model.ErrStoreUnavailable) {
		t.Fatalf("reopened over the damage record: Ready = %v, want not ready until repaired", err)
	}
	if miss := acked.missing(stored(t, n)); miss != 0 {
		t.Fatalf("%d of %d acknowledged points missing after the restart", miss, acked.points())
	}
	n.Close()

	rep, err := node.Repair(node.RepairOptions{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Damaged() || rep.DamageRecord == "" {
		t.Fatalf("repair of an intact store over a damage record: %+v", rep)
	}
	n = mustOpen(t, o)
	defer n.Close()
	if err := n.Ready(); err != nil {
		t.Fatalf("after the repair: Ready = %v", err)
	}
	if miss := acked.missing(stored(t, n)); miss != 0 {
		t.Fatalf("%d of %d acknowledged points missing after the repair", miss, acked.points())
	}
}

func TestHealth_OtherFailuresMakeTheNodeNotReadyOnlyWhenTheyPersist(t *testing.T) {
	o := healthOptions(t, t.TempDir())
	n := mustOpen(t, o)
	defer n.Close()
	now := o.Now().UnixMilli()
	acked := ackLedger{}
	if err := acked.writeRun(n, "a", now-3600_000, 1000, 1); err != nil {
		t.Fatal(err)
	}
	n.SetStoreFaultForTest(func() error { return errors.New("IO error: While appending to file: 000012.log: Input/output error") })
	start := time.Now()
	if err := acked.writeRun(n, "a", now-3500_000, 1000, 40); err != nil {
		t.Fatal(err)
	}
	for n.StoreHealth().Failures == 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("no flush failed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := n.Ready(); err != nil && time.Since(start) < o.FailingBeforeUnhealthy {
		t.Fatalf("not ready after one transient failure: %v", err)
	}
	se, _ := waitNotReady(t, n, 5*time.Second)
	if se.Reason != node.ReasonIOError || time.Since(start) < o.FailingBeforeUnhealthy {
		t.Fatalf("readiness error %q after %v: want io_error, not before %v", se, time.Since(start), o.FailingBeforeUnhealthy)
	}
	if h := n.StoreHealth(); h.Damaged || h.Failures < o.FailuresBeforeUnhealthy {
		t.Fatalf("StoreHealth = %+v", h)
	}
	n.SetStoreFaultForTest(nil)
	for n.Ready() != nil {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("still not ready after the fault cleared: %v", n.Ready())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if h := n.StoreHealth(); !h.Healthy || h.Failures != 0 {
		t.Fatalf("StoreHealth after recovery = %+v", h)
	}
	if miss := acked.missing(stored(t, n)); miss != 0 {
		t.Fatalf("%d acknowledged points missing", miss)
	}
}

func TestHealth_WritesAreRefusedPastTheBoundAndNothingAcknowledgedIsLost(t *testing.T) {
	dir := t.TempDir()
	o := healthOptions(t, dir)
	o.HeadMaxBytes = 1 << 20
	o.UnflushedWALMaxBytes = 1 << 20
	n := mustOpen(t, o)
	now := o.Now().UnixMilli()
	acked := ackLedger{}
	for i := range 8 {
		if err := acked.writeRun(n, fmt.Sprint(i), now-20*86400_000, 1000, 1); err != nil {
			t.Fatal(err)
		}
	}
	n.SetStoreFaultForTest(func() error { return errors.New("Corruption: injected") })
	var refused error
	t0 := now - 20*86400_000 + 1000
	for round := 0; refused == nil; round++ {
		if round > 10_000 {
			t.Fatal("writes never refused")
		}
		for i := range 8 {
			if err := acked.writeRun(n, fmt.Sprint(i), t0, 1000, 2000); err != nil {
				refused = err
				break
			}
		}
		t0 += 2000 * 1000
	}
	t.Logf("refused after %d acknowledged points: %v", acked.points(), refused)
	if !errors.Is(refused, model.ErrStoreUnavailable) || errors.Is(refused, model.ErrOverloaded) || !strings.Contains(refused.Error(), "bound") {
		t.Fatalf("refusal %v: want a store error naming the bound (retryable, not overload)", refused)
	}
	if err := n.WriteReady(); !errors.Is(err, model.ErrStoreUnavailable) {
		t.Fatalf("WriteReady = %v", err)
	}
	if miss := acked.missing(stored(t, n)); miss != 0 {
		t.Fatalf("%d acknowledged points missing before the restart", miss)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Repair(node.RepairOptions{DataDir: dir}); err != nil {
		t.Fatal(err)
	}
	n = mustOpen(t, o)
	defer n.Close()
	if miss := acked.missing(stored(t, n)); miss != 0 {
		t.Fatalf("%d of %d acknowledged points missing after the restart", miss, acked.points())
	}
}

// damageDataBlocks flips a byte every 512 bytes of the second quarter of
// an SST file, among its data blocks: the first block (which listing the
// partitions reads) and the index, filter and properties blocks at the end
// stay intact, so the store opens and lists its partitions, and a read of
// the damaged blocks fails its checksum.
func damageDataBlocks(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) / 4; i < len(b)/2; i += 512 {
		b[i] ^= 0xFF
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestHealth_CorruptSSTFileIsFoundRepairedAndItsLossCounted(t *testing.T) {
	dir := t.TempDir()
	o := healthOptions(t, dir)
	n := mustOpen(t, o)
	now := o.Now().UnixMilli()
	day := now - 2*86400_000 - now%86400_000 // a whole day, two days ago
	// Enough series for the chunks file to have several data blocks.
	const series = 100
	before := ackLedger{}
	for i := range series {
		if err := before.writeRun(n, fmt.Sprint(i), day+3600_000, 30_000, 200); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CompactStore(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := store.Inspect(store.Options{Dir: filepath.Join(dir, "db")})
	if err != nil {
		t.Fatal(err)
	}
	var chunks []string
	for _, f := range in.Files {
		if f.ColumnFamily == "chunks" {
			chunks = append(chunks, f.Name)
		}
	}
	if len(chunks) != 1 {
		t.Fatalf("chunks files %v, want one after the compaction", chunks)
	}
	damageDataBlocks(t, filepath.Join(dir, "db", chunks[0]))

	n = mustOpen(t, o)
	if err := n.Ready(); err != nil {
		t.Fatalf("the damage is not read at open, yet Ready = %v", err)
	}
	after := ackLedger{}
	// New points in the damaged hours (30 s off the old ones): the flush
	// merges them with the stored chunks and reads the damaged file.
	start := time.Now()
	for i := range series {
		if err := after.writeRun(n, fmt.Sprint(i), day+3600_000+15_000, 30_000, 20); err != nil {
			t.Fatal(err)
		}
	}
	se, took := waitNotReady(t, n, 5*time.Second)
	t.Logf("not ready %v after the write that made the flush read the damaged file: %v", took.Round(time.Millisecond), se)
	if se.Reason != node.ReasonCorruption || time.Since(start) > 5*time.Second {
		t.Fatalf("readiness error %v", se)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	rep, err := node.Repair(node.RepairOptions{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) != 1 || rep.Lost[0].File != chunks[0] || rep.Lost[0].ColumnFamily != "chunks" || !rep.Lost[0].KeysKnown ||
		rep.Lost[0].FromMs != day || rep.Lost[0].ToMs != day+86400_000 {
		t.Fatalf("repair report %+v: want the one chunks file of %s", rep.Lost, time.UnixMilli(day).UTC())
	}
	if _, err := os.Stat(filepath.Join(dir, rep.Quarantine, chunks[0])); err != nil {
		t.Fatalf("the damaged file is not in quarantine: %v", err)
	}

	n = mustOpen(t, o)
	defer n.Close()
	if err := n.Ready(); err != nil {
		t.Fatalf("after the repair: Ready = %v", err)
	}
	got := stored(t, n)
	if miss := after.missing(got); miss != 0 {
		t.Fatalf("%d points acknowledged after the damage are missing (the WAL held them)", miss)
	}
	lost := before.missing(got)
	l := n.StoreLosses()
	t.Logf("lost %d of %d points written before the damage; ackLedger: lost %d, rebuilt hours %d", lost, before.points(), l.LostPoints, l.RebuiltHours)
	// The points written after the damage fell inside the span the
	// rollups cover and were never flushed: the audit cannot tell them
	// from flushed ones and flags its count as an upper bound (here exact).
	if lost == 0 || l.LostPoints != int64(lost) || !l.Ranges[0].UpperBound || !l.Ranges[0].Audited {
		t.Fatalf("ackLedger counts %d lost points (%+v), the store misses %d", l.LostPoints, l.Ranges, lost)
	}
	if st := n.Status(); st.StoreLostPoints != int64(lost) || st.StoreQuarantinedFiles != 1 || st.StoreUnrestoredRanges != 1 {
		t.Fatalf("Status: lost %d, quarantined %d, unrestored %d", st.StoreLostPoints, st.StoreQuarantinedFiles, st.StoreUnrestoredRanges)
	}
	if err := n.ResolveLostRange(l.Ranges[0].ID, 0); err != nil {
		t.Fatal(err)
	}
	if st := n.Status(); st.StoreUnrestoredRanges != 0 {
		t.Fatalf("unrestored ranges after ResolveLostRange: %d", st.StoreUnrestoredRanges)
	}
}

func TestHealth_RepairReplaysTheKeptWALAndCountsWhatItRestored(t *testing.T) {
	dir := t.TempDir()
	o := healthOptions(t, dir)
	o.WALRetention = func() uint64 { return 0 } // keep every segment, as for shipping
	n := mustOpen(t, o)
	now := o.Now().UnixMilli()
	day := now - 2*86400_000 - now%86400_000
	acked := ackLedger{}
	for i := range 10 {
		if err := acked.writeRun(n, fmt.Sprint(i), day+3600_000, 60_000, 100); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.CompactStore(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := store.Inspect(store.Options{Dir: filepath.Join(dir, "db")})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range in.Files {
		if f.ColumnFamily == "chunks" {
			damageDataBlocks(t, filepath.Join(dir, "db", f.Name))
		}
	}
	rep, err := node.Repair(node.RepairOptions{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lost) == 0 || rep.WALPoints < int64(acked.points()) {
		t.Fatalf("repair: lost %+v, WAL holds %d points (want at least %d)", rep.Lost, rep.WALPoints, acked.points())
	}
	n = mustOpen(t, o)
	defer n.Close()
	if miss := acked.missing(stored(t, n)); miss != 0 {
		t.Fatalf("%d of %d points missing: the kept WAL held them all", miss, acked.points())
	}
	if l := n.StoreLosses(); l.LostPoints != 0 || l.Ranges[0].UpperBound || !l.Ranges[0].Audited {
		t.Fatalf("ledger %+v: the WAL replay restored everything, nothing is lost", l)
	}
}

func TestHealth_WALQuarantinesAreCountedAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	o := healthOptions(t, dir)
	o.WALRetention = func() uint64 { return 0 }
	o.WALSegmentBytes = 4096
	o.WALFormat = wal.FormatV1 // raw records: these writes fill several 4 KiB segments
	n := mustOpen(t, o)
	now := o.Now().UnixMilli()
	acked := ackLedger{}
	for i := range 20 {
		if err := acked.writeRun(n, "q", now-3600_000+int64(i)*100_000, 1000, 50); err != nil {
			t.Fatal(err)
		}
	}
	segs := n.WALSegments()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	b, err := os.ReadFile(segs[1].Path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xFF
	if err := os.WriteFile(segs[1].Path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		n = mustOpen(t, o)
		st := n.Status()
		n.Close()
		if st.WALQuarantined != 1 {
			t.Fatalf("open %d: WALQuarantined = %d (this run %d), want 1 kept across restarts", i+1, st.WALQuarantined, st.WAL.CorruptQuarantined)
		}
	}
}
