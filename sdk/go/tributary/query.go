package tributary

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/internal/enum"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Func is an aggregate function: per step when downsampling, across series
// when grouping.
type Func int

// The functions, numbered as the query protocol's Aggregate, which a
// Query's Func is sent as. FuncNone means no aggregation.
const (
	FuncNone  = Func(pb.Aggregate_AGGREGATE_UNSPECIFIED)
	FuncAvg   = Func(pb.Aggregate_AGGREGATE_AVG)
	FuncSum   = Func(pb.Aggregate_AGGREGATE_SUM)
	FuncMin   = Func(pb.Aggregate_AGGREGATE_MIN)
	FuncMax   = Func(pb.Aggregate_AGGREGATE_MAX)
	FuncCount = Func(pb.Aggregate_AGGREGATE_COUNT)
	FuncFirst = Func(pb.Aggregate_AGGREGATE_FIRST)
	FuncLast  = Func(pb.Aggregate_AGGREGATE_LAST)
)

var funcNames = [...]string{"none", "avg", "sum", "min", "max", "count", "first", "last"}

func (f Func) String() string { return enum.Name(funcNames[:], f, "Func") }

// ParseFunc maps a name (avg, sum, min, max, count, first, last, none) to
// its Func.
func ParseFunc(s string) (Func, error) {
	for i, n := range funcNames {
		if strings.EqualFold(s, n) {
			return Func(i), nil
		}
	}
	return FuncNone, fmt.Errorf("unknown function %q: want avg, sum, min, max, count, first or last", s)
}

// Query asks for series matching Selector and Matchers (all must match; at
// least one must not match the empty string) in [Start, End].
//
// The shape of the answer: raw samples; buckets of Step aggregated with Fn
// (Step > 0), aligned to multiples of Step since the epoch, each labelled
// with its start, empty buckets left out; or the newest point of each
// series (Last). With Aggregate set, series are combined per timestamp
// within groups of equal GroupBy label values (one group when GroupBy is
// empty), and each answer series carries only the GroupBy labels.
type Query struct {
	Selector string
	Matchers []Matcher
	// Start and End bound the time range, inclusive. A zero End means now;
	// a zero Start means no lower bound.
	Start, End time.Time
	Step       time.Duration // > 0: downsample; a whole number of milliseconds
	Fn         Func          // downsampling function; FuncNone means FuncAvg
	Last       bool          // only the newest point at or before End
	GroupBy    []string
	Aggregate  Func
	// LimitSeries bounds the series the query may touch (0: the server's
	// default); more is an error, not a truncated answer.
	LimitSeries int
	// MaxStaleness lets a coordinator answer up to this much behind End:
	// edges whose data it holds within it of End are not asked, and
	// SeriesIter.FreshThrough says how fresh the answer is. 0: the
	// coordinator's default (--query-max-staleness); AlwaysFresh: ask
	// every edge that may hold newer data. A node ignores it. Whole
	// milliseconds (rounded up).
	MaxStaleness time.Duration
}

// AlwaysFresh is the Query.MaxStaleness that asks a coordinator for the
// freshest answer whatever its default.
const AlwaysFresh time.Duration = -1

// Raw asks for the raw samples of the series matching selector.
func Raw(selector string, start, end time.Time) Query {
	return Query{Selector: selector, Start: start, End: end}
}

// Downsample asks for buckets of step aggregated with fn.
func Downsample(selector string, start, end time.Time, step time.Duration, fn Func) Query {
	return Query{Selector: selector, Start: start, End: end, Step: step, Fn: fn}
}

// Last asks for the newest point of each series matching selector, however
// old.
func Last(selector string) Query {
	return Query{Selector: selector, Last: true}
}

// Grouped returns q aggregating across series with agg, per group of equal
// values of the by labels (all series form one group when by is empty).
func (q Query) Grouped(agg Func, by ...string) Query {
	q.Aggregate, q.GroupBy = agg, by
	return q
}

func toMs(t time.Time, zero int64) int64 {
	if t.IsZero() {
		return zero
	}
	return t.UnixMilli()
}

// request builds the API request, checking what can be checked here.
func (q Query) request(now time.Time) (*pb.QueryRequest, error) {
	ms, err := protoMatchers(q.Selector, q.Matchers)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, errors.New("query: no selector or matchers")
	}
	req := &pb.QueryRequest{
		Matchers:    ms,
		StartMs:     toMs(q.Start, 0),
		EndMs:       toMs(q.End, now.UnixMilli()),
		GroupBy:     q.GroupBy,
		LimitSeries: int64(q.LimitSeries),
	}
	if req.EndMs < req.StartMs {
		return nil, fmt.Errorf("query: end %s is before start %s", fmtMs(req.EndMs), fmtMs(req.StartMs))
	}
	for _, f := range []Func{q.Fn, q.Aggregate} {
		if f < FuncNone || f > FuncLast {
			return nil, fmt.Errorf("query: unknown function %d", int(f))
		}
	}
	switch {
	case q.Step < 0 || q.Step%time.Millisecond != 0:
		return nil, fmt.Errorf("query: step %s is not a positive whole number of milliseconds", q.Step)
	case q.Last && q.Step > 0:
		return nil, errors.New("query: Last and Step exclude each other")
	case q.Fn != FuncNone && q.Step == 0:
		return nil, fmt.Errorf("query: function %s needs a step", q.Fn)
	case q.Last:
		req.Mode = pb.QueryMode_QUERY_MODE_LAST_POINT
	case q.Step > 0:
		req.Mode, req.StepMs, req.Downsample = pb.QueryMode_QUERY_MODE_DOWNSAMPLE, q.Step.Milliseconds(), pb.Aggregate(q.Fn)
		if q.Fn == FuncNone {
			req.Downsample = pb.Aggregate_AGGREGATE_AVG
		}
	default:
		req.Mode = pb.QueryMode_QUERY_MODE_RAW
	}
	req.Aggregate = pb.Aggregate(q.Aggregate)
	switch {
	case q.MaxStaleness == AlwaysFresh:
		req.MaxStalenessMs = proto.Int64(0)
	case q.MaxStaleness > 0:
		req.MaxStalenessMs = proto.Int64(int64((q.MaxStaleness + time.Millisecond - 1) / time.Millisecond))
	case q.MaxStaleness < 0:
		return nil, fmt.Errorf("query: max staleness %s is negative", q.MaxStaleness)
	}
	return req, nil
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// Point is one sample.
type Point struct {
	TimestampMs int64 // milliseconds since the Unix epoch
	Value       float64
}

// Time returns the point's timestamp as a time.Time in UTC.
func (p Point) Time() time.Time { return time.UnixMilli(p.TimestampMs).UTC() }

// Series is one series of an answer, or one group of an aggregated answer
// (whose Labels are then the GroupBy labels only).
type Series struct {
	Labels Labels
	Points []Point
}

// SeriesIter streams a query's answer series by series. It is not safe for
// concurrent use. Each series is assembled in memory before Next returns;
// split very long raw ranges into several queries.
//
//	it := c.Query(ctx, q)
//	defer it.Close()
//	for it.Next() {
//		s := it.Series()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
type SeriesIter struct {
	c       *Client
	ctx     context.Context
	cancel  context.CancelFunc
	req     *pb.QueryRequest
	stream  grpc.ServerStreamingClient[pb.QueryResponse]
	ahead   *pb.QueryResponse // received, not yet consumed
	started bool
	done    bool
	cur     Series
	err     error
	source  string
	warns   []string
	fresh   int64
}

// Query starts q. The call is sent on the first Next; retryable failures
// before the first answer are retried per the client's policy (a query is
// an idempotent read), failures after it end the iteration.
func (c *Client) Query(ctx context.Context, q Query) *SeriesIter {
	it := &SeriesIter{c: c}
	it.ctx, it.cancel = context.WithCancel(ctx)
	it.req, it.err = q.request(time.Now())
	if it.err != nil {
		it.err = fmt.Errorf("query: %w", it.err)
		it.Close()
	}
	return it
}

// Next assembles the next series and reports whether there is one.
func (it *SeriesIter) Next() bool {
	if it.done || it.err != nil {
		return false
	}
	if !it.started {
		it.started = true
		if err := it.open(); err != nil {
			it.fail(err)
			return false
		}
	}
	for {
		msg := it.ahead
		it.ahead = nil
		if msg == nil {
			var err error
			if msg, err = it.recv(); err != nil {
				it.fail(err)
				return false
			}
			if msg == nil {
				it.finish()
				return false
			}
		}
		if msg.SeriesIndex < 0 { // an empty answer says where it came from
			continue
		}
		idx := msg.SeriesIndex
		s := Series{Labels: labelsFromProto(msg.Series)}
		s.Points = appendPoints(s.Points, msg)
		for {
			next, err := it.recv()
			if err != nil {
				it.fail(err)
				return false
			}
			if next == nil {
				it.finish()
				break
			}
			if next.SeriesIndex != idx {
				it.ahead = next
				break
			}
			s.Points = appendPoints(s.Points, next)
		}
		it.cur = s
		return true
	}
}

func appendPoints(dst []Point, msg *pb.QueryResponse) []Point {
	n := min(len(msg.TimestampsMs), len(msg.Values))
	dst = growPoints(dst, n)
	for i := range n {
		dst = append(dst, Point{msg.TimestampsMs[i], msg.Values[i]})
	}
	return dst
}

func growPoints(dst []Point, n int) []Point {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	out := make([]Point, len(dst), len(dst)+max(n, len(dst)))
	copy(out, dst)
	return out
}

// errNoFirstAnswer marks an attempt cut by the client's timeout before the
// server's first message.
var errNoFirstAnswer = errors.New("no answer within the timeout")

// open starts the stream and receives its first message, retrying
// retryable failures.
func (it *SeriesIter) open() error {
	c := it.c
	return c.call(it.ctx, c.opts.retry, true, "query", nil, func(context.Context) error {
		// The attempt's context must outlive this function (the stream
		// keeps it), so the client's timeout is applied to the first
		// message only, by a timer.
		actx, cancel := context.WithCancel(it.ctx)
		var timedOut atomic.Bool
		var timer *time.Timer
		if c.opts.timeout > 0 {
			timer = time.AfterFunc(c.opts.timeout, func() { timedOut.Store(true); cancel() })
		}
		stream, err := c.query.Query(actx, it.req)
		var first *pb.QueryResponse
		if err == nil {
			first, err = stream.Recv()
		}
		if timer != nil {
			timer.Stop()
		}
		if err == io.EOF {
			err = status.Error(codes.Internal, "query: the server closed the stream without an answer")
		}
		if err != nil {
			cancel()
			if timedOut.Load() && it.ctx.Err() == nil {
				return status.Error(codes.DeadlineExceeded, errNoFirstAnswer.Error())
			}
			return err
		}
		prev := it.cancel
		it.cancel = func() { cancel(); prev() }
		it.stream, it.ahead = stream, first
		it.note(first)
		return nil
	})
}

// recv returns the next message, nil at the end of the stream.
func (it *SeriesIter) recv() (*pb.QueryResponse, error) {
	msg, err := it.stream.Recv()
	if err == io.EOF {
		return nil, nil
	}
	if err != nil {
		if it.ctx.Err() != nil {
			err = ctxError(it.ctx, err)
		}
		return nil, fmt.Errorf("query: %w", err)
	}
	it.note(msg)
	return msg, nil
}

func (it *SeriesIter) note(msg *pb.QueryResponse) {
	if msg.Source != "" && it.source == "" {
		it.source = msg.Source
	}
	it.warns = append(it.warns, msg.Warnings...)
	if msg.FreshThroughMs != 0 {
		it.fresh = msg.FreshThroughMs
	}
}

func (it *SeriesIter) fail(err error) {
	it.err = err
	it.Close()
}

func (it *SeriesIter) finish() {
	it.done = true
	it.cancel()
}

// Series returns the series assembled by the last successful Next.
func (it *SeriesIter) Series() Series { return it.cur }

// Err returns the error that ended the iteration, if any.
func (it *SeriesIter) Err() error { return it.err }

// Source says where the answer came from ("raw", "rollup_1h", "rollup_1d",
// "last"), once the first Next has returned.
func (it *SeriesIter) Source() string { return it.source }

// Warnings returns what the server said is missing from the answer (for
// example a coordinator that could not reach a node), complete once Next
// has returned false.
func (it *SeriesIter) Warnings() []string { return it.warns }

// FreshThrough returns, once Next has returned false, the time through
// which a coordinator's answer given with a staleness allowance
// (Query.MaxStaleness) holds every edge's data: points after it were not
// asked for. The zero time: the answer is as fresh as its sources.
func (it *SeriesIter) FreshThrough() time.Time {
	if it.fresh == 0 {
		return time.Time{}
	}
	return time.UnixMilli(it.fresh).UTC()
}

// Close abandons the rest of the answer and releases the stream. It is
// safe to call more than once and after the end.
func (it *SeriesIter) Close() {
	it.done = true
	it.cancel()
}

// All adapts the iterator to a range-over-func loop; it yields each series
// with a nil error, then the iterator's error, if any, with a zero Series.
// Breaking out of the loop closes the iterator.
func (it *SeriesIter) All() iter.Seq2[Series, error] {
	return func(yield func(Series, error) bool) {
		defer it.Close()
		for it.Next() {
			if !yield(it.Series(), nil) {
				return
			}
		}
		if err := it.Err(); err != nil {
			yield(Series{}, err)
		}
	}
}

// Collect reads the whole answer into a slice.
func (it *SeriesIter) Collect() ([]Series, error) {
	defer it.Close()
	var out []Series
	for it.Next() {
		out = append(out, it.Series())
	}
	return out, it.Err()
}
