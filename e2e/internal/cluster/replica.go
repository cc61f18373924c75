package cluster

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/internal/qstream"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// ReplicaQueryRaw asks one coordinator's replica store, and it alone, for
// the raw points of metric that it holds of edge in [startMs, endMs]:
// tributary.cluster.v1.ReplicaService/Query on its cluster listener
// (clusterAddr), the call other coordinators' query front ends make. No
// front end, catalog or other replica takes part, so the answer is what
// that store holds. The fleet must run with --insecure-cluster (the
// caller presents no certificate).
func ReplicaQueryRaw(ctx context.Context, clusterAddr, edge, metric string, startMs, endMs int64) (RawAnswer, error) {
	ans := RawAnswer{Points: map[string][]Sample{}}
	info, err := replicaQuery(ctx, clusterAddr, "replica query", edge, &clusterv1.QueryRequest{
		Edges:    []string{edge},
		Matchers: []*clusterv1.Matcher{{Type: clusterv1.MatchType_MATCH_TYPE_EQUAL, Name: "__name__", Value: metric}},
		StartMs:  startMs, EndMs: endMs, Mode: clusterv1.QueryMode_QUERY_MODE_RAW,
	}, ans.add)
	ans.Warnings = info.Warnings
	return ans, err
}

// replicaQuery sends req to the ReplicaService on one coordinator's
// cluster listener (plaintext: the fleet runs with --insecure-cluster)
// and reads the answer into points (see qstream.Replica; edge, when set,
// is the only edge the answer may name); what names the query in errors.
func replicaQuery(ctx context.Context, clusterAddr, what, edge string, req *clusterv1.QueryRequest, points qstream.Points) (qstream.Info, error) {
	conn, err := grpc.NewClient(clusterAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return qstream.Info{}, fmt.Errorf("%s %s: connect: %w", what, clusterAddr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := clusterv1.NewReplicaServiceClient(conn).Query(ctx, req)
	if err != nil {
		return qstream.Info{}, fmt.Errorf("%s %s: %w", what, clusterAddr, err)
	}
	info, err := qstream.Replica(stream, SeriesLabel, edge, points)
	if err != nil {
		return info, fmt.Errorf("%s %s: %w", what, clusterAddr, err)
	}
	return info, nil
}

// SeqRun is an inclusive run of segment sequence numbers.
type SeqRun struct{ First, Last uint64 }

// ReplicaHoldings asks one coordinator's replica store which runs of
// edge's segments it holds (ReplicaService/Holdings: segments stored and
// ranges copied), as the store itself says.
func ReplicaHoldings(ctx context.Context, clusterAddr, edge string) ([]SeqRun, error) {
	conn, err := grpc.NewClient(clusterAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("replica holdings %s: connect: %w", clusterAddr, err)
	}
	defer conn.Close()
	resp, err := clusterv1.NewReplicaServiceClient(conn).Holdings(ctx, &clusterv1.HoldingsRequest{Edge: edge})
	if err != nil {
		return nil, fmt.Errorf("replica holdings of %s at %s: %w", edge, clusterAddr, err)
	}
	if resp.Truncated {
		return nil, fmt.Errorf("replica holdings of %s at %s: truncated answer", edge, clusterAddr)
	}
	out := make([]SeqRun, len(resp.Ranges))
	for i, r := range resp.Ranges {
		out[i] = SeqRun{r.FirstSeq, r.LastSeq}
	}
	return out, nil
}

// Covers reports whether runs (ascending, disjoint) hold every number of
// first..last.
func Covers(runs []SeqRun, first, last uint64) bool {
	next := first
	for _, r := range runs {
		if next > last {
			return true
		}
		if r.First > next {
			return false
		}
		if r.Last >= next {
			next = r.Last + 1
		}
	}
	return next > last
}
