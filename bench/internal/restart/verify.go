package restart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// expectation is what the node must answer after the restarts: every
// acknowledged point of every series written. Each series was written in
// time order in whole windows from the generator's start, and a window is
// acknowledged or the load fails, so a series' acknowledged points are a
// contiguous run of Counts[key] samples from StartMs.
type expectation struct {
	StartMs, IntervalMs int64
	Counts              map[string]int64 // nodeclient.SeriesKey → acknowledged points
	Points              int64
	// MetricNames are the distinct __name__ values, one query each.
	MetricNames []string
}

// expect derives the acknowledged points of every series from where the
// load left its requests. A request that stopped because its next window
// would have passed limitMs had filled that window without sending it.
func expect(gen *workload.Generator, reqs []*workload.Request, pointsPerSeries int, limitMs int64) expectation {
	e := expectation{StartMs: gen.StartMs(), IntervalMs: gen.IntervalMs(), Counts: map[string]int64{}}
	for _, r := range reqs {
		n := (r.NextMs() - gen.StartMs()) / gen.IntervalMs()
		if n > 0 && r.LastMs() > limitMs {
			n -= int64(pointsPerSeries)
		}
		if n <= 0 {
			continue
		}
		for _, b := range r.Msg.GetBatches() {
			e.Counts[nodeclient.SeriesKey(b.GetSeries().GetLabels())] = n
			e.Points += n
		}
	}
	names := map[string]bool{}
	for _, s := range gen.Series() {
		names[workload.Label(s, workload.MetricName)] = true
	}
	for n := range names {
		e.MetricNames = append(e.MetricNames, n)
	}
	slices.Sort(e.MetricNames)
	return e
}

// verification is what the node answered.
type verification struct {
	Points  int64 // samples answered
	Series  int   // series answered
	Elapsed time.Duration
	// Problems describe series whose answer differs from the expectation,
	// the first maxProblems of them; NumProblems counts them all.
	Problems    []string
	NumProblems int
}

const maxProblems = 5

func (v *verification) problem(format string, args ...any) {
	v.NumProblems++
	if len(v.Problems) < maxProblems {
		v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
	}
}

// verify reads every series back with raw queries, one per metric name over
// the hour written and an hour either side, and compares each series with
// the expectation: exactly its acknowledged points, each at its own
// timestamp. A missing point is a problem, and so is any other sample. It
// returns an error only when it could not ask.
func verify(ctx context.Context, qc tributaryv1.QueryServiceClient, e expectation, callTimeout time.Duration) (verification, error) {
	t0 := time.Now()
	var v verification
	seen := make(map[string]bool, len(e.Counts))
	fromMs := e.StartMs - time.Hour.Milliseconds()
	toMs := e.StartMs + 2*time.Hour.Milliseconds()
	for _, name := range e.MetricNames {
		if err := verifyMetric(ctx, qc, e, name, fromMs, toMs, callTimeout, seen, &v); err != nil {
			return v, err
		}
	}
	for _, key := range slices.Sorted(maps.Keys(e.Counts)) {
		if !seen[key] {
			v.problem("%s: no points, want %s", key, report.Int(e.Counts[key]))
		}
	}
	v.Elapsed = time.Since(t0)
	return v, nil
}

// seriesCheck follows one series of a streamed answer.
type seriesCheck struct {
	key  string
	want int64 // -1: not a series that was written
	got  int64
	bad  string // the first sample out of place
}

func verifyMetric(ctx context.Context, qc tributaryv1.QueryServiceClient, e expectation, name string, fromMs, toMs int64,
	callTimeout time.Duration, seen map[string]bool, v *verification) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	stream, err := qc.Query(ctx, &tributaryv1.QueryRequest{
		Matchers:    []*tributaryv1.Matcher{{Type: tributaryv1.Matcher_EQUAL, Name: workload.MetricName, Value: name}},
		StartMs:     fromMs,
		EndMs:       toMs,
		Mode:        tributaryv1.QueryMode_QUERY_MODE_RAW,
		LimitSeries: int64(len(e.Counts)) + 1, // one more, so that a stray series shows up
	})
	if err != nil {
		return fmt.Errorf("query %s: %w", name, err)
	}
	byIx := map[int64]*seriesCheck{}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("query %s: %w", name, err)
		}
		if msg.GetSeriesIndex() < 0 { // an empty answer
			continue
		}
		c := byIx[msg.GetSeriesIndex()]
		if c == nil {
			if msg.GetSeries() == nil {
				return fmt.Errorf("query %s: series %d starts without its labels", name, msg.GetSeriesIndex())
			}
			key := nodeclient.SeriesKey(msg.GetSeries().GetLabels())
			if seen[key] {
				return fmt.Errorf("query %s: series %s answered twice", name, key)
			}
			seen[key] = true
			want, ok := e.Counts[key]
			if !ok {
				want = -1
			}
			c = &seriesCheck{key: key, want: want}
			byIx[msg.GetSeriesIndex()] = c
			v.Series++
		}
		for _, ts := range msg.GetTimestampsMs() {
			if wantTs := e.StartMs + c.got*e.IntervalMs; c.bad == "" && ts != wantTs {
				c.bad = fmt.Sprintf("sample %s is at %s, want %s (%s acknowledged points)", report.Int(c.got+1),
					fmtMs(ts), fmtMs(wantTs), report.Int(max(c.want, 0)))
			}
			c.got++
		}
		v.Points += int64(len(msg.GetTimestampsMs()))
	}
	checks := slices.SortedFunc(maps.Values(byIx), func(a, b *seriesCheck) int { return strings.Compare(a.key, b.key) })
	for _, c := range checks {
		switch {
		case c.want < 0:
			v.problem("%s: %s points in a series that was never written", c.key, report.Int(c.got))
		case c.bad != "":
			v.problem("%s: %s", c.key, c.bad)
		case c.got != c.want:
			v.problem("%s: %s of %s acknowledged points", c.key, report.Int(c.got), report.Int(c.want))
		}
	}
	return nil
}

func fmtMs(t int64) string { return time.UnixMilli(t).UTC().Format("15:04:05.000") }
