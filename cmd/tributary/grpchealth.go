package main

import (
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// nodeGRPCHealth is an edge node's health service (grpc.health.v1):
// overall and QueryService follow Ready (store healthy), WriteService
// follows WriteReady (writes still accepted, into the WAL, while the store
// cannot flush).
func nodeGRPCHealth(n *node.Node) *grpcapi.Health {
	ready, writes := []func() error{nodeReady(n)}, []func() error{nodeWriteReady(n)}
	return grpcapi.NewHealth(grpcapi.HealthOptions{Overall: ready, Services: map[string][]func() error{
		pb.WriteService_ServiceDesc.ServiceName: writes,
		pb.QueryService_ServiceDesc.ServiceName: ready,
	}})
}
