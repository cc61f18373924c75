package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
)

// TestPowerCut_Edge cuts the power of the edge while it ingests: SIGKILL,
// then its data directory (WAL and store, on powerfs) loses everything it
// did not fsync, with a random prefix of unsynced appends kept as a torn
// tail; restart on what is left. With --wal-sync always every acknowledged
// point must survive, on the edge and in the cloud. With interval:1s the
// points acknowledged in the last second before a cut may be lost: the loss
// is reported and must stay within that bound.
func TestPowerCut_Edge(t *testing.T) {
	t.Run("wal-sync=always", func(t *testing.T) { edgePowerCut(t, "always", 0) })
	t.Run("wal-sync=interval:1s", func(t *testing.T) { edgePowerCut(t, "interval:1s", time.Second) })
}

func edgePowerCut(t *testing.T, sync string, interval time.Duration) {
	requireDiskScenarios(t)
	requireFUSE(t)
	cuts := envInt(t, "TRIBUTARY_E2E_POWER_CUTS", 3)
	f := startDiskFleet(t, 1, []string{"edge-1"}, "--wal-sync", sync)
	f.startLoad()
	for i := range cuts {
		time.Sleep(time.Second + rand.N(2*time.Second))
		before := f.node().AckedThrough
		cutAt := time.Now()
		cs, down := f.powerCut(f.c.Edge.Process)
		rec := f.waitAckedPast(before, cutAt, 60*time.Second, fmt.Sprintf("power cut %d", i+1))
		f.faults = append(f.faults, fmt.Sprintf("power cut #%d of %s (down %v)", i+1, f.c.Edge.ID, down.Round(time.Millisecond)))
		t.Logf("power cut %d: %s down %v, a segment acknowledged again %v after the cut; the cut: %v",
			i+1, f.c.Edge.ID, down.Round(time.Millisecond), rec.Round(time.Millisecond), cs)
	}
	st := f.stopLoad()

	// The loss a power cut may cause: nothing with always; with an
	// interval, per series, one run of the points acknowledged during one
	// interval (plus one request and the fsync itself) before each cut.
	perCut := 0
	if interval > 0 {
		window := interval + replInterval + 250*time.Millisecond
		perCut = replPoints * int((window+replInterval-1)/replInterval)
	}
	bound := cuts * perCut * replSeries
	// The edge itself, before the cloud is checked.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	er, err := cluster.Check(ctx, f.c.Edge.GRPC, metric, f.w.Ledger, f.startMs, time.Now().Add(time.Hour).UnixMilli())
	cancel()
	if err != nil {
		f.fatal("query %s: %v", f.c.Edge.ID, err)
	}
	t.Logf("%s: %v", f.c.Edge.ID, er)
	requireLossWithin(t, f.c.Edge.ID, er, cuts, perCut, sync)
	if er.Duplicated+er.Phantom+er.WrongValue > 0 {
		t.Errorf("%s answers wrong after power cuts: %v", f.c.Edge.ID, er)
	}
	// Everything the edge still holds must reach the cloud when every
	// write was synced; with an interval, the cloud may lack points the
	// edge kept (in its store) but lost from its WAL: within the bound.
	want := int64(st.Acked - er.Lost)
	if interval > 0 {
		want = 0
	}
	f.waitDrained(want, 120*time.Second)
	cc, results := f.cloudCheck(bound)
	for i, r := range results {
		requireLossWithin(t, f.c.Coordinators[i].ID, r, cuts, perCut, sync)
	}
	t.Logf("summary: load %.0f points/s written of %.0f targeted (%.0f acknowledged/s); faults: %s; --wal-sync %s; %d points acknowledged; edge: lost %d, duplicated %d, phantom %d; summed over %d coordinator(s): lost %d, duplicated %d, phantom %d; loss allowed per cut and series %d; recovery %v",
		float64(st.Acked+st.InDoubt)/st.Elapsed.Seconds(), replTarget, st.PointsPerSecond(), strings.Join(f.faults, ", "), sync,
		st.Acked, er.Lost, er.Duplicated, er.Phantom+er.WrongValue, len(f.c.Coordinators), cc.lost, cc.dup, cc.phantom, perCut, roundAll(f.recoveries))
}

// requireLossWithin requires r's lost points to form, per series, at most
// cuts runs of consecutive timestamps of at most perCut points each (the
// load writes each series' timestamps 1 ms apart).
func requireLossWithin(t *testing.T, who string, r cluster.CheckResult, cuts, perCut int, sync string) {
	t.Helper()
	for series, ts := range r.LostTimes {
		runs, longest, n := 0, 0, 0
		for i, x := range ts {
			if i == 0 || x != ts[i-1]+1 {
				runs++
				n = 0
			}
			n++
			longest = max(longest, n)
		}
		if runs > cuts || longest > perCut {
			t.Errorf("%s lost %d acknowledged points of %s in %d runs (longest %d) after %d power cuts with --wal-sync %s; at most %d runs of %d allowed",
				who, len(ts), series, runs, longest, cuts, sync, cuts, perCut)
			return
		}
	}
}

// cloudCheck kills the edge and queries every coordinator for the
// ledger's points: duplicates, phantoms and wrong values fail the test, and
// so do more than allowedLost lost points per coordinator.
func (f *diskFleet) cloudCheck(allowedLost int) (cloudCheck, []cluster.CheckResult) {
	f.t.Helper()
	f.c.Edge.Kill()
	var out cloudCheck
	var results []cluster.CheckResult
	endMs := time.Now().Add(time.Hour).UnixMilli()
	for _, co := range f.c.Coordinators {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := cluster.Check(ctx, co.GRPC, metric, f.w.Ledger, f.startMs, endMs)
		cancel()
		if err != nil {
			f.t.Errorf("%s: %v", co.ID, err)
			continue
		}
		f.t.Logf("%s: %v", co.ID, r)
		results = append(results, r)
		if r.Lost > allowedLost {
			f.t.Errorf("%s lost %d acknowledged points (at most %d allowed): %v", co.ID, r.Lost, allowedLost, r)
		}
		if r.Duplicated+r.Phantom+r.WrongValue > 0 {
			f.t.Errorf("%s answers wrong: %v", co.ID, r)
		}
		out.lost += r.Lost
		out.dup += r.Duplicated
		out.phantom += r.Phantom + r.WrongValue
	}
	return out, results
}

// TestPowerCut_Coordinator cuts the power of coordinators (raft log,
// catalog and replica store on powerfs): the raft leader, then a follower,
// in turn, while the edge ingests and ships. A restarted coordinator must
// know at least what it had acknowledged before the cut (the edge's
// registration and acked_through), and in the end every coordinator must
// answer every acknowledged point exactly once.
func TestPowerCut_Coordinator(t *testing.T) {
	requireDiskScenarios(t)
	requireFUSE(t)
	cuts := envInt(t, "TRIBUTARY_E2E_COORD_POWER_CUTS", 4)
	n := envInt(t, "TRIBUTARY_E2E_REPL_COORDINATORS", 3)
	if n < 3 {
		t.Skipf("TRIBUTARY_E2E_REPL_COORDINATORS=%d: a coordinator power cut needs a quorum of the others (3 or more)", n)
	}
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("c%d", i+1))
	}
	f := startDiskFleet(t, n, names)
	f.startLoad()
	ctx := context.Background()
	for i := range cuts {
		time.Sleep(time.Second + rand.N(2*time.Second))
		leader, err := f.c.Leader(ctx, 30*time.Second)
		if err != nil {
			f.fatal("cut %d: %v", i+1, err)
		}
		victim, role := leader, "leader"
		if i%2 == 1 {
			role = "follower"
			for _, co := range f.c.Coordinators {
				if co != leader && co.Running() {
					victim = co
					break
				}
			}
		}
		fl, err := f.c.Fleet(ctx, victim)
		if err != nil {
			f.fatal("cut %d: %v", i+1, err)
		}
		before, registered := fl.Node(f.c.Edge.ID)
		cutAt := time.Now()
		cs, down := f.powerCut(victim.Process)
		// The restarted member must know what it knew (after catching up
		// with the others, which is raft's job, so wait a while).
		if _, err := waitOwnFleet(ctx, f.c, victim, 60*time.Second, func(fl cluster.Fleet) bool {
			n, ok := fl.Node(f.c.Edge.ID)
			return (ok || !registered) && n.AckedThrough >= before.AckedThrough
		}); err != nil {
			f.fatal("cut %d: %s (%s) after the power cut: %v; before it: registered %v, acked_through %d", i+1, victim.ID, role, err, registered, before.AckedThrough)
		}
		rec := f.waitAckedPast(f.node().AckedThrough, cutAt, 60*time.Second, fmt.Sprintf("power cut %d", i+1))
		f.faults = append(f.faults, fmt.Sprintf("power cut #%d of the %s %s (down %v)", i+1, role, victim.ID, down.Round(time.Millisecond)))
		t.Logf("power cut %d: %s (%s) down %v, a segment acknowledged again %v after the cut; the cut: %v",
			i+1, victim.ID, role, down.Round(time.Millisecond), rec.Round(time.Millisecond), cs)
	}
	st := f.stopLoad()
	nd := f.waitDrained(int64(st.Acked), 120*time.Second)
	f.requireHeldWithinWritten(nd, st)
	requireFleetsAgree(t, f.c)
	cc, _ := f.cloudCheck(0)
	f.summary(st, cc)
}

// waitOwnFleet polls co's own GET /api/v1/fleet until ok accepts it.
func waitOwnFleet(ctx context.Context, c *cluster.Cluster, co *cluster.Coordinator, timeout time.Duration, ok func(cluster.Fleet) bool) (cluster.Fleet, error) {
	deadline := time.Now().Add(timeout)
	var last cluster.Fleet
	var lastErr error
	for time.Now().Before(deadline) {
		fl, err := c.Fleet(ctx, co)
		if err == nil {
			last, lastErr = fl, nil
			if ok(fl) {
				return fl, nil
			}
		} else {
			lastErr = err
		}
		time.Sleep(200 * time.Millisecond)
	}
	if lastErr != nil {
		return last, lastErr
	}
	n, _ := last.Node(c.Edge.ID)
	return last, fmt.Errorf("condition not met within %v: it names acked_through %d, held %d points", timeout, n.AckedThrough, n.HeldPoints)
}
