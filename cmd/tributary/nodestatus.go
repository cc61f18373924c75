package main

import (
	"context"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// nodeStatus answers the gRPC Status call of tributary node: the node's
// counters, its version and role ("edge"), and, with repl, its
// replication (an edge that replicates to coordinators).
func nodeStatus(n *node.Node, version string, repl func() *pb.ReplicationStatus) grpcapi.StatusFunc {
	return func(context.Context) (*pb.StatusResponse, error) {
		st := n.Status()
		var r *pb.ReplicationStatus
		if repl != nil {
			r = repl()
		}
		return &pb.StatusResponse{
			Replication:                r,
			NodeId:                     st.NodeID,
			Role:                       "edge",
			Version:                    version,
			Series:                     int64(st.Series),
			HeadSeries:                 int64(st.Series),
			HeadSamples:                st.HeadSamples,
			WalSegmentSeq:              st.WAL.OpenSeq,
			WalBytes:                   st.WAL.Bytes,
			PointsAcceptedTotal:        st.Accepted,
			PointsRejectedTotal:        st.Rejected,
			UptimeMs:                   st.Uptime.Milliseconds(),
			CorruptSegmentsQuarantined: st.WALQuarantined,
			StoreHealth:                storeHealth(st),
		}, nil
	}
}

// storeHealth is the store health part of a node's status.
func storeHealth(st node.Status) *pb.StoreHealth {
	h := st.Store
	out := &pb.StoreHealth{Healthy: h.Healthy, Reason: h.Reason, Error: h.Err, WritesRefused: h.WritesRefused,
		Damaged: h.Damaged, QuarantinedFiles: st.StoreQuarantinedFiles, LostPoints: st.StoreLostPoints,
		UnrestoredRanges: int64(st.StoreUnrestoredRanges)}
	if !h.Healthy && !h.FailingSince.IsZero() {
		out.FailingSinceMs = h.FailingSince.UnixMilli()
	}
	return out
}
