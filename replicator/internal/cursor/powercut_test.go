package cursor

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
)

// nextCursor is s one step later, as the replicator moves it: the cloud
// acknowledges, a backlog overflow releases segments as a gap, or the
// cloud records the gaps and backfills them.
func nextCursor(s State, rng *rand.Rand) State {
	n := s
	n.Gaps = slices.Clone(s.Gaps)
	switch rng.IntN(3) {
	case 0:
		n.AckedThrough += 1 + uint64(rng.IntN(5))
		n.Released = max(n.Released, n.AckedThrough)
	case 1:
		after, through := n.Released, n.Released+1+uint64(rng.IntN(10))
		n.AddGap(Gap{After: after, Through: through, Reason: ReasonBacklogOverflow, Segments: through - after,
			Points: int64(rng.IntN(1000)), MinT: int64(after) * 1000, MaxT: int64(through) * 1000})
		n.Released = through
	default:
		for i := range n.Gaps {
			n.Gaps[i].Backfilled = n.Gaps[i].Reported
			n.Gaps[i].Reported = true
		}
		n.AckedThrough = n.Released
	}
	return n
}

// cursorPowerCuts saves a run of cursors on a CrashFS and cuts the power
// three times, each at a random operation of the file system (an open, a
// write, an fsync, a rename, a directory fsync), tearing what was not
// fsynced. After each cut it loads the cursor from the rebooted file
// system and carries on from it. Every Sync or SyncDir is skipped when
// skip names it (the disk acknowledges it and does nothing). It returns
// what went wrong, or "".
func cursorPowerCuts(seed uint64, skip vfs.Op) string {
	rng := rand.New(rand.NewPCG(seed, 0xC0))
	const path = "/data/cursor"
	fsys := vfs.NewCrashFS()
	if err := fsys.MkdirAll("/data", 0o755); err != nil {
		return err.Error()
	}
	cur := State{NodeID: fmt.Sprintf("edge-%d", seed)}
	var saved *State // the last cursor Save returned nil for
	for cut := range 3 {
		var after *vfs.CrashFS
		ops, cutAt := 0, 1+rng.IntN(40)
		fsys.SetFault(func(op vfs.Op, _ string) error {
			if ops++; ops == cutAt {
				after = fsys.CrashTorn(rng)
			}
			if op == skip {
				return vfs.ErrSkipSync
			}
			return nil
		})
		var next State
		for after == nil {
			next = nextCursor(cur, rng)
			if err := Save(fsys, path, &next); err != nil && after == nil {
				return fmt.Sprintf("save: %v", err)
			}
			if after == nil {
				s := next
				saved, cur = &s, next
			}
		}
		got, found, err := Load(after, path)
		switch {
		case err != nil:
			return fmt.Sprintf("cut %d: Load: %v", cut, err)
		case !found && saved == nil:
		case !found:
			return fmt.Sprintf("cut %d: the cursor is gone; the last one saved released %d", cut, saved.Released)
		case saved != nil && bytes.Equal(got.Encode(), saved.Encode()):
		case bytes.Equal(got.Encode(), next.Encode()):
			s := got // the save in flight was durable after all
			saved = &s
		default:
			want := "nothing"
			if saved != nil {
				want = fmt.Sprintf("released %d", saved.Released)
			}
			return fmt.Sprintf("cut %d: Load = %+v; want the last cursor saved (%s) or the one being saved (released %d)",
				cut, got, want, next.Released)
		}
		fsys, cur = after, got
		if !found {
			cur = State{NodeID: fmt.Sprintf("edge-%d", seed)}
		}
	}
	return ""
}

// TestSave_PowerCutKeepsTheLastSavedCursor: whenever the power goes,
// the cursor read back is the last one saved or the one being saved,
// whole: it never goes back past what was durably saved (which would
// let the node keep deleting segments the cloud has not acknowledged)
// and never holds a torn record that parses.
func TestSave_PowerCutKeepsTheLastSavedCursor(t *testing.T) {
	for seed := range uint64(300) {
		if msg := cursorPowerCuts(seed, ""); msg != "" {
			t.Fatalf("seed %d: %s", seed, msg)
		}
	}
}

// TestSave_PowerCutTestNoticesAMissingFsync is the check of the test
// above: on a disk that skips every file fsync, or every directory
// fsync, it must find a cut that loses or tears a saved cursor.
func TestSave_PowerCutTestNoticesAMissingFsync(t *testing.T) {
	for _, skip := range []vfs.Op{vfs.OpSync, vfs.OpSyncDir} {
		caught := 0
		for seed := range uint64(300) {
			if cursorPowerCuts(seed, skip) != "" {
				caught++
			}
		}
		t.Logf("skipping every %s: %d of 300 runs lose or tear a saved cursor", skip, caught)
		if caught == 0 {
			t.Errorf("skipping every %s: no power cut lost a saved cursor", skip)
		}
	}
}
