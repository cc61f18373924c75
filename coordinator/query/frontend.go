package query

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// Source answers queries over one edge's data, resolving matchers against
// the edge's own index: an *EdgeClient, or the edge's *node.Node itself
// in-process.
// The methods mean what they mean on backend.Backend.
type Source interface {
	Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error)
	Series(ctx context.Context, ms []*labels.Matcher, limit int) ([]labels.Labels, error)
	LabelNames(ctx context.Context, ms []*labels.Matcher) ([]string, error)
	LabelValues(ctx context.Context, name string, ms []*labels.Matcher) ([]string, error)
}

// ReplicaSource answers queries over the replicated data of some edges: a
// coordinator's local replica store or a peer coordinator. emit names the
// edge each series comes from.
type ReplicaSource interface {
	Query(ctx context.Context, edges []string, q model.Query, emit func(edge string, s model.Series) error) (model.QueryInfo, error)
}

// Options configure a Frontend.
type Options struct {
	// Catalog is the coordinator's catalog state machine. Required.
	Catalog *catalog.FSM
	// Barrier waits until the local catalog reflects every committed
	// command (a linearizable read barrier). nil: read the local state as
	// it is.
	Barrier func(ctx context.Context) error
	// Replica returns the replica store of a coordinator (local or peer).
	// Required.
	Replica func(coordinatorID string) (ReplicaSource, error)
	// Edge returns a source for an edge at its advertised address. nil, or
	// an error: the edge is not queried and counts as unreachable.
	Edge func(edgeID, addr string) (Source, error)
	// EdgeTimeout bounds one leg to an edge (default 5s), ReplicaTimeout
	// one leg to a replica (default 30s). HedgeAfter is how long a replica
	// leg may go unanswered before the same leg is sent to the next
	// replica (default 1s).
	EdgeTimeout, ReplicaTimeout, HedgeAfter time.Duration
	// MaxSeries bounds the series of one query (and of a Series listing)
	// when the request gives no limit; default model.DefaultQuerySeriesLimit.
	MaxSeries int
	// MaxParallelEdges bounds the edges queried at once (default 16).
	MaxParallelEdges int
	// ListingLag is how old an edge's registration watermark may be before
	// a listing (Series, LabelNames, LabelValues) warns that the edge's
	// newest series may be missing (default 5s: a few announce intervals;
	// an edge that stopped announcing is unreachable or cut off). A
	// listing does not ask the edges that announce their series.
	ListingLag time.Duration
	// MaxStaleness is the staleness allowance of a query that sets none
	// (model.Query.MaxStaleness 0): an edge whose data the replicas hold
	// within it of the query's end is not asked for its newest data
	// (plan). Default 0: every edge that may hold newer data is asked.
	MaxStaleness time.Duration
	// Now is the clock that ages registration watermarks (default
	// time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// MeterProvider receives the front end's metrics (metrics.go); nil:
	// none.
	MeterProvider metric.MeterProvider
}

// Validate fills defaults and reports the first invalid option.
func (o *Options) Validate() error {
	o.EdgeTimeout = cmp.Or(o.EdgeTimeout, 5*time.Second)
	o.ReplicaTimeout = cmp.Or(o.ReplicaTimeout, 30*time.Second)
	o.HedgeAfter = cmp.Or(o.HedgeAfter, time.Second)
	o.MaxSeries = cmp.Or(o.MaxSeries, model.DefaultQuerySeriesLimit)
	o.MaxParallelEdges = cmp.Or(o.MaxParallelEdges, 16)
	o.ListingLag = cmp.Or(o.ListingLag, 5*time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.MeterProvider == nil {
		o.MeterProvider = metricnoop.NewMeterProvider()
	}
	switch {
	case o.Catalog == nil:
		return errors.New("query front end: a catalog is required")
	case o.Replica == nil:
		return errors.New("query front end: a replica resolver is required")
	case o.EdgeTimeout < 0 || o.ReplicaTimeout < 0 || o.HedgeAfter < 0:
		return fmt.Errorf("query front end: negative timeout (edge %s, replica %s, hedge after %s)", o.EdgeTimeout, o.ReplicaTimeout, o.HedgeAfter)
	case o.MaxSeries < 0:
		return fmt.Errorf("query front end: negative series limit %d", o.MaxSeries)
	case o.MaxStaleness < 0:
		return fmt.Errorf("query front end: negative max staleness %s", o.MaxStaleness)
	case o.ListingLag < 0:
		return fmt.Errorf("query front end: negative listing lag %s", o.ListingLag)
	case o.MaxParallelEdges < 0:
		return fmt.Errorf("query front end: negative edge parallelism %d", o.MaxParallelEdges)
	}
	return nil
}

// Frontend answers queries from the fleet. It implements backend.Backend.
type Frontend struct {
	o Options
	m *metrics
}

var _ backend.Backend = (*Frontend)(nil)

// New returns a Frontend.
func New(o Options) (*Frontend, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(o.MeterProvider)
	if err != nil {
		return nil, err
	}
	m.instrument(&o)
	return &Frontend{o: o, m: m}, nil
}

// Coverage says which sources answered a query and what is missing.
type Coverage struct {
	Edges []EdgeCoverage // sorted by edge
}

// Complete reports whether nothing is missing.
func (c Coverage) Complete() bool {
	for _, e := range c.Edges {
		if len(e.Missing) > 0 {
			return false
		}
	}
	return true
}

// EdgeCoverage is how one edge's part of a query was answered.
type EdgeCoverage struct {
	Edge string
	// Replicas are the coordinators placed to hold the edge's data;
	// ReplicaAnswered is the one whose answer was used ("" if none).
	Replicas        []string
	ReplicaAnswered string
	// EdgeAnswered says the edge itself answered its part.
	EdgeAnswered bool
	// WatermarkMs is the edge's watermark time when the query ran.
	WatermarkMs int64
	// StaleTail says the edge was not asked for its data after
	// WatermarkMs: the query's staleness allowance accepted the replicas'
	// answer (the answer's QueryInfo.FreshThroughMs is at most
	// WatermarkMs). Those points are not Missing: they were not asked for.
	StaleTail bool
	// Missing are the time ranges of the edge's data that the answer
	// lacks (inclusive), sorted.
	Missing []TimeRange
	// Reason says why sources were skipped or failed ("" when all went
	// to plan).
	Reason string
}

// TimeRange is an inclusive range of Unix milliseconds.
type TimeRange struct{ StartMs, EndMs int64 }

// Write refuses: coordinators hold replicas, not primaries.
func (f *Frontend) Write(context.Context, []model.Batch) (model.WriteResult, error) {
	return model.WriteResult{}, fmt.Errorf("%w: coordinators do not accept writes; write to an edge node", model.ErrBadRequest)
}

func (f *Frontend) barrier(ctx context.Context) error {
	if f.o.Barrier == nil {
		return nil
	}
	if err := f.o.Barrier(ctx); err != nil {
		return fmt.Errorf("catalog read barrier: %w", err)
	}
	return nil
}

// selectSeries returns the catalog's series matching ms (all series when
// ms is empty), sorted by labels, once the catalog read barrier is passed.
func (f *Frontend) selectSeries(ctx context.Context, ms []*labels.Matcher) ([]catalog.SeriesRef, error) {
	if err := f.barrier(ctx); err != nil {
		return nil, err
	}
	var refs []catalog.SeriesRef
	if len(ms) == 0 {
		n := f.o.Catalog.SeriesCount()
		refs = make([]catalog.SeriesRef, 0, n)
		for id := uint64(1); id <= uint64(n); id++ {
			if ls, ok := f.o.Catalog.Series(id); ok {
				refs = append(refs, catalog.SeriesRef{ID: id, Labels: ls})
			}
		}
	} else {
		var err error
		refs, err = f.o.Catalog.Select(ms, 0)
		if errors.Is(err, catalog.ErrNoSelectiveMatcher) {
			return nil, fmt.Errorf("%w: at least one matcher must not match the empty string (e.g. __name__=\"cpu\")", model.ErrBadRequest)
		}
		if err != nil {
			return nil, fmt.Errorf("select series in the catalog: %w", err)
		}
	}
	slices.SortFunc(refs, func(a, b catalog.SeriesRef) int { return labels.Compare(a.Labels, b.Labels) })
	return refs, nil
}

// listSeries is Series (metrics.go times the call).
func (f *Frontend) listSeries(ctx context.Context, ms []*labels.Matcher, limit int) ([]labels.Labels, error) {
	refs, err := f.selectSeries(ctx, ms)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = f.o.MaxSeries
	}
	seen := map[string]labels.Labels{}
	for _, r := range refs[:min(len(refs), limit)] {
		seen[string(r.Labels.AppendKey(nil))] = r.Labels
	}
	answers, err := askEdges(ctx, f, "list series", f.listingEdges(ctx), func(ctx context.Context, src Source) ([]labels.Labels, error) {
		return src.Series(ctx, ms, limit)
	})
	if err != nil {
		return nil, err
	}
	for _, sets := range answers {
		for _, ls := range sets {
			seen[string(ls.AppendKey(nil))] = ls
		}
	}
	out := make([]labels.Labels, 0, len(seen))
	for _, ls := range seen {
		out = append(out, ls)
	}
	slices.SortFunc(out, labels.Compare)
	return out[:min(len(out), limit)], nil
}

// listLabelNames is LabelNames (metrics.go times the call).
func (f *Frontend) listLabelNames(ctx context.Context, ms []*labels.Matcher) ([]string, error) {
	refs, err := f.selectSeries(ctx, ms)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range refs {
		for _, l := range r.Labels {
			seen[l.Name] = true
		}
	}
	answers, err := askEdges(ctx, f, "list label names", f.listingEdges(ctx), func(ctx context.Context, src Source) ([]string, error) {
		return src.LabelNames(ctx, ms)
	})
	if err != nil {
		return nil, err
	}
	for _, names := range answers {
		for _, n := range names {
			seen[n] = true
		}
	}
	return sortedSet(seen), nil
}

// listLabelValues is LabelValues (metrics.go times the call).
func (f *Frontend) listLabelValues(ctx context.Context, name string, ms []*labels.Matcher) ([]string, error) {
	refs, err := f.selectSeries(ctx, ms)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range refs {
		if v := r.Labels.Get(name); v != "" {
			seen[v] = true
		}
	}
	answers, err := askEdges(ctx, f, "list label values", f.listingEdges(ctx), func(ctx context.Context, src Source) ([]string, error) {
		return src.LabelValues(ctx, name, ms)
	})
	if err != nil {
		return nil, err
	}
	for _, vals := range answers {
		for _, v := range vals {
			if v != "" {
				seen[v] = true
			}
		}
	}
	return sortedSet(seen), nil
}

// listingEdges returns the edges a listing asks: those without a
// registration watermark (they do not announce their series, so the
// catalog may lack any they have not shipped yet). An edge that announces
// is not asked: the catalog lists every series it created before its
// registration watermark. The one line that lists the edges whose
// watermark is more than ListingLag old (they stopped announcing:
// unreachable, or cut off from every coordinator), whose newest series
// may be missing, is added to ctx's warnings (backend.Warn).
func (f *Frontend) listingEdges(ctx context.Context) []string {
	var asked, stale []string
	oldest := int64(math.MaxInt64)
	lagMs := f.o.Now().Add(-f.o.ListingLag).UnixMilli()
	for _, n := range f.o.Catalog.Nodes() {
		if n.Role != catalog.RoleEdge {
			continue
		}
		reg, ok := f.o.Catalog.Registration(n.ID)
		switch {
		case !ok:
			asked = append(asked, n.ID)
		case reg < lagMs:
			stale = append(stale, n.ID)
			oldest = min(oldest, reg)
		}
	}
	if len(stale) > 0 {
		what, they := "edges have", "they"
		if len(stale) == 1 {
			what, they = "edge has", "it"
		}
		backend.Warn(ctx, fmt.Sprintf("%d %s not announced new series for more than %s (%s; the oldest since %s): series %s created since may be missing",
			len(stale), what, f.o.ListingLag, listIDs(stale), fmtMs(oldest), they))
	}
	return asked
}

// listIDs names the first maxListedEdges of sorted ids, and how many more.
func listIDs(ids []string) string {
	list := strings.Join(ids[:min(len(ids), maxListedEdges)], ", ")
	if len(ids) > maxListedEdges {
		list += fmt.Sprintf(", and %d more", len(ids)-maxListedEdges)
	}
	return list
}

// askEdges calls ask for each of edges that is reachable, at most
// MaxParallelEdges at once and each within EdgeTimeout, and returns the
// answers of those that answered (in no particular order). The edges that
// cannot be asked or fail are logged and named in one warning (ctx's,
// backend.Warn): the series of theirs that the catalog has not
// registered are missing.
func askEdges[T any](ctx context.Context, f *Frontend, what string, edges []string, ask func(context.Context, Source) (T, error)) ([]T, error) {
	out, ok, err := askEach(ctx, f, what, edges, ask)
	if err != nil {
		return nil, err
	}
	answered := out[:0]
	for i := range out {
		if ok[i] {
			answered = append(answered, out[i])
		}
	}
	warnUnreachable(ctx, failedOf(edges, ok), func(they string) string {
		return "series " + they + " created that the catalog has not registered are missing"
	})
	return answered, nil
}

// askEach calls ask for each of edges that is reachable, at most
// MaxParallelEdges at once and each within EdgeTimeout: out[i] is the
// answer of edges[i] when ok[i]; an edge that could not be asked or failed
// is logged.
func askEach[T any](ctx context.Context, f *Frontend, what string, edges []string, ask func(context.Context, Source) (T, error)) (out []T, ok []bool, err error) {
	out = make([]T, len(edges))
	ok = make([]bool, len(edges))
	sem := make(chan struct{}, f.o.MaxParallelEdges)
	var wg sync.WaitGroup
	for i, edge := range edges {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			src, why := f.edgeSource(edge)
			if src == nil {
				f.o.Logger.Debug("query: edge not asked", "what", what, "edge", edge, "why", why)
				return
			}
			ectx, cancel := context.WithTimeout(ctx, f.o.EdgeTimeout)
			defer cancel()
			v, err := ask(ectx, src)
			if err != nil {
				f.o.Logger.Warn("query: edge failed", "what", what, "edge", edge, "err", err)
				return
			}
			out[i], ok[i] = v, true
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return out, ok, nil
}

// failedOf is the edges whose ok is false, in edges' order.
func failedOf(edges []string, ok []bool) []string {
	var failed []string
	for i, e := range edges {
		if !ok[i] {
			failed = append(failed, e)
		}
	}
	return failed
}

// warnUnreachable adds to ctx's warnings the line that names the edges
// failed (if any) as unreachable, followed by consequence("they") or
// consequence("it").
func warnUnreachable(ctx context.Context, failed []string, consequence func(they string) string) {
	if len(failed) == 0 {
		return
	}
	what, they := "edges", "they"
	if len(failed) == 1 {
		what, they = "edge", "it"
	}
	backend.Warn(ctx, fmt.Sprintf("%d %s unreachable (%s): %s", len(failed), what, listIDs(failed), consequence(they)))
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
