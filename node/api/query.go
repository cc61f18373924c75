package api

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// maxPointsPerResponse bounds one streamed QueryResponse message.
const maxPointsPerResponse = 8192

// StatusFunc reports the status of whatever serves the queries.
type StatusFunc func(ctx context.Context) (*pb.StatusResponse, error)

// QueryServer implements tributary.v1 QueryService over a backend.Backend.
type QueryServer struct {
	pb.UnimplementedQueryServiceServer
	b      backend.Backend
	status StatusFunc
}

// NewQueryServer returns a QueryServer answering from b. status answers
// the Status call (nil: Status is unimplemented).
func NewQueryServer(b backend.Backend, status StatusFunc) *QueryServer {
	return &QueryServer{b: b, status: status}
}

// RegisterQuery adds QueryService to g.
func (s *QueryServer) RegisterQuery(g *grpc.Server) { pb.RegisterQueryServiceServer(g, s) }

// ToQuery converts a QueryRequest into a node.Query. An unspecified mode
// is raw without a step and a downsample with one; a downsample without a
// function averages.
func ToQuery(req *pb.QueryRequest) (model.Query, error) {
	ms, err := ToMatchers(req.Matchers)
	if err != nil {
		return model.Query{}, err
	}
	q := model.Query{
		Matchers:    ms,
		Start:       req.StartMs,
		End:         req.EndMs,
		Step:        req.StepMs,
		Downsample:  rollup.Func(req.Downsample),
		GroupBy:     req.GroupBy,
		Aggregate:   rollup.Func(req.Aggregate),
		LimitSeries: int(req.LimitSeries),
	}
	switch req.Mode {
	case pb.QueryMode_QUERY_MODE_RAW:
		q.Mode = model.ModeRaw
	case pb.QueryMode_QUERY_MODE_DOWNSAMPLE:
		q.Mode = model.ModeDownsample
	case pb.QueryMode_QUERY_MODE_LAST_POINT:
		q.Mode = model.ModeLastPoint
	case pb.QueryMode_QUERY_MODE_UNSPECIFIED:
		q.Mode = model.ModeRaw
		if req.StepMs > 0 {
			q.Mode = model.ModeDownsample
		}
	default:
		return model.Query{}, fmt.Errorf("unknown query mode %d", req.Mode)
	}
	if q.Mode == model.ModeDownsample && q.Downsample == rollup.FuncNone {
		q.Downsample = rollup.FuncAvg
	}
	return q, nil
}

// FromQuery converts a node.Query into a QueryRequest. The API has no
// bucket offset: a downsampling query whose Offset is not a multiple of
// its Step cannot be expressed and is refused (ask for raw samples and
// bucket them instead).
func FromQuery(q model.Query) (*pb.QueryRequest, error) {
	if q.Mode == model.ModeDownsample && q.Step > 0 && q.Offset%q.Step != 0 {
		return nil, fmt.Errorf("%w: the gRPC API has no bucket offset (offset %d ms, step %d ms)", model.ErrBadQuery, q.Offset, q.Step)
	}
	req := &pb.QueryRequest{
		Matchers:    FromMatchers(q.Matchers),
		StartMs:     q.Start,
		EndMs:       q.End,
		StepMs:      q.Step,
		Downsample:  pb.Aggregate(q.Downsample),
		GroupBy:     q.GroupBy,
		Aggregate:   pb.Aggregate(q.Aggregate),
		LimitSeries: int64(q.LimitSeries),
	}
	switch q.Mode {
	case model.ModeRaw:
		req.Mode = pb.QueryMode_QUERY_MODE_RAW
		req.StepMs = 0
	case model.ModeDownsample:
		req.Mode = pb.QueryMode_QUERY_MODE_DOWNSAMPLE
	case model.ModeLastPoint:
		req.Mode = pb.QueryMode_QUERY_MODE_LAST_POINT
	default:
		return nil, fmt.Errorf("%w: unknown mode %d", model.ErrBadQuery, q.Mode)
	}
	return req, nil
}

// FromMatchers converts matchers into API matchers.
func FromMatchers(ms []*labels.Matcher) []*pb.Matcher {
	out := make([]*pb.Matcher, len(ms))
	for i, m := range ms {
		out[i] = &pb.Matcher{Type: pb.Matcher_Type(m.Type), Name: m.Name, Value: m.Value}
	}
	return out
}

// ToLabels converts an API series into a label set (as sent, not
// re-validated).
func ToLabels(s *pb.Series) labels.Labels {
	if s == nil {
		return nil
	}
	out := make(labels.Labels, len(s.Labels))
	for i, l := range s.Labels {
		out[i] = labels.Label{Name: l.Name, Value: l.Value}
	}
	return out
}

// Query streams the answer, series by series. QueryInfo.Warnings go on the
// last message.
func (s *QueryServer) Query(req *pb.QueryRequest, stream grpc.ServerStreamingServer[pb.QueryResponse]) error {
	q, err := ToQuery(req)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	idx := int64(0)
	first := true
	// The newest message is held back so that warnings, known only at the
	// end, can ride on the last one.
	var pending *pb.QueryResponse
	send := func(m *pb.QueryResponse) error {
		if pending != nil {
			if err := stream.Send(pending); err != nil {
				return err
			}
		}
		pending = m
		return nil
	}
	info, err := s.b.Query(model.WithQueryAPI(stream.Context(), model.QueryAPIGRPC), q, func(ser model.Series) error {
		for off := 0; off == 0 || off < len(ser.Ts); off += maxPointsPerResponse {
			end := min(off+maxPointsPerResponse, len(ser.Ts))
			msg := &pb.QueryResponse{
				SeriesIndex:  idx,
				TimestampsMs: ser.Ts[off:end],
				Values:       ser.Vs[off:end],
			}
			if off == 0 {
				msg.Series = toSeries(ser.Labels)
			}
			if first {
				msg.Source, first = q.Source(), false
			}
			if err := send(msg); err != nil {
				return err
			}
		}
		idx++
		return nil
	})
	if err != nil {
		return queryError(err)
	}
	if pending == nil { // empty answer: still say where it came from
		pending = &pb.QueryResponse{SeriesIndex: -1, Source: info.Source}
	}
	pending.Warnings = info.Warnings
	return stream.Send(pending)
}

func queryError(err error) error {
	switch backend.Classify(err) {
	case backend.KindBadRequest:
		return status.Error(codes.InvalidArgument, err.Error())
	case backend.KindOverloaded:
		return status.Error(codes.ResourceExhausted, err.Error())
	case backend.KindTimeout:
		return status.FromContextError(err).Err()
	}
	if errors.Is(err, model.ErrClosed) {
		return status.Error(codes.Unavailable, "node is shutting down")
	}
	return status.Errorf(codes.Internal, "query failed: %v", err)
}

// Series lists the series matching the request's matchers.
func (s *QueryServer) Series(ctx context.Context, req *pb.SeriesRequest) (*pb.SeriesResponse, error) {
	ms, err := ToMatchers(req.Matchers)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	sets, err := s.b.Series(ctx, ms, int(req.Limit))
	if err != nil {
		return nil, queryError(err)
	}
	out := &pb.SeriesResponse{Series: make([]*pb.Series, len(sets))}
	for i, ls := range sets {
		out.Series[i] = toSeries(ls)
	}
	return out, nil
}

// LabelNames lists label names.
func (s *QueryServer) LabelNames(ctx context.Context, req *pb.LabelNamesRequest) (*pb.LabelNamesResponse, error) {
	ms, err := ToMatchers(req.Matchers)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	names, err := s.b.LabelNames(ctx, ms)
	if err != nil {
		return nil, queryError(err)
	}
	return &pb.LabelNamesResponse{Names: names}, nil
}

// LabelValues lists the values of one label.
func (s *QueryServer) LabelValues(ctx context.Context, req *pb.LabelValuesRequest) (*pb.LabelValuesResponse, error) {
	if req.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "label name is required")
	}
	ms, err := ToMatchers(req.Matchers)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	vals, err := s.b.LabelValues(ctx, req.Name, ms)
	if err != nil {
		return nil, queryError(err)
	}
	return &pb.LabelValuesResponse{Values: vals}, nil
}

// Status reports the status of what serves the queries.
func (s *QueryServer) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	if s.status == nil {
		return nil, status.Error(codes.Unimplemented, "status is not served here")
	}
	return s.status(ctx)
}
