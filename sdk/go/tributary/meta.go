package tributary

import (
	"context"
	"fmt"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// allSeries selects every series (the server wants at least one matcher
// that does not match the empty string).
var allSeries = []*pb.Matcher{{Type: pb.Matcher_REGEX, Name: MetricName, Value: ".+"}}

// Series lists the label sets of the series matching selector (every
// series when it is empty), sorted, at most limit of them (0: the server's
// default).
func (c *Client) Series(ctx context.Context, selector string, limit int) ([]Labels, error) {
	ms, err := protoMatchers(selector, nil)
	if err != nil {
		return nil, fmt.Errorf("series: %w", err)
	}
	if len(ms) == 0 {
		ms = allSeries
	}
	var resp *pb.SeriesResponse
	err = c.call(ctx, c.opts.retry, true, "series", nil, func(ctx context.Context) error {
		var err error
		resp, err = c.query.Series(ctx, &pb.SeriesRequest{Matchers: ms, Limit: int64(limit)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Labels, len(resp.Series))
	for i, s := range resp.Series {
		out[i] = labelsFromProto(s)
	}
	return out, nil
}

// LabelNames lists the label names (including MetricName) of the series
// matching selector, or of all series when it is empty, sorted.
func (c *Client) LabelNames(ctx context.Context, selector string) ([]string, error) {
	ms, err := protoMatchers(selector, nil)
	if err != nil {
		return nil, fmt.Errorf("label names: %w", err)
	}
	var resp *pb.LabelNamesResponse
	err = c.call(ctx, c.opts.retry, true, "label names", nil, func(ctx context.Context) error {
		var err error
		resp, err = c.query.LabelNames(ctx, &pb.LabelNamesRequest{Matchers: ms})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.Names, nil
}

// LabelValues lists the values of the label name among the series matching
// selector, or among all series when it is empty, sorted. LabelValues(ctx,
// MetricName, "") lists the metric names.
func (c *Client) LabelValues(ctx context.Context, name, selector string) ([]string, error) {
	if name == "" {
		return nil, fmt.Errorf("label values: empty label name")
	}
	ms, err := protoMatchers(selector, nil)
	if err != nil {
		return nil, fmt.Errorf("label values: %w", err)
	}
	var resp *pb.LabelValuesResponse
	err = c.call(ctx, c.opts.retry, true, "label values", nil, func(ctx context.Context) error {
		var err error
		resp, err = c.query.LabelValues(ctx, &pb.LabelValuesRequest{Name: name, Matchers: ms})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.Values, nil
}

// Status is a snapshot of a server's state.
type Status struct {
	NodeID, Role, Version string
	Series                int64 // series known
	HeadSeries            int64
	HeadSamples           int64 // samples not yet flushed to the store
	WALSegmentSeq         uint64
	WALBytes              int64
	PointsAccepted        int64 // since the server started
	PointsRejected        int64
	Uptime                time.Duration
	// CorruptSegmentsQuarantined counts WAL segments set aside after a
	// crash because they failed their checksums, ever (the count survives
	// restarts).
	CorruptSegmentsQuarantined int64
	// Replication is set by an edge node that replicates to coordinators.
	Replication *ReplicationStatus
	// Store is set by a storage node (an edge node, tributary local).
	Store *StoreHealth
}

// StoreHealth is a storage node's store health (see the StoreHealth
// message in the API).
type StoreHealth struct {
	// Healthy is false while the store cannot flush or damage is on
	// record: the node is not ready. Reason is "ok", "corruption",
	// "no_space", "io_error" or "store_error"; Error the failure.
	Healthy       bool
	Reason, Error string
	FailingSince  time.Time // zero when healthy
	WritesRefused bool
	Damaged       bool
	// Kept across restarts: table files repairs quarantined, raw points
	// counted lost after them, lost ranges not restored yet.
	QuarantinedFiles, LostPoints, UnrestoredRanges int64
}

// ReplicationStatus is an edge node's view of its replication to the
// cloud (see the ReplicationStatus message in the API).
type ReplicationStatus struct {
	Connected                     bool
	Coordinator                   string
	AckedThrough, NewestSealedSeq uint64
	Lag                           time.Duration
	LagBytes                      int64
	BacklogSegments               int64
	BacklogBytes                  int64
	GapSegments, GapPoints        uint64
	DroppedPoints                 uint64
	BackfilledPoints              uint64
	BytesPerPoint                 float64
	LastError                     string
}

// Status asks the server for its state. It is cheap; use it as a health
// check.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var resp *pb.StatusResponse
	err := c.call(ctx, c.opts.retry, true, "status", nil, func(ctx context.Context) error {
		var err error
		resp, err = c.query.Status(ctx, &pb.StatusRequest{})
		return err
	})
	if err != nil {
		return Status{}, err
	}
	var repl *ReplicationStatus
	if r := resp.Replication; r != nil {
		repl = &ReplicationStatus{Connected: r.Connected, Coordinator: r.Coordinator, AckedThrough: r.AckedThrough,
			NewestSealedSeq: r.NewestSealedSeq, Lag: time.Duration(r.LagSeconds * float64(time.Second)), LagBytes: r.LagBytes,
			BacklogSegments: r.BacklogSegments, BacklogBytes: r.BacklogBytes, GapSegments: r.GapSegments, GapPoints: r.GapPoints,
			DroppedPoints: r.DroppedPoints, BackfilledPoints: r.BackfilledPoints, BytesPerPoint: r.BytesPerPoint, LastError: r.LastError}
	}
	return Status{
		NodeID:                     resp.NodeId,
		Role:                       resp.Role,
		Version:                    resp.Version,
		Series:                     resp.Series,
		HeadSeries:                 resp.HeadSeries,
		HeadSamples:                resp.HeadSamples,
		WALSegmentSeq:              resp.WalSegmentSeq,
		WALBytes:                   resp.WalBytes,
		PointsAccepted:             resp.PointsAcceptedTotal,
		PointsRejected:             resp.PointsRejectedTotal,
		Uptime:                     time.Duration(resp.UptimeMs) * time.Millisecond,
		CorruptSegmentsQuarantined: resp.CorruptSegmentsQuarantined,
		Replication:                repl,
		Store:                      storeHealth(resp.StoreHealth),
	}, nil
}

func storeHealth(h *pb.StoreHealth) *StoreHealth {
	if h == nil {
		return nil
	}
	out := &StoreHealth{Healthy: h.Healthy, Reason: h.Reason, Error: h.Error, WritesRefused: h.WritesRefused,
		Damaged: h.Damaged, QuarantinedFiles: h.QuarantinedFiles, LostPoints: h.LostPoints, UnrestoredRanges: h.UnrestoredRanges}
	if h.FailingSinceMs != 0 {
		out.FailingSince = time.UnixMilli(h.FailingSinceMs)
	}
	return out
}
