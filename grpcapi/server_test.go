package grpcapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

func serve(t *testing.T) (pb.WriteServiceClient, pb.QueryServiceClient) {
	t.Helper()
	w, q, _ := serveWith(t, 0)
	return w, q
}

func serveWith(t *testing.T, maxPoints int) (pb.WriteServiceClient, pb.QueryServiceClient, *grpcapi.Server) {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// A node's counters, as tributary node reports them (more fields).
	status := func(context.Context) (*pb.StatusResponse, error) {
		st := n.Status()
		return &pb.StatusResponse{NodeId: st.NodeID, Series: int64(st.Series), PointsAcceptedTotal: st.Accepted}, nil
	}
	srv := grpcapi.New(n, grpcapi.Options{MaxPointsPerRequest: maxPoints, Status: status})
	g, conn := serveBackend(t, srv.Register)
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		n.Close()
	})
	return pb.NewWriteServiceClient(conn), pb.NewQueryServiceClient(conn), srv
}

// serveBackend serves what register adds over an in-memory listener.
func serveBackend(t *testing.T, register func(*grpc.Server)) (*grpc.Server, *grpc.ClientConn) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	register(g)
	go g.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///buf", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	return g, conn
}

func TestAPI_RequestOverThePointsLimitIsRefusedWhole(t *testing.T) {
	wc, qc, srv := serveWith(t, 3)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	big := &pb.WriteRequest{Batches: []*pb.SeriesBatch{
		{Series: series("__name__", "a"), TimestampsMs: []int64{now, now + 1}, Values: []float64{1, 2}},
		{Series: series("__name__", "b"), TimestampsMs: []int64{now, now + 1}, Values: []float64{1, 2}},
	}}
	_, err := wc.Write(ctx, big)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "4 points, the limit is 3") {
		t.Fatalf("unary: %v", err)
	}
	st, err := wc.WriteStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(big)
	if _, err := st.CloseAndRecv(); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("stream: %v", err)
	}
	if srv.TooLargeRequests() != 2 {
		t.Fatalf("counted %d, want 2", srv.TooLargeRequests())
	}
	resp, err := qc.Series(ctx, &pb.SeriesRequest{Matchers: []*pb.Matcher{{Type: pb.Matcher_REGEX, Name: "__name__", Value: ".+"}}})
	if err != nil || len(resp.Series) != 0 {
		t.Fatalf("something was stored: %v %v", resp, err)
	}
	small := &pb.WriteRequest{Batches: big.Batches[:1]}
	if r, err := wc.Write(ctx, small); err != nil || r.Accepted != 2 {
		t.Fatalf("small write: %v %v", r, err)
	}
}

func series(nv ...string) *pb.Series {
	s := &pb.Series{}
	for i := 0; i < len(nv); i += 2 {
		s.Labels = append(s.Labels, &pb.Label{Name: nv[i], Value: nv[i+1]})
	}
	return s
}

func TestAPI_WriteReportsRejectionsAndQueryStreams(t *testing.T) {
	w, q := serve(t)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	resp, err := w.Write(ctx, &pb.WriteRequest{Batches: []*pb.SeriesBatch{
		{Series: series("__name__", "temp", "room", "a"), TimestampsMs: []int64{now - 2000, now - 1000}, Values: []float64{20.5, 20.6}},
		{Series: series("room", "b"), TimestampsMs: []int64{now}, Values: []float64{1}},
		{Series: series("__name__", "temp", "room", "c"), TimestampsMs: []int64{now, now + 1}, Values: []float64{1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Accepted != 2 || resp.Rejected != 3 || len(resp.Rejections) != 2 {
		t.Fatalf("response %v", resp)
	}
	if r := resp.Rejections[0]; r.Reason != pb.RejectReason_REJECT_REASON_INVALID_SERIES || r.BatchIndex != 1 || r.PointIndex != -1 {
		t.Fatalf("first rejection %v", r)
	}
	if r := resp.Rejections[1]; r.Reason != pb.RejectReason_REJECT_REASON_LENGTH_MISMATCH || r.BatchIndex != 2 {
		t.Fatalf("second rejection %v", r)
	}

	stream, err := q.Query(ctx, &pb.QueryRequest{
		Matchers: []*pb.Matcher{{Type: pb.Matcher_EQUAL, Name: "__name__", Value: "temp"}},
		StartMs:  now - 10_000, EndMs: now, Mode: pb.QueryMode_QUERY_MODE_RAW,
	})
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
	if len(msgs) != 1 || msgs[0].Source != "raw" || len(msgs[0].Values) != 2 || msgs[0].Values[1] != 20.6 {
		t.Fatalf("query answer %v", msgs)
	}
	st, err := q.Status(ctx, &pb.StatusRequest{})
	if err != nil || st.PointsAcceptedTotal != 2 || st.Series != 1 {
		t.Fatalf("status %v %v", st, err)
	}
}

func TestAPI_BadQueriesAreInvalidArgument(t *testing.T) {
	_, q := serve(t)
	for name, req := range map[string]*pb.QueryRequest{
		"bad regexp":        {Matchers: []*pb.Matcher{{Type: pb.Matcher_REGEX, Name: "a", Value: "("}}, EndMs: 1},
		"no matchers":       {EndMs: 1},
		"reversed":          {Matchers: []*pb.Matcher{{Name: "__name__", Value: "x"}}, StartMs: 5, EndMs: 1},
		"unknown aggregate": {Matchers: []*pb.Matcher{{Name: "__name__", Value: "x"}}, EndMs: 1, Aggregate: 99},
		"unknown mode":      {Matchers: []*pb.Matcher{{Name: "__name__", Value: "x"}}, EndMs: 1, Mode: 99},
	} {
		stream, err := q.Query(context.Background(), req)
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if _, err := q.LabelValues(context.Background(), &pb.LabelValuesRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("label values without a name: %v", err)
	}
}

// failingBackend answers every call with err.
type failingBackend struct{ err error }

func (f failingBackend) Write(context.Context, []model.Batch) (model.WriteResult, error) {
	return model.WriteResult{}, f.err
}

func (f failingBackend) Query(context.Context, model.Query, func(model.Series) error) (model.QueryInfo, error) {
	return model.QueryInfo{}, f.err
}

func (f failingBackend) Series(context.Context, []*labels.Matcher, int) ([]labels.Labels, error) {
	return nil, f.err
}

func (f failingBackend) LabelNames(context.Context, []*labels.Matcher) ([]string, error) {
	return nil, f.err
}

func (f failingBackend) LabelValues(context.Context, string, []*labels.Matcher) ([]string, error) {
	return nil, f.err
}

func TestAPI_BackendErrorsMapToStatusCodes(t *testing.T) {
	for _, tc := range []struct {
		name         string
		err          error
		write, query codes.Code
	}{
		{"bad query", fmt.Errorf("x: %w", model.ErrBadQuery), codes.Unavailable, codes.InvalidArgument},
		{"bad request", fmt.Errorf("x: %w", model.ErrBadRequest), codes.Unavailable, codes.InvalidArgument},
		{"overloaded", fmt.Errorf("x: %w", model.ErrOverloaded), codes.ResourceExhausted, codes.ResourceExhausted},
		{"closed", model.ErrClosed, codes.Unavailable, codes.Unavailable},
		{"deadline", context.DeadlineExceeded, codes.Unavailable, codes.DeadlineExceeded},
		{"store unavailable", fmt.Errorf("x: %w", model.ErrStoreUnavailable), codes.Unavailable, codes.Internal},
		{"unknown", errors.New("disk on fire"), codes.Unavailable, codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, conn := serveBackend(t, grpcapi.New(failingBackend{tc.err}, grpcapi.Options{}).Register)
			t.Cleanup(func() { conn.Close(); g.Stop() })
			ctx := context.Background()
			_, err := pb.NewWriteServiceClient(conn).Write(ctx, &pb.WriteRequest{})
			if status.Code(err) != tc.write {
				t.Errorf("write: %v, want %v", err, tc.write)
			}
			qc := pb.NewQueryServiceClient(conn)
			stream, err := qc.Query(ctx, &pb.QueryRequest{Matchers: []*pb.Matcher{{Name: "__name__", Value: "x"}}, EndMs: 1})
			if err == nil {
				_, err = stream.Recv()
			}
			if status.Code(err) != tc.query {
				t.Errorf("query: %v, want %v", err, tc.query)
			}
			if _, err := qc.Series(ctx, &pb.SeriesRequest{}); status.Code(err) != tc.query {
				t.Errorf("series: %v, want %v", err, tc.query)
			}
			if _, err := qc.Status(ctx, &pb.StatusRequest{}); status.Code(err) != codes.Unimplemented {
				t.Errorf("status without a StatusFunc: %v", err)
			}
		})
	}
}
