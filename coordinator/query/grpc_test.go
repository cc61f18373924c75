package query_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// serveGRPC serves register on an in-memory listener and returns a client
// connection's dial options.
func serveGRPC(t *testing.T, register func(*grpc.Server)) []grpc.DialOption {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	register(g)
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })}
}

func TestEdgeClient_FrontendOverGRPCEdgesMatchesTheOracle(t *testing.T) {
	f := theFleet
	clients := map[string]*query.EdgeClient{}
	for id, n := range f.edge {
		opts := serveGRPC(t, grpcapi.New(n, grpcapi.Options{}).Register)
		c, err := query.DialEdge("passthrough:///"+id, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients[id] = c
	}
	fe := f.frontend(t, faults{}, func(o *query.Options) {
		o.Edge = func(id, _ string) (query.Source, error) { return clients[id], nil }
	})
	ctx := context.Background()
	qs := queries(t, f.start)
	maps.Copy(qs, freshQueries(t, f.start))
	for name, q := range qs {
		want, _ := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return f.oracle.Query(ctx, q, emit) })
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) { return fe.Query(ctx, q, emit) })
		sameAnswer(t, name, got, want)
		if len(info.Warnings) != 0 {
			t.Fatalf("%s: warnings %q", name, info.Warnings)
		}
	}
	sameMetadata(t, fe, f.oracle)
	// A bad selector is the edge's InvalidArgument, classified as such.
	if _, err := clients["e1"].Series(ctx, []*labels.Matcher{must(t, labels.MatchRegexp, "host", ".*")}, 0); !errors.Is(err, model.ErrBadQuery) {
		t.Fatalf("series with a bad selector: %v", err)
	}
}

func TestQueryServer_OverTheFrontendCarriesWarnings(t *testing.T) {
	f := theFleet
	fe := f.frontend(t, faults{deadEdges: []string{"e1"}}, nil)
	opts := serveGRPC(t, grpcapi.New(fe, grpcapi.Options{}).RegisterQuery)
	conn, err := grpc.NewClient("passthrough:///coordinator", opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	qc := pb.NewQueryServiceClient(conn)
	ctx := context.Background()
	req := &pb.QueryRequest{
		Matchers: []*pb.Matcher{{Type: pb.Matcher_EQUAL, Name: "__name__", Value: "cpu"}},
		StartMs:  f.start, EndMs: t0.UnixMilli(), Mode: pb.QueryMode_QUERY_MODE_DOWNSAMPLE, StepMs: hour,
		Downsample: pb.Aggregate_AGGREGATE_SUM, Aggregate: pb.Aggregate_AGGREGATE_SUM, GroupBy: []string{"dc"},
	}
	// e1 unreachable: its points after its watermark are missing.
	stream, err := qc.Query(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*pb.QueryResponse
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) != 2 || msgs[0].Source != "rollup_1h" {
		t.Fatalf("%d messages, first %v", len(msgs), msgs[0])
	}
	for i, m := range msgs {
		if w := m.Warnings; (i == len(msgs)-1) != (len(w) > 0) {
			t.Fatalf("message %d has warnings %q", i, w)
		}
	}
	last := msgs[len(msgs)-1].Warnings
	if len(last) != 1 || !strings.HasPrefix(last[0], "edge e1 unreachable: points after ") {
		t.Fatalf("warnings %q", last)
	}
	// The sums equal the oracle's over data cut at e1's watermark.
	q := model.Query{Matchers: []*labels.Matcher{must(t, labels.MatchEqual, "__name__", "cpu")}, Start: req.StartMs, End: req.EndMs,
		Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncSum, Aggregate: rollup.FuncSum, GroupBy: []string{"dc"}}
	want := answerOf(t, f.truncatedOracle(t, "e1"), q)
	var got []model.Series
	for _, m := range msgs {
		got = append(got, model.Series{Labels: grpcapi.LabelsFromProto(m.Series), Ts: m.TimestampsMs, Vs: m.Values})
	}
	sameAnswer(t, "grpc", got, want)

	// Metadata is the catalog's.
	lv, err := qc.LabelValues(ctx, &pb.LabelValuesRequest{Name: "dc"})
	if err != nil || !slices.Equal(lv.Values, []string{"a", "b"}) {
		t.Fatalf("label values %v %v", lv, err)
	}
}
