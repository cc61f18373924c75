// Package tributaryv1 holds the Go code generated from tributary.proto, the
// public gRPC API of Tributary (version 1): WriteService for columnar sample
// batches and QueryService for raw, downsampled, grouped and last-point
// queries plus series metadata; and from replication.proto,
// ReplicationService, the edge-to-coordinator segment shipping stream; and
// from cluster.proto, ClusterService, membership of the coordinators' raft
// cluster. The
// .proto files are the specification; run `make generate` after changing
// them and commit the result.
package tributaryv1
