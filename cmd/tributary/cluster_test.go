package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// fakeCluster records the requests of `tributary cluster` and answers
// like a leader with two members.
type fakeCluster struct {
	pb.UnimplementedClusterServiceServer
	mu    sync.Mutex
	got   []any
	token string
}

func (f *fakeCluster) record(ctx context.Context, req any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, req)
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		f.token = md.Get("authorization")[0]
	}
}

var fakeMembers = []*pb.Member{
	{RaftId: 1, NodeId: "coord-1", Addr: "10.0.0.1:7444", Leader: true, MatchIndex: 42},
	{RaftId: 4, NodeId: "", Addr: "10.0.0.4:7444", Learner: true},
}

func (f *fakeCluster) Members(ctx context.Context, req *pb.MembersRequest) (*pb.MembersResponse, error) {
	f.record(ctx, req)
	return &pb.MembersResponse{AnsweredBy: "coord-1", LeaderRaftId: 1, Term: 3, Members: fakeMembers}, nil
}

func (f *fakeCluster) AddMember(ctx context.Context, req *pb.AddMemberRequest) (*pb.AddMemberResponse, error) {
	f.record(ctx, req)
	return &pb.AddMemberResponse{Members: fakeMembers}, nil
}

func (f *fakeCluster) RemoveMember(ctx context.Context, req *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	f.record(ctx, req)
	return nil, status.Error(codes.FailedPrecondition, `the leader is raft id 2 (node "coord-2")`)
}

func (f *fakeCluster) TransferLeadership(ctx context.Context, req *pb.TransferLeadershipRequest) (*pb.TransferLeadershipResponse, error) {
	f.record(ctx, req)
	return &pb.TransferLeadershipResponse{LeaderRaftId: 3}, nil
}

// fakeEdges: coord-1 alone holds segments 1-40 of e1 (coord-2 lacks
// them); e2 has every segment on both.
var fakeEdges = &pb.EdgesResponse{AnsweredBy: "coord-1", Edges: []*pb.EdgeInfo{
	{NodeId: "e1", HeldPoints: 4000, AckedThrough: 40, UnderReplicatedSegments: 40, Replicas: []*pb.ReplicaInfo{
		{Coordinator: "coord-1", State: "active"},
		{Coordinator: "coord-2", State: "active", Lacks: []*pb.LackRun{{FirstSeq: 1, LastSeq: 40}}},
	}},
	{NodeId: "e2", HeldPoints: 10, AckedThrough: 2, Replicas: []*pb.ReplicaInfo{
		{Coordinator: "coord-1", State: "active"}, {Coordinator: "coord-2", State: "active"},
	}},
}}

func (f *fakeCluster) Edges(ctx context.Context, req *pb.EdgesRequest) (*pb.EdgesResponse, error) {
	f.record(ctx, req)
	return fakeEdges, nil
}

func (f *fakeCluster) DecommissionEdge(ctx context.Context, req *pb.DecommissionEdgeRequest) (*pb.DecommissionEdgeResponse, error) {
	f.record(ctx, req)
	return &pb.DecommissionEdgeResponse{}, nil
}

func (f *fakeCluster) PlaceEdge(ctx context.Context, req *pb.PlaceEdgeRequest) (*pb.PlaceEdgeResponse, error) {
	f.record(ctx, req)
	if req.Unpin {
		return &pb.PlaceEdgeResponse{Replicas: []*pb.ReplicaInfo{{Coordinator: "coord-1", State: "active"}}}, nil
	}
	r := &pb.PlaceEdgeResponse{Pinned: true}
	for _, c := range req.Coordinators {
		r.Replicas = append(r.Replicas, &pb.ReplicaInfo{Coordinator: c, State: "active", Lacks: []*pb.LackRun{{FirstSeq: 1, LastSeq: 3}}})
	}
	r.Replicas = append(r.Replicas, &pb.ReplicaInfo{Coordinator: "coord-9", State: "draining", Leaving: true})
	return r, nil
}

func (f *fakeCluster) Rebalance(ctx context.Context, req *pb.RebalanceRequest) (*pb.RebalanceResponse, error) {
	f.record(ctx, req)
	return &pb.RebalanceResponse{Changed: 2}, nil
}

func (f *fakeCluster) SetCoordinatorState(ctx context.Context, req *pb.SetCoordinatorStateRequest) (*pb.SetCoordinatorStateResponse, error) {
	f.record(ctx, req)
	return &pb.SetCoordinatorStateResponse{Moved: 5}, nil
}

func (f *fakeCluster) RevokeEdge(ctx context.Context, req *pb.RevokeEdgeRequest) (*pb.RevokeEdgeResponse, error) {
	f.record(ctx, req)
	return &pb.RevokeEdgeResponse{}, nil
}

func startFakeCluster(t *testing.T) (*fakeCluster, string) {
	t.Helper()
	f := &fakeCluster{}
	g := grpc.NewServer()
	pb.RegisterClusterServiceServer(g, f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return f, lis.Addr().String()
}

func TestCluster_CommandsSendTheirRequests(t *testing.T) {
	f, addr := startFakeCluster(t)
	cases := []struct {
		args []string
		code int
		want []string
		req  string
	}{
		{[]string{"members", "--token", "s3cret"}, 0, []string{"answered by coord-1, leader 1, term 3", "RAFT ID", "coord-1", "(not registered)", "learner", "42"}, ""},
		{[]string{"add", "4=coord-4@10.0.0.4:7444"}, 0, []string{"10.0.0.4:7444"}, `raft_id:4 node_id:"coord-4" addr:"10.0.0.4:7444" learner:true`},
		{[]string{"add", "--voter", "5=coord-5@10.0.0.5:7444"}, 0, nil, `raft_id:5 node_id:"coord-5" addr:"10.0.0.5:7444"`},
		{[]string{"remove", "3"}, 1, []string{"FailedPrecondition", `node "coord-2"`}, "raft_id:3"},
		{[]string{"transfer"}, 0, []string{"leader is now 3"}, ""},
		{[]string{"transfer", "2"}, 0, nil, "to_raft_id:2"},
		{[]string{"edges"}, 0, []string{"answered by coord-1: 2 edges", "EDGE", "coord-2:40"}, ""},
		{[]string{"decommission-edge", "e2"}, 0, []string{"edge e2 decommissioned"}, `node_id:"e2"`},
		{[]string{"revoke-edge", "e2"}, 0, []string{"edge e2 revoked"}, `node_id:"e2" revoked:true`},
		{[]string{"unrevoke-edge", "e2"}, 0, []string{"edge e2 may connect again"}, `node_id:"e2"`},
		{[]string{"place", "e1", "--on", "coord-2, coord-3"}, 0, []string{"edge e1 pinned: coord-2 coord-3 coord-9*(draining)", "* leaving"},
			`node_id:"e1" coordinators:"coord-2" coordinators:"coord-3"`},
		{[]string{"place", "--unpin", "e1"}, 0, []string{"edge e1 placed automatically: coord-1"}, `node_id:"e1" unpin:true`},
		{[]string{"rebalance"}, 0, []string{"2 placements changed"}, ""},
		{[]string{"rebalance", "--max-moves", "3"}, 0, nil, "max_moves:3"},
		{[]string{"drain", "coord-2"}, 0, []string{"coordinator coord-2 is draining; 5 placements changed"}, `node_id:"coord-2" state:COORDINATOR_STATE_DRAINING`},
		{[]string{"undrain", "coord-2"}, 0, []string{"coordinator coord-2 is active"}, `node_id:"coord-2" state:COORDINATOR_STATE_ACTIVE`},
		// coord-1 (raft id 1) alone holds e1's segments 1-40: refused
		// before RemoveMember is sent (the last request is Edges).
		{[]string{"remove", "1"}, 1, []string{"last live holder", "e1 (40 segments: 1-40)", "tributary cluster drain coord-1"}, ""},
		{[]string{"remove", "1", "--force"}, 1, []string{"warning: member 1 (coord-1) is the last live holder", "--force", "FailedPrecondition"}, "raft_id:1 force:true"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(append([]string{"cluster"}, append(c.args, "--addr", addr)...), &out, &errOut)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, c.code, errOut.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String()+errOut.String(), w) {
					t.Errorf("output does not mention %q:\n%s%s", w, out.String(), errOut.String())
				}
			}
			f.mu.Lock()
			last := f.got[len(f.got)-1]
			f.mu.Unlock()
			if _, ok := last.(*pb.RemoveMemberRequest); c.args[0] == "remove" && c.req == "" && ok {
				t.Errorf("RemoveMember was sent: %v", last)
			}
			if got := strings.ReplaceAll(last.(interface{ String() string }).String(), "  ", " "); c.req != "" && got != c.req {
				t.Errorf("request %q, want %q", got, c.req)
			}
		})
	}
	if f.token != "Bearer s3cret" {
		t.Errorf("token sent: %q", f.token)
	}
}

func TestCluster_MembersAsJSON(t *testing.T) {
	_, addr := startFakeCluster(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"cluster", "members", "--format", "json", "--addr", addr}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got struct {
		AnsweredBy string `json:"answered_by"`
		Members    []struct {
			RaftID  uint64 `json:"raft_id"`
			NodeID  string `json:"node_id"`
			Learner bool   `json:"learner"`
			Leader  bool   `json:"leader"`
			Match   uint64 `json:"match_index"`
		} `json:"members"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if got.AnsweredBy != "coord-1" || len(got.Members) != 2 || !got.Members[0].Leader || got.Members[0].Match != 42 || !got.Members[1].Learner {
		t.Errorf("json: %+v", got)
	}
}

func TestCluster_BadInvocations(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"grow"}, `unknown subcommand "grow"`},
		{[]string{"add"}, "takes 1 to 1 arguments"},
		{[]string{"add", "coord-4@h:1"}, "RAFTID=NODEID@HOST:PORT"},
		{[]string{"promote", "zero"}, `raft id "zero"`},
		{[]string{"remove", "0"}, "non-zero"},
		{[]string{"members", "--format", "yaml"}, "--format"},
		{[]string{"members", "--token", "t", "--addr", "10.1.2.3:7070"}, "without TLS"},
		{[]string{"edges", "e1"}, "takes 0 to 0 arguments"},
		{[]string{"place", "e1"}, "--on C1,C2"},
		{[]string{"place", "e1", "--on", ","}, "--on C1,C2"},
		{[]string{"place", "e1", "--on", "c1", "--unpin"}, "exclude each other"},
		{[]string{"place", "--on", "c1"}, "takes one argument, the edge's node id"},
		{[]string{"drain"}, "the coordinator's node id"},
		{[]string{"undrain", "c1", "c2"}, "takes one argument"},
		{[]string{"revoke-edge"}, "the edge's node id"},
		{[]string{"decommission-edge", "e1", "e2"}, "takes one argument"},
		{[]string{"rebalance", "now"}, "takes 0 to 0 arguments"},
		{[]string{"rebalance", "--max-moves", "-1"}, "max-moves"},
		{[]string{"remove", "--force"}, "takes 1 to 1 arguments"},
		{[]string{"config", "--dead-after", "10ms"}, "--dead-after"},
		{[]string{"config", "--dead-after", "soon"}, "--dead-after"},
		{[]string{"config", "--lag-budget", "100ms"}, "--lag-budget"},
		{[]string{"config", "--min-segment-points", "20000000"}, "--min-segment-points"},
	} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"cluster"}, c.args...), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 mentioning %q", c.args, code, errOut.String(), c.want)
		}
	}
}

func TestCoordinatorFlags_JoinAndPeersExcludeEachOther(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"coordinator", "--id", "c1", "--raft-id", "1", "--insecure-cluster",
		"--peers", "1=c1@127.0.0.1:7444", "--join", "2=c2@127.0.0.1:7445"}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "exclude each other") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if _, err := parsePeers("--join", "2=c2@127.0.0.1:7445,x"); err == nil || !strings.Contains(err.Error(), "--join item 2") {
		t.Errorf("bad --join item: %v", err)
	}
}

func TestClusterEdges_TableMarksLeavingReplicasAndStates(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &pb.EdgesResponse{AnsweredBy: "c1", Edges: []*pb.EdgeInfo{
		{NodeId: "pi-1", SecondsSinceHeartbeat: 3.2, WatermarkTimeMs: now.UnixMilli() - 81_000, UnderReplicatedSegments: 52, UnsourcedSegments: 12,
			Pinned: true, Labels: map[string]string{"site": "berlin", "model": "pi4b"}, Replicas: []*pb.ReplicaInfo{
				{Coordinator: "c1", State: "active"},
				{Coordinator: "c3", State: "active", Lacks: []*pb.LackRun{{FirstSeq: 1, LastSeq: 40}, {FirstSeq: 50, LastSeq: 61}}},
				{Coordinator: "c2", State: "down", Leaving: true, Lacks: []*pb.LackRun{{FirstSeq: 7, LastSeq: 7}}},
			}},
		{NodeId: "pi-2", SecondsSinceHeartbeat: -1, Revoked: true, Replicas: []*pb.ReplicaInfo{{Coordinator: "c1", State: "draining"}}},
	}}
	var b bytes.Buffer
	if err := printCluster(&b, "table", r, now); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"answered by c1: 2 edges",
		"EDGE  REPLICAS             LACKING         UNDER-REPL  UNSOURCED  LAG  HEARTBEAT  FLAGS  LABELS",
		"pi-1  c1 c3 c2*(down)      c3:52 c2:1      52          12         1m21s  3.2s ago   pinned  model=pi4b,site=berlin",
		"pi-2  c1(draining)         -               0           0          -    never      revoked  -",
		"* leaving: being replaced; still read, and kept until the active replicas hold what it holds",
	}
	got := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got:\n%s", b.String())
	}
	for i := range want {
		if strings.Join(strings.Fields(got[i]), " ") != strings.Join(strings.Fields(want[i]), " ") {
			t.Errorf("line %d:\n got %q\nwant %q", i, got[i], want[i])
		}
	}

	b.Reset()
	if err := printCluster(&b, "json", r, now); err != nil {
		t.Fatal(err)
	}
	var j edgesJSON
	if err := json.Unmarshal(b.Bytes(), &j); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	e := j.Edges[0]
	if j.TimeMs != now.UnixMilli() || e.LagSeconds == nil || *e.LagSeconds != 81 || e.Replicas[1].LackingSegments != 52 ||
		len(e.Replicas[1].Lacks) != 2 || !e.Replicas[2].Leaving || e.Replicas[2].State != "down" || j.Edges[1].LagSeconds != nil {
		t.Fatalf("json:\n%s", b.String())
	}
}

// TestCluster_PlacementCommandsAgainstACoordinator runs every placement
// subcommand against a real coordinator with a shipping edge, as a user
// would, and checks what each changed in the catalog.
func TestCluster_PlacementCommandsAgainstACoordinator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a coordinator and an edge")
	}
	f := startTestFleet(t)
	f.addEdge(t, "edge-a").write(t, 300)
	f.addEdge(t, "edge-b")
	addr := []string{"--addr", f.grpcAddr}
	cl := func(args ...string) (int, string) {
		t.Helper()
		code, out, errOut := cli(append(append([]string{"cluster"}, args...), addr...)...)
		return code, out + errOut
	}
	cat := f.c.Catalog()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, _ := cat.Progress("edge-a")
		if _, ok := cat.Node("edge-b"); ok && len(p.Held) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cloud holds nothing of edge-a, or edge-b never registered")
		}
		time.Sleep(50 * time.Millisecond)
	}

	code, out := cl("edges", "--format", "json")
	var edges edgesJSON
	if err := json.Unmarshal([]byte(out), &edges); code != 0 || err != nil {
		t.Fatalf("edges: exit %d %v\n%s", code, err, out)
	}
	if edges.AnsweredBy != "c1" || len(edges.Edges) != 2 || edges.Edges[0].NodeID != "edge-a" || edges.Edges[0].HeldPoints == 0 ||
		len(edges.Edges[0].Replicas) != 1 || edges.Edges[0].Replicas[0].Coordinator != "c1" || edges.Edges[0].LagSeconds == nil {
		t.Fatalf("edges: %+v", edges)
	}
	if code, out := cl("edges"); code != 0 || !strings.Contains(out, "edge-a  c1") {
		t.Fatalf("edges table: exit %d\n%s", code, out)
	}

	// place: pin, errors, unpin.
	if code, out := cl("place", "edge-a", "--on", "c1"); code != 0 || !strings.Contains(out, "edge edge-a pinned: c1") {
		t.Fatalf("place: exit %d\n%s", code, out)
	}
	if p, _ := cat.Placement("edge-a"); !p.Pinned {
		t.Fatalf("edge-a not pinned: %+v", p)
	}
	if code, out := cl("place", "edge-a", "--on", "c7"); code != 1 || !strings.Contains(out, "NotFound") || !strings.Contains(out, "c7") {
		t.Fatalf("place on an unknown coordinator: exit %d\n%s", code, out)
	}
	if code, out := cl("place", "edge-a", "--unpin", "--format", "json"); code != 0 || !strings.Contains(out, `"pinned": false`) {
		t.Fatalf("unpin: exit %d\n%s", code, out)
	}
	if p, _ := cat.Placement("edge-a"); p.Pinned {
		t.Fatalf("edge-a still pinned: %+v", p)
	}
	if code, out := cl("rebalance", "--max-moves", "3"); code != 0 || !strings.Contains(out, "0 placements changed") {
		t.Fatalf("rebalance: exit %d\n%s", code, out)
	}

	// drain: the only coordinator cannot be drained; undrain is harmless.
	if code, out := cl("drain", "c1"); code != 1 || !strings.Contains(out, "last active coordinator") {
		t.Fatalf("drain the only coordinator: exit %d\n%s", code, out)
	}
	if code, out := cl("drain", "edge-a"); code != 1 || !strings.Contains(out, "InvalidArgument") {
		t.Fatalf("drain an edge: exit %d\n%s", code, out)
	}
	if code, out := cl("undrain", "c1"); code != 0 || !strings.Contains(out, "coordinator c1 is active") {
		t.Fatalf("undrain: exit %d\n%s", code, out)
	}

	// revoke-edge and unrevoke-edge.
	if code, out := cl("revoke-edge", "edge-b"); code != 0 || !strings.Contains(out, "edge edge-b revoked") {
		t.Fatalf("revoke: exit %d\n%s", code, out)
	}
	if n, _ := cat.Node("edge-b"); !n.Revoked {
		t.Fatal("edge-b not revoked")
	}
	if code, out := cl("edges"); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("edges after revoke: exit %d\n%s", code, out)
	}
	if code, _ := cl("unrevoke-edge", "edge-b"); code != 0 {
		t.Fatal("unrevoke failed")
	}
	if n, _ := cat.Node("edge-b"); n.Revoked {
		t.Fatal("edge-b still revoked")
	}

	// remove: c1 is the last holder of edge-a's segments, so the CLI
	// refuses; with --force the leader refuses to remove itself.
	if code, out := cl("remove", "1"); code != 1 || !strings.Contains(out, "last live holder of segments of 1 edge: edge-a") ||
		!strings.Contains(out, "tributary cluster drain c1") {
		t.Fatalf("remove the last holder: exit %d\n%s", code, out)
	}
	if code, out := cl("remove", "1", "--force"); code != 1 || !strings.Contains(out, "warning:") || !strings.Contains(out, "transfer leadership first") {
		t.Fatalf("remove --force: exit %d\n%s", code, out)
	}

	// config: write quorum and dead-after.
	code, out = cl("config", "--write-quorum", "1", "--dead-after", "2m", "--format", "json")
	var cfg fleetConfigJSON
	if err := json.Unmarshal([]byte(out), &cfg); code != 0 || err != nil || cfg.WriteQuorum != 1 || cfg.DeadAfterMs != 120_000 {
		t.Fatalf("config: exit %d %v\n%s", code, err, out)
	}
	if c := cat.Config(); c.WriteQuorum != 1 || c.DeadAfterMs != 120_000 {
		t.Fatalf("catalog config: %+v", c)
	}
	if code, out := cl("config"); code != 0 || !strings.Contains(out, "write quorum        1") || !strings.Contains(out, "dead after          2m0s") {
		t.Fatalf("config print: exit %d\n%s", code, out)
	}

	// decommission-edge: a coordinator is refused; a stopped edge goes.
	if code, out := cl("decommission-edge", "c1"); code != 1 || !strings.Contains(out, "cluster remove") {
		t.Fatalf("decommission a coordinator: exit %d\n%s", code, out)
	}
	if code, out := cl("decommission-edge", "edge-z"); code != 1 || !strings.Contains(out, "NotFound") {
		t.Fatalf("decommission an unknown edge: exit %d\n%s", code, out)
	}
	f.edges["edge-b"].stop()
	if code, out := cl("decommission-edge", "edge-b"); code != 0 || !strings.Contains(out, "edge edge-b decommissioned") {
		t.Fatalf("decommission: exit %d\n%s", code, out)
	}
	if _, ok := cat.Node("edge-b"); ok {
		t.Fatal("edge-b still registered")
	}
}
