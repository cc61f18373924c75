package replicator

import (
	"time"

	"github.com/tributarydb/tributary/internal/tunnel"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// TunnelOptions returns the options of the edge's query tunnels
// (internal/tunnel) to the Shipper's coordinators, with its security,
// keepalives, instrumentation and backoff (the backoff capped at 30 s: a
// tunnel carries interactive queries). o must have been validated. q is
// the QueryService served on every tunnel, as node nodeID.
func (o *Options) TunnelOptions(nodeID string, q pb.QueryServiceServer) tunnel.EdgeOptions {
	return tunnel.EdgeOptions{
		NodeID: nodeID, Targets: o.Targets, DialOptions: o.dialOptions(), Query: q,
		BackoffInitial: o.BackoffInitial, BackoffMax: min(o.BackoffMax, 30*time.Second), BackoffJitter: o.BackoffJitter,
		Logger: o.Logger, MeterProvider: o.MeterProvider, TracerProvider: o.TracerProvider,
	}
}
