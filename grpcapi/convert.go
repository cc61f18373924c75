package grpcapi

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The conversions between the public API's messages and model. The
// enumerations (QueryMode, Aggregate, RejectReason, Matcher.Type) mirror
// model's and rollup's value for value, which TestConvert_EnumsMirrorTheAPI
// holds them to.

// BatchesFromProto converts a write request's batches. Labels are taken
// as sent; the backend validates them.
func BatchesFromProto(req *pb.WriteRequest) []model.Batch {
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

// WriteResultToProto converts what a write did into its response.
func WriteResultToProto(res model.WriteResult) *pb.WriteResponse {
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

// MatchersFromProto converts API matchers, naming the one at fault on
// error.
func MatchersFromProto(ms []*pb.Matcher) ([]*labels.Matcher, error) {
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

// MatchersToProto converts matchers into API matchers.
func MatchersToProto(ms []*labels.Matcher) []*pb.Matcher {
	out := make([]*pb.Matcher, len(ms))
	for i, m := range ms {
		out[i] = &pb.Matcher{Type: pb.Matcher_Type(m.Type), Name: m.Name, Value: m.Value}
	}
	return out
}

// LabelsFromProto converts an API series into a label set (as sent, not
// re-validated).
func LabelsFromProto(s *pb.Series) labels.Labels {
	if s == nil {
		return nil
	}
	out := make(labels.Labels, len(s.Labels))
	for i, l := range s.Labels {
		out[i] = labels.Label{Name: l.Name, Value: l.Value}
	}
	return out
}

// LabelsToProto converts a label set into an API series.
func LabelsToProto(ls labels.Labels) *pb.Series {
	out := &pb.Series{Labels: make([]*pb.Label, len(ls))}
	for i, l := range ls {
		out.Labels[i] = &pb.Label{Name: l.Name, Value: l.Value}
	}
	return out
}

// QueryFromProto converts a QueryRequest into a model.Query. An
// unspecified mode is raw without a step and a downsample with one; a
// downsample without a function averages. An unset max_staleness_ms is
// the server's default (MaxStaleness 0), a zero one model.AlwaysFresh; a
// negative one is refused. The query is not validated otherwise (the
// backend does that, model.Query.Validate).
func QueryFromProto(req *pb.QueryRequest) (model.Query, error) {
	ms, err := MatchersFromProto(req.Matchers)
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
	if req.MaxStalenessMs != nil {
		switch ms := req.GetMaxStalenessMs(); {
		case ms < 0:
			return model.Query{}, fmt.Errorf("max_staleness_ms %d is negative", ms)
		case ms == 0:
			q.MaxStaleness = model.AlwaysFresh
		default:
			q.MaxStaleness = ms
		}
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

// QueryToProto converts a model.Query into a QueryRequest. The API has no
// bucket offset: a downsampling query whose Offset is not a multiple of
// its Step cannot be expressed and is refused with model.ErrBadQuery (ask
// for raw samples and bucket them instead).
func QueryToProto(q model.Query) (*pb.QueryRequest, error) {
	if q.Mode == model.ModeDownsample && q.Step > 0 && q.Offset%q.Step != 0 {
		return nil, fmt.Errorf("%w: the gRPC API has no bucket offset (offset %d ms, step %d ms)", model.ErrBadQuery, q.Offset, q.Step)
	}
	req := &pb.QueryRequest{
		Matchers:    MatchersToProto(q.Matchers),
		StartMs:     q.Start,
		EndMs:       q.End,
		StepMs:      q.Step,
		Downsample:  pb.Aggregate(q.Downsample),
		GroupBy:     q.GroupBy,
		Aggregate:   pb.Aggregate(q.Aggregate),
		LimitSeries: int64(q.LimitSeries),
	}
	switch {
	case q.MaxStaleness == model.AlwaysFresh:
		req.MaxStalenessMs = proto.Int64(0)
	case q.MaxStaleness > 0:
		req.MaxStalenessMs = proto.Int64(q.MaxStaleness)
	case q.MaxStaleness < 0:
		return nil, fmt.Errorf("%w: max staleness %d ms is negative", model.ErrBadQuery, q.MaxStaleness)
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
