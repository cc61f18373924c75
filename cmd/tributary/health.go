package main

import (
	"errors"

	"github.com/tributarydb/tributary/node"
)

// Readiness checks of the processes, served as /readyz on the HTTP
// listener (httpapi.RegisterHealth, without a token: see openPaths) and as
// grpc.health.v1 on the gRPC listener (grpcapi.Health). An edge node
// passes nodeReady(n); a coordinator passes its own checks (and nodeReady
// of its in-process edge, if it has one).

// nodeReady is the readiness check of an edge node: ready once Open
// returned (WAL replayed, RocksDB open) and until Close starts, while its
// store takes flushes and no damage is on record (node.Node.Ready says
// why not, and what to do).
func nodeReady(n *node.Node) func() error {
	return func() error {
		if n == nil {
			return errors.New("node: not open")
		}
		return n.Ready()
	}
}

// nodeWriteReady is the check of an edge node's WriteService in the gRPC
// health service: writes are accepted (into the WAL, within its bounds),
// even while the store cannot flush.
func nodeWriteReady(n *node.Node) func() error {
	return func() error {
		if n == nil {
			return errors.New("node: not open")
		}
		return n.WriteReady()
	}
}
