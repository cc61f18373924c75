package cluster

import (
	"context"
	"fmt"
	"math"
	"strings"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/internal/qstream"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// CheckResult compares one raw query answer with a Ledger.
type CheckResult struct {
	Addr       string
	Series     int // series in the answer
	Returned   int // points in the answer
	Lost       int // acknowledged, not returned
	Duplicated int // returned more than once (extra copies)
	Phantom    int // returned, neither acknowledged nor in doubt
	WrongValue int // returned at an acknowledged or in-doubt timestamp with another value
	InDoubt    int // returned, written by a failed request (allowed)
	Warnings   []string
	Examples   []string // the first few faults, for the failure message
	// LostTimes lists the lost points' timestamps by series, ascending
	// (for tests that allow points inside a declared gap to be missing).
	LostTimes map[string][]int64
}

// OK reports an answer with every acknowledged point exactly once and
// nothing else.
func (r CheckResult) OK() bool {
	return r.Lost == 0 && r.Duplicated == 0 && r.Phantom == 0 && r.WrongValue == 0
}

func (r CheckResult) String() string {
	s := fmt.Sprintf("%s: %d series, %d points returned; lost %d, duplicated %d, phantom %d, wrong value %d, in doubt %d",
		r.Addr, r.Series, r.Returned, r.Lost, r.Duplicated, r.Phantom, r.WrongValue, r.InDoubt)
	if len(r.Warnings) > 0 {
		s += fmt.Sprintf("; warnings %q", r.Warnings)
	}
	if len(r.Examples) > 0 {
		s += "; e.g. " + strings.Join(r.Examples, "; ")
	}
	return s
}

func (r *CheckResult) example(format string, args ...any) {
	if len(r.Examples) < 5 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// RawAnswer is a raw query's points by SeriesLabel value, in answer order,
// and the answer's warnings.
type RawAnswer struct {
	Points   map[string][]Sample
	Warnings []string
}

// add appends a run of points of series name.
func (a RawAnswer) add(name string, ts []int64, vs []float64) error {
	for i, t := range ts {
		a.Points[name] = append(a.Points[name], Sample{t, vs[i]})
	}
	return nil
}

// Sample is one returned point.
type Sample struct {
	TimestampMs int64
	Value       float64
}

// QueryRaw asks the QueryService at addr for the raw points of metric in
// [startMs, endMs].
func QueryRaw(ctx context.Context, addr, metric string, startMs, endMs int64) (RawAnswer, error) {
	return QueryRawWith(ctx, Client{}, addr, metric, startMs, endMs)
}

// QueryRawWith is QueryRaw through cl (TLS, token).
func QueryRawWith(ctx context.Context, cl Client, addr, metric string, startMs, endMs int64) (RawAnswer, error) {
	ans := RawAnswer{Points: map[string][]Sample{}}
	info, err := frontQuery(ctx, cl, addr, "query", &pb.QueryRequest{
		Matchers: []*pb.Matcher{{Type: pb.Matcher_EQUAL, Name: "__name__", Value: metric}},
		StartMs:  startMs, EndMs: endMs, Mode: pb.QueryMode_QUERY_MODE_RAW,
	}, ans.add)
	ans.Warnings = info.Warnings
	return ans, err
}

// frontQuery sends req to the QueryService at addr through cl and reads
// the answer into points (see qstream.Query); what names the query in
// errors.
func frontQuery(ctx context.Context, cl Client, addr, what string, req *pb.QueryRequest, points qstream.Points) (qstream.Info, error) {
	conn, err := grpc.NewClient(addr, cl.DialOptions()...)
	if err != nil {
		return qstream.Info{}, fmt.Errorf("%s %s: connect: %w", what, addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewQueryServiceClient(conn).Query(ctx, req)
	if err != nil {
		return qstream.Info{}, fmt.Errorf("%s %s: %w", what, addr, err)
	}
	info, err := qstream.Query(stream, SeriesLabel, points)
	if err != nil {
		return info, fmt.Errorf("%s %s: %w", what, addr, err)
	}
	return info, nil
}

// Check queries addr for the raw points of metric in [startMs, endMs] and
// compares them with l.
func Check(ctx context.Context, addr, metric string, l *Ledger, startMs, endMs int64) (CheckResult, error) {
	return CheckWith(ctx, Client{}, addr, metric, l, startMs, endMs)
}

// CheckWith is Check through cl (TLS, token).
func CheckWith(ctx context.Context, cl Client, addr, metric string, l *Ledger, startMs, endMs int64) (CheckResult, error) {
	ans, err := QueryRawWith(ctx, cl, addr, metric, startMs, endMs)
	if err != nil {
		return CheckResult{Addr: addr}, err
	}
	r := Compare(ans, l)
	r.Addr = addr
	return r, nil
}

// Compare compares an answer with a ledger: CompareWindow over the whole
// time line.
func Compare(ans RawAnswer, l *Ledger) CheckResult {
	return CompareWindow(ans, l, math.MinInt64, math.MaxInt64)
}
