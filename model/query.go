package model

import (
	"fmt"
	"slices"

	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// QueryMode selects the shape of a query answer.
type QueryMode int

// The modes; see the public API's QueryMode.
const (
	ModeRaw QueryMode = iota + 1
	ModeDownsample
	ModeLastPoint
)

// Query is a request to a backend's query engine.
type Query struct {
	Matchers   []*labels.Matcher
	Start, End int64 // inclusive, ms
	Mode       QueryMode
	Step       int64 // ms, for ModeDownsample
	Downsample rollup.Func
	// Offset (ms) shifts the buckets of ModeDownsample: they are
	// [k*Step+Offset, (k+1)*Step+Offset) and are reported by their start,
	// instead of being aligned to multiples of Step since the epoch. Only
	// Offset modulo Step matters, and the zero value keeps epoch alignment.
	// Rollups are epoch-aligned, so a query whose offset is not a multiple
	// of Step is always answered from raw samples.
	Offset int64
	// Aggregate, when set, aggregates across series per timestamp, grouped
	// by the GroupBy labels.
	GroupBy     []string
	Aggregate   rollup.Func
	LimitSeries int // 0: DefaultQuerySeriesLimit
	// MaxStaleness (ms) is how far behind End a coordinator's answer may
	// be for an edge: an edge whose data the cloud holds (its replica
	// watermark) within MaxStaleness of End is answered from its replicas
	// alone, without asking the edge for its newest data, and the answer
	// says how fresh it is (QueryInfo.FreshThroughMs). 0: the server's
	// default; AlwaysFresh: ask every edge that may hold newer data,
	// whatever the default. A node answers from its own data and ignores
	// it.
	MaxStaleness int64
}

// AlwaysFresh is the Query.MaxStaleness that asks for the freshest answer
// (a staleness of zero), overriding a coordinator's default.
const AlwaysFresh = -1

// MaxBuckets bounds the buckets of a downsampling query per series.
const MaxBuckets = 1_000_000

// DefaultQuerySeriesLimit bounds the series one query may touch.
const DefaultQuerySeriesLimit = 100_000

// Series is one series (or group) of a query answer.
type Series struct {
	Labels labels.Labels
	Ts     []int64
	Vs     []float64
}

// QueryInfo says how a query was answered.
type QueryInfo struct {
	Source string // "raw", "rollup_1h", "rollup_1d", "last"
	Series int
	// Points is how many samples (or rollup buckets) were read.
	Points int64
	// Warnings say, one human-readable line each, what an answer is
	// missing when it is incomplete. A node answering from its own data
	// leaves them nil; a coordinator's query front end sets them when an
	// edge or a replica could not answer (partial result).
	Warnings []string
	// FreshThroughMs, when not 0, is how fresh an answer given with a
	// positive staleness allowance (Query.MaxStaleness) is: it holds every
	// edge's data through this time (the oldest watermark of the edges not
	// asked for their newest data; the query's end when every edge was
	// asked), never earlier than End - MaxStaleness. Points after it that
	// were not asked for are what the allowance permitted, not missing;
	// what is missing is in Warnings. 0: the answer is as fresh as its
	// sources (a node; a coordinator asked with no allowance).
	FreshThroughMs int64
}

// Validate checks q before anything is read, and sorts and de-duplicates
// q.GroupBy. Every error wraps ErrBadQuery and says what is wrong, in the
// same words whichever backend is asked.
func (q *Query) Validate() error {
	slices.Sort(q.GroupBy)
	q.GroupBy = slices.Compact(q.GroupBy)
	for _, f := range []rollup.Func{q.Downsample, q.Aggregate} {
		if f < rollup.FuncNone || f > rollup.FuncLast {
			return fmt.Errorf("%w: unknown aggregate function %d", ErrBadQuery, f)
		}
	}
	switch {
	case len(q.Matchers) == 0:
		return fmt.Errorf("%w: at least one matcher is required", ErrBadQuery)
	case q.End < q.Start:
		return fmt.Errorf("%w: end %d is before start %d", ErrBadQuery, q.End, q.Start)
	case q.Mode == ModeDownsample && q.Step <= 0:
		return fmt.Errorf("%w: downsampling needs a positive step", ErrBadQuery)
	case q.Mode == ModeDownsample && q.Downsample == rollup.FuncNone:
		return fmt.Errorf("%w: downsampling needs a function (avg, sum, min, max, count, first, last)", ErrBadQuery)
	case q.Mode < ModeRaw || q.Mode > ModeLastPoint:
		return fmt.Errorf("%w: unknown mode %d", ErrBadQuery, q.Mode)
	case q.MaxStaleness < AlwaysFresh:
		return fmt.Errorf("%w: max staleness %d ms is negative", ErrBadQuery, q.MaxStaleness)
	case q.Mode == ModeDownsample && (q.End-q.Start)/q.Step > MaxBuckets:
		return fmt.Errorf("%w: %d buckets is more than %d; use a larger step or a shorter range", ErrBadQuery, (q.End-q.Start)/q.Step, MaxBuckets)
	}
	for _, m := range q.Matchers {
		if m.MatchesEmpty() {
			continue
		}
		return nil
	}
	return fmt.Errorf("%w: at least one matcher must not match the empty string (e.g. __name__=\"cpu\")", ErrBadQuery)
}

// Source names where a query's answer comes from: "raw", "rollup_1h",
// "rollup_1d" or "last" (QueryInfo.Source). A downsampling query whose
// step is a whole number of days (hours) and whose buckets are
// epoch-aligned is answered from the daily (hourly) rollups; one whose
// buckets are left-open hours (LeftOpenHours) from the hourly rollups.
func (q *Query) Source() string {
	switch {
	case q.Mode == ModeLastPoint:
		return "last"
	case q.LeftOpenHours():
		return "rollup_1h"
	case q.Mode != ModeDownsample || q.BucketOffset() != 0:
		return "raw"
	case q.Step%rollup.Day == 0:
		return "rollup_1d"
	case q.Step%rollup.Hour == 0:
		return "rollup_1h"
	}
	return "raw"
}

// LeftOpenHours says whether q downsamples into left-open buckets
// (h, h+Step] with h a whole hour — Step a whole number of hours and
// buckets offset by 1 ms, the windows PromQL evaluates every R — by max,
// min, last or count: the functions whose value over such a bucket
// follows from the hourly rollups of the hours it meets and their first
// samples (most of the time; see the node's downsampleLeftOpen).
func (q *Query) LeftOpenHours() bool {
	if q.Mode != ModeDownsample || q.Step <= 0 || q.Step%rollup.Hour != 0 || q.BucketOffset() != 1 {
		return false
	}
	switch q.Downsample {
	case rollup.FuncMax, rollup.FuncMin, rollup.FuncLast, rollup.FuncCount:
		return true
	}
	return false
}

// BucketOffset is Offset reduced to [0, Step) (0 without a positive Step):
// the bucket holding t starts at aggregate.BucketStart(t, Step, off).
func (q *Query) BucketOffset() int64 { return aggregate.Offset(q.Offset, q.Step) }
