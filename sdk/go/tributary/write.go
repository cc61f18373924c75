package tributary

import (
	"context"
	"fmt"
	"time"

	"github.com/tributarydb/tributary/internal/enum"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Batch is samples of one series in columnar form: TimestampsMs[i]
// (milliseconds since the Unix epoch) goes with Values[i].
type Batch struct {
	Labels       Labels
	TimestampsMs []int64
	Values       []float64
}

// RejectReason says why the server did not store points.
type RejectReason int32

// The reasons, as in the API's RejectReason.
const (
	RejectUnspecified    RejectReason = 0
	RejectInvalidSeries  RejectReason = 1 // no metric name, bad label name, duplicate label, invalid UTF-8
	RejectLengthMismatch RejectReason = 2 // timestamps and values differ in length
	RejectTooOld         RejectReason = 3 // older than the out-of-order window or the raw retention
	RejectTooFarInFuture RejectReason = 4 // ahead of the server's clock by more than it accepts
	RejectInvalidValue   RejectReason = 5 // a value the server does not accept
	RejectLimitExceeded  RejectReason = 6 // labels per series, label length or series per node
)

var rejectReasonNames = []string{
	RejectInvalidSeries:  "INVALID_SERIES",
	RejectLengthMismatch: "LENGTH_MISMATCH",
	RejectTooOld:         "TOO_OLD",
	RejectTooFarInFuture: "TOO_FAR_IN_FUTURE",
	RejectInvalidValue:   "INVALID_VALUE",
	RejectLimitExceeded:  "LIMIT_EXCEEDED",
	RejectUnspecified:    "UNSPECIFIED",
}

func (r RejectReason) String() string { return enum.Name(rejectReasonNames, r, "RejectReason") }

// Rejection describes points the server refused.
type Rejection struct {
	// Labels of the series, as sent.
	Labels Labels
	// BatchIndex is the index of the batch in the request; PointIndex the
	// index of the point in the batch, or -1 when the whole batch (all its
	// Points) was refused.
	BatchIndex, PointIndex int
	// TimestampMs and Value of the refused point when PointIndex >= 0.
	TimestampMs int64
	Value       float64
	Reason      RejectReason
	// Message is the server's explanation, naming the value at fault.
	Message string
	// Points is how many points this rejection covers.
	Points int64
}

func (r Rejection) String() string {
	if r.PointIndex >= 0 {
		return fmt.Sprintf("%s %s at %s: %s", r.Reason, r.Labels, time.UnixMilli(r.TimestampMs).UTC().Format(time.RFC3339Nano), r.Message)
	}
	return fmt.Sprintf("%s %s (%d points): %s", r.Reason, r.Labels, r.Points, r.Message)
}

// WriteResult reports what the server did with a write. Accepted points are
// durable on the server (fsynced to its write-ahead log unless it runs with
// a relaxed sync policy).
type WriteResult struct {
	Accepted, Rejected int64
	// Rejections details the first rejections (the server bounds the
	// list; Rejected is the total).
	Rejections []Rejection
}

// Write sends batches in one request and returns the server's answer.
// Points are validated one by one: valid points are stored even when others
// are rejected, and an error means nothing of the request was acknowledged.
// Retryable failures are retried per the client's policy (see the package
// documentation for why that is safe).
func (c *Client) Write(ctx context.Context, batches ...Batch) (WriteResult, error) {
	req := &pb.WriteRequest{Batches: make([]*pb.SeriesBatch, len(batches))}
	for i, b := range batches {
		req.Batches[i] = &pb.SeriesBatch{Series: b.Labels.proto(), TimestampsMs: b.TimestampsMs, Values: b.Values}
	}
	resp, err := c.writeRequest(ctx, req, c.opts.retry, nil)
	if err != nil {
		return WriteResult{}, err
	}
	return toWriteResult(req, resp), nil
}

// writeRequest sends one request with retries.
func (c *Client) writeRequest(ctx context.Context, req *pb.WriteRequest, p RetryPolicy, onRetry func(error)) (*pb.WriteResponse, error) {
	var resp *pb.WriteResponse
	err := c.call(ctx, p, false, "write", onRetry, func(ctx context.Context) error {
		var err error
		resp, err = c.write.Write(ctx, req)
		return err
	})
	return resp, err
}

// toWriteResult maps the response's rejections back to the request's
// series and points.
func toWriteResult(req *pb.WriteRequest, resp *pb.WriteResponse) WriteResult {
	out := WriteResult{Accepted: resp.Accepted, Rejected: resp.Rejected}
	if len(resp.Rejections) > 0 {
		out.Rejections = make([]Rejection, len(resp.Rejections))
		for i, rj := range resp.Rejections {
			out.Rejections[i] = toRejection(req, rj)
		}
	}
	return out
}

func toRejection(req *pb.WriteRequest, rj *pb.Rejection) Rejection {
	r := Rejection{
		BatchIndex: int(rj.BatchIndex),
		PointIndex: int(rj.PointIndex),
		Reason:     RejectReason(rj.Reason),
		Message:    rj.Message,
		Points:     rj.Points,
	}
	if bi := int(rj.BatchIndex); bi >= 0 && bi < len(req.Batches) {
		b := req.Batches[bi]
		r.Labels = labelsFromProto(b.Series)
		if pi := int(rj.PointIndex); pi >= 0 && pi < len(b.TimestampsMs) && pi < len(b.Values) {
			r.TimestampMs, r.Value = b.TimestampsMs[pi], b.Values[pi]
		}
	}
	return r
}
