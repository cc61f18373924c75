package query

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// EdgeClient queries an edge's tributary.v1 QueryService. It implements
// Source and is safe for concurrent use.
type EdgeClient struct {
	addr string
	conn *grpc.ClientConn
	qc   pb.QueryServiceClient
}

// DialEdge returns a client for the edge at addr. The options must say how
// to secure the connection (grpc.WithTransportCredentials); the connection
// is made lazily, so an unreachable edge fails on its first query.
func DialEdge(addr string, opts ...grpc.DialOption) (*EdgeClient, error) {
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial edge %s: %w", addr, err)
	}
	return &EdgeClient{addr: addr, conn: conn, qc: pb.NewQueryServiceClient(conn)}, nil
}

// NewEdgeClient returns a client over a connection its caller owns (an
// edge's query tunnel); name stands for the edge in errors. Close does not
// close cc.
func NewEdgeClient(name string, cc grpc.ClientConnInterface) *EdgeClient {
	return &EdgeClient{addr: name, qc: pb.NewQueryServiceClient(cc)}
}

var _ Source = (*EdgeClient)(nil)

// Close closes the connection DialEdge made; for a client of
// NewEdgeClient it does nothing.
func (c *EdgeClient) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Query runs q on the edge. The API has no bucket offset, so a
// downsampling query whose Offset is not a multiple of its Step (and that
// does not aggregate across series) asks for raw samples and buckets them
// here.
func (c *EdgeClient) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	var info model.QueryInfo
	wire := q
	rebucket := q.Mode == model.ModeDownsample && q.Step > 0 && q.Offset%q.Step != 0
	if rebucket {
		if q.Aggregate != rollup.FuncNone {
			return info, fmt.Errorf("%w: edge %s: cannot aggregate across series with a bucket offset over the gRPC API", model.ErrBadQuery, c.addr)
		}
		wire.Mode, wire.Step, wire.Offset, wire.Downsample = model.ModeRaw, 0, 0, rollup.FuncNone
	}
	req, err := grpcapi.QueryToProto(wire)
	if err != nil {
		return info, fmt.Errorf("query edge %s: %w", c.addr, err)
	}
	stream, err := c.qc.Query(ctx, req)
	if err != nil {
		return info, c.wrap("query", err)
	}
	recv := func() (*pb.QueryResponse, error) {
		msg, err := stream.Recv()
		if err != nil && err != io.EOF {
			err = c.wrap("query", err)
		}
		return msg, err
	}
	var points int64
	info, err = grpcapi.ReadAnswer(recv, func(s model.Series) error {
		if rebucket {
			s.Ts, s.Vs = aggregate.Downsample(s.Ts, s.Vs, q.Step, q.Offset, q.Downsample)
		}
		points += int64(len(s.Ts))
		return emit(s)
	})
	info.Points = points
	if errors.Is(err, grpcapi.ErrMalformedAnswer) {
		err = fmt.Errorf("query edge %s: %w", c.addr, err)
	}
	if err != nil {
		return info, err
	}
	if rebucket {
		info.Source = q.Source()
	}
	return info, nil
}

// Series lists the edge's series matching ms, at most limit (<= 0: the
// edge's default), sorted.
func (c *EdgeClient) Series(ctx context.Context, ms []*labels.Matcher, limit int) ([]labels.Labels, error) {
	resp, err := c.qc.Series(ctx, &pb.SeriesRequest{Matchers: grpcapi.MatchersToProto(ms), Limit: int64(max(limit, 0))})
	if err != nil {
		return nil, c.wrap("list series of", err)
	}
	out := make([]labels.Labels, len(resp.Series))
	for i, s := range resp.Series {
		out[i] = grpcapi.LabelsFromProto(s)
	}
	return out, nil
}

// LabelNames lists the label names of the edge's series matching ms (all
// series when ms is empty).
func (c *EdgeClient) LabelNames(ctx context.Context, ms []*labels.Matcher) ([]string, error) {
	resp, err := c.qc.LabelNames(ctx, &pb.LabelNamesRequest{Matchers: grpcapi.MatchersToProto(ms)})
	if err != nil {
		return nil, c.wrap("list label names of", err)
	}
	return resp.Names, nil
}

// LabelValues lists the values of name among the edge's series matching
// ms (all series when ms is empty).
func (c *EdgeClient) LabelValues(ctx context.Context, name string, ms []*labels.Matcher) ([]string, error) {
	resp, err := c.qc.LabelValues(ctx, &pb.LabelValuesRequest{Name: name, Matchers: grpcapi.MatchersToProto(ms)})
	if err != nil {
		return nil, c.wrap("list label values of", err)
	}
	return resp.Values, nil
}

// wrap names the edge and the action; an InvalidArgument status becomes
// model.ErrBadQuery.
func (c *EdgeClient) wrap(action string, err error) error {
	if status.Code(err) == codes.InvalidArgument {
		return fmt.Errorf("%w: edge %s: %s", model.ErrBadQuery, c.addr, status.Convert(err).Message())
	}
	return fmt.Errorf("%s edge %s: %w", action, c.addr, err)
}

// RuleGroups lists the rule groups the edge evaluates under f.
func (c *EdgeClient) RuleGroups(ctx context.Context, f model.RuleFilter) ([]model.RuleGroup, error) {
	resp, err := c.qc.RuleGroups(ctx, grpcapi.RuleFilterToProto(f))
	if err != nil {
		return nil, c.wrap("list rule groups of", err)
	}
	return grpcapi.RuleGroupsFromProto(resp.GetGroups()), nil
}
