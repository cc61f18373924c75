package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// freeAddr reserves a loopback port and releases it for the caller to
// listen on (for addresses that must be known before the listener opens).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// frontAddr is the bound address of one of fe's listeners ("grpc", "http").
func frontAddr(t *testing.T, fe *frontend, which string) string {
	t.Helper()
	for i := 0; i+1 < len(fe.addrs); i += 2 {
		if fe.addrs[i] == which {
			return fe.addrs[i+1].(string)
		}
	}
	t.Fatalf("no %s listener in %v", which, fe.addrs)
	return ""
}

// testFleet is a coordinator serving its client APIs, with edges wired as
// tributary node wires them (Shipper, Status with replication, an
// advertised query address).
type testFleet struct {
	c         *coordinator.Coordinator
	fe        *frontend
	grpcAddr  string
	httpAddr  string
	edges     map[string]*testEdge
	log       *slog.Logger
	telemetry *telemetry.Provider
}

type testEdge struct {
	n    *node.Node
	ship *shipping
	fe   *frontend
	next int64
	stop func()
}

func startTestFleet(t *testing.T) *testFleet {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cluster := freeAddr(t)
	c, err := coordinator.Open(coordinator.Options{NodeID: "c1", RaftID: 1, DataDir: t.TempDir(),
		ClusterListen: cluster, IntakeListen: "127.0.0.1:0", Insecure: true, TickInterval: 50 * time.Millisecond,
		Peers: []coordinator.Peer{{RaftID: 1, NodeID: "c1", Addr: cluster}}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		c.Stop(context.Background())
		t.Fatal(err)
	}
	tp, err := telemetry.Setup(context.Background(), telemetry.Config{Role: "coordinator", Instance: "c1", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sf := serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0"}
	fe, gh, err := serveCoordinator(c, &sf, nil, tp, log)
	if err != nil {
		c.Stop(context.Background())
		t.Fatal(err)
	}
	f := &testFleet{c: c, fe: fe, grpcAddr: frontAddr(t, fe, "grpc"), httpAddr: frontAddr(t, fe, "http"), edges: map[string]*testEdge{}, log: log, telemetry: tp}
	t.Cleanup(func() {
		for _, e := range f.edges {
			e.stop()
		}
		gh.Close()
		fe.stop(time.Second)
		c.Stop(context.Background())
		tp.Shutdown(context.Background())
	})
	return f
}

func (f *testFleet) addEdge(t *testing.T, id string) *testEdge {
	t.Helper()
	dir := t.TempDir()
	grpcAddr := freeAddr(t)
	ro := replicator.Options{Targets: []string{f.c.IntakeAddr()}, Insecure: true, SoftwareVersion: "test",
		CursorPath: filepath.Join(dir, "replication.cursor"), QueryAddr: grpcAddr, Logger: f.log,
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, PollInterval: 10 * time.Millisecond}
	no := node.Options{DataDir: dir, NodeID: id, WALSegmentBytes: 4096, WALSegmentAge: 20 * time.Millisecond,
		FlushInterval: 10 * time.Millisecond}
	ship, err := newShipping(&ro, &no)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(no)
	if err != nil {
		t.Fatal(err)
	}
	a := grpcapi.New(n, grpcapi.Options{Status: nodeStatus(n, "test", ship.status)})
	sf := serveFlags{grpcListen: grpcAddr}
	fe, err := sf.start(n, a.Register, nil, f.log)
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	ship.start(n, f.log)
	e := &testEdge{n: n, ship: ship, fe: fe, next: time.Now().Add(-time.Minute).UnixMilli()}
	stopped := false
	e.stop = func() {
		if !stopped {
			stopped = true
			fe.stop(time.Second)
			ship.stop()
			n.Close()
		}
	}
	f.edges[id] = e
	return e
}

// write writes points one second apart in data time, ending near now.
func (e *testEdge) write(t *testing.T, points int) {
	t.Helper()
	b := model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "temp"}, {Name: "sensor", Value: "a"}}}
	for range points {
		b.Ts = append(b.Ts, e.next)
		b.Vs = append(b.Vs, float64(e.next%100))
		e.next += 100
	}
	if res, err := e.n.Write(context.Background(), []model.Batch{b}); err != nil || res.Accepted != int64(points) {
		t.Fatalf("write: %+v %v", res, err)
	}
}

// statusJSON runs tributary status --json and decodes the fleet view.
func statusJSON(t *testing.T, args ...string) fleetView {
	t.Helper()
	code, out, errOut := cli(append([]string{"status", "--json"}, args...)...)
	var v fleetView
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("status: exit %d %v\n%s%s", code, err, out, errOut)
	}
	return v
}

func rowOf(v fleetView, node string) (fleetRow, bool) {
	for _, r := range v.Nodes {
		if r.Node == node {
			return r, true
		}
	}
	return fleetRow{}, false
}

// TestStatus_FleetTableOfACoordinatorWithEdges runs a coordinator with three
// edges, stops one, and reads the fleet table as a user would.
func TestStatus_FleetTableOfACoordinatorWithEdges(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a heartbeat to age")
	}
	f := startTestFleet(t)
	for _, id := range []string{"edge-a", "edge-b", "edge-c"} {
		f.addEdge(t, id).write(t, 600)
	}
	// Wait until the cloud holds data of every edge.
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := statusJSON(t, "--addr", f.grpcAddr, "--http-addr", f.httpAddr)
		held := 0
		for _, r := range v.Nodes {
			if r.Role == "edge" && r.HeldPoints > 0 {
				held++
			}
		}
		if held == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cloud does not hold data of all three edges: %+v", v.Nodes)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.edges["edge-c"].stop()
	stoppedAt := time.Now()

	// A node with no heartbeat for --offline-after is offline; heartbeats
	// come every 10s.
	var v fleetView
	for {
		f.edges["edge-a"].write(t, 50)
		v = statusJSON(t, "--addr", f.grpcAddr, "--http-addr", f.httpAddr, "--offline-after", "12s")
		if r, _ := rowOf(v, "edge-c"); r.State == stateOffline {
			break
		}
		if time.Since(stoppedAt) > 40*time.Second {
			t.Fatalf("edge-c not offline 40s after it stopped: %+v", v.Nodes)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if v.Nodes[0].Node != "edge-c" {
		t.Errorf("the offline edge is not first: %+v", v.Nodes)
	}
	s := v.Summary
	if s.Edges != 3 || s.Offline != 1 || s.Coordinators != 1 || s.Coordinator != "c1" || s.RaftLeader != 1 || s.Series == 0 {
		t.Errorf("summary %+v", s)
	}
	c, ok := rowOf(v, "c1")
	if !ok || c.Role != "coordinator" || c.Raft != "leader" || c.State != stateOnline {
		t.Errorf("coordinator row %+v", c)
	}
	for _, id := range []string{"edge-a", "edge-b"} {
		r, _ := rowOf(v, id)
		if r.State != stateOnline || r.ProbeError != "" || r.BacklogBytes == nil || r.BacklogSegments == nil ||
			r.LagSeconds == nil || (r.LagSource != "edge" && r.LagSource != "cloud") || r.IngestPointsPerSec == nil || *r.IngestPointsPerSec <= 0 ||
			r.Connected == nil || !*r.Connected || r.LastSeenSeconds < 0 || r.LastSeenSeconds > 12 {
			t.Errorf("%s: %+v", id, r)
		}
	}
	off, _ := rowOf(v, "edge-c")
	// Not probed (offline): lag from the watermark, rate from the held run.
	if off.BacklogBytes != nil || off.LagSource != "watermark" || off.IngestSource != "cloud-average" || off.LastSeenSeconds <= 12 {
		t.Errorf("offline edge: %+v", off)
	}

	// The table: summary line, header, the offline edge first.
	code, out, errOut := cli("status", "--addr", f.grpcAddr, "--http-addr", f.httpAddr, "--offline-after", "12s")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 6 || !strings.Contains(lines[0], "3 edges, 1 offline") ||
		!strings.HasPrefix(lines[1], "NODE") || !strings.HasPrefix(lines[2], "edge-c ") || !strings.Contains(lines[2], "offline") {
		t.Fatalf("table: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("tributary status:\n%s", out)

	// --node still shows the coordinator's own state.
	if code, out, _ := cli("status", "--addr", f.grpcAddr, "--http-addr", f.httpAddr, "--node"); code != 0 || !strings.Contains(out, "role:") || strings.Contains(out, "NODE") {
		t.Fatalf("--node: exit %d\n%s", code, out)
	}

	// --watch --json: one document per refresh; from the second on, the
	// rate is measured between refreshes.
	code, out, errOut = cli("status", "--addr", f.grpcAddr, "--http-addr", f.httpAddr, "--watch", "200ms", "--iterations", "3", "--json")
	dec := json.NewDecoder(strings.NewReader(out))
	var views []fleetView
	for {
		var w fleetView
		if err := dec.Decode(&w); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("watch output: %v\n%s", err, out)
		}
		views = append(views, w)
	}
	if code != 0 || len(views) != 3 {
		t.Fatalf("watch: exit %d, %d documents\n%s%s", code, len(views), out, errOut)
	}
	if r, _ := rowOf(views[2], "edge-a"); r.IngestSource != "edge" {
		t.Errorf("third refresh: edge-a rate from %q, want between refreshes", r.IngestSource)
	}
}

func TestStatus_WatchOnAPipeRepeatsWithoutEscapes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator")
	}
	f := startTestFleet(t)
	f.addEdge(t, "edge-a")
	code, out, errOut := cli("status", "--addr", f.grpcAddr, "--http-addr", f.httpAddr, "--watch", "50ms", "--iterations", "2")
	if code != 0 || strings.Count(out, "NODE") != 2 || strings.Contains(out, "\x1b[") {
		t.Fatalf("exit %d\n%q%s", code, out, errOut)
	}
}

func TestStatus_BadFleetInvocations(t *testing.T) {
	for _, args := range [][]string{
		{"--watch", "soon"},
		{"--watch=-1s"},
		{"--fleet", "--node"},
		{"--iterations", "-1"},
		{"--probe-timeout", "0s"},
		{"--format", "yaml"},
		{"extra"},
	} {
		code, _, errOut := cli(append([]string{"status"}, args...)...)
		if code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want a usage error", args, code, errOut)
		}
	}
	// A fleet read from something that is not a coordinator's HTTP API
	// fails with what was asked.
	plain := startCLINode(t, "")
	code, _, errOut := cli("status", "--addr", plain.addr, "--fleet", "--http-addr", freeAddr(t))
	if code != 1 || !strings.Contains(errOut, "read the fleet") {
		t.Fatalf("--fleet against a node: exit %d %s", code, errOut)
	}
}

func TestFleetTable_Format(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	i := func(x int64) *int64 { return &x }
	v := fleetView{Summary: fleetSummary{Coordinator: "c1", RaftLeader: 1, RaftTerm: 2, Edges: 2, Coordinators: 2, Offline: 2,
		UnderReplicated: 1, CoordinatorsDown: 1,
		WorstLagSeconds: 252, WorstLagNode: "pi-7", Series: 1234, TimeMs: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()},
		Nodes: []fleetRow{
			{Node: "pi-7", Role: "edge", State: stateOffline, LastSeenSeconds: 95, IngestPointsPerSec: f(12.5), IngestSource: "cloud-average",
				LagSeconds: f(252), LagSource: "watermark", GapSegments: 2, GapPoints: -1, UnderReplicatedSegments: 52, UnsourcedSegments: 12},
			{Node: "c2", Role: "coordinator", Raft: "follower", Placement: "down", State: stateOffline, LastSeenSeconds: 400},
			{Node: "pi-1", Role: "edge", State: stateOnline, LastSeenSeconds: 3.2, IngestPointsPerSec: f(1500), IngestSource: "edge",
				LagSeconds: f(0.85), LagSource: "edge", BacklogBytes: i(3 << 20), BacklogSegments: i(3), UnderReplicatedSegments: 4},
			{Node: "c1", Role: "coordinator", Raft: "leader", Placement: "active", State: stateOnline, LastSeenSeconds: 1, ProbeError: ""},
		}}
	var b bytes.Buffer
	if err := printFleet(&b, "text", v); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"2026-01-02 03:04:05: 2 edges, 2 offline, 0 behind, 0 with gaps, 1 under-replicated; worst lag 4m12s (pi-7); 2 coordinators, 1 down (leader raft id 1, term 2); 1,234 series",
		"NODE  ROLE                       STATE    LAST SEEN  INGEST      LAG       BACKLOG         GAPS             UNDER-REPL",
		"pi-7  edge                       offline  1m35s ago  12.5/s avg  4m12s wm  -               2 seg, ? points  52 seg, 12 unsourced",
		"c2    coordinator/follower/down  offline  6m40s ago  -           -         -               -                -",
		"pi-1  edge                       online   3.2s ago   1,500/s     850ms     3.0 MiB, 3 seg  0                4 seg",
		"c1    coordinator/leader/active  online   1.0s ago   -           -         -               -                -",
	}
	got := strings.Split(b.String(), "\n")
	for k, w := range want {
		if k >= len(got) || strings.TrimRight(got[k], " ") != w {
			t.Fatalf("line %d:\n got %q\nwant %q\n%s", k, got[min(k, len(got)-1)], w, b.String())
		}
	}
}

// TestFleetWatcher_LocalEdgeAndCloudRates reads a fleet from a fake
// coordinator: tributary local's edge takes its figures from the status
// of the answering process, an edge not asked gets the catalog's.
func TestFleetWatcher_LocalEdgeAndCloudRates(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	fleet := coordinator.Fleet{Coordinator: "lc", Raft: coordinator.RaftStatus{ID: 1, Leader: 1, Term: 3, Voters: []uint64{1}},
		Nodes: []coordinator.FleetNode{
			{ID: "lc", Role: "coordinator", RaftID: 1, LastHeartbeatMs: now.UnixMilli() - 2000, SecondsSinceHeartbeat: 2},
			{ID: "local", Role: "edge", LastHeartbeatMs: now.UnixMilli() - 1000, SecondsSinceHeartbeat: 1},
		}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/fleet" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(fleet)
	}))
	defer srv.Close()
	sf := &statusFlags{probe: true, probeTimeout: time.Second, offlineAfter: 30 * time.Second, behindAfter: time.Minute}
	cf := &clientFlags{addr: "127.0.0.1:1", getenv: func(string) string { return "" }}
	sf.httpAddr = strings.TrimPrefix(srv.URL, "http://")
	w, err := newFleetWatcher(cf, sf)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.now = func() time.Time { return now }

	target := tributary.Status{Role: "local", PointsAccepted: 600, Uptime: time.Minute,
		Replication: &tributary.ReplicationStatus{Connected: true, Lag: 90 * time.Second, BacklogBytes: 4096, BacklogSegments: 2}}
	v, err := w.read(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := rowOf(v, "local")
	if r.IngestSource != "edge-average" || *r.IngestPointsPerSec != 10 || *r.LagSeconds != 90 || *r.BacklogBytes != 4096 || r.State != stateBehind {
		t.Fatalf("local edge: %+v", r)
	}
	if v.Nodes[0].Node != "local" || v.Summary.Behind != 1 || v.Summary.WorstLagNode != "local" {
		t.Fatalf("view: %+v", v)
	}

	// A plain coordinator: the edge has no address, so the catalog
	// speaks: watermark lag, then the held points' growth per second.
	fleet.Nodes[1].WatermarkTimeMs = now.UnixMilli() - 5000
	fleet.Nodes[1].HeldPoints = 1000
	fleet.Nodes[1].HeldRuns = []coordinator.HeldRun{{FirstSeq: 1, LastSeq: 9, Points: 1000, MinTimeMs: now.UnixMilli() - 100_000, MaxTimeMs: now.UnixMilli() - 5000}}
	fleet.Nodes[1].Gaps = []coordinator.FleetGap{{AfterSeq: 9, ThroughSeq: 10, Segments: 1, Points: -1}}
	coord := tributary.Status{Role: "coordinator"}
	w.prev = map[string]rateSample{}
	v, _ = w.read(context.Background(), coord)
	r, _ = rowOf(v, "local")
	if r.LagSource != "watermark" || *r.LagSeconds != 5 || r.IngestSource != "cloud-average" || r.BacklogBytes != nil ||
		r.State != stateGaps || r.GapPoints != -1 {
		t.Fatalf("catalog only: %+v", r)
	}
	want := 1000 / 95.0
	if d := *r.IngestPointsPerSec - want; d > 1e-9 || d < -1e-9 {
		t.Fatalf("cloud average %v, want %v", *r.IngestPointsPerSec, want)
	}
	now = now.Add(10 * time.Second)
	fleet.Nodes[1].HeldPoints = 1500
	v, _ = w.read(context.Background(), coord)
	if r, _ = rowOf(v, "local"); r.IngestSource != "cloud" || *r.IngestPointsPerSec != 50 {
		t.Fatalf("between refreshes: %+v", r)
	}
}

// fakeEdgeStatus answers QueryService.Status like an edge node.
type fakeEdgeStatus struct {
	pb.UnimplementedQueryServiceServer
	resp *pb.StatusResponse
}

func (f *fakeEdgeStatus) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return f.resp, nil
}

func startFakeEdgeStatus(t *testing.T, repl *pb.ReplicationStatus) string {
	t.Helper()
	g := grpc.NewServer()
	pb.RegisterQueryServiceServer(g, &fakeEdgeStatus{resp: &pb.StatusResponse{Role: "edge", UptimeMs: 60_000, Replication: repl}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// TestFleetWatcher_LagIsHowOldTheCloudsNewestDataIs reads a fleet whose
// edges answer their probes, and requires the lag and the behind count to
// be what the cloud holds: an edge that believes its segments were
// acknowledged while the catalog holds them only through a minute and a
// half ago is behind; an edge the catalog has not heard from for a while
// but that answers is alive and behind, not offline; an idle edge whose
// watermark is old but which has nothing newer is not behind.
func TestFleetWatcher_LagIsHowOldTheCloudsNewestDataIs(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	ms := now.UnixMilli()
	acked := startFakeEdgeStatus(t, &pb.ReplicationStatus{Connected: true, AckedThrough: 40, NewestSealedSeq: 40})
	idle := startFakeEdgeStatus(t, &pb.ReplicationStatus{Connected: true, AckedThrough: 40, NewestSealedSeq: 40})
	cut := startFakeEdgeStatus(t, &pb.ReplicationStatus{Connected: false, AckedThrough: 10, NewestSealedSeq: 30, LagSeconds: 70,
		BacklogSegments: 20, BacklogBytes: 1 << 20})
	fleet := coordinator.Fleet{Coordinator: "c1", Raft: coordinator.RaftStatus{ID: 1, Leader: 1, Term: 3, Voters: []uint64{1, 2}},
		Nodes: []coordinator.FleetNode{
			{ID: "c1", Role: "coordinator", RaftID: 1, State: "active", LastHeartbeatMs: ms - 2000, SecondsSinceHeartbeat: 2},
			{ID: "c2", Role: "coordinator", RaftID: 2, State: "down", LastHeartbeatMs: ms - 400_000, SecondsSinceHeartbeat: 400},
			// Acknowledged through 40 as the edge sees it; the catalog holds
			// 1-20, its newest data 81 s old.
			{ID: "pi-acked", Role: "edge", Addr: acked, LastHeartbeatMs: ms - 2000, SecondsSinceHeartbeat: 2,
				AckedThrough: 20, WatermarkTimeMs: ms - 81_000, UnderReplicatedSegments: 20, UnsourcedSegments: 5},
			// Everything sealed is held; it wrote nothing for five minutes.
			{ID: "pi-idle", Role: "edge", Addr: idle, LastHeartbeatMs: ms - 2000, SecondsSinceHeartbeat: 2,
				AckedThrough: 40, WatermarkTimeMs: ms - 300_000},
			// No heartbeat for 95 s (its stream is down), but it answers.
			{ID: "pi-cut", Role: "edge", Addr: cut, LastHeartbeatMs: ms - 95_000, SecondsSinceHeartbeat: 95,
				AckedThrough: 10, WatermarkTimeMs: ms - 100_000},
			// No heartbeat and no answer.
			{ID: "pi-gone", Role: "edge", Addr: freeAddr(t), LastHeartbeatMs: ms - 95_000, SecondsSinceHeartbeat: 95,
				AckedThrough: 10, WatermarkTimeMs: ms - 100_000},
		}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(fleet)
	}))
	defer srv.Close()
	// The flags' defaults, as tributary status sets them.
	var sf statusFlags
	sf.register(flag.NewFlagSet("status", flag.ContinueOnError))
	sf.httpAddr = strings.TrimPrefix(srv.URL, "http://")
	cf := &clientFlags{addr: "127.0.0.1:1", getenv: func(string) string { return "" }, maxAttempts: 1}
	w, err := newFleetWatcher(cf, &sf)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	w.now = func() time.Time { return now }
	v, err := w.read(context.Background(), tributary.Status{Role: "coordinator"})
	if err != nil {
		t.Fatal(err)
	}

	a, _ := rowOf(v, "pi-acked")
	if a.LagSeconds == nil || *a.LagSeconds != 81 || a.LagSource != "cloud" || a.State != stateBehind ||
		a.UnderReplicatedSegments != 20 || a.UnsourcedSegments != 5 {
		t.Errorf("an edge acknowledged past what the catalog holds: %+v (lag %v), want 81s behind from the cloud", a, deref(a.LagSeconds))
	}
	i, _ := rowOf(v, "pi-idle")
	if i.LagSeconds == nil || *i.LagSeconds != 0 || i.LagSource != "edge" || i.State != stateOnline {
		t.Errorf("an idle edge: %+v (lag %v), want online with no lag", i, deref(i.LagSeconds))
	}
	c, _ := rowOf(v, "pi-cut")
	if c.State != stateBehind || c.LagSeconds == nil || *c.LagSeconds != 100 || c.Connected == nil || *c.Connected {
		t.Errorf("an edge that answers but cannot reach the cloud: %+v (lag %v), want behind by 100s", c, deref(c.LagSeconds))
	}
	g, _ := rowOf(v, "pi-gone")
	if g.State != stateOffline || g.LagSource != "watermark" || g.ProbeError == "" {
		t.Errorf("an edge that does not answer: %+v", g)
	}
	if c2, _ := rowOf(v, "c2"); c2.Placement != "down" || c2.State != stateOffline {
		t.Errorf("a down coordinator: %+v", c2)
	}
	s := v.Summary
	if s.Behind != 2 || s.Offline != 2 || s.UnderReplicated != 1 || s.CoordinatorsDown != 1 || s.WorstLagNode != "pi-cut" {
		t.Errorf("summary %+v, want 2 behind (pi-acked, pi-cut), 2 offline (pi-gone, c2)", s)
	}
	var b bytes.Buffer
	if err := printFleet(&b, "text", v); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "2 behind") || strings.Contains(out, "pi-gone: status not read") {
		t.Errorf("table:\n%s", out)
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}
