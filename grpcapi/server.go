package grpcapi

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// DefaultMaxPointsPerRequest bounds the points of one WriteRequest (each
// message of a WriteStream counts on its own).
const DefaultMaxPointsPerRequest = 1_000_000

// StatusFunc reports the status of whatever serves the API (the Status
// call): a node's counters, a coordinator's, tributary local's.
type StatusFunc func(ctx context.Context) (*pb.StatusResponse, error)

// Options configure a Server. The zero value of every field means its
// default.
type Options struct {
	// MaxPointsPerRequest bounds the points of one write request (each
	// message of a WriteStream counts on its own); a request over it is
	// refused whole with INVALID_ARGUMENT. <= 0: DefaultMaxPointsPerRequest.
	MaxPointsPerRequest int
	// Status answers the Status call; nil: Status is unimplemented.
	Status StatusFunc
}

// Server serves WriteService and QueryService over a backend.Backend.
// Register serves both; RegisterQuery only QueryService (a coordinator,
// which takes no writes).
type Server struct {
	pb.UnimplementedWriteServiceServer
	// QueryServer is the QueryService half, also served on its own (an
	// edge's query tunnels).
	*QueryServer
	b         backend.Backend
	maxPoints int
	tooLarge  atomic.Int64
}

// QueryServer implements QueryService over a backend.Backend.
type QueryServer struct {
	pb.UnimplementedQueryServiceServer
	b      backend.Backend
	status StatusFunc
	rules  atomic.Pointer[RuleGroupsFunc]
}

// New returns a Server over b.
func New(b backend.Backend, o Options) *Server {
	if o.MaxPointsPerRequest <= 0 {
		o.MaxPointsPerRequest = DefaultMaxPointsPerRequest
	}
	return &Server{QueryServer: &QueryServer{b: b, status: o.Status}, b: b, maxPoints: o.MaxPointsPerRequest}
}

// Register adds both services to g.
func (s *Server) Register(g *grpc.Server) {
	pb.RegisterWriteServiceServer(g, s)
	s.RegisterQuery(g)
}

// RegisterQuery adds QueryService to g.
func (s *QueryServer) RegisterQuery(g *grpc.Server) { pb.RegisterQueryServiceServer(g, s) }

// TooLargeRequests counts write requests refused for carrying more points
// than the limit.
func (s *Server) TooLargeRequests() int64 { return s.tooLarge.Load() }

// checkSize refuses a request over the points limit; nothing of it is stored.
func (s *Server) checkSize(req *pb.WriteRequest) error {
	var points int
	for _, b := range req.Batches {
		points += max(len(b.TimestampsMs), len(b.Values))
	}
	if points > s.maxPoints {
		s.tooLarge.Add(1)
		return status.Errorf(codes.InvalidArgument, "write request carries %d points, the limit is %d; split it into smaller requests", points, s.maxPoints)
	}
	return nil
}

// Write stores one request.
func (s *Server) Write(ctx context.Context, req *pb.WriteRequest) (*pb.WriteResponse, error) {
	if err := s.checkSize(req); err != nil {
		return nil, err
	}
	res, err := s.b.Write(ctx, BatchesFromProto(req))
	if err != nil {
		return nil, writeError(err)
	}
	return WriteResultToProto(res), nil
}

// WriteStream stores a stream of requests, each durable before the next is
// read, and answers with the totals.
func (s *Server) WriteStream(stream grpc.ClientStreamingServer[pb.WriteRequest, pb.WriteResponse]) error {
	total := &pb.WriteResponse{}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(total)
		}
		if err != nil {
			return err
		}
		if err := s.checkSize(req); err != nil {
			return err
		}
		res, err := s.b.Write(stream.Context(), BatchesFromProto(req))
		if err != nil {
			return writeError(err)
		}
		r := WriteResultToProto(res)
		total.Accepted += r.Accepted
		total.Rejected += r.Rejected
		for _, rj := range r.Rejections {
			if len(total.Rejections) < model.MaxRejectionDetails {
				total.Rejections = append(total.Rejections, rj)
			}
		}
	}
}

func writeError(err error) error {
	switch {
	case errors.Is(err, model.ErrClosed):
		return status.Error(codes.Unavailable, "node is shutting down")
	case errors.Is(err, model.ErrOverloaded):
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	// Disk and fsync failures: retryable from the client's point of view.
	return status.Errorf(codes.Unavailable, "write not acknowledged: %v", err)
}
