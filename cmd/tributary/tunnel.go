package main

import (
	"fmt"
	"log/slog"

	"github.com/tributarydb/tributary/internal/tunnel"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// startQueryTunnels runs a tunnel.Edge beside the Shipper: the node
// opens a query tunnel to every coordinator of --replicate-to, with the
// Shipper's security, keepalives and backoff, and serves q (its
// QueryService) on it as node nodeID, so that coordinators reach it behind
// NAT. Stop it before closing the node.
func startQueryTunnels(ro *replicator.Options, nodeID string, q pb.QueryServiceServer, log *slog.Logger) (*background, error) {
	t, err := tunnel.NewEdge(ro.TunnelOptions(nodeID, q))
	if err != nil {
		return nil, fmt.Errorf("query tunnels: %w", err)
	}
	return goBackground("query tunnels", t.Run, log), nil
}
