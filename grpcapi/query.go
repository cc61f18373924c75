package grpcapi

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Query streams the answer, series by series (see "Query answers" in the
// package doc).
func (s *QueryServer) Query(req *pb.QueryRequest, stream grpc.ServerStreamingServer[pb.QueryResponse]) error {
	q, err := QueryFromProto(req)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	a := answerSender{send: stream.Send, source: q.Source()}
	info, err := s.b.Query(model.WithQueryAPI(stream.Context(), model.QueryAPIGRPC), q, a.series)
	if err != nil {
		return queryError(err)
	}
	return a.finish(info)
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
	ms, err := MatchersFromProto(req.Matchers)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	ctx, warns := backend.WithWarnings(ctx)
	sets, err := s.b.Series(ctx, ms, int(req.Limit))
	if err != nil {
		return nil, queryError(err)
	}
	out := &pb.SeriesResponse{Series: make([]*pb.Series, len(sets)), Warnings: warns.List()}
	for i, ls := range sets {
		out.Series[i] = LabelsToProto(ls)
	}
	return out, nil
}

// LabelNames lists label names.
func (s *QueryServer) LabelNames(ctx context.Context, req *pb.LabelNamesRequest) (*pb.LabelNamesResponse, error) {
	ms, err := MatchersFromProto(req.Matchers)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	ctx, warns := backend.WithWarnings(ctx)
	names, err := s.b.LabelNames(ctx, ms)
	if err != nil {
		return nil, queryError(err)
	}
	return &pb.LabelNamesResponse{Names: names, Warnings: warns.List()}, nil
}

// LabelValues lists the values of one label.
func (s *QueryServer) LabelValues(ctx context.Context, req *pb.LabelValuesRequest) (*pb.LabelValuesResponse, error) {
	if req.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "label name is required")
	}
	ms, err := MatchersFromProto(req.Matchers)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	ctx, warns := backend.WithWarnings(ctx)
	vals, err := s.b.LabelValues(ctx, req.Name, ms)
	if err != nil {
		return nil, queryError(err)
	}
	return &pb.LabelValuesResponse{Values: vals, Warnings: warns.List()}, nil
}

// Status reports the status of what serves the queries.
func (s *QueryServer) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	if s.status == nil {
		return nil, status.Error(codes.Unimplemented, "status is not served here")
	}
	return s.status(ctx)
}
