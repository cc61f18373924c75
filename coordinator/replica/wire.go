package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	"github.com/tributarydb/tributary/node/wal"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// Conversions between the store's types and tributary.cluster.v1, and the
// mapping of errors to gRPC status codes and back.

// DefaultMaxSegmentBytes bounds a stored segment (uncompressed).
const DefaultMaxSegmentBytes = 64 << 20

// maxQueryPartPoints bounds the points of one QuerySeries part, and
// maxQueryMessageBytes (about) one QueryResponse, well under gRPC's default
// 4 MiB message limit.
const (
	maxQueryPartPoints   = 64 << 10
	maxQueryMessageBytes = 1 << 20
)

// MaxStoreMessageBytes is the largest StoreRequest a segment of up to
// maxSegmentBytes can make (zstd's worst case, plus the other fields):
// the receive limit a server needs and the send limit a client needs.
func MaxStoreMessageBytes(maxSegmentBytes int64) int {
	return int(maxSegmentBytes + maxSegmentBytes/64 + 64<<10)
}

// maxHoldingsRanges bounds the runs of one HoldingsResponse: at most
// about 24 bytes each, 1.5 MiB in all, under gRPC's default 4 MiB message
// limit.
const maxHoldingsRanges = 1 << 16

// exportFileToProto makes the message of one exported file, compressed
// as c asks (COMPRESSION_ZSTD or COMPRESSION_S2; anything else: none)
// when that makes it smaller.
func exportFileToProto(enc *zstd.Encoder, c clusterv1.Compression, f ExportedFile) *clusterv1.ExportResponse {
	m := &clusterv1.ExportResponse{UncompressedBytes: uint64(len(f.Data)), Crc32C: f.Info.CRC, Points: f.Info.Points,
		MinTimeMs: f.Info.MinT, MaxTimeMs: f.Info.MaxT, Compression: c}
	switch c {
	case clusterv1.Compression_COMPRESSION_ZSTD:
		m.Data = zstdFrame(enc, f.Data)
	case clusterv1.Compression_COMPRESSION_S2:
		m.Data = s2.Encode(nil, f.Data)
	}
	if m.Data == nil || len(m.Data) >= len(f.Data) {
		m.Compression, m.Data = clusterv1.Compression_COMPRESSION_NONE, f.Data
	}
	return m
}

// exportFileFromProto decodes the file of an export of edge's
// firstSeq..lastSeq, never making more than maxFileBytes bytes. The file
// is not verified: its Info is what the sender says. Errors wrap
// ErrInvalidSegment.
func exportFileFromProto(dec *zstd.Decoder, m *clusterv1.ExportResponse, edge string, firstSeq, lastSeq uint64, maxFileBytes int64) (ExportedFile, error) {
	switch {
	case m.GetPoints() < 0:
		return ExportedFile{}, fmt.Errorf("%w: %d points", ErrInvalidSegment, m.GetPoints())
	case m.GetMaxTimeMs() < m.GetMinTimeMs():
		return ExportedFile{}, fmt.Errorf("%w: time span [%d, %d] ends before it starts", ErrInvalidSegment, m.GetMinTimeMs(), m.GetMaxTimeMs())
	}
	data, err := decompressFile(dec, m.GetCompression(), m.GetData(), m.GetUncompressedBytes(), maxFileBytes)
	if err != nil {
		return ExportedFile{}, err
	}
	return ExportedFile{Data: data, Info: wal.SegmentInfo{
		Seq: lastSeq, PrevSeq: firstSeq - 1, NodeID: edge, Sealed: true, Bytes: int64(len(data)),
		Points: m.GetPoints(), MinT: m.GetMinTimeMs(), MaxT: m.GetMaxTimeMs(), CRC: m.GetCrc32C(),
	}}, nil
}

// holdingsToProto answers runs, at most maxHoldingsRanges of them.
func holdingsToProto(runs []SeqRange) *clusterv1.HoldingsResponse {
	r := &clusterv1.HoldingsResponse{}
	if len(runs) > maxHoldingsRanges {
		runs, r.Truncated = runs[:maxHoldingsRanges], true
	}
	r.Ranges = make([]*clusterv1.SeqRange, len(runs))
	for i, x := range runs {
		r.Ranges[i] = &clusterv1.SeqRange{FirstSeq: x.First, LastSeq: x.Last}
	}
	return r
}

// holdingsFromProto checks that the runs are ascending, disjoint and not
// adjacent, as Holdings makes them.
func holdingsFromProto(r *clusterv1.HoldingsResponse) ([]SeqRange, error) {
	if len(r.GetRanges()) > maxHoldingsRanges {
		return nil, fmt.Errorf("%w: %d runs, more than %d", ErrInvalidSegment, len(r.GetRanges()), maxHoldingsRanges)
	}
	out := make([]SeqRange, len(r.GetRanges()))
	for i, x := range r.GetRanges() {
		out[i] = SeqRange{First: x.GetFirstSeq(), Last: x.GetLastSeq()}
		if x.GetFirstSeq() == 0 || x.GetLastSeq() < x.GetFirstSeq() || i > 0 && x.GetFirstSeq() <= out[i-1].Last+1 {
			return nil, fmt.Errorf("%w: run %d..%d after %v", ErrInvalidSegment, x.GetFirstSeq(), x.GetLastSeq(), out[:i])
		}
	}
	return out, nil
}

func labelsToProto(ls labels.Labels) []*clusterv1.Label {
	out := make([]*clusterv1.Label, len(ls))
	for i, l := range ls {
		out[i] = &clusterv1.Label{Name: l.Name, Value: l.Value}
	}
	return out
}

func labelsFromProto(ps []*clusterv1.Label) labels.Labels {
	out := make(labels.Labels, len(ps))
	for i, p := range ps {
		out[i] = labels.Label{Name: p.GetName(), Value: p.GetValue()}
	}
	return out
}

func appliedToProto(a Applied) *clusterv1.StoreResponse {
	r := &clusterv1.StoreResponse{Points: a.Points, Rejected: a.Rejected, MinTimeMs: a.MinTimeMs, MaxTimeMs: a.MaxTimeMs, Duplicate: a.Duplicate}
	r.Series = make([]*clusterv1.Series, len(a.Series))
	for i, ls := range a.Series {
		r.Series[i] = &clusterv1.Series{Labels: labelsToProto(ls)}
	}
	return r
}

func appliedFromProto(r *clusterv1.StoreResponse) Applied {
	a := Applied{Points: r.GetPoints(), Rejected: r.GetRejected(), MinTimeMs: r.GetMinTimeMs(), MaxTimeMs: r.GetMaxTimeMs(), Duplicate: r.GetDuplicate()}
	a.Series = make([]labels.Labels, len(r.GetSeries()))
	for i, s := range r.GetSeries() {
		a.Series[i] = labelsFromProto(s.GetLabels())
	}
	return a
}

func queryToProto(edges []string, q model.Query) (*clusterv1.QueryRequest, error) {
	r := &clusterv1.QueryRequest{
		Edges: edges, StartMs: q.Start, EndMs: q.End, Mode: clusterv1.QueryMode(q.Mode), StepMs: q.Step,
		Downsample: clusterv1.Func(q.Downsample), OffsetMs: q.Offset, GroupBy: q.GroupBy,
		Aggregate: clusterv1.Func(q.Aggregate), LimitSeries: int64(q.LimitSeries),
	}
	for _, m := range q.Matchers {
		if m == nil {
			return nil, fmt.Errorf("%w: nil matcher", model.ErrBadQuery)
		}
		r.Matchers = append(r.Matchers, &clusterv1.Matcher{Type: clusterv1.MatchType(m.Type + 1), Name: m.Name, Value: m.Value})
	}
	return r, nil
}

func queryFromProto(r *clusterv1.QueryRequest) (model.Query, error) {
	q := model.Query{
		Start: r.GetStartMs(), End: r.GetEndMs(), Mode: model.QueryMode(r.GetMode()), Step: r.GetStepMs(),
		Downsample: rollup.Func(r.GetDownsample()), Offset: r.GetOffsetMs(), GroupBy: r.GetGroupBy(),
		Aggregate: rollup.Func(r.GetAggregate()),
	}
	if l := r.GetLimitSeries(); l < 0 || l > int64(^uint(0)>>1) {
		return q, fmt.Errorf("%w: limit_series %d", model.ErrBadQuery, l)
	}
	q.LimitSeries = int(r.GetLimitSeries())
	for i, pm := range r.GetMatchers() {
		if pm.GetType() == clusterv1.MatchType_MATCH_TYPE_UNSPECIFIED {
			return q, fmt.Errorf("%w: matcher %d on %q has no type", model.ErrBadQuery, i, pm.GetName())
		}
		m, err := labels.NewMatcher(labels.MatchType(pm.GetType()-1), pm.GetName(), pm.GetValue())
		if err != nil {
			return q, fmt.Errorf("%w: matcher %d: %w", model.ErrBadQuery, i, err)
		}
		q.Matchers = append(q.Matchers, m)
	}
	return q, nil
}

// toStatus maps a store error to the status the service answers with.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if !isPlain(err) {
		return err // already a status (e.g. from Authorize)
	}
	code := codes.Unavailable
	switch {
	case errors.Is(err, ErrInvalidSegment), errors.Is(err, model.ErrBadQuery):
		code = codes.InvalidArgument
	case errors.Is(err, ErrConflict):
		code = codes.AlreadyExists
	case errors.Is(err, model.ErrOverloaded):
		code = codes.ResourceExhausted
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}

// isPlain reports whether err carries no gRPC status of its own.
func isPlain(err error) bool {
	var se interface{ GRPCStatus() *status.Status }
	return !errors.As(err, &se)
}

// remoteError is an error answered by a peer: its status stays readable
// (status.Code, status.FromError) and errors.Is matches the sentinel of
// its class (ErrConflict, ErrInvalidSegment, model.ErrBadQuery,
// model.ErrOverloaded).
type remoteError struct {
	st       *status.Status
	sentinel error
}

func (e *remoteError) Error() string {
	return fmt.Sprintf("replica peer: %s: %s", e.st.Code(), e.st.Message())
}
func (e *remoteError) Unwrap() error              { return e.sentinel }
func (e *remoteError) GRPCStatus() *status.Status { return e.st }

// fromStatus maps an error of a call back to the store's classes.
// invalid is the sentinel of InvalidArgument for this method.
func fromStatus(err error, invalid error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var sentinel error
	switch st.Code() {
	case codes.InvalidArgument:
		sentinel = invalid
	case codes.AlreadyExists:
		sentinel = ErrConflict
	case codes.ResourceExhausted:
		sentinel = model.ErrOverloaded
	case codes.Canceled:
		sentinel = context.Canceled
	case codes.DeadlineExceeded:
		sentinel = context.DeadlineExceeded
	}
	return &remoteError{st: st, sentinel: sentinel}
}
