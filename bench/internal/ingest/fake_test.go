package ingest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// fakeWriter is a WriteService that counts points and checks that every
// series arrives in time order, as a node's head expects.
type fakeWriter struct {
	tributaryv1.UnimplementedWriteServiceServer

	// rejectLast makes every response reject the request's last point.
	rejectLast bool
	// failAfter makes the n-th and later calls fail (0 = never).
	failAfter int64

	mu       sync.Mutex
	calls    int64
	points   int64
	newest   map[string]int64 // series → newest timestamp
	disorder []string
}

func newFakeWriter() *fakeWriter { return &fakeWriter{newest: map[string]int64{}} }

func (f *fakeWriter) Write(_ context.Context, req *tributaryv1.WriteRequest) (*tributaryv1.WriteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.failAfter > 0 && f.calls >= f.failAfter {
		return nil, status.Error(codes.Unavailable, "fake node is shutting down")
	}
	var n int64
	for _, b := range req.Batches {
		if len(b.TimestampsMs) != len(b.Values) {
			return nil, status.Error(codes.InvalidArgument, "length mismatch")
		}
		key := labelKey(b.Series)
		newest, seen := f.newest[key]
		for _, ts := range b.TimestampsMs {
			if seen && ts <= newest && len(f.disorder) < 10 {
				f.disorder = append(f.disorder, fmt.Sprintf("%s: %d after %d", key, ts, newest))
			}
			newest, seen = ts, true
		}
		f.newest[key] = newest
		n += int64(len(b.TimestampsMs))
	}
	resp := &tributaryv1.WriteResponse{Accepted: n}
	if f.rejectLast && n > 0 {
		last := len(req.Batches) - 1
		resp.Accepted, resp.Rejected = n-1, 1
		resp.Rejections = []*tributaryv1.Rejection{{
			BatchIndex: int32(last), PointIndex: int32(len(req.Batches[last].TimestampsMs) - 1),
			Reason: tributaryv1.RejectReason_REJECT_REASON_TOO_FAR_IN_FUTURE, Message: "timestamp is 2h in the future", Points: 1,
		}}
	}
	f.points += resp.Accepted
	return resp, nil
}

func (f *fakeWriter) stats() (points int64, series int, disorder []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.points, len(f.newest), append([]string(nil), f.disorder...)
}

func labelKey(s *tributaryv1.Series) string {
	var sb strings.Builder
	for _, l := range s.GetLabels() {
		sb.WriteString(l.GetName() + "=" + l.GetValue() + ",")
	}
	return sb.String()
}

// noopWriter accepts every request without decoding it: paired with
// discardCodec it measures the client alone. It answers that perRequest
// points were accepted.
type noopWriter struct {
	tributaryv1.UnimplementedWriteServiceServer
	perRequest int64
}

func (w noopWriter) Write(context.Context, *tributaryv1.WriteRequest) (*tributaryv1.WriteResponse, error) {
	return &tributaryv1.WriteResponse{Accepted: w.perRequest}, nil
}

// discardCodec is a server codec that skips decoding requests.
type discardCodec struct{}

func (discardCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}
func (discardCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (discardCodec) Name() string                         { return "proto" }

var _ encoding.CodecV2 = discardCodec{}

// serve runs a gRPC server with the given WriteService on a loopback port
// and returns its address; the server stops when the test ends.
func serve(t testing.TB, ws tributaryv1.WriteServiceServer, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	tributaryv1.RegisterWriteServiceServer(srv, ws)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}
