package coordinator

import (
	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/internal/telemetry"
)

// grpcServerOption instruments a server of this coordinator (the intake,
// the cluster listener) with otelgrpc and the coordinator's providers.
func (c *Coordinator) grpcServerOption() grpc.ServerOption {
	return telemetry.GRPCServerOption(c.opts.MeterProvider, c.opts.TracerProvider)
}

// grpcDialOption instruments a client connection of this coordinator (raft
// peers, other coordinators' replica services, edges' query APIs, the
// query tunnels).
func (c *Coordinator) grpcDialOption() grpc.DialOption {
	return telemetry.GRPCDialOption(c.opts.MeterProvider, c.opts.TracerProvider)
}
