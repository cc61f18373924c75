package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	pmodel "github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// Evaluator evaluates PromQL for a backfill: in process over a node's
// store (EngineEvaluator) or through a node's Prometheus API.
type Evaluator interface {
	// Instant evaluates expr at t.
	Instant(ctx context.Context, expr string, t time.Time) (promql.Vector, error)
	// Matrix evaluates expr, a range vector such as a selector with a
	// range, at t: the raw samples.
	Matrix(ctx context.Context, expr string, t time.Time) (promql.Matrix, error)
	// Range evaluates expr at start, start+step, ... up to end.
	Range(ctx context.Context, expr string, start, end time.Time, step time.Duration) (promql.Matrix, error)
}

// EngineEvaluator evaluates with a PromQL engine over a Queryable, as the
// rule manager does.
type EngineEvaluator struct {
	Engine    promql.QueryEngine
	Queryable storage.Queryable
}

// Instant implements Evaluator.
func (e EngineEvaluator) Instant(ctx context.Context, expr string, t time.Time) (promql.Vector, error) {
	q, err := e.Engine.NewInstantQuery(ctx, e.Queryable, nil, expr, t)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	switch v := res.Value.(type) {
	case promql.Vector:
		return v, nil
	case promql.Scalar:
		return promql.Vector{promql.Sample{T: v.T, F: v.V}}, nil
	}
	return nil, fmt.Errorf("%s: the expression gives a %s, not an instant vector", expr, res.Value.Type())
}

// Matrix implements Evaluator.
func (e EngineEvaluator) Matrix(ctx context.Context, expr string, t time.Time) (promql.Matrix, error) {
	q, err := e.Engine.NewInstantQuery(ctx, e.Queryable, nil, expr, t)
	return execMatrix(ctx, q, err, expr, "the expression gives a %s, not a range vector")
}

// Range implements Evaluator.
func (e EngineEvaluator) Range(ctx context.Context, expr string, start, end time.Time, step time.Duration) (promql.Matrix, error) {
	q, err := e.Engine.NewRangeQuery(ctx, e.Queryable, nil, expr, start, end, step)
	return execMatrix(ctx, q, err, expr, "a range query gave a %s")
}

// execMatrix runs a query just made (err: its making failed) and returns
// its matrix; notMatrix, with the value's type, says what else came.
func execMatrix(ctx context.Context, q promql.Query, err error, expr, notMatrix string) (promql.Matrix, error) {
	if err != nil {
		return nil, err
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	m, ok := res.Value.(promql.Matrix)
	if !ok {
		return nil, fmt.Errorf("%s: "+notMatrix, expr, res.Value.Type())
	}
	return m, nil
}

// WriteFunc stores batches; an error means some were not stored.
type WriteFunc func(ctx context.Context, batches []model.Batch) error

// BackfillOptions configure Backfill.
type BackfillOptions struct {
	// Files are the rule files (glob patterns, as for Options.Files).
	Files []string
	// Start and End bound the evaluation times, both included.
	Start, End time.Time
	// EvaluationInterval is the interval of groups without their own.
	// Default 1m.
	EvaluationInterval time.Duration
	// StepsPerQuery bounds the evaluation times of one range query (and
	// so the memory of one rule's results before they are written).
	// Default 720.
	StepsPerQuery int
	// MaxSamplesPerWrite bounds the samples of one write. Default 10,000.
	MaxSamplesPerWrite int
	// Logger reports progress. Default: discard.
	Logger *slog.Logger
}

// BackfillReport is what a backfill did.
type BackfillReport struct {
	Groups, Rules int
	// AlertingSkipped counts the alerting rules, which are not backfilled.
	AlertingSkipped int
	Series          int
	Samples         int64
	// First and Last are the first and last evaluation times (zero when
	// the range holds none).
	First, Last time.Time
}

// ErrBackfillConflict is returned, before anything is written, when a
// recording rule's series already hold samples in the range.
var ErrBackfillConflict = errors.New("the rules' series already hold samples in the range")

// backfillRule is one recording rule to backfill.
type backfillRule struct {
	group    string
	file     string
	interval time.Duration
	record   string
	expr     string
	labels   labels.Labels // the group's labels overridden by the rule's
}

// selector matches every series the rule can write.
func (r backfillRule) selector() string {
	ms := []string{fmt.Sprintf("__name__=%q", r.record)}
	r.labels.Range(func(l labels.Label) {
		if l.Value != "" {
			ms = append(ms, fmt.Sprintf("%s=%q", quoteName(l.Name), l.Value))
		}
	})
	return "{" + strings.Join(ms, ",") + "}"
}

var legacyName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// quoteName quotes a label name that PromQL does not take bare.
func quoteName(n string) string {
	if legacyName.MatchString(n) {
		return n
	}
	return strconv.Quote(n)
}

// Backfill evaluates the recording rules of o.Files at every multiple of
// their group's interval from o.Start to o.End and writes their samples
// with write, as the rules would have written them had they been
// evaluated then (without staleness markers: a series that stops is not
// ended). Alerting rules are not backfilled (counted in the report).
//
// Conflicts: before writing anything, Backfill looks for samples in every
// series a recording rule can write (its record name with its labels):
// in [Start, End], which the backfill would overwrite or duplicate, and
// after End, before which the node would refuse the backfill's points
// once they are older than the series' newest by more than its
// out-of-order window. If any has one, it writes nothing and returns an
// error wrapping ErrBackfillConflict that names the series, their sample
// counts and the newest sample. Within the run, a rule whose
// results land on a series another rule of the run has written fails the
// backfill at that rule (what was written before stays).
//
// The rules are evaluated window after window of o.StepsPerQuery steps,
// each group's rules in file order, a rule's results written before the
// next rule is evaluated: a rule that reads another's series sees the
// backfilled samples of the rules before it.
func Backfill(ctx context.Context, ev Evaluator, write WriteFunc, o BackfillOptions) (BackfillReport, error) {
	o.EvaluationInterval = cmpOr(o.EvaluationInterval, DefaultEvaluationInterval)
	o.StepsPerQuery = int(cmpOr(int64(o.StepsPerQuery), 720))
	o.MaxSamplesPerWrite = int(cmpOr(int64(o.MaxSamplesPerWrite), DefaultMaxSamplesPerWrite))
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var rep BackfillReport
	if !o.End.After(o.Start) {
		return rep, fmt.Errorf("backfill: the end (%s) must be after the start (%s)", o.End.UTC().Format(time.RFC3339), o.Start.UTC().Format(time.RFC3339))
	}
	rs, err := loadBackfillRules(o, &rep)
	if err != nil {
		return rep, err
	}
	if err := checkConflicts(ctx, ev, rs, o.Start, o.End, time.Now()); err != nil {
		return rep, err
	}
	written := map[string]string{} // series → the rule that wrote it
	// Windows of a common length; every rule is evaluated at the
	// multiples of its interval (since the Unix epoch) in each.
	window := time.Duration(o.StepsPerQuery) * o.EvaluationInterval
	for _, r := range rs {
		window = max(window, time.Duration(o.StepsPerQuery)*r.interval)
	}
	window = window.Truncate(time.Second)
	for wStart := o.Start; !wStart.After(o.End); wStart = wStart.Add(window) {
		wEnd := minTime(wStart.Add(window-time.Millisecond), o.End)
		for _, r := range rs {
			if err := backfillWindow(ctx, ev, write, o, r, wStart, wEnd, written, &rep); err != nil {
				return rep, err
			}
		}
		o.Logger.Info("backfilled", "until", wEnd.UTC().Format(time.RFC3339), "samples", rep.Samples)
	}
	rep.Series = len(written)
	return rep, nil
}

func cmpOr[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// loadBackfillRules reads the recording rules of the files, checked as
// `rules check` checks them.
func loadBackfillRules(o BackfillOptions, rep *BackfillReport) ([]backfillRule, error) {
	m := &Manager{opts: Options{Files: o.Files, Logger: o.Logger}}
	files, err := m.expand()
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("backfill: no rule file")
	}
	if err := CheckFiles(files...); err != nil {
		return nil, err
	}
	var rs []backfillRule
	for _, f := range files {
		rgs, errs := rulefmt.ParseFile(f, false, pmodel.UTF8Validation)
		if len(errs) > 0 {
			return nil, errors.Join(errs...)
		}
		for _, g := range rgs.Groups {
			rep.Groups++
			interval := time.Duration(g.Interval)
			if interval <= 0 {
				interval = o.EvaluationInterval
			}
			for _, r := range g.Rules {
				if r.Alert != "" {
					rep.AlertingSkipped++
					continue
				}
				lb := labels.NewBuilder(labels.FromMap(g.Labels))
				for n, v := range r.Labels {
					lb.Set(n, v)
				}
				rs = append(rs, backfillRule{group: g.Name, file: f, interval: interval, record: r.Record, expr: r.Expr, labels: lb.Labels()})
				rep.Rules++
			}
		}
	}
	return rs, nil
}

// checkConflicts fails when a series a rule can write holds a sample in
// [start, end] (the backfill would overwrite or duplicate it) or after end
// (the node refuses points older than a series' newest by more than its
// out-of-order window, so the backfill would be refused part way).
func checkConflicts(ctx context.Context, ev Evaluator, rs []backfillRule, start, end, now time.Time) error {
	after := now.Add(futureSlack)
	seen := map[string]bool{}
	var in, later []string
	for _, r := range rs {
		sel := r.selector()
		if seen[sel] {
			continue
		}
		seen[sel] = true
		msg, err := samplesIn(ctx, ev, r, start, end)
		if err != nil {
			return err
		}
		if msg != "" {
			in = append(in, fmt.Sprintf("%s (rule group %q, %s): %s", sel, r.group, r.file, msg))
			continue
		}
		if after.After(end) {
			if msg, err = samplesIn(ctx, ev, r, end.Add(time.Millisecond), after); err != nil {
				return err
			}
			if msg != "" {
				later = append(later, fmt.Sprintf("%s (rule group %q, %s): %s", sel, r.group, r.file, msg))
			}
		}
	}
	span := start.UTC().Format(time.RFC3339) + " and " + end.UTC().Format(time.RFC3339)
	switch {
	case len(in) > 0:
		return fmt.Errorf("backfill: nothing written: %w between %s, which the backfill would overwrite or duplicate (a rule evaluated live writes its series from its first evaluation on: end the backfill before it):\n  %s",
			ErrBackfillConflict, span, strings.Join(in, "\n  "))
	case len(later) > 0:
		return fmt.Errorf("backfill: nothing written: %w after %s: the node refuses points older than a series' newest by more than its out-of-order window (--ooo-window); backfill a new rule before it is evaluated live, then add it to --rules:\n  %s",
			ErrBackfillConflict, end.UTC().Format(time.RFC3339), strings.Join(later, "\n  "))
	}
	return nil
}

// futureSlack is how far past now the check looks for samples (a node
// takes points up to its --future-window, 10 minutes by default, ahead).
const futureSlack = time.Hour

// samplesIn describes the samples of the series r can write in [from,
// to], or is "" when there are none.
func samplesIn(ctx context.Context, ev Evaluator, r backfillRule, from, to time.Time) (string, error) {
	sel := r.selector()
	rng := pmodel.Duration(to.Sub(from) + time.Millisecond) // (to-rng, to] = [from, to]
	counts, err := ev.Instant(ctx, fmt.Sprintf("count_over_time(%s[%s])", sel, rng), to)
	if err != nil {
		return "", fmt.Errorf("backfill: look for samples of %s: %w", sel, err)
	}
	if len(counts) == 0 {
		return "", nil
	}
	n := 0.0
	for _, c := range counts {
		n += c.F
	}
	msg := fmt.Sprintf("%v samples in %d series", n, len(counts))
	// The span of one series, for the message: its raw samples.
	slices.SortFunc(counts, func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) })
	one := strings.TrimSuffix(sel, "}")
	counts[0].Metric.Range(func(l labels.Label) {
		if !r.labels.Has(l.Name) {
			one += fmt.Sprintf(",%s=%q", quoteName(l.Name), l.Value)
		}
	})
	one += "}"
	raw, err := ev.Matrix(ctx, fmt.Sprintf("%s[%s]", one, rng), to)
	if err == nil && len(raw) == 1 && len(raw[0].Floats) > 0 {
		fs := raw[0].Floats
		msg += fmt.Sprintf("; %s holds %d from %s to %s", one, len(fs), time.UnixMilli(fs[0].T).UTC().Format(time.RFC3339), time.UnixMilli(fs[len(fs)-1].T).UTC().Format(time.RFC3339))
	}
	return msg, nil
}

// backfillWindow evaluates r at its grid times in [wStart, wEnd] and
// writes the results.
func backfillWindow(ctx context.Context, ev Evaluator, write WriteFunc, o BackfillOptions, r backfillRule,
	wStart, wEnd time.Time, written map[string]string, rep *BackfillReport) error {
	first := time.UnixMilli(ceilMultiple(wStart.UnixMilli(), r.interval.Milliseconds()))
	if first.After(wEnd) {
		return nil
	}
	m, err := ev.Range(ctx, r.expr, first, wEnd, r.interval)
	if err != nil {
		return fmt.Errorf("backfill: rule %s (group %q): %w", r.record, r.group, err)
	}
	var batches []model.Batch
	flush := func() error {
		if len(batches) == 0 {
			return nil
		}
		err := write(ctx, batches)
		batches = batches[:0]
		if err != nil {
			return fmt.Errorf("backfill: rule %s (group %q): %w", r.record, r.group, err)
		}
		return nil
	}
	lb := labels.NewBuilder(labels.EmptyLabels())
	seen := map[string]bool{}
	pending := 0
	for _, s := range m {
		if len(s.Floats) == 0 {
			continue
		}
		if len(s.Histograms) > 0 {
			return fmt.Errorf("backfill: rule %s (group %q): %w", r.record, r.group, errNativeHistogram)
		}
		lb.Reset(s.Metric)
		lb.Set(pmodel.MetricNameLabel, r.record)
		r.labels.Range(func(l labels.Label) { lb.Set(l.Name, l.Value) })
		ls := lb.Labels()
		key := ls.String()
		if seen[key] {
			return fmt.Errorf("backfill: rule %s (group %q): %w", r.record, r.group, errDuplicateLabelSet)
		}
		seen[key] = true
		if by, ok := written[key]; ok && by != r.group+"/"+r.expr {
			return fmt.Errorf("backfill: rule %s (group %q) gives series %s, which another rule of the backfill (%s) has written", r.record, r.group, key, by)
		}
		written[key] = r.group + "/" + r.expr
		b := model.Batch{Labels: toNodeLabels(ls)}
		for _, f := range s.Floats {
			if t := time.UnixMilli(f.T); rep.First.IsZero() || t.Before(rep.First) {
				rep.First = t
			}
			if t := time.UnixMilli(f.T); t.After(rep.Last) {
				rep.Last = t
			}
			b.Ts, b.Vs = append(b.Ts, f.T), append(b.Vs, f.F)
		}
		batches = append(batches, b)
		pending += len(b.Ts)
		rep.Samples += int64(len(b.Ts))
		if pending >= o.MaxSamplesPerWrite {
			if err := flush(); err != nil {
				return err
			}
			pending = 0
		}
	}
	return flush()
}

// errDuplicateLabelSet is the upstream recording rule's error for results that
// are one series once the rule's labels are applied.
var errDuplicateLabelSet = errors.New("vector contains metrics with the same labelset after applying rule labels")

// ceilMultiple is the first multiple of step at or after t.
func ceilMultiple(t, step int64) int64 {
	q := t / step * step
	if q < t {
		q += step
	}
	return q
}

func toNodeLabels(l labels.Labels) nlabels.Labels {
	ls := make(nlabels.Labels, 0, l.Len())
	l.Range(func(lb labels.Label) { ls = append(ls, nlabels.Label{Name: lb.Name, Value: lb.Value}) })
	slices.SortFunc(ls, func(a, b nlabels.Label) int { return strings.Compare(a.Name, b.Name) })
	return ls
}

// BackendWriteFunc writes into a backend (a node opened in process),
// failing on any refused sample with the node's reason.
func BackendWriteFunc(b backend.Backend) WriteFunc {
	return func(ctx context.Context, batches []model.Batch) error {
		ap := &appender{a: &appendable{b: b, max: math.MaxInt}, ctx: ctx, batches: batches}
		return ap.write()
	}
}
