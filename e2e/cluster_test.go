package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
)

// bin is the tributary binary the tests run, built by TestMain.
var bin string

// TestMain builds the binary once per run (or takes TRIBUTARY_E2E_BIN)
// and checks that no test left a goroutine behind.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin = os.Getenv("TRIBUTARY_E2E_BIN")
	if bin == "" && !testing.Short() {
		dir, err := os.MkdirTemp("", "tributary-e2e-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: make a directory for the binary:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		if bin, err = build(dir); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	code := m.Run()
	// Every test kills its processes and closes its connections. NB:
	// toxiproxy v2.12.0 leaves a link's pipe goroutines blocked on a
	// channel send after its proxy is closed (its own leak, not ours).
	if err := goleak.Find(goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe")); code == 0 && err != nil {
		fmt.Fprintln(os.Stderr, "e2e: goroutines left behind:", err)
		return 1
	}
	return code
}

// build builds ./cmd/tributary of this module into dir.
func build(dir string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if err != nil || strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return "", fmt.Errorf("find the module root with go env GOMOD (%q): %v", gomod, err)
	}
	out := filepath.Join(dir, "tributary")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/tributary")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tributary in %s: %v\n%s", root, err, msg)
	}
	return out, nil
}

const metric = "e2e_load"

// startCluster starts three coordinators and edge-1, and kills them when
// the test ends (printing their log tails if it failed).
func startCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	c, err := cluster.New(cluster.Options{Bin: bin, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	cluster.ReportOnFailure(t, 20, c.Processes()...)
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("fleet of %d coordinators and %s ready in %v", len(c.Coordinators), c.Edge.ID, time.Since(start).Round(time.Millisecond))
	return c
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, s)
	}
	return n
}

// edgeOf returns edge's entry of f, or a zero entry.
func edgeOf(f cluster.Fleet, edge string) cluster.FleetNode {
	n, _ := f.Node(edge)
	return n
}

// waitHeld waits until the cloud holds at least want points of the edge
// (every acknowledged point; points of failed writes may add to it) and,
// when l is not nil, until its watermark has reached l's newest
// acknowledged timestamp: the count alone does not prove that the newest
// segment shipped, since stored points of writes in doubt count too.
func waitHeld(t *testing.T, c *cluster.Cluster, l *cluster.Ledger, want int, timeout time.Duration) cluster.FleetNode {
	t.Helper()
	start := time.Now()
	var newest int64
	if l != nil {
		newest = l.NewestAckedMs()
	}
	f, err := c.WaitFleet(context.Background(), timeout, func(f cluster.Fleet) bool {
		n := edgeOf(f, c.Edge.ID)
		return n.HeldPoints >= uint64(want) && n.WatermarkTimeMs >= newest
	})
	n := edgeOf(f, c.Edge.ID)
	if err != nil {
		t.Fatalf("cloud holds %d of %d acknowledged points of %s after %v, watermark %d, newest acknowledged %d (acked_through %d, held %+v, gaps %+v): %v",
			n.HeldPoints, want, c.Edge.ID, timeout, n.WatermarkTimeMs, newest, n.AckedThrough, n.Held, n.Gaps, err)
	}
	t.Logf("cloud holds %d points of %s (%d acknowledged) %v after the last write; acked_through %d",
		n.HeldPoints, c.Edge.ID, want, time.Since(start).Round(time.Millisecond), n.AckedThrough)
	return n
}

// requireFleetsAgree requires every running coordinator to report the same
// held runs and acked_through for the edge (polling a while, since a
// restarted member may still be catching up).
func requireFleetsAgree(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var views []string
		var first *cluster.FleetNode
		agree := true
		for _, co := range c.Coordinators {
			f, err := c.Fleet(ctx, co)
			if err != nil {
				agree = false
				views = append(views, fmt.Sprintf("%s: %v", co.ID, err))
				continue
			}
			n := edgeOf(f, c.Edge.ID)
			views = append(views, fmt.Sprintf("%s: acked_through %d, held %+v", co.ID, n.AckedThrough, n.Held))
			if first == nil {
				first = &n
			} else if n.AckedThrough != first.AckedThrough || !reflect.DeepEqual(n.Held, first.Held) {
				agree = false
			}
		}
		if agree {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("coordinators disagree on %s:\n%s", c.Edge.ID, strings.Join(views, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkEveryCoordinator queries every coordinator for the raw load in a
// wide range and requires the ledger's acknowledged points exactly once.
func checkEveryCoordinator(t *testing.T, c *cluster.Cluster, l *cluster.Ledger, startMs int64) []cluster.CheckResult {
	t.Helper()
	var out []cluster.CheckResult
	endMs := time.Now().Add(time.Hour).UnixMilli()
	for _, co := range c.Coordinators {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := cluster.Check(ctx, co.GRPC, metric, l, startMs, endMs)
		cancel()
		if err != nil {
			t.Errorf("%s: %v", co.ID, err)
			continue
		}
		t.Logf("%s: %v", co.ID, r)
		if !r.OK() {
			t.Errorf("%s answers wrong: %v", co.ID, r)
		}
		out = append(out, r)
	}
	return out
}

// TestCluster_LeaderKillLosesNoAcknowledgedPoint kills the raft leader with
// SIGKILL while an edge writes and ships, restarts it, repeats; then kills
// the edge and requires every coordinator to answer every acknowledged
// point exactly once from the replicas.
func TestCluster_LeaderKillLosesNoAcknowledgedPoint(t *testing.T) {
	cycles := envInt(t, "TRIBUTARY_E2E_CYCLES", 2)
	downtime := time.Duration(envInt(t, "TRIBUTARY_E2E_DOWNTIME_MS", 3000)) * time.Millisecond
	c := startCluster(t)
	ctx := context.Background()
	w, err := cluster.NewWriter(cluster.WriterOptions{Addr: c.Edge.GRPC, Metric: metric})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	startMs := time.Now().UnixMilli() - 1000
	w.Start()

	// Replication must flow before the first fault, or the test proves
	// nothing about the kills.
	if _, err := c.WaitFleet(ctx, 30*time.Second, func(f cluster.Fleet) bool {
		return edgeOf(f, c.Edge.ID).AckedThrough > 0
	}); err != nil {
		w.Stop()
		t.Fatalf("no segment of %s acknowledged before the first fault: %v", c.Edge.ID, err)
	}

	var recoveries []time.Duration
	for i := range cycles {
		leader, err := c.Leader(ctx, 30*time.Second)
		if err != nil {
			w.Stop()
			t.Fatalf("cycle %d: %v", i+1, err)
		}
		f, _, err := c.AnyFleet(ctx)
		if err != nil {
			w.Stop()
			t.Fatalf("cycle %d: %v", i+1, err)
		}
		e := edgeOf(f, c.Edge.ID)
		before, replica := e.AckedThrough, slices.Contains(e.Replicas, leader.ID)
		killedAt := time.Now()
		leader.Kill()
		// Segments are accepted again once a survivor's catalog shows the
		// edge's acked_through past what it was before the kill. Watch
		// while the member is down, then restart it and keep watching.
		accepted := func(f cluster.Fleet) bool { return edgeOf(f, c.Edge.ID).AckedThrough > before }
		_, errDown := c.WaitFleet(ctx, downtime, accepted)
		rec := time.Since(killedAt)
		if d := downtime - time.Since(killedAt); d > 0 {
			time.Sleep(d)
		}
		if err := leader.Start(c.Opts.ReadyTimeout); err != nil {
			w.Stop()
			t.Fatalf("cycle %d: restart %s: %v", i+1, leader.ID, err)
		}
		if errDown != nil {
			if _, err := c.WaitFleet(ctx, 30*time.Second, accepted); err != nil {
				w.Stop()
				t.Fatalf("cycle %d: after killing leader %s (raft %d, replica of %s: %v) and restarting it, no segment of %s accepted: %v",
					i+1, leader.ID, leader.RaftID, c.Edge.ID, replica, c.Edge.ID, err)
			}
			rec = time.Since(killedAt)
		}
		recoveries = append(recoveries, rec)
		t.Logf("cycle %d: killed leader %s (raft %d, replica of %s: %v) for %v; segments accepted again %v after the kill (while it was down: %v)",
			i+1, leader.ID, leader.RaftID, c.Edge.ID, replica, downtime, rec.Round(time.Millisecond), errDown == nil)
	}

	st := w.Stop()
	t.Logf("load: %d requests, %d points acknowledged in %v (%.0f points/s), %d in doubt, %d failed",
		st.Requests, st.Acked, st.Elapsed.Round(time.Millisecond), st.PointsPerSecond(), st.InDoubt, st.Failed)
	if st.Failed > 0 {
		t.Errorf("%d writes to %s failed (the edge writes locally, coordinators do not matter): %v", st.Failed, c.Edge.ID, st.FirstErr)
	}
	if st.Acked == 0 {
		t.Fatal("no point was acknowledged")
	}
	// The writer's defaults are the fault scenarios' load (4,000 points/s).
	if written := float64(st.Acked+st.InDoubt) / st.Elapsed.Seconds(); written < 0.9*target(faultLoad) {
		t.Errorf("INVALID run: the writer held %.0f points/s, below 90%% of its target %.0f", written, target(faultLoad))
	}
	held := waitHeld(t, c, w.Ledger, st.Acked, 60*time.Second)
	if held.HeldPoints > uint64(st.Acked+st.InDoubt) {
		t.Errorf("cloud holds %d points of %s, only %d were written (%d acknowledged)", held.HeldPoints, c.Edge.ID, st.Acked+st.InDoubt, st.Acked)
	}
	if len(held.Gaps) > 0 {
		t.Errorf("%s declared gaps (points the cloud will never hold): %+v", c.Edge.ID, held.Gaps)
	}
	requireFleetsAgree(t, c)
	requireEdgeCaughtUp(t, c, held.AckedThrough)

	// The answers must now come from the replicas alone.
	c.Edge.Kill()
	results := checkEveryCoordinator(t, c, w.Ledger, startMs)
	var lost, dup, phantom int
	for _, r := range results {
		lost, dup, phantom = lost+r.Lost, dup+r.Duplicated, phantom+r.Phantom+r.WrongValue
	}
	t.Logf("summary: load %.0f points/s, %d leader kills, %d points acknowledged, over %d coordinators lost %d, duplicated %d, phantom %d; accepting again after %v",
		st.PointsPerSecond(), cycles, st.Acked, len(results), lost, dup, phantom, roundAll(recoveries))
}

// requireEdgeCaughtUp requires the edge's own replication gauges to agree
// with the catalog: acked through the same segment, no backlog, no gaps.
func requireEdgeCaughtUp(t *testing.T, c *cluster.Cluster, ackedThrough uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := c.EdgeMetrics(context.Background(), "tributary_replication_")
		if err != nil {
			t.Fatal(err)
		}
		if m["tributary_replication_acked_through_seq"] == float64(ackedThrough) && m["tributary_replication_backlog_segments"] == 0 {
			t.Logf("%s replication gauges: %v", c.Edge.ID, m)
			if m["tributary_replication_gap_points"] != 0 || m["tributary_replication_dropped_points"] != 0 {
				t.Errorf("%s gave up points: %v", c.Edge.ID, m)
			}
			waitReplicasWhole(t, c)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's replication gauges do not match the catalog's acked_through %d: %v", c.Edge.ID, ackedThrough, m)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitReplicasWhole waits until every replica of the edge lacks no
// segment. A write quorum acknowledges a segment before every replica
// holds it; the one that missed it is repaired by the heal loop. The
// checks that follow read from the replicas alone (the edge killed), and
// a replica still lacking a run would answer short, with a warning: they
// are the cloud's answers once healed.
func waitReplicasWhole(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(60 * time.Second)
	var last string
	for {
		for _, co := range c.Coordinators {
			if !co.Running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			v, err := c.ClusterEdges(ctx, co)
			cancel()
			if err != nil {
				last = err.Error()
				continue
			}
			e, ok := v.Edge(c.Edge.ID)
			if !ok {
				last = fmt.Sprintf("%s lists no edge %s", co.ID, c.Edge.ID)
				continue
			}
			var lacking []string
			for _, r := range e.Replicas {
				if r.LackingSegments > 0 {
					lacking = append(lacking, fmt.Sprintf("%s lacks %d segments %+v", r.Coordinator, r.LackingSegments, r.Lacks))
				}
			}
			if len(lacking) == 0 && e.UnderReplicatedSegments == 0 {
				t.Logf("every replica of %s holds every segment %v after the edge caught up", c.Edge.ID, time.Since(start).Round(time.Millisecond))
				return
			}
			last = fmt.Sprintf("%s says: %d under-replicated segments; %s", co.ID, e.UnderReplicatedSegments, strings.Join(lacking, "; "))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replicas of %s still not whole %v after the edge caught up: %s", c.Edge.ID, time.Since(start).Round(time.Millisecond), last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// TestCluster_QueryFlagsUnreachableEdge kills an edge whose points the
// cloud holds and requires a query reaching past the edge's watermark to
// say that the edge did not answer, while still returning every point.
func TestCluster_QueryFlagsUnreachableEdge(t *testing.T) {
	c := startCluster(t)
	w, err := cluster.NewWriter(cluster.WriterOptions{Addr: c.Edge.GRPC, Metric: metric, Series: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	startMs := time.Now().UnixMilli() - 1000
	for i := range 10 {
		if err := w.WriteOnce(context.Background()); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	waitHeld(t, c, w.Ledger, w.Ledger.Acked(), 30*time.Second)
	c.Edge.Kill()
	for _, r := range checkEveryCoordinator(t, c, w.Ledger, startMs) {
		named := false
		for _, warn := range r.Warnings {
			named = named || strings.Contains(warn, c.Edge.ID)
		}
		if !named {
			t.Errorf("%s: query past the watermark of the killed %s has no warning naming it (warnings %q)", r.Addr, c.Edge.ID, r.Warnings)
		}
	}
}
