// Package clusterv1 holds the Go code generated from raft.proto, the
// cluster-internal gRPC API between Tributary's cloud coordinators
// (version 1): RaftService streams raft messages from one coordinator to
// another over mutual TLS. The .proto file is the specification; run
// `make generate` after changing it and commit the result.
package clusterv1
