package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"

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
