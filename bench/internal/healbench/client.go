package healbench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/internal/promtext"
	"github.com/tributarydb/tributary/internal/qstream"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// metricOf is the metric edge writes.
func metricOf(edge string) string { return "heal_" + strings.ReplaceAll(edge, "-", "_") }

// dial opens a plaintext connection (loopback only).
func dial(addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// write sends one request: n points per series of edge's metric from
// startMs, stepMs apart, and records it in l as acknowledged or not.
func write(ctx context.Context, wc pb.WriteServiceClient, edge string, l *ledger, startMs, stepMs int64, n int) error {
	req := &pb.WriteRequest{}
	for i := range l.series {
		b := &pb.SeriesBatch{Series: &pb.Series{Labels: []*pb.Label{{Name: "__name__", Value: metricOf(edge)}, {Name: "s", Value: seriesName(i)}}},
			TimestampsMs: make([]int64, n), Values: make([]float64, n)}
		for k := range n {
			ts := startMs + int64(k)*stepMs
			b.TimestampsMs[k], b.Values[k] = ts, value(i, ts)
		}
		req.Batches = append(req.Batches, b)
	}
	resp, err := wc.Write(ctx, req)
	if err == nil && (resp.Rejected != 0 || resp.Accepted != int64(n*l.series)) {
		err = fmt.Errorf("%d accepted, %d rejected: %v", resp.Accepted, resp.Rejected, resp.Rejections)
	}
	if rerr := l.record(startMs, stepMs, n, err == nil); rerr != nil {
		return rerr
	}
	if err != nil {
		return fmt.Errorf("write to %s: %w", edge, err)
	}
	return nil
}

// queryFront asks a coordinator's query front end for the raw points of
// edge's metric in [fromMs, toMs]: points by series and the warnings.
func queryFront(ctx context.Context, qc pb.QueryServiceClient, edge string, fromMs, toMs int64) (map[string][]point, []string, error) {
	stream, err := qc.Query(ctx, &pb.QueryRequest{
		Matchers: []*pb.Matcher{{Type: pb.Matcher_EQUAL, Name: "__name__", Value: metricOf(edge)}},
		StartMs:  fromMs, EndMs: toMs, Mode: pb.QueryMode_QUERY_MODE_RAW})
	if err != nil {
		return nil, nil, err
	}
	out := pointsByName{}
	info, err := qstream.Query(stream, "s", out.add)
	return out, info.Warnings, err
}

// queryReplica asks one coordinator's replica store alone
// (ReplicaService/Query on its cluster listener) for edge's points.
func queryReplica(ctx context.Context, rc clusterv1.ReplicaServiceClient, edge string, fromMs, toMs int64) (map[string][]point, error) {
	stream, err := rc.Query(ctx, &clusterv1.QueryRequest{Edges: []string{edge},
		Matchers: []*clusterv1.Matcher{{Type: clusterv1.MatchType_MATCH_TYPE_EQUAL, Name: "__name__", Value: metricOf(edge)}},
		StartMs:  fromMs, EndMs: toMs, Mode: clusterv1.QueryMode_QUERY_MODE_RAW})
	if err != nil {
		return nil, err
	}
	out := pointsByName{}
	_, err = qstream.Replica(stream, "s", "", out.add)
	return out, err
}

// pointsByName are the points of an answer by the value of label "s".
type pointsByName map[string][]point

func (p pointsByName) add(name string, ts []int64, vs []float64) error {
	for i, t := range ts {
		p[name] = append(p[name], point{t, vs[i]})
	}
	return nil
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// gauge reads the unlabelled sample of name from GET /metrics at addr.
func gauge(ctx context.Context, addr, name string) (float64, error) {
	m, err := metricsOf(ctx, addr)
	if err != nil {
		return 0, err
	}
	v, ok := m[name]
	if !ok {
		return 0, fmt.Errorf("metrics of %s: no sample of %s", addr, name)
	}
	return v, nil
}

// metricsOf reads the unlabelled samples of GET /metrics at addr, by name.
func metricsOf(ctx context.Context, addr string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	m, err := promtext.Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", addr, err)
	}
	return m, nil
}
