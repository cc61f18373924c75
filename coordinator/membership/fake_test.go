package membership

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serverCluster is Cluster in memory: the member at each cluster address
// is a ClusterServiceServer called directly; an address without one does
// not answer. The map is not changed once the loops run.
type serverCluster map[string]pb.ClusterServiceServer

var _ Cluster = serverCluster(nil)

func (c serverCluster) member(addr string) (pb.ClusterServiceServer, error) {
	if s, ok := c[addr]; ok {
		return s, nil
	}
	return nil, status.Errorf(codes.Unavailable, "no member answers at %s", addr)
}

func (c serverCluster) Members(ctx context.Context, addr string) (*pb.MembersResponse, error) {
	s, err := c.member(addr)
	if err != nil {
		return nil, err
	}
	return s.Members(ctx, &pb.MembersRequest{})
}

func (c serverCluster) AddMember(ctx context.Context, addr string, req *pb.AddMemberRequest) error {
	s, err := c.member(addr)
	if err == nil {
		_, err = s.AddMember(ctx, req)
	}
	return err
}

func (c serverCluster) PromoteMember(ctx context.Context, addr string, raftID uint64) error {
	s, err := c.member(addr)
	if err == nil {
		_, err = s.PromoteMember(ctx, &pb.PromoteMemberRequest{RaftId: raftID})
	}
	return err
}

func (c serverCluster) RemoveMember(ctx context.Context, addr string, req *pb.RemoveMemberRequest) error {
	s, err := c.member(addr)
	if err == nil {
		_, err = s.RemoveMember(ctx, req)
	}
	return err
}

func (c serverCluster) TransferLeadership(ctx context.Context, addr string, to uint64) (uint64, error) {
	s, err := c.member(addr)
	if err != nil {
		return 0, err
	}
	resp, err := s.TransferLeadership(ctx, &pb.TransferLeadershipRequest{ToRaftId: to})
	if err != nil {
		return 0, err
	}
	return resp.LeaderRaftId, nil
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// countingCluster counts the Members calls it passes on.
type countingCluster struct {
	Cluster
	members atomic.Int64
}

func (c *countingCluster) Members(ctx context.Context, addr string) (*pb.MembersResponse, error) {
	c.members.Add(1)
	return c.Cluster.Members(ctx, addr)
}
