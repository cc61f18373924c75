package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
)

// dockerImage is the image the container scenarios run, built once.
const dockerImage = "tributary-e2e:local"

var (
	imageOnce sync.Once
	imageErr  error
)

// startDockerFleet builds the image from the static binary (once per run)
// and runs three coordinators and edge-1 as containers on a private
// network, removed when the test ends. It skips unless
// TRIBUTARY_E2E_DOCKER=1 (make e2e sets it), and when docker or the static
// binary is missing, saying why.
func startDockerFleet(t *testing.T) *cluster.DockerFleet {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: runs containers; skipped under -short")
	}
	if os.Getenv("TRIBUTARY_E2E_DOCKER") != "1" {
		t.Skip("container scenarios run with TRIBUTARY_E2E_DOCKER=1 (make e2e)")
	}
	if err := cluster.DockerAvailable(); err != nil {
		t.Skipf("container scenarios need docker: %v", err)
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	static := os.Getenv("TRIBUTARY_E2E_STATIC_BIN")
	if static == "" {
		static = filepath.Join(root, "bin", "tributary-static")
	}
	if _, err := os.Stat(static); err != nil {
		t.Skipf("container scenarios need a static linux/amd64 binary at %s (make e2e builds it; or set TRIBUTARY_E2E_STATIC_BIN): %v", static, err)
	}
	ctx := context.Background()
	imageOnce.Do(func() {
		start := time.Now()
		imageErr = cluster.BuildImage(ctx, root, static, dockerImage)
		t.Logf("image %s built from %s in %v", dockerImage, static, time.Since(start).Round(time.Millisecond))
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	start := time.Now()
	f, err := cluster.StartDockerFleet(ctx, cluster.DockerOptions{Image: dockerImage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Remove)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range f.Nodes() {
				t.Logf("--- last 20 lines of %s:\n%s", n.Container(), n.Logs(context.Background(), 20))
			}
		}
	})
	t.Logf("containers of 3 coordinators and edge-1 on network %s ready in %v", f.Network, time.Since(start).Round(time.Millisecond))
	return f
}

// dockerLoad starts the writer against the edge's container and waits
// for a first acknowledged segment.
func dockerLoad(t *testing.T, f *cluster.DockerFleet) (*cluster.Writer, int64) {
	t.Helper()
	o := faultLoad
	o.Addr = f.Edge.GRPC()
	w, err := cluster.NewWriter(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	startMs := time.Now().UnixMilli() - 1000
	w.Start()
	if _, err := f.WaitFleet(context.Background(), 60*time.Second, func(fl cluster.Fleet) bool {
		n, _ := fl.Node(f.Edge.Name)
		return n.AckedThrough > 0
	}); err != nil {
		w.Stop()
		t.Fatalf("no segment of edge-1 acknowledged before the first fault: %v", err)
	}
	return w, startMs
}

// ackedThrough is the edge's acked_through in any coordinator's catalog.
func dockerAckedThrough(t *testing.T, f *cluster.DockerFleet, skip ...*cluster.DockerNode) uint64 {
	t.Helper()
	fl, err := f.WaitFleet(context.Background(), 30*time.Second, func(cluster.Fleet) bool { return true }, skip...)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := fl.Node(f.Edge.Name)
	return n.AckedThrough
}

// waitDockerAccepted waits until a segment past before is acknowledged
// and returns how long after since that was.
func waitDockerAccepted(t *testing.T, f *cluster.DockerFleet, before uint64, since time.Time, timeout time.Duration, what string, skip ...*cluster.DockerNode) time.Duration {
	t.Helper()
	if _, err := f.WaitFleet(context.Background(), timeout, func(fl cluster.Fleet) bool {
		n, _ := fl.Node(f.Edge.Name)
		return n.AckedThrough > before
	}, skip...); err != nil {
		t.Fatalf("%s: no segment of edge-1 accepted within %v: %v", what, timeout, err)
	}
	return time.Since(since)
}

// checkDockerCloud stops the load, waits until every coordinator holds
// every acknowledged point, kills the edge's container and requires each
// coordinator to answer each acknowledged point exactly once; it logs the
// scenario's summary line.
func checkDockerCloud(t *testing.T, f *cluster.DockerFleet, w *cluster.Writer, startMs int64, faults, recovery string) {
	t.Helper()
	st := w.Stop()
	load := requireLoadHeld(t, st, faultLoad)
	ctx := context.Background()
	// The count alone does not prove the newest segment shipped (stored
	// points of writes in doubt count too): the watermark must reach the
	// newest acknowledged timestamp before the edge is killed.
	newest := w.Ledger.NewestAckedMs()
	for _, co := range f.Coordinators {
		if _, err := f.WaitFleet(ctx, 120*time.Second, func(fl cluster.Fleet) bool {
			n, _ := fl.Node(f.Edge.Name)
			return n.HeldPoints >= uint64(st.Acked) && n.WatermarkTimeMs >= newest
		}, others(f, co)...); err != nil {
			t.Fatalf("%s does not hold every acknowledged point of edge-1 (%d, newest at %d): %v", co.Name, st.Acked, newest, err)
		}
	}
	if err := f.KillAndStop(ctx, f.Edge); err != nil {
		t.Fatal(err)
	}
	var tot cloudTotals
	endMs := time.Now().Add(time.Hour).UnixMilli()
	for _, co := range f.Coordinators {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := cluster.Check(cctx, co.GRPC(), metric, w.Ledger, startMs, endMs)
		cancel()
		if err != nil {
			t.Errorf("%s: %v", co.Name, err)
			continue
		}
		t.Logf("%s: %v", co.Name, r)
		if !r.OK() {
			t.Errorf("%s answers wrong: %v", co.Name, r)
		}
		tot.checked++
		tot.lost, tot.dup, tot.phantom = tot.lost+r.Lost, tot.dup+r.Duplicated, tot.phantom+r.Phantom+r.WrongValue
	}
	t.Logf("summary: load %.0f points/s, %s, %d points acknowledged, over %d coordinators lost %d, duplicated %d, phantom %d; recovery: %s",
		load, faults, st.Acked, tot.checked, tot.lost, tot.dup, tot.phantom, recovery)
}

// others lists the coordinators other than co.
func others(f *cluster.DockerFleet, co *cluster.DockerNode) []*cluster.DockerNode {
	var out []*cluster.DockerNode
	for _, n := range f.Coordinators {
		if n != co {
			out = append(out, n)
		}
	}
	return out
}

// leaderFault injects a fault into the raft leader's container for
// TRIBUTARY_E2E_DOCKER_FAULT (10s) while the edge writes, heals it, and
// checks the cloud. Segments are acknowledged only once they are durable
// on every replica of the edge's placement: when the leader is not a
// replica of edge-1 they must be accepted during the fault; when it is,
// shipping waits for it (the edge keeps its backlog) and must resume
// after the heal.
func leaderFault(t *testing.T, what string, inject, heal func(*cluster.DockerNode, context.Context) error) {
	fault := envDuration(t, "TRIBUTARY_E2E_DOCKER_FAULT", 10*time.Second)
	f := startDockerFleet(t)
	ctx := context.Background()
	w, startMs := dockerLoad(t, f)
	leader, err := f.Leader(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fl, err := f.WaitFleet(ctx, 30*time.Second, func(cluster.Fleet) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	e, _ := fl.Node(f.Edge.Name)
	replica := slices.Contains(e.Replicas, leader.Name)
	before := e.AckedThrough
	began := time.Now()
	if err := inject(leader, ctx); err != nil {
		t.Fatal(err)
	}
	var during time.Duration
	if _, err := f.WaitFleet(ctx, fault, func(fl cluster.Fleet) bool {
		n, _ := fl.Node(f.Edge.Name)
		return n.AckedThrough > before
	}, leader); err == nil {
		during = time.Since(began)
		t.Logf("leader %s %s (replica of edge-1: %v); segments accepted again %v later, during the fault", leader.Name, what, replica, during.Round(time.Millisecond))
	} else if !replica {
		t.Errorf("leader %s %s, not a replica of edge-1 (replicas %v): no segment accepted during the %v fault", leader.Name, what, e.Replicas, fault)
	} else {
		t.Logf("leader %s %s is a replica of edge-1 (replicas %v): no segment accepted during the fault (they wait for every replica)", leader.Name, what, e.Replicas)
	}
	time.Sleep(time.Until(began.Add(fault)))
	healed := time.Now()
	if err := heal(leader, ctx); err != nil {
		t.Fatal(err)
	}
	after := dockerAckedThrough(t, f)
	rec := waitDockerAccepted(t, f, after, healed, 60*time.Second, "after healing "+leader.Name)
	t.Logf("healed %s; a segment accepted %v later", leader.Name, rec.Round(time.Millisecond))
	recovery := fmt.Sprintf("none during the fault, a segment accepted %v after the heal", rec.Round(time.Millisecond))
	if during > 0 {
		recovery = fmt.Sprintf("a segment accepted %v after the fault began, %v after the heal", during.Round(time.Millisecond), rec.Round(time.Millisecond))
	}
	checkDockerCloud(t, f, w, startMs, fmt.Sprintf("leader %s (replica of edge-1: %v) %s %v", leader.Name, replica, what, fault), recovery)
}

// TestDocker_PausedLeader freezes the raft leader's container (docker
// pause), then thaws it (docker unpause).
func TestDocker_PausedLeader(t *testing.T) {
	leaderFault(t, "paused", (*cluster.DockerNode).Pause, (*cluster.DockerNode).Unpause)
}

// TestDocker_IsolatedLeader takes the raft leader's container off the
// network (docker network disconnect), then connects it again.
func TestDocker_IsolatedLeader(t *testing.T) {
	leaderFault(t, "isolated", (*cluster.DockerNode).Disconnect, (*cluster.DockerNode).Connect)
}

// TestDocker_AllCoordinatorsRestarted kills every coordinator's container
// at once and starts them again while the edge writes.
func TestDocker_AllCoordinatorsRestarted(t *testing.T) {
	f := startDockerFleet(t)
	ctx := context.Background()
	w, startMs := dockerLoad(t, f)
	before := dockerAckedThrough(t, f)
	began := time.Now()
	if err := f.KillAndStart(ctx, f.Coordinators...); err != nil {
		t.Fatal(err)
	}
	t.Logf("every coordinator killed and started again; ready %v later", time.Since(began).Round(time.Millisecond))
	rec := waitDockerAccepted(t, f, before, began, 60*time.Second, "after restarting every coordinator")
	time.Sleep(5 * time.Second) // keep writing after the recovery
	checkDockerCloud(t, f, w, startMs, "3 coordinators killed and restarted at once", fmt.Sprintf("a segment accepted %v after the kill", rec.Round(time.Millisecond)))
}
