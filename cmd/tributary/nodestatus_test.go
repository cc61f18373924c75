package main

import (
	"context"
	"testing"
	"time"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// testNodeAPI is the gRPC API of tributary node over n, reporting version.
func testNodeAPI(n *node.Node, version string) *grpcapi.Server {
	return grpcapi.New(n, grpcapi.Options{Status: nodeStatus(n, version, nil)})
}

func TestNodeStatus_ReportsTheNodesCountersAndReplication(t *testing.T) {
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "pi-7"})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	now := time.Now().UnixMilli()
	res, err := n.Write(context.Background(), []model.Batch{
		{Labels: labels.FromStrings(labels.MetricName, "t", "room", "a"), Ts: []int64{now, now + 1}, Vs: []float64{1, 2}},
		{Labels: labels.FromStrings(labels.MetricName, "t", "room", "b"), Ts: []int64{now}, Vs: []float64{1, 2}},
	})
	if err != nil || res.Accepted != 2 || res.Rejected != 2 {
		t.Fatalf("write: %+v %v", res, err)
	}
	for _, repl := range []*pb.ReplicationStatus{nil, {Connected: true, AckedThrough: 9}} {
		var f func() *pb.ReplicationStatus
		if repl != nil {
			f = func() *pb.ReplicationStatus { return repl }
		}
		st, err := nodeStatus(n, "v1.2.3", f)(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.NodeId != "pi-7" || st.Role != "edge" || st.Version != "v1.2.3" || st.Series != 1 || st.HeadSeries != 1 ||
			st.PointsAcceptedTotal != 2 || st.PointsRejectedTotal != 2 || st.HeadSamples != 2 {
			t.Errorf("status %v", st)
		}
		if h := st.StoreHealth; h == nil || !h.Healthy || h.Reason != node.ReasonOK {
			t.Errorf("store health %v", h)
		}
		if st.Replication != repl {
			t.Errorf("replication %v, want %v", st.Replication, repl)
		}
	}
}
