// Package fakenode holds stand-ins for a node, for the benchmark driver's
// tests: a Writer that counts points and checks that every series arrives
// in time order, a NoopWriter that accepts requests without decoding them,
// and Serve and ServeServices, which run them (or any other fake services) on
// a loopback port for the length of a test.
//
// It also holds what a test binary needs to double as the tributary binary,
// so that the benchmarks can start it as a node process: Main, which runs a
// fake instead of the tests when Env is set, ParseArgs for the command line
// nodeproc writes, and ServeProcess for the serving half of `tributary node`.
//
// Concurrency: a Writer is safe for concurrent use.
package fakenode

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Writer is a WriteService that counts points and checks that every series
// arrives in time order, as a node's head expects.
type Writer struct {
	tributaryv1.UnimplementedWriteServiceServer

	// RejectLast makes every response reject the request's last point.
	RejectLast bool
	// FailAfter makes the n-th and later calls fail (0 = never).
	FailAfter int64
	// OnAccept, when set, is called with every accepted batch before the
	// response is sent. It runs under the Writer's lock, so calls never
	// overlap, and must not call the Writer's methods. An error fails the
	// call.
	OnAccept func(*tributaryv1.SeriesBatch) error

	mu       sync.Mutex
	calls    int64
	points   int64
	newest   map[string]int64 // series → newest timestamp
	disorder []string
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer { return &Writer{newest: map[string]int64{}} }

// Write implements tributaryv1.WriteServiceServer.
func (f *Writer) Write(_ context.Context, req *tributaryv1.WriteRequest) (*tributaryv1.WriteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.FailAfter > 0 && f.calls >= f.FailAfter {
		return nil, status.Error(codes.Unavailable, "fake node is shutting down")
	}
	var n int64
	for _, b := range req.Batches {
		if len(b.TimestampsMs) != len(b.Values) {
			return nil, status.Error(codes.InvalidArgument, "length mismatch")
		}
	}
	for _, b := range req.Batches {
		key := LabelKey(b.Series)
		newest, seen := f.newest[key]
		for _, ts := range b.TimestampsMs {
			if seen && ts <= newest && len(f.disorder) < 10 {
				f.disorder = append(f.disorder, fmt.Sprintf("%s: %d after %d", key, ts, newest))
			}
			newest, seen = ts, true
		}
		f.newest[key] = newest
		n += int64(len(b.TimestampsMs))
		if f.OnAccept != nil {
			if err := f.OnAccept(b); err != nil {
				return nil, status.Error(codes.Internal, err.Error())
			}
		}
	}
	resp := &tributaryv1.WriteResponse{Accepted: n}
	if f.RejectLast && n > 0 {
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

// Stats returns the points accepted so far, the number of distinct series,
// and up to ten examples of series written out of time order.
func (f *Writer) Stats() (points int64, series int, disorder []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.points, len(f.newest), append([]string(nil), f.disorder...)
}

// LabelKey renders a series' labels, in the order given, as one string.
func LabelKey(s *tributaryv1.Series) string {
	var sb strings.Builder
	for _, l := range s.GetLabels() {
		sb.WriteString(l.GetName() + "=" + l.GetValue() + ",")
	}
	return sb.String()
}

// NoopWriter accepts every request without decoding it: paired with
// DiscardCodec it measures the client alone. It answers that PerRequest
// points were accepted.
type NoopWriter struct {
	tributaryv1.UnimplementedWriteServiceServer
	PerRequest int64
}

// Write implements tributaryv1.WriteServiceServer.
func (w NoopWriter) Write(context.Context, *tributaryv1.WriteRequest) (*tributaryv1.WriteResponse, error) {
	return &tributaryv1.WriteResponse{Accepted: w.PerRequest}, nil
}

// DiscardCodec is a server codec that skips decoding requests; install it
// with grpc.ForceServerCodecV2.
type DiscardCodec struct{}

// Marshal implements encoding.CodecV2.
func (DiscardCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	if err != nil {
		return nil, err
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// Unmarshal implements encoding.CodecV2 by leaving v untouched.
func (DiscardCodec) Unmarshal(mem.BufferSlice, any) error { return nil }

// Name implements encoding.CodecV2.
func (DiscardCodec) Name() string { return "proto" }

var _ encoding.CodecV2 = DiscardCodec{}

// Serve runs a gRPC server with the given WriteService on a loopback port
// and returns its address; the server stops when the test ends.
func Serve(t testing.TB, ws tributaryv1.WriteServiceServer, opts ...grpc.ServerOption) string {
	t.Helper()
	return ServeServices(t, func(s grpc.ServiceRegistrar) { tributaryv1.RegisterWriteServiceServer(s, ws) }, opts...)
}

// ServeServices runs a gRPC server with the services register adds on a
// loopback port and returns its address; the server stops when the test
// ends.
func ServeServices(t testing.TB, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	register(srv)
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

// Env is the environment variable that makes a test binary act as the
// tributary binary; its value names the fake's mode.
const Env = "FAKE_TRIBUTARY"

// Main is a TestMain for a package whose test binary doubles as the
// tributary binary. Started with Env set, the binary runs fake with Env's
// value and its command-line arguments and exits with what fake returns;
// otherwise it runs the tests and fails if they leak goroutines.
func Main(m *testing.M, fake func(mode string, args []string) int) {
	if mode := os.Getenv(Env); mode != "" {
		os.Exit(fake(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// Args is what a fake reads from the command line nodeproc gives the
// tributary binary.
type Args struct {
	// Command is the subcommand: "node" or "compact".
	Command string
	DataDir string // --data-dir
	Listen  string // --listen
}

// ParseArgs parses `tributary <command> [flags]` as nodeproc writes it:
// --data-dir and --listen, and --node-id, --wal-sync, --log-level and the
// string flags named in ignored, which a fake accepts and ignores. A parse
// error is also reported on stderr.
func ParseArgs(args []string, ignored ...string) (Args, error) {
	if len(args) == 0 {
		return Args{}, errors.New("no command")
	}
	a := Args{Command: args[0]}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.StringVar(&a.DataDir, "data-dir", "", "")
	fs.StringVar(&a.Listen, "listen", "", "")
	for _, name := range append([]string{"node-id", "wal-sync", "log-level"}, ignored...) {
		fs.String(name, "", "")
	}
	return a, fs.Parse(args[1:])
}

// ServeProcess is the serving half of a fake `tributary node` process: it
// serves srv on listen, logs the ready line nodeproc waits for, and returns
// once SIGTERM has stopped srv gracefully (requests in flight complete).
func ServeProcess(srv *grpc.Server, listen string, log *slog.Logger) error {
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		srv.GracefulStop()
	}()
	log.Info("node ready", "listen", lis.Addr())
	if err := srv.Serve(lis); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
