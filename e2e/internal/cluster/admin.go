package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Admin runs `tributary cluster SUB ARGS... --addr CO` (the operator's
// command, with co's client listener) and returns its standard output and
// error; err is set when it exits non-zero.
func (c *Cluster) Admin(ctx context.Context, co *Coordinator, sub string, args ...string) (stdout, stderr string, err error) {
	argv := append([]string{"cluster", sub}, args...)
	argv = append(argv, "--addr", co.GRPC)
	cmd := exec.CommandContext(ctx, c.Opts.Bin, argv...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		return o.String(), e.String(), fmt.Errorf("tributary %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(e.String()))
	}
	return o.String(), e.String(), nil
}

// EdgesView is `tributary cluster edges --format json`.
type EdgesView struct {
	AnsweredBy string     `json:"answered_by"`
	TimeMs     int64      `json:"time_ms"`
	Edges      []EdgeView `json:"edges"`
}

// EdgeView is one edge of an EdgesView.
type EdgeView struct {
	NodeID                  string        `json:"node_id"`
	Replicas                []ReplicaView `json:"replicas"`
	SecondsSinceHeartbeat   float64       `json:"seconds_since_heartbeat"`
	Revoked                 bool          `json:"revoked"`
	Pinned                  bool          `json:"pinned"`
	AckedThrough            uint64        `json:"acked_through"`
	HeldPoints              uint64        `json:"held_points"`
	UnderReplicatedSegments uint64        `json:"under_replicated_segments"`
	UnsourcedSegments       uint64        `json:"unsourced_segments"`
}

// ReplicaView is one replica of an EdgeView.
type ReplicaView struct {
	Coordinator     string    `json:"coordinator"`
	Leaving         bool      `json:"leaving"`
	State           string    `json:"state"`
	LackingSegments uint64    `json:"lacking_segments"`
	Lacks           []LackRun `json:"lacks"`
}

// LackRun is a run of held segments a replica lacks.
type LackRun struct {
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	MinTimeMs int64  `json:"min_time_ms"`
	MaxTimeMs int64  `json:"max_time_ms"`
}

// Edge returns the view of edge id.
func (v EdgesView) Edge(id string) (EdgeView, bool) {
	return first(v.Edges, func(e EdgeView) bool { return e.NodeID == id })
}

// first returns the first of xs that match accepts.
func first[T any](xs []T, match func(T) bool) (T, bool) {
	for _, x := range xs {
		if match(x) {
			return x, true
		}
	}
	var zero T
	return zero, false
}

// ClusterEdges runs `tributary cluster edges --format json` against co.
func (c *Cluster) ClusterEdges(ctx context.Context, co *Coordinator) (EdgesView, error) {
	out, _, err := c.Admin(ctx, co, "edges", "--format", "json")
	if err != nil {
		return EdgesView{}, err
	}
	var v EdgesView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return EdgesView{}, fmt.Errorf("cluster edges from %s: decode: %w", co.ID, err)
	}
	return v, nil
}

// Members asks co's ClusterService for the raft members as it sees them.
func Members(ctx context.Context, co *Coordinator) (*pb.MembersResponse, error) {
	conn, err := grpc.NewClient(co.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("members from %s: %w", co.ID, err)
	}
	defer conn.Close()
	r, err := pb.NewClusterServiceClient(conn).Members(ctx, &pb.MembersRequest{})
	if err != nil {
		return nil, fmt.Errorf("members from %s: %w", co.ID, err)
	}
	return r, nil
}
