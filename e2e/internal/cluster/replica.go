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
	conn, err := grpc.NewClient(clusterAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return RawAnswer{}, fmt.Errorf("replica query %s: connect: %w", clusterAddr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := clusterv1.NewReplicaServiceClient(conn).Query(ctx, &clusterv1.QueryRequest{
		Edges:    []string{edge},
		Matchers: []*clusterv1.Matcher{{Type: clusterv1.MatchType_MATCH_TYPE_EQUAL, Name: "__name__", Value: metric}},
		StartMs:  startMs, EndMs: endMs, Mode: clusterv1.QueryMode_QUERY_MODE_RAW,
	})
	if err != nil {
		return RawAnswer{}, fmt.Errorf("replica query %s: %w", clusterAddr, err)
	}
	ans := RawAnswer{Points: map[string][]Sample{}}
	info, err := qstream.Replica(stream, SeriesLabel, edge, ans.add)
	ans.Warnings = info.Warnings
	if err != nil {
		return ans, fmt.Errorf("replica query %s: %w", clusterAddr, err)
	}
	return ans, nil
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
