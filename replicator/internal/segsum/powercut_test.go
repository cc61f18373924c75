package segsum

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
)

// summariesPowerCuts runs the replicator's use of a summaries file on a
// CrashFS (Open, Add of a few summaries at a time, DropThrough, which
// compacts the file now and then) and cuts the power three times, each at
// a random operation of the file system, tearing what was not fsynced.
// After each cut it reopens the file from the rebooted file system,
// checks it and carries on. Every Sync or SyncDir is skipped when skip
// names it (the disk acknowledges it and does nothing). It returns what
// went wrong, or "", and how many compactions succeeded.
func summariesPowerCuts(seed uint64, skip vfs.Op) (string, int) {
	rng := rand.New(rand.NewPCG(seed, 0x55))
	const path, node = "/data/cursor.segments", "edge-1"
	fsys := vfs.NewCrashFS()
	if err := fsys.MkdirAll("/data", 0o755); err != nil {
		return err.Error(), 0
	}
	acked := map[uint64]Summary{} // Add returned nil
	added := map[uint64]Summary{} // ever passed to Add
	var dropped uint64            // DropThrough was asked up to here
	next := uint64(1)
	compactions := 0
	for cut := range 3 {
		var after *vfs.CrashFS
		ops, cutAt := 0, 1+rng.IntN(600)
		fsys.SetFault(func(op vfs.Op, _ string) error {
			if ops++; ops == cutAt {
				after = fsys.CrashTorn(rng)
			}
			if op == skip {
				return vfs.ErrSkipSync
			}
			return nil
		})
		f, _, err := Open(fsys, path, node)
		for err == nil && after == nil {
			if rng.IntN(4) == 0 {
				if back := uint64(rng.IntN(20)); next-1 >= back {
					dropped = max(dropped, next-1-back)
				}
				before := f.entries
				err = f.DropThrough(dropped)
				if f.entries < before {
					compactions++
				}
				continue
			}
			batch := make([]Summary, 1+rng.IntN(8))
			for i := range batch {
				minT := int64(next) * 1000
				batch[i] = Summary{Seq: next, PrevSeq: next - 1, Points: int64(rng.IntN(500)), MinT: minT, MaxT: minT + int64(rng.IntN(1000))}
				added[next] = batch[i]
				next++
			}
			if err = f.Add(batch...); err == nil {
				for _, e := range batch {
					acked[e.Seq] = e
				}
			}
		}
		if after == nil {
			return fmt.Sprintf("cut %d: %v", cut, err), compactions
		}
		if f != nil {
			f.Close()
		}
		g, note, err := Open(after, path, node)
		if err != nil || note != "" {
			return fmt.Sprintf("cut %d: reopen: note %q, %v", cut, note, err), compactions
		}
		for seq, want := range acked {
			if got, ok := g.Get(seq); seq > dropped && (!ok || got != want) {
				return fmt.Sprintf("cut %d: acknowledged summary %d is %+v (held %v), want %+v", cut, seq, got, ok, want), compactions
			}
		}
		for seq, got := range g.sums {
			if want, ok := added[seq]; !ok || got != want {
				return fmt.Sprintf("cut %d: holds summary %+v, which was never added", cut, got), compactions
			}
		}
		for seq := range acked {
			if seq <= dropped {
				delete(acked, seq)
			}
		}
		g.Close()
		fsys = after
	}
	return "", compactions
}

// TestFile_PowerCutKeepsEverySyncedSummary: whenever the power goes, the
// reopened file holds every summary an Add returned nil for (unless
// dropped since), and nothing that was never added: a torn entry never
// parses as valid.
func TestFile_PowerCutKeepsEverySyncedSummary(t *testing.T) {
	compactions := 0
	for seed := range uint64(300) {
		msg, n := summariesPowerCuts(seed, "")
		if msg != "" {
			t.Fatalf("seed %d: %s", seed, msg)
		}
		compactions += n
	}
	// The cuts must also land around compactions, not only appends.
	t.Logf("%d compactions in 300 runs", compactions)
	if compactions < 100 {
		t.Fatalf("only %d compactions in 300 runs", compactions)
	}
}

// TestFile_PowerCutTestNoticesAMissingFsync is the check of the test
// above: on a disk that skips every file fsync, or every directory
// fsync, it must find a cut that loses an acknowledged summary.
func TestFile_PowerCutTestNoticesAMissingFsync(t *testing.T) {
	for _, skip := range []vfs.Op{vfs.OpSync, vfs.OpSyncDir} {
		caught := 0
		for seed := range uint64(300) {
			if msg, _ := summariesPowerCuts(seed, skip); msg != "" {
				caught++
			}
		}
		t.Logf("skipping every %s: %d of 300 runs lose an acknowledged summary", skip, caught)
		if caught == 0 {
			t.Errorf("skipping every %s: no power cut lost an acknowledged summary", skip)
		}
	}
}
