package membership

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/grpc"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// GRPCCluster is Cluster over gRPC: each call dials the member's client
// listener, makes the call and closes the connection (the loops call
// seldom, and a member that moved is found at its new address).
type GRPCCluster struct {
	// ClientAddr maps a member's cluster address to its client listener
	// (ClientAddrAtPort). Required.
	ClientAddr func(clusterAddr string) (string, error)
	// DialOptions secure the connections (transport credentials are
	// required) and authenticate the calls.
	DialOptions []grpc.DialOption
}

var _ Cluster = (*GRPCCluster)(nil)

// ClientAddrAtPort maps a cluster address to the same host at port: every
// member listens on the same ports, as in the Helm chart.
func ClientAddrAtPort(port string) func(clusterAddr string) (string, error) {
	return func(clusterAddr string) (string, error) {
		host, _, err := net.SplitHostPort(clusterAddr)
		if err != nil {
			return "", fmt.Errorf("cluster address %q: %w", clusterAddr, err)
		}
		return net.JoinHostPort(host, port), nil
	}
}

// call runs f against the ClusterService of the member at clusterAddr.
func (g *GRPCCluster) call(clusterAddr string, f func(pb.ClusterServiceClient) error) error {
	addr, err := g.ClientAddr(clusterAddr)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(addr, g.DialOptions...)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	return f(pb.NewClusterServiceClient(conn))
}

// Members implements Cluster.
func (g *GRPCCluster) Members(ctx context.Context, clusterAddr string) (view *pb.MembersResponse, err error) {
	err = g.call(clusterAddr, func(c pb.ClusterServiceClient) error {
		view, err = c.Members(ctx, &pb.MembersRequest{})
		return err
	})
	return view, err
}

// AddMember implements Cluster.
func (g *GRPCCluster) AddMember(ctx context.Context, clusterAddr string, req *pb.AddMemberRequest) error {
	return g.call(clusterAddr, func(c pb.ClusterServiceClient) error {
		_, err := c.AddMember(ctx, req)
		return err
	})
}

// PromoteMember implements Cluster.
func (g *GRPCCluster) PromoteMember(ctx context.Context, clusterAddr string, raftID uint64) error {
	return g.call(clusterAddr, func(c pb.ClusterServiceClient) error {
		_, err := c.PromoteMember(ctx, &pb.PromoteMemberRequest{RaftId: raftID})
		return err
	})
}

// RemoveMember implements Cluster.
func (g *GRPCCluster) RemoveMember(ctx context.Context, clusterAddr string, req *pb.RemoveMemberRequest) error {
	return g.call(clusterAddr, func(c pb.ClusterServiceClient) error {
		_, err := c.RemoveMember(ctx, req)
		return err
	})
}

// TransferLeadership implements Cluster.
func (g *GRPCCluster) TransferLeadership(ctx context.Context, clusterAddr string, toRaftID uint64) (leader uint64, err error) {
	err = g.call(clusterAddr, func(c pb.ClusterServiceClient) error {
		resp, err := c.TransferLeadership(ctx, &pb.TransferLeadershipRequest{ToRaftId: toRaftID})
		if err == nil {
			leader = resp.LeaderRaftId
		}
		return err
	})
	return leader, err
}
