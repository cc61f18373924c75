// Package api serves the public gRPC API (tributary.v1 WriteService and
// QueryService): it converts between protobuf messages and the node's types
// and maps errors to gRPC status codes. A Server serves both services over
// a storage node; a QueryServer serves QueryService over any
// backend.Backend, so a coordinator's query front end answers the same
// queries as a node.
//
// Servers are safe for concurrent use; gRPC calls them from many goroutines.
package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Server implements the gRPC services over one node. Its QueryService
// methods are those of a QueryServer over backend.ForNode.
type Server struct {
	pb.UnimplementedWriteServiceServer
	*QueryServer
	node      *node.Node
	version   string
	role      string
	maxPoints int
	tooLarge  atomic.Int64
	// replication reports the edge's replication (nil: none).
	replication func() *pb.ReplicationStatus
}

// DefaultMaxPointsPerRequest bounds the points of one WriteRequest (each
// message of a WriteStream counts on its own).
const DefaultMaxPointsPerRequest = 1_000_000

// New returns a Server for n. version and role are reported by Status.
func New(n *node.Node, version, role string) *Server {
	s := &Server{node: n, version: version, role: role, maxPoints: DefaultMaxPointsPerRequest}
	s.QueryServer = NewQueryServer(backend.ForNode(n), s.nodeStatus)
	return s
}

// SetMaxPointsPerRequest changes the points limit of one request (<= 0:
// the default). Call it before serving.
func (s *Server) SetMaxPointsPerRequest(n int) {
	if n <= 0 {
		n = DefaultMaxPointsPerRequest
	}
	s.maxPoints = n
}

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

// Register adds both services to g.
func (s *Server) Register(g *grpc.Server) {
	pb.RegisterWriteServiceServer(g, s)
	pb.RegisterQueryServiceServer(g, s)
}

// Write stores one request.
func (s *Server) Write(ctx context.Context, req *pb.WriteRequest) (*pb.WriteResponse, error) {
	if err := s.checkSize(req); err != nil {
		return nil, err
	}
	res, err := s.node.WriteContext(ctx, toBatches(req))
	if err != nil {
		return nil, writeError(err)
	}
	return toWriteResponse(res), nil
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
		res, err := s.node.WriteContext(stream.Context(), toBatches(req))
		if err != nil {
			return writeError(err)
		}
		r := toWriteResponse(res)
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

func toBatches(req *pb.WriteRequest) []model.Batch {
	out := make([]model.Batch, len(req.Batches))
	for i, b := range req.Batches {
		var ls []labels.Label
		if b.Series != nil {
			ls = make([]labels.Label, len(b.Series.Labels))
			for j, l := range b.Series.Labels {
				ls[j] = labels.Label{Name: l.Name, Value: l.Value}
			}
		}
		out[i] = model.Batch{Labels: ls, Ts: b.TimestampsMs, Vs: b.Values}
	}
	return out
}

func toWriteResponse(res model.WriteResult) *pb.WriteResponse {
	out := &pb.WriteResponse{Accepted: res.Accepted, Rejected: res.Rejected}
	for _, r := range res.Rejections {
		out.Rejections = append(out.Rejections, &pb.Rejection{
			BatchIndex: int32(r.BatchIndex),
			PointIndex: int32(r.PointIndex),
			Reason:     pb.RejectReason(r.Reason),
			Message:    r.Message,
			Points:     r.Points,
		})
	}
	return out
}

// ToMatchers converts API matchers, naming the one at fault on error.
func ToMatchers(ms []*pb.Matcher) ([]*labels.Matcher, error) {
	out := make([]*labels.Matcher, 0, len(ms))
	for i, m := range ms {
		lm, err := labels.NewMatcher(labels.MatchType(m.Type), m.Name, m.Value)
		if err != nil {
			return nil, fmt.Errorf("matcher %d: %w", i, err)
		}
		out = append(out, lm)
	}
	return out, nil
}

func toSeries(ls labels.Labels) *pb.Series {
	out := &pb.Series{Labels: make([]*pb.Label, len(ls))}
	for i, l := range ls {
		out.Labels[i] = &pb.Label{Name: l.Name, Value: l.Value}
	}
	return out
}

// nodeStatus reports the node's counters.
// SetReplicationStatus makes Status report the node's replication (an
// edge that replicates to coordinators). Call it before serving.
func (s *Server) SetReplicationStatus(f func() *pb.ReplicationStatus) { s.replication = f }

func (s *Server) nodeStatus(context.Context) (*pb.StatusResponse, error) {
	st := s.node.Status()
	var repl *pb.ReplicationStatus
	if s.replication != nil {
		repl = s.replication()
	}
	return &pb.StatusResponse{
		Replication:                repl,
		NodeId:                     st.NodeID,
		Role:                       s.role,
		Version:                    s.version,
		Series:                     int64(st.Series),
		HeadSeries:                 int64(st.Series),
		HeadSamples:                st.HeadSamples,
		WalSegmentSeq:              st.WAL.OpenSeq,
		WalBytes:                   st.WAL.Bytes,
		PointsAcceptedTotal:        st.Accepted,
		PointsRejectedTotal:        st.Rejected,
		UptimeMs:                   st.Uptime.Milliseconds(),
		CorruptSegmentsQuarantined: st.WALQuarantined,
		StoreHealth:                StoreHealth(st),
	}, nil
}

// StoreHealth is the store health part of a node's Status.
func StoreHealth(st node.Status) *pb.StoreHealth {
	h := st.Store
	out := &pb.StoreHealth{Healthy: h.Healthy, Reason: h.Reason, Error: h.Err, WritesRefused: h.WritesRefused,
		Damaged: h.Damaged, QuarantinedFiles: st.StoreQuarantinedFiles, LostPoints: st.StoreLostPoints,
		UnrestoredRanges: int64(st.StoreUnrestoredRanges)}
	if !h.Healthy && !h.FailingSince.IsZero() {
		out.FailingSinceMs = h.FailingSince.UnixMilli()
	}
	return out
}
