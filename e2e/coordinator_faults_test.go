package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
)

// faultLoad is the writer of the coordinator fault scenarios: 20 series ×
// 10 points every 50 ms through the edge (4,000 points/s).
var faultLoad = cluster.WriterOptions{Metric: metric, Series: 20, PointsPerSeries: 10, Interval: 50 * time.Millisecond}

// target is the points per second o writes when it keeps its pace.
func target(o cluster.WriterOptions) float64 {
	return float64(o.Series*o.PointsPerSeries) / o.Interval.Seconds()
}

// requireLoadHeld logs the load and fails the run as INVALID when the
// writer did not hold 90% of its target (written points, in doubt
// included).
func requireLoadHeld(t *testing.T, st cluster.WriterStats, o cluster.WriterOptions) float64 {
	t.Helper()
	written := float64(st.Acked+st.InDoubt) / st.Elapsed.Seconds()
	t.Logf("load: %d requests in %v, %.0f points/s written (target %.0f); %d points acknowledged, %d in doubt, %d requests failed; slowest request %v",
		st.Requests, st.Elapsed.Round(time.Millisecond), written, target(o), st.Acked, st.InDoubt, st.Failed, st.MaxLatency.Round(time.Millisecond))
	if written < 0.9*target(o) {
		t.Errorf("INVALID run: the writer held %.0f points/s, below 90%% of its target %.0f", written, target(o))
	}
	if st.Failed > 0 {
		t.Errorf("%d writes to the edge failed (the edge writes locally, coordinators do not matter): %v", st.Failed, st.FirstErr)
	}
	if st.Acked == 0 {
		t.Fatal("no point was acknowledged")
	}
	return written
}

// cloudTotals adds up the checks of every coordinator.
type cloudTotals struct{ checked, lost, dup, phantom int }

// checkCloudAfterFaults waits until the cloud holds every acknowledged
// point, requires the coordinators to agree and the edge to be caught up,
// kills the edge and requires every coordinator to answer each
// acknowledged point exactly once.
func checkCloudAfterFaults(t *testing.T, c *cluster.Cluster, l *cluster.Ledger, st cluster.WriterStats, startMs int64) cloudTotals {
	t.Helper()
	held := waitHeld(t, c, l, st.Acked, 120*time.Second)
	if held.HeldPoints > uint64(st.Acked+st.InDoubt) {
		t.Errorf("cloud holds %d points of %s, only %d were written", held.HeldPoints, c.Edge.ID, st.Acked+st.InDoubt)
	}
	if len(held.Gaps) > 0 {
		t.Errorf("%s declared gaps (points the cloud will never hold): %+v", c.Edge.ID, held.Gaps)
	}
	requireFleetsAgree(t, c)
	requireEdgeCaughtUp(t, c, held.AckedThrough)
	c.Edge.Kill()
	var tot cloudTotals
	for _, r := range checkEveryCoordinator(t, c, l, startMs) {
		tot.checked++
		tot.lost += r.Lost
		tot.dup += r.Duplicated
		tot.phantom += r.Phantom + r.WrongValue
	}
	if tot.checked != len(c.Coordinators) {
		t.Errorf("only %d of %d coordinators answered the check", tot.checked, len(c.Coordinators))
	}
	return tot
}

// startFaultLoad starts the writer and waits until a segment of the edge
// is acknowledged, so that faults hit a flowing replication.
func startFaultLoad(t *testing.T, c *cluster.Cluster) (*cluster.Writer, int64) {
	t.Helper()
	o := faultLoad
	o.Addr = c.Edge.GRPC
	w, err := cluster.NewWriter(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	startMs := time.Now().UnixMilli() - 1000
	w.Start()
	if _, err := c.WaitFleet(context.Background(), 30*time.Second, func(f cluster.Fleet) bool {
		return edgeOf(f, c.Edge.ID).AckedThrough > 0
	}); err != nil {
		w.Stop()
		t.Fatalf("no segment of %s acknowledged before the first fault: %v", c.Edge.ID, err)
	}
	return w, startMs
}

// TestCoordinatorFaults_LeaderKillEvery kills the raft leader with SIGKILL
// every TRIBUTARY_E2E_LEADER_KILL_INTERVAL for
// TRIBUTARY_E2E_LEADER_KILL_DURATION while the edge writes and ships,
// restarting each killed leader at once; at the end every coordinator must
// answer every acknowledged point exactly once.
func TestCoordinatorFaults_LeaderKillEvery(t *testing.T) {
	interval := envDuration(t, "TRIBUTARY_E2E_LEADER_KILL_INTERVAL", 5*time.Second)
	duration := envDuration(t, "TRIBUTARY_E2E_LEADER_KILL_DURATION", 20*time.Second)
	c := startCluster(t)
	ctx := context.Background()
	w, startMs := startFaultLoad(t, c)
	var recoveries []time.Duration
	var worst time.Duration
	end := time.Now().Add(duration)
	for kill := 1; time.Now().Before(end); kill++ {
		next := time.Now().Add(interval)
		leader, err := c.Leader(ctx, 30*time.Second)
		if err != nil {
			w.Stop()
			t.Fatalf("kill %d: %v", kill, err)
		}
		f, _, err := c.AnyFleet(ctx)
		if err != nil {
			w.Stop()
			t.Fatalf("kill %d: %v", kill, err)
		}
		before := edgeOf(f, c.Edge.ID).AckedThrough
		killedAt := time.Now()
		leader.Kill()
		if err := leader.Start(c.Opts.ReadyTimeout); err != nil {
			w.Stop()
			t.Fatalf("kill %d: restart %s: %v", kill, leader.ID, err)
		}
		if _, err := c.WaitFleet(ctx, 30*time.Second, func(f cluster.Fleet) bool { return edgeOf(f, c.Edge.ID).AckedThrough > before }); err != nil {
			w.Stop()
			t.Fatalf("kill %d: no segment of %s accepted within 30 s of killing leader %s: %v", kill, c.Edge.ID, leader.ID, err)
		}
		rec := time.Since(killedAt)
		recoveries = append(recoveries, rec)
		worst = max(worst, rec)
		t.Logf("kill %d: leader %s (raft %d) killed and restarted; segments accepted again %v after the kill", kill, leader.ID, leader.RaftID, rec.Round(time.Millisecond))
		time.Sleep(time.Until(next))
	}
	st := w.Stop()
	load := requireLoadHeld(t, st, faultLoad)
	tot := checkCloudAfterFaults(t, c, w.Ledger, st, startMs)
	t.Logf("summary: load %.0f points/s, %d leader kills (every %v for %v), %d points acknowledged, over %d coordinators lost %d, duplicated %d, phantom %d; recovery worst %v, all %v",
		load, len(recoveries), interval, duration, st.Acked, tot.checked, tot.lost, tot.dup, tot.phantom, worst.Round(time.Millisecond), roundAll(recoveries))
}

// TestCoordinatorFaults_SnapshotCatchUp stops a follower while the leader
// snapshots and compacts its log past it (--raft-snapshot-entries 32
// --raft-keep-entries 8), restarts it, and requires it to catch up from a
// snapshot sent by the leader (its snapshot index goes past everything it
// had applied) and then to answer every acknowledged point exactly once.
func TestCoordinatorFaults_SnapshotCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	const keep = 8
	c, err := cluster.New(cluster.Options{Bin: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, co := range c.Coordinators {
		co.Args = append(co.Args, "--raft-snapshot-entries", "32", "--raft-keep-entries", fmt.Sprint(keep))
	}
	t.Cleanup(c.KillAll)
	cluster.ReportOnFailure(t, 20, c.Processes()...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, startMs := startFaultLoad(t, c)
	leader, err := c.Leader(ctx, 30*time.Second)
	if err != nil {
		w.Stop()
		t.Fatal(err)
	}
	i := slices.IndexFunc(c.Coordinators, func(co *cluster.Coordinator) bool { return co != leader })
	lag := c.Coordinators[i]
	m, err := cluster.Metrics(ctx, lag.HTTP, "tributary_raft_")
	if err != nil {
		w.Stop()
		t.Fatal(err)
	}
	appliedAtStop := m["tributary_raft_applied_index"]
	lag.Kill()
	stoppedAt := time.Now()
	// Wait until the leader compacted its log past what the stopped member
	// holds: it can only catch up from a snapshot.
	var leaderSnap float64
	for {
		lm, err := cluster.Metrics(ctx, leader.HTTP, "tributary_raft_")
		if err == nil {
			leaderSnap = lm["tributary_raft_snapshot_index"]
			if leaderSnap > appliedAtStop+2*keep {
				break
			}
		}
		if time.Since(stoppedAt) > 3*time.Minute {
			w.Stop()
			t.Fatalf("the leader %s's snapshot index is %v after 3 minutes, not past %v (the stopped member's applied index) + %d", leader.ID, leaderSnap, appliedAtStop, 2*keep)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%s stopped at applied index %v; the leader %s snapshotted through %v (log kept %d entries before it) %v later",
		lag.ID, appliedAtStop, leader.ID, leaderSnap, keep, time.Since(stoppedAt).Round(time.Millisecond))
	restart := time.Now()
	if err := lag.Start(c.Opts.ReadyTimeout); err != nil {
		w.Stop()
		t.Fatal(err)
	}
	var got map[string]float64
	for {
		got, err = cluster.Metrics(ctx, lag.HTTP, "tributary_raft_")
		if err == nil && got["tributary_raft_snapshot_index"] >= leaderSnap && got["tributary_raft_snapshots_restored_total"] >= 1 {
			break
		}
		if time.Since(restart) > time.Minute {
			w.Stop()
			t.Fatalf("%s did not restore a snapshot from the leader within a minute of its restart (snapshot index %v, restored %v, want index ≥ %v): %v",
				lag.ID, got["tributary_raft_snapshot_index"], got["tributary_raft_snapshots_restored_total"], leaderSnap, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	caughtUp := time.Since(restart)
	t.Logf("%s restored a snapshot at index %v (restored %v times; it had applied %v) %v after its restart",
		lag.ID, got["tributary_raft_snapshot_index"], got["tributary_raft_snapshots_restored_total"], appliedAtStop, caughtUp.Round(time.Millisecond))
	time.Sleep(2 * time.Second) // more segments, applied by the caught-up member from the log
	st := w.Stop()
	load := requireLoadHeld(t, st, faultLoad)
	tot := checkCloudAfterFaults(t, c, w.Ledger, st, startMs)
	t.Logf("summary: load %.0f points/s, 1 follower stopped %v until the leader compacted past it, %d points acknowledged, over %d coordinators lost %d, duplicated %d, phantom %d; snapshot restored %v after restart",
		load, restart.Sub(stoppedAt).Round(time.Millisecond), st.Acked, tot.checked, tot.lost, tot.dup, tot.phantom, caughtUp.Round(time.Millisecond))
}
