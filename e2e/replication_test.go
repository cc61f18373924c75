package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The replication scenarios run one coordinator (TRIBUTARY_E2E_REPL_COORDINATORS
// for more) and one edge that ships to the first coordinator's intake,
// through an in-process fault proxy when the scenario cuts the link. The
// load is replSeries series × replPoints points every replInterval.
const (
	replSeries   = 10
	replPoints   = 10
	replInterval = 50 * time.Millisecond
)

// replTarget is the load the writer is asked to hold, in points/s.
var replTarget = float64(replSeries*replPoints) / replInterval.Seconds()

// replFleet is a running scenario: the fleet, its fault proxy (nil when
// the edge ships directly), the writer, and what the summary reports.
type replFleet struct {
	t          *testing.T
	c          *cluster.Cluster
	proxy      *cluster.FaultProxy
	w          *cluster.Writer
	startMs    int64
	faults     []string
	recoveries []time.Duration
}

// startReplFleet starts the coordinators and the edge (with edgeArgs and a
// short reconnection backoff), optionally behind a fault proxy, and a
// writer that is not started yet. Everything is closed when t ends.
func startReplFleet(t *testing.T, withProxy bool, edgeArgs ...string) *replFleet {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	f := &replFleet{t: t}
	o := cluster.Options{Bin: bin, Dir: t.TempDir(), Coordinators: envInt(t, "TRIBUTARY_E2E_REPL_COORDINATORS", 1),
		EdgeArgs: append([]string{"--replication-backoff-max", "1s"}, edgeArgs...)}
	if withProxy {
		o.EdgeTargets = func(intakes []string) ([]string, error) {
			p, err := cluster.NewFaultProxy("intake-c1", intakes[0])
			if err != nil {
				return nil, err
			}
			f.proxy = p
			return []string{p.Listen}, nil
		}
	}
	c, err := cluster.New(o)
	if f.proxy != nil {
		t.Cleanup(f.proxy.Close)
	}
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	t.Cleanup(c.KillAll)
	cluster.ReportOnFailure(t, 30, c.Processes()...)
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d coordinator(s) and %s ready in %v (edge flags %q)", len(c.Coordinators), c.Edge.ID, time.Since(start).Round(time.Millisecond), o.EdgeArgs)
	f.w, err = cluster.NewWriter(cluster.WriterOptions{Addr: c.Edge.GRPC, Metric: metric,
		Series: replSeries, PointsPerSeries: replPoints, Interval: replInterval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.w.Close() })
	f.startMs = time.Now().UnixMilli() - 1000
	return f
}

// fatal stops the load and fails the test now.
func (f *replFleet) fatal(format string, args ...any) {
	f.t.Helper()
	f.w.Stop()
	f.t.Fatalf(format, args...)
}

// startLoad starts the writer and waits until a segment is acknowledged,
// so that the faults act on a link that worked.
func (f *replFleet) startLoad() {
	f.t.Helper()
	f.w.Start()
	if _, err := f.c.WaitFleet(context.Background(), 30*time.Second, func(fl cluster.Fleet) bool {
		return edgeOf(fl, f.c.Edge.ID).AckedThrough > 0
	}); err != nil {
		f.fatal("no segment of %s acknowledged before the first fault: %v", f.c.Edge.ID, err)
	}
}

// stopLoad stops the writer, logs the load and fails the run as INVALID
// when the writer did not hold 90% of its target (written points, in doubt
// included: a write refused by a killed edge still kept the pace).
func (f *replFleet) stopLoad() cluster.WriterStats {
	f.t.Helper()
	st := f.w.Stop()
	written := float64(st.Acked+st.InDoubt) / st.Elapsed.Seconds()
	f.t.Logf("load: %d requests in %v, %.0f points/s written (target %.0f), %.0f points/s acknowledged; %d points acknowledged, %d in doubt, %d requests failed; slowest request %v",
		st.Requests, st.Elapsed.Round(time.Millisecond), written, replTarget, st.PointsPerSecond(), st.Acked, st.InDoubt, st.Failed, st.MaxLatency.Round(time.Millisecond))
	if written < 0.9*replTarget {
		f.t.Errorf("INVALID run: the writer held %.0f points/s, below 90%% of its target %.0f", written, replTarget)
	}
	if st.Acked == 0 {
		f.fatal("no point was acknowledged")
	}
	return st
}

// metrics scrapes the edge's replication metrics.
func (f *replFleet) metrics() map[string]float64 {
	f.t.Helper()
	m, err := f.c.EdgeMetrics(context.Background(), "tributary_replication_")
	if err != nil {
		f.fatal("%v", err)
	}
	return m
}

func (f *replFleet) node() cluster.FleetNode {
	f.t.Helper()
	fl, _, err := f.c.AnyFleet(context.Background())
	if err != nil {
		f.fatal("%v", err)
	}
	return edgeOf(fl, f.c.Edge.ID)
}

// waitAckedPast waits until the catalog's acked_through for the edge
// passes seq and returns how long that took from since.
func (f *replFleet) waitAckedPast(seq uint64, since time.Time, timeout time.Duration, what string) time.Duration {
	f.t.Helper()
	fl, err := f.c.WaitFleet(context.Background(), timeout, func(fl cluster.Fleet) bool {
		return edgeOf(fl, f.c.Edge.ID).AckedThrough > seq
	})
	if err != nil {
		n := edgeOf(fl, f.c.Edge.ID)
		f.fatal("%s: acked_through of %s still %d (want > %d) after %v; edge gauges %v: %v", what, f.c.Edge.ID, n.AckedThrough, seq, timeout, f.metrics(), err)
	}
	d := time.Since(since)
	f.recoveries = append(f.recoveries, d)
	return d
}

// gapPoints sums the known points of n's gaps.
func gapPoints(n cluster.FleetNode) int64 {
	var p int64
	for _, g := range n.Gaps {
		if g.Points > 0 {
			p += g.Points
		}
	}
	return p
}

// waitDrained waits until the edge has nothing left to ship: its backlog
// is empty, its acked_through is the catalog's, the catalog accounts for
// at least want points (held or, with a known count, in a gap) and, when
// want is positive, its watermark has reached the newest acknowledged
// timestamp.
func (f *replFleet) waitDrained(want int64, timeout time.Duration) cluster.FleetNode {
	f.t.Helper()
	start := time.Now()
	var m map[string]float64
	// The last points may wait in the open segment until its age seals it
	// (the node's flush tick, up to a second later, does). The cloud's
	// point count alone cannot tell: points of writes in doubt that were
	// stored count too, and can make up for the last segment's points
	// while it is still open on the edge. So the edge counts as drained
	// only once the cloud's watermark has reached the newest acknowledged
	// timestamp (every point at or before it is on the replicas), and not
	// before the segment age has passed since the load stopped.
	sealed := start.Add(f.c.Opts.WALSegmentAge + time.Second)
	newest := f.w.Ledger.NewestAckedMs()
	if want <= 0 {
		newest = 0 // the caller expects nothing (the edge may have lost its newest points)
	}
	fl, err := f.c.WaitFleet(context.Background(), timeout, func(fl cluster.Fleet) bool {
		if time.Now().Before(sealed) {
			return false
		}
		n := edgeOf(fl, f.c.Edge.ID)
		var err error
		if m, err = f.c.EdgeMetrics(context.Background(), "tributary_replication_"); err != nil {
			return false
		}
		return n.AckedThrough > 0 && m["tributary_replication_backlog_segments"] == 0 &&
			uint64(m["tributary_replication_acked_through_seq"]) == n.AckedThrough &&
			int64(n.HeldPoints)+gapPoints(n) >= want && n.WatermarkTimeMs >= newest
	})
	n := edgeOf(fl, f.c.Edge.ID)
	if err != nil {
		f.fatal("%s not drained after %v: cloud holds %d points (gaps %+v), want %d; watermark %d, newest acknowledged %d; acked_through %d, held %+v; edge gauges %v: %v",
			f.c.Edge.ID, timeout, n.HeldPoints, n.Gaps, want, n.WatermarkTimeMs, newest, n.AckedThrough, n.Held, m, err)
	}
	f.t.Logf("drained %v after the load stopped: cloud holds %d points of %s, gaps %+v, acked_through %d, watermark %d (newest acknowledged %d)",
		time.Since(start).Round(time.Millisecond), n.HeldPoints, f.c.Edge.ID, n.Gaps, n.AckedThrough, n.WatermarkTimeMs, newest)
	return n
}

// cloudCheck is what the coordinators answered, summed over them.
type cloudCheck struct {
	lost, inGap, dup, phantom int
}

// checkCloud kills the edge (so that answers come from the replicas
// alone) and queries every coordinator for the ledger's points. A lost
// point counts as inGap when it lies in the time span of one of gaps;
// every other fault fails the test.
func (f *replFleet) checkCloud(gaps []cluster.FleetGap) cloudCheck {
	f.t.Helper()
	f.c.Edge.Kill()
	var out cloudCheck
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
		inGap := 0
		var outside []string
		for series, ts := range r.LostTimes {
			for _, t := range ts {
				if slices.ContainsFunc(gaps, func(g cluster.FleetGap) bool { return t >= g.MinTimeMs && t <= g.MaxTimeMs }) {
					inGap++
				} else if len(outside) < 5 {
					outside = append(outside, fmt.Sprintf("%s@%d", series, t))
				}
			}
		}
		if r.Lost > inGap {
			f.t.Errorf("%s lost %d acknowledged points outside every declared gap (e.g. %v): %v", co.ID, r.Lost-inGap, outside, r)
		}
		if r.Duplicated+r.Phantom+r.WrongValue > 0 {
			f.t.Errorf("%s answers wrong: %v", co.ID, r)
		}
		out.lost += r.Lost - inGap
		out.inGap += inGap
		out.dup += r.Duplicated
		out.phantom += r.Phantom + r.WrongValue
	}
	if out.lost > 0 {
		f.explainLoss()
	}
	return out
}

// explainLoss runs after the cloud lost acknowledged points: it says
// whether the edge's own store still holds them (a replication fault) or
// not (an edge durability fault), and copies the data directories to
// TRIBUTARY_E2E_KEEP when that is set, for a post-mortem.
func (f *replFleet) explainLoss() {
	f.t.Helper()
	if keep := os.Getenv("TRIBUTARY_E2E_KEEP"); keep != "" {
		dst := filepath.Join(keep, strings.ReplaceAll(f.t.Name(), "/", "_"))
		if out, err := exec.Command("cp", "-a", f.c.Opts.Dir, dst).CombinedOutput(); err != nil {
			f.t.Logf("keeping the data directories: %v: %s", err, out)
		} else {
			f.t.Logf("data directories kept in %s", dst)
		}
	}
	if err := f.c.Edge.Start(f.c.Opts.ReadyTimeout); err != nil {
		f.t.Logf("restarting %s to ask its own store: %v", f.c.Edge.ID, err)
		return
	}
	defer f.c.Edge.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cluster.Check(ctx, f.c.Edge.GRPC, metric, f.w.Ledger, f.startMs, time.Now().Add(time.Hour).UnixMilli())
	if err != nil {
		f.t.Logf("asking %s's own store: %v", f.c.Edge.ID, err)
		return
	}
	f.t.Logf("%s's own store after the loss (lost there too: a durability fault on the edge; held there: a replication fault): %v", f.c.Edge.ID, r)
}

// summary logs the line every scenario ends with.
func (f *replFleet) summary(st cluster.WriterStats, cc cloudCheck) {
	f.t.Helper()
	f.t.Logf("summary: load %.0f points/s written of %.0f targeted (%.0f acknowledged/s); faults: %s; %d points acknowledged; summed over %d coordinator(s): lost %d, in declared gaps %d, duplicated %d, phantom %d; recovery %v",
		float64(st.Acked+st.InDoubt)/st.Elapsed.Seconds(), replTarget, st.PointsPerSecond(),
		strings.Join(f.faults, ", "), st.Acked, len(f.c.Coordinators), cc.lost, cc.inGap, cc.dup, cc.phantom, roundAll(f.recoveries))
}

// requireHeldWithinWritten requires the cloud to hold no more points than
// were written (a resend stored twice would exceed it).
func (f *replFleet) requireHeldWithinWritten(n cluster.FleetNode, st cluster.WriterStats) {
	f.t.Helper()
	if n.HeldPoints > uint64(st.Acked+st.InDoubt) {
		f.t.Errorf("cloud holds %d points of %s, only %d were written (%d acknowledged)", n.HeldPoints, f.c.Edge.ID, st.Acked+st.InDoubt, st.Acked)
	}
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 20s", name, s)
	}
	return d
}

// TestReplication_EdgeKillNine kills the edge with SIGKILL while it
// ingests and ships, restarts it on the same data directory, repeats; then
// requires the cloud to hold every acknowledged point exactly once.
func TestReplication_EdgeKillNine(t *testing.T) {
	kills := envInt(t, "TRIBUTARY_E2E_EDGE_KILLS", 5)
	f := startReplFleet(t, false)
	f.startLoad()
	for i := range kills {
		time.Sleep(1500 * time.Millisecond)
		killedAt := time.Now()
		f.c.Edge.Kill()
		if err := f.c.Edge.Start(f.c.Opts.ReadyTimeout); err != nil {
			f.fatal("kill %d: restart %s: %v", i+1, f.c.Edge.ID, err)
		}
		down := time.Since(killedAt)
		// A segment in flight at the kill may be acknowledged to nobody;
		// recovery is a segment acknowledged after the restart.
		rec := f.waitAckedPast(f.node().AckedThrough, killedAt, 30*time.Second, fmt.Sprintf("kill %d", i+1))
		f.faults = append(f.faults, fmt.Sprintf("kill -9 #%d (down %v)", i+1, down.Round(time.Millisecond)))
		t.Logf("kill %d: %s down %v; a segment acknowledged again %v after the kill", i+1, f.c.Edge.ID, down.Round(time.Millisecond), rec.Round(time.Millisecond))
	}
	st := f.stopLoad()
	n := f.waitDrained(int64(st.Acked), 60*time.Second)
	if len(n.Gaps) > 0 {
		t.Errorf("%s declared gaps: %+v", f.c.Edge.ID, n.Gaps)
	}
	f.requireHeldWithinWritten(n, st)
	f.summary(st, f.checkCloud(nil))
}

// TestReplication_LinkCutAndHeal cuts the link between the edge and the
// intake (refused dials, open connections closed) for
// TRIBUTARY_E2E_OUTAGE while the edge ingests, heals it and requires the
// backlog to drain with every acknowledged point in the cloud once.
func TestReplication_LinkCutAndHeal(t *testing.T) {
	outage := envDuration(t, "TRIBUTARY_E2E_OUTAGE", 20*time.Second)
	f := startReplFleet(t, true)
	f.startLoad()
	time.Sleep(time.Second)
	f.proxy.Cut()
	time.Sleep(outage)
	m := f.metrics()
	if m["tributary_replication_connected"] != 0 || m["tributary_replication_backlog_segments"] == 0 {
		f.fatal("after a %v cut the edge is connected or has no backlog: %v", outage, m)
	}
	sealed := uint64(m["tributary_replication_newest_sealed_seq"])
	healAt := time.Now()
	if err := f.proxy.Heal(); err != nil {
		f.fatal("%v", err)
	}
	rec := f.waitAckedPast(sealed-1, healAt, 60*time.Second, "after healing")
	f.faults = append(f.faults, fmt.Sprintf("link cut %v (backlog %v segments)", outage, m["tributary_replication_backlog_segments"]))
	t.Logf("backlog of %v segments (through seq %d) acknowledged %v after healing", m["tributary_replication_backlog_segments"], sealed, rec.Round(time.Millisecond))
	time.Sleep(time.Second)
	st := f.stopLoad()
	if st.Failed > 0 {
		t.Errorf("%d writes failed (the edge writes locally; the link does not matter): %v", st.Failed, st.FirstErr)
	}
	n := f.waitDrained(int64(st.Acked), 60*time.Second)
	if len(n.Gaps) > 0 {
		t.Errorf("%s declared gaps: %+v", f.c.Edge.ID, n.Gaps)
	}
	f.requireHeldWithinWritten(n, st)
	f.summary(st, f.checkCloud(nil))
}

// TestReplication_MidSegmentCutAndLostAcks cuts the upstream after a few
// KiB (in the middle of a segment) several times, then drops the acks of
// segments the coordinator stored, and requires the cloud to hold every
// acknowledged point exactly once (the intake stores a resent segment
// once: held points equal acknowledged points).
func TestReplication_MidSegmentCutAndLostAcks(t *testing.T) {
	cuts := envInt(t, "TRIBUTARY_E2E_CUTS", 3)
	f := startReplFleet(t, true, "--replication-ack-timeout", "3s")
	f.startLoad()
	for i := range cuts {
		before, sessions := f.node().AckedThrough, f.metrics()["tributary_replication_sessions_total"]
		if err := f.proxy.AddToxic("cut", "limit_data", "upstream", map[string]any{"bytes": 6000}); err != nil {
			f.fatal("%v", err)
		}
		time.Sleep(3 * time.Second)
		if err := f.proxy.RemoveToxic("cut"); err != nil {
			f.fatal("%v", err)
		}
		healAt := time.Now()
		streams := f.metrics()["tributary_replication_sessions_total"] - sessions
		rec := f.waitAckedPast(before, healAt, 30*time.Second, fmt.Sprintf("cut %d", i+1))
		f.faults = append(f.faults, fmt.Sprintf("upstream cut after 6000 B for 3s (%v streams)", streams))
		t.Logf("cut %d: %v streams opened while upstream connections were cut after 6000 bytes; acknowledged again %v after removing the toxic", i+1, streams, rec.Round(time.Millisecond))
	}
	// Drop every ack (and anything else the coordinator sends) while the
	// edge keeps sending: the coordinator stores segments the edge does
	// not know are stored; the edge's ack timeout ends the stream.
	timeouts := f.c.Edge.CountInLog("ack timeout")
	fleetBefore, edgeBefore := f.node().AckedThrough, uint64(f.metrics()["tributary_replication_acked_through_seq"])
	if err := f.proxy.AddToxic("acks", "timeout", "downstream", map[string]any{"timeout": 0}); err != nil {
		f.fatal("%v", err)
	}
	time.Sleep(5 * time.Second)
	fleetDuring, edgeDuring := f.node().AckedThrough, uint64(f.metrics()["tributary_replication_acked_through_seq"])
	if err := f.proxy.RemoveToxic("acks"); err != nil {
		f.fatal("%v", err)
	}
	healAt := time.Now()
	rec := f.waitAckedPast(fleetDuring, healAt, 30*time.Second, "after the acks came back")
	f.faults = append(f.faults, fmt.Sprintf("acks dropped 5s (cloud acked_through %d→%d, edge %d→%d)", fleetBefore, fleetDuring, edgeBefore, edgeDuring))
	t.Logf("acks dropped for 5s: the cloud's acked_through went %d→%d, the edge's %d→%d; %d ack-timeout log lines; acknowledged again %v after the toxic went",
		fleetBefore, fleetDuring, edgeBefore, edgeDuring, f.c.Edge.CountInLog("ack timeout")-timeouts, rec.Round(time.Millisecond))
	time.Sleep(time.Second)
	st := f.stopLoad()
	if st.Failed > 0 {
		t.Errorf("%d writes failed: %v", st.Failed, st.FirstErr)
	}
	n := f.waitDrained(int64(st.Acked), 60*time.Second)
	if len(n.Gaps) > 0 {
		t.Errorf("%s declared gaps: %+v", f.c.Edge.ID, n.Gaps)
	}
	f.requireHeldWithinWritten(n, st)
	if st.InDoubt == 0 && n.HeldPoints != uint64(st.Acked) {
		t.Errorf("cloud holds %d points of %s, %d were acknowledged (a resent segment stored twice, or one missing)", n.HeldPoints, f.c.Edge.ID, st.Acked)
	}
	f.summary(st, f.checkCloud(nil))
}

// TestReplication_HalfOpenLink makes the link swallow everything in both
// directions without closing (a half-open TCP connection); the edge's ack
// timeout (3s) must end the stream, and once the link passes data again
// the edge must reconnect and ship everything.
func TestReplication_HalfOpenLink(t *testing.T) {
	hold := envDuration(t, "TRIBUTARY_E2E_HALF_OPEN", 8*time.Second)
	f := startReplFleet(t, true, "--replication-ack-timeout", "3s")
	f.startLoad()
	time.Sleep(time.Second)
	timeouts := f.c.Edge.CountInLog("ack timeout")
	before := f.node().AckedThrough
	for _, dir := range []string{"upstream", "downstream"} {
		if err := f.proxy.AddToxic("blackhole-"+dir, "timeout", dir, map[string]any{"timeout": 0}); err != nil {
			f.fatal("%v", err)
		}
	}
	time.Sleep(hold)
	detected := f.c.Edge.CountInLog("ack timeout") - timeouts
	during := f.node().AckedThrough
	for _, dir := range []string{"upstream", "downstream"} {
		if err := f.proxy.RemoveToxic("blackhole-" + dir); err != nil {
			f.fatal("%v", err)
		}
	}
	healAt := time.Now()
	if detected == 0 {
		t.Errorf("the edge logged no ack timeout during %v of a half-open link", hold)
	}
	if during > before+1 {
		// One segment may have been in flight when the toxics went in.
		t.Errorf("acked_through moved %d→%d through a link that passes nothing", before, during)
	}
	rec := f.waitAckedPast(during, healAt, 30*time.Second, "after the link passed data again")
	f.faults = append(f.faults, fmt.Sprintf("half-open link %v (%d ack timeouts)", hold, detected))
	t.Logf("half-open for %v: %d ack-timeout log lines; acknowledged again %v after the link came back", hold, detected, rec.Round(time.Millisecond))
	time.Sleep(time.Second)
	st := f.stopLoad()
	if st.Failed > 0 {
		t.Errorf("%d writes failed: %v", st.Failed, st.FirstErr)
	}
	n := f.waitDrained(int64(st.Acked), 60*time.Second)
	if len(n.Gaps) > 0 {
		t.Errorf("%s declared gaps: %+v", f.c.Edge.ID, n.Gaps)
	}
	f.requireHeldWithinWritten(n, st)
	f.summary(st, f.checkCloud(nil))
}

// TestReplication_BacklogOverflow cuts the link of an edge with a tiny
// replication budget until the backlog overflows, heals it, and requires
// every acknowledged point to be in the cloud or counted in a declared
// gap: with keep-in-store the gap's points stay on the edge and are then
// backfilled from its store until the cloud holds every one of them; with
// drop-oldest the edge counts them as dropped and they are not shipped.
func TestReplication_BacklogOverflow(t *testing.T) {
	for _, tc := range []struct{ policy, reason, counter string }{
		{"keep-in-store", "backlog-overflow", "tributary_replication_gap_points"},
		{"drop-oldest", "dropped", "tributary_replication_dropped_points"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			f := startReplFleet(t, true, "--wal-segment-bytes", "16384", "--replication-budget-bytes", "65536",
				"--replication-overflow", tc.policy)
			f.startLoad()
			f.proxy.Cut()
			cutAt := time.Now()
			deadline := cutAt.Add(30 * time.Second)
			for f.metrics()[tc.counter] == 0 {
				if time.Now().After(deadline) {
					f.fatal("no overflow 30s into the cut: %v", f.metrics())
				}
				time.Sleep(200 * time.Millisecond)
			}
			time.Sleep(time.Second)
			overflowAfter := time.Since(cutAt)
			healAt := time.Now()
			if err := f.proxy.Heal(); err != nil {
				f.fatal("%v", err)
			}
			sealed := uint64(f.metrics()["tributary_replication_newest_sealed_seq"])
			rec := f.waitAckedPast(sealed-1, healAt, 60*time.Second, "after healing")
			f.faults = append(f.faults, fmt.Sprintf("link cut %v until the budget overflowed (%s)", overflowAfter.Round(time.Millisecond), tc.policy))
			time.Sleep(time.Second)
			st := f.stopLoad()
			if st.Failed > 0 {
				t.Errorf("%d writes failed: %v", st.Failed, st.FirstErr)
			}
			n := f.waitDrained(int64(st.Acked), 60*time.Second)
			m := f.metrics()
			if tc.policy == "keep-in-store" {
				f.checkBackfilled(st, m)
				return
			}
			var gapPts int64
			for _, g := range n.Gaps {
				if g.Reason != tc.reason || g.Points < 0 {
					t.Errorf("gap %+v: want reason %s with a point count", g, tc.reason)
				}
				gapPts += max(g.Points, 0)
			}
			if gapPts == 0 {
				f.fatal("the catalog records no gap after an overflow: %+v (edge gauges %v)", n.Gaps, m)
			}
			t.Logf("healed after %v: recovered %v; catalog gaps %+v (%d points); edge gauges %v", overflowAfter.Round(time.Millisecond), rec.Round(time.Millisecond), n.Gaps, gapPts, m)
			if got := int64(n.HeldPoints) + gapPts; st.InDoubt == 0 && got != int64(st.Acked) {
				t.Errorf("cloud holds %d points + %d in gaps = %d, %d were acknowledged", n.HeldPoints, gapPts, got, st.Acked)
			}
			if m["tributary_replication_backfilled_points_total"] != 0 {
				t.Errorf("dropped points were backfilled: %v", m)
			}
			if int64(m[tc.counter]) != gapPts {
				t.Errorf("edge counts %v in %s, the catalog's gaps hold %d", m[tc.counter], tc.counter, gapPts)
			}
			var gapSegs uint64
			for _, g := range n.Gaps {
				gapSegs += g.Segments
			}
			cc := f.checkCloud(n.Gaps)
			// The dropped points are not shipped, so each coordinator misses
			// the gaps' points, except those of one segment in flight when
			// the link was cut: a replica may have stored it while its
			// catalog record and ack were lost with the stream (the catalog
			// counts it in the gap; the replica still answers its points).
			// Segments are cut by size, so one holds about gapPts/gapSegs.
			want := gapPts * int64(len(f.c.Coordinators))
			inFlight := int64(len(f.c.Coordinators)) * (gapPts*5/4/int64(max(gapSegs, 1)) + 1)
			if got := int64(cc.inGap); got > want || got < want-inFlight {
				t.Errorf("the coordinators miss %d points inside the gaps, the gaps count %d each (%d segments)", cc.inGap, gapPts, gapSegs)
			} else if got < want {
				t.Logf("the coordinators answer %d points of the gaps: a segment stored by a replica as the link was cut", want-got)
			}
			f.summary(st, cc)
		})
	}
}

// checkBackfilled is the end of the keep-in-store overflow: the gap's
// points stayed in the edge's store and are backfilled from there, so the
// catalog's gaps are cut, it holds every acknowledged point, and every
// coordinator answers each of them once (lost 0, in gaps 0, duplicated 0,
// phantom 0).
func (f *replFleet) checkBackfilled(st cluster.WriterStats, m map[string]float64) {
	t := f.t
	t.Helper()
	declared := m["tributary_replication_gap_points"]
	if declared == 0 {
		f.fatal("the edge declared no gap points after an overflow: %v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	r, err := cluster.Check(ctx, f.c.Edge.GRPC, metric, f.w.Ledger, f.startMs, time.Now().Add(time.Hour).UnixMilli())
	cancel()
	if err != nil {
		f.fatal("query %s: %v", f.c.Edge.ID, err)
	}
	t.Logf("%s itself: %v", f.c.Edge.ID, r)
	if !r.OK() {
		t.Errorf("%s does not answer its acknowledged points (the gap's points must stay in its store): %v", f.c.Edge.ID, r)
	}
	start := time.Now()
	var em map[string]float64
	fl, err := f.c.WaitFleet(context.Background(), 60*time.Second, func(fl cluster.Fleet) bool {
		var err error
		if em, err = f.c.EdgeMetrics(context.Background(), "tributary_replication_"); err != nil {
			return false
		}
		n := edgeOf(fl, f.c.Edge.ID)
		return len(n.Gaps) == 0 && em["tributary_replication_backfilled_points_total"] >= declared && int64(n.HeldPoints) >= int64(st.Acked)
	})
	n := edgeOf(fl, f.c.Edge.ID)
	if err != nil {
		f.fatal("gap not backfilled after 60s: catalog gaps %+v, holds %d points of %d acknowledged; edge gauges %v: %v",
			n.Gaps, n.HeldPoints, st.Acked, em, err)
	}
	f.recoveries = append(f.recoveries, time.Since(start))
	t.Logf("backfilled %v points in %v: catalog holds %d points, acked_through %d, no gap", declared, time.Since(start).Round(time.Millisecond), n.HeldPoints, n.AckedThrough)
	if got := em["tributary_replication_backfilled_points_total"]; got != declared {
		t.Errorf("edge backfilled %v points, declared %v in gaps", got, declared)
	}
	if st.InDoubt == 0 && int64(n.HeldPoints) != int64(st.Acked) {
		t.Errorf("catalog holds %d points after the backfill, %d were acknowledged", n.HeldPoints, st.Acked)
	}
	cc := f.checkCloud(nil)
	if cc.lost+cc.inGap+cc.dup+cc.phantom != 0 {
		t.Errorf("after the backfill the coordinators lost %d, in gaps %d, duplicated %d, phantom %d", cc.lost, cc.inGap, cc.dup, cc.phantom)
	}
	f.summary(st, cc)
}

// TestReplication_CorruptSegmentOnDisk damages a sealed segment the cloud
// does not hold while the edge is down (after its samples were flushed to
// the edge's store); the restarted edge must quarantine it, declare it a
// MISSING gap and re-ship its points from its store, so that the cloud
// ends up holding every acknowledged point once and nothing corrupt.
func TestReplication_CorruptSegmentOnDisk(t *testing.T) {
	lostSegmentScenario(t, "corrupt", true)
}

// TestReplication_CorruptUnflushedSegmentStaysAGap damages a sealed
// segment whose samples were never flushed to the edge's store (chunks of
// 65536 samples never close during the test) and kills the edge: its
// points are gone from the edge too. The restarted edge must declare a
// MISSING gap with the segment's count and time span (from its summary),
// mark it unrecoverable and re-ship nothing for it; the cloud misses
// exactly those points, all inside the gap, and nothing else.
func TestReplication_CorruptUnflushedSegmentStaysAGap(t *testing.T) {
	lostSegmentScenario(t, "corrupt", false)
}

// TestReplication_SegmentFileVanishes removes a sealed segment file the
// cloud does not hold while the edge is down (after its samples were
// flushed); the restarted edge knows its count and time span from the
// summary it recorded when the segment was sealed, and re-ships its points
// from its store: the cloud holds every acknowledged point once.
func TestReplication_SegmentFileVanishes(t *testing.T) {
	lostSegmentScenario(t, "vanished", true)
}

// lostSegmentScenario: link cut, 3 segments sealed, the load stops, the
// edge flushes its head (8-sample chunks) and its store if flushed, SIGKILL, one sealed
// unshipped segment (not the newest) is damaged or removed, restart,
// heal. If flushed, the gap must be backfilled from the edge's store
// (lost = duplicated = phantom = 0 on every coordinator, no gap left in
// the catalog); if not, it must stay a gap with the segment's count.
func lostSegmentScenario(t *testing.T, how string, flushed bool) {
	args := []string{"--head-chunk-samples", "65536"}
	if flushed {
		// 8-sample chunks leave the head, and every flush that releases
		// WAL also flushes the store: flushes write the store without
		// RocksDB's WAL, so a point is in the store for good (and the
		// segment holding it may be lost) only after a store flush.
		args = []string{"--head-chunk-samples", "8", "--store-flush-wal-bytes", "1"}
	}
	f := startReplFleet(t, true, args...)
	f.startLoad()
	f.proxy.Cut()
	sealed0 := uint64(f.metrics()["tributary_replication_newest_sealed_seq"])
	deadline := time.Now().Add(30 * time.Second)
	for uint64(f.metrics()["tributary_replication_newest_sealed_seq"]) < sealed0+3 {
		if time.Now().After(deadline) {
			f.fatal("the edge sealed no 3 segments in 30s: %v", f.metrics())
		}
		time.Sleep(200 * time.Millisecond)
	}
	st := f.stopLoad()
	acked := f.node().AckedThrough
	if flushed {
		f.waitHeadFlushed()
	}
	f.c.Edge.Kill()

	walDir := filepath.Join(f.c.Opts.Dir, f.c.Edge.ID, "wal")
	victim, info := pickUnshippedSegment(t, walDir, acked)
	switch how {
	case "corrupt":
		b, err := os.ReadFile(victim)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			b[len(b)/2+i] ^= 0xA5
		}
		if err := os.WriteFile(victim, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f.faults = append(f.faults, fmt.Sprintf("link cut, kill -9, 8 bytes flipped in sealed segment %d (%d points)", info.Seq, info.Points))
	case "vanished":
		if err := os.Remove(victim); err != nil {
			t.Fatal(err)
		}
		f.faults = append(f.faults, fmt.Sprintf("link cut, kill -9, sealed segment %d (%d points) removed", info.Seq, info.Points))
	}
	t.Logf("%s %s (seq %d, %d points in [%d, %d]; the cloud acked through %d)",
		how, filepath.Base(victim), info.Seq, info.Points, info.MinT, info.MaxT, acked)

	if err := f.c.Edge.Start(f.c.Opts.ReadyTimeout); err != nil {
		t.Fatal(err)
	}
	if how == "corrupt" {
		q, err := os.ReadDir(filepath.Join(walDir, "quarantine"))
		if err != nil || len(q) == 0 {
			t.Fatalf("no file in %s/quarantine after restarting on a damaged segment (%v)", walDir, err)
		}
	}
	healAt := time.Now()
	if err := f.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	f.waitAckedPast(info.Seq, healAt, 60*time.Second, "after healing")
	if !flushed {
		f.checkUnrecoverable(st, info)
		return
	}
	f.requireHeldWithinWritten(f.waitDrained(int64(st.Acked), 60*time.Second), st)
	m := f.metrics()
	if got := int64(m["tributary_replication_backfilled_points_total"]); got != info.Points {
		t.Errorf("edge backfilled %d points; the lost segment held %d (gauges %v)", got, info.Points, m)
	}
	if v, ok := m["tributary_replication_unrecoverable_points"]; !ok || v != 0 {
		t.Errorf("edge reports %v unrecoverable points (exported: %v); the lost segment was flushed", v, ok)
	}
	f.checkBackfilled(st, m)
}

// checkUnrecoverable is the end of a scenario whose lost segment's points
// were only in the killed edge's head: the catalog keeps a MISSING gap
// over exactly that segment with its count and span, the edge reports
// those points unrecoverable and backfills nothing, held + gap points ==
// acknowledged, and the coordinators miss exactly those points, all
// inside the gap.
func (f *replFleet) checkUnrecoverable(st cluster.WriterStats, info wal.SegmentInfo) {
	t := f.t
	t.Helper()
	n := f.waitDrained(int64(st.Acked), 60*time.Second)
	if len(n.Gaps) != 1 {
		f.fatal("catalog gaps %+v; want one over segment %d", n.Gaps, info.Seq)
	}
	g := n.Gaps[0]
	if g.AfterSeq != info.PrevSeq || g.ThroughSeq != info.Seq || g.Reason != "missing" || g.Points != info.Points ||
		g.MinTimeMs != info.MinT || g.MaxTimeMs != info.MaxT {
		t.Errorf("catalog gap %+v; want missing (%d, %d] with %d points in [%d, %d]", g, info.PrevSeq, info.Seq, info.Points, info.MinT, info.MaxT)
	}
	if st.InDoubt == 0 && int64(n.HeldPoints)+g.Points != int64(st.Acked) {
		t.Errorf("cloud holds %d points + %d in the gap; %d were acknowledged", n.HeldPoints, g.Points, st.Acked)
	}
	m := f.metrics()
	if int64(m["tributary_replication_unrecoverable_points"]) != info.Points || m["tributary_replication_backfilled_points_total"] != 0 {
		t.Errorf("edge gauges %v; want %d unrecoverable points and none backfilled", m, info.Points)
	}
	// The edge lost them too: replaying its WAL could not bring back the
	// samples of a quarantined segment.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	r, err := cluster.Check(ctx, f.c.Edge.GRPC, metric, f.w.Ledger, f.startMs, time.Now().Add(time.Hour).UnixMilli())
	cancel()
	if err != nil {
		f.fatal("query %s: %v", f.c.Edge.ID, err)
	}
	t.Logf("%s itself: %v", f.c.Edge.ID, r)
	if int64(r.Lost) != info.Points || r.Duplicated+r.Phantom+r.WrongValue > 0 {
		t.Errorf("%s answers %v; want exactly the %d points of the quarantined segment lost", f.c.Edge.ID, r, info.Points)
	}
	cc := f.checkCloud(n.Gaps)
	if cc.lost != 0 || int64(cc.inGap) != info.Points*int64(len(f.c.Coordinators)) {
		t.Errorf("the coordinators miss %d points inside the gap and %d outside; want %d inside each", cc.inGap, cc.lost, info.Points)
	}
	f.summary(st, cc)
}

// waitHeadFlushed waits until the edge's head holds no more than the open
// chunks (at most 8 samples a series, all from the last write, which
// carried replPoints > 8 a series): every earlier sample is in its store
// and the flushed-through record covers every sealed segment but the one
// holding them. It then waits one more flush interval, so that the record
// written after the last flush is there too.
func (f *replFleet) waitHeadFlushed() {
	f.t.Helper()
	conn, err := grpc.NewClient(f.c.Edge.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.fatal("%v", err)
	}
	defer conn.Close()
	qc := pb.NewQueryServiceClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	var head int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := qc.Status(ctx, &pb.StatusRequest{})
		cancel()
		if err == nil {
			if head = r.GetHeadSamples(); head <= 8*replSeries {
				break
			}
		}
		if time.Now().After(deadline) {
			f.fatal("the edge's head still holds %d samples 30s after the load stopped (%v)", head, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond)
	f.t.Logf("edge head flushed down to %d samples", head)
}

// pickUnshippedSegment returns a sealed, verified segment in walDir above
// ackedThrough that is not the newest sealed one, with its description.
func pickUnshippedSegment(t *testing.T, walDir string, ackedThrough uint64) (string, wal.SegmentInfo) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(walDir, "*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	var cands []wal.SegmentInfo
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		info, err := wal.VerifySegment(p, b, nil)
		if err != nil || info.Seq <= ackedThrough || info.Points == 0 || !bytes.HasPrefix(b, []byte("TWAL")) {
			continue // the open segment, or one the cloud holds
		}
		info.Path = p
		cands = append(cands, info)
	}
	if len(cands) < 2 {
		t.Fatalf("fewer than 2 sealed segments above %d in %s (%d files)", ackedThrough, walDir, len(names))
	}
	c := cands[len(cands)-2]
	return c.Path, c
}
