package query

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// The front end's metrics. Each public call is timed as a whole (fan-out
// and merge); the legs are counted where they are sent, by wrapping the
// sources that Options.Replica and Options.Edge return, so the planning
// code stays as it is.

// APIs, the "api" attribute.
const (
	apiQuery = iota
	apiSeries
	apiLabelNames
	apiLabelValues
	numAPIs
)

var apiNames = [numAPIs]string{"query", "series", "label_names", "label_values"}

// Query kinds, the "kind" attribute of api="query" (0: no kind, other APIs).
var kindNames = [...]string{"", "raw", "downsample", "last_point"}

// Call outcomes, the "outcome" attribute.
const (
	callOK      = iota // complete answer
	callPartial        // answered, with missing coverage
	callError          // failed
	numCalls
)

var callNames = [numCalls]string{"ok", "partial", "error"}

// Leg kinds and outcomes.
const (
	legReplica = iota
	legEdge
	numLegKinds
)

var legKindNames = [numLegKinds]string{"replica", "edge"}

type metrics struct {
	duration    metric.Float64Histogram
	callAttrs   [numAPIs][len(kindNames)][numCalls]metric.RecordOption
	legsPerCall metric.Int64Histogram
	perAPI      [numAPIs]metric.RecordOption
	legs        metric.Int64Counter
	legAttrs    [numLegKinds][2]metric.AddOption // [kind][failed]
	partial     metric.Int64Counter
	unreachable metric.Int64Counter
	hedges      metric.Int64Counter
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	in := telemetry.NewInstruments(mp.Meter("github.com/tributarydb/tributary/coordinator/query"))
	m := &metrics{}
	hist, counter := in.Histogram, in.Counter
	m.duration = hist("tributary.query.fanout.duration", "s",
		"Time the fleet query front end took to answer (plan, fan-out to replicas and edges, merge), by api, kind and outcome.")
	m.legs = counter("tributary.query.legs", "{leg}", "Requests the front end sent to replica coordinators and edges, by kind and outcome (hedged requests included).")
	m.partial = counter("tributary.query.partial", "{query}", "Query answers with missing coverage (an edge's data partly or wholly absent; the answer says which).")
	m.unreachable = counter("tributary.query.edge.unreachable", "{edge}", "Edges a query could not reach: no usable address, or the edge's request failed.")
	m.hedges = counter("tributary.query.hedges", "{leg}", "Replica requests sent to the next replica because the previous one was slow to answer.")
	err := in.Err()
	if err == nil {
		m.legsPerCall, err = in.Meter().Int64Histogram("tributary.query.fanout.legs", metric.WithUnit("{leg}"),
			metric.WithDescription("Requests to replicas and edges that one front-end call sent, by api."),
			metric.WithExplicitBucketBoundaries(0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
	}
	if err != nil {
		return nil, fmt.Errorf("query front end metrics: %w", err)
	}
	for a := range numAPIs {
		m.perAPI[a] = metric.WithAttributeSet(attribute.NewSet(attribute.String("api", apiNames[a])))
		for k, kind := range kindNames {
			for o := range numCalls {
				kv := []attribute.KeyValue{attribute.String("api", apiNames[a]), attribute.String("outcome", callNames[o])}
				if kind != "" {
					kv = append(kv, attribute.String("kind", kind))
				}
				m.callAttrs[a][k][o] = metric.WithAttributeSet(attribute.NewSet(kv...))
			}
		}
	}
	// The counters are reported from the start (as 0), not from their
	// first event.
	m.partial.Add(context.Background(), 0)
	m.unreachable.Add(context.Background(), 0)
	m.hedges.Add(context.Background(), 0)
	for k := range numLegKinds {
		for f, out := range []string{"ok", "error"} {
			m.legAttrs[k][f] = metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", legKindNames[k]), attribute.String("outcome", out)))
		}
	}
	return m, nil
}

// legTally counts the legs of one call; it travels in the call's context.
type legTally struct{ n atomic.Int64 }

type tallyKey struct{}

// call is one timed front-end call.
type call struct {
	m     *metrics
	api   int
	kind  int
	start time.Time
	tally *legTally
}

// begin starts timing a call and returns the context its legs run under.
func (m *metrics) begin(ctx context.Context, api int) (context.Context, call) {
	c := call{m: m, api: api, start: time.Now(), tally: &legTally{}}
	return context.WithValue(ctx, tallyKey{}, c.tally), c
}

// end records the call.
func (c call) end(ctx context.Context, partial bool, err error) {
	o := callOK
	switch {
	case err != nil:
		o = callError
	case partial:
		o = callPartial
		c.m.partial.Add(ctx, 1)
	}
	c.m.duration.Record(ctx, time.Since(c.start).Seconds(), c.m.callAttrs[c.api][c.kind][o])
	c.m.legsPerCall.Record(ctx, c.tally.n.Load(), c.m.perAPI[c.api])
}

// leg counts one request to a replica or an edge.
func (m *metrics) leg(ctx context.Context, kind int, err error) {
	if t, ok := ctx.Value(tallyKey{}).(*legTally); ok {
		t.n.Add(1)
	}
	failed := 0
	if err != nil {
		failed = 1
		if kind == legEdge {
			m.unreachable.Add(ctx, 1)
		}
	}
	m.legs.Add(ctx, 1, m.legAttrs[kind][failed])
}

// hedged counts a hedged replica request.
func (m *metrics) hedged(ctx context.Context) { m.hedges.Add(ctx, 1) }

// instrument wraps the sources the options resolve so that every request
// sent to them is counted. An edge that cannot be resolved counts as
// unreachable.
func (m *metrics) instrument(o *Options) {
	if get := o.Replica; get != nil {
		o.Replica = func(id string) (ReplicaSource, error) {
			rs, err := get(id)
			if err != nil || rs == nil {
				return rs, err
			}
			return countedReplica{rs, m}, nil
		}
	}
	if get := o.Edge; get != nil {
		o.Edge = func(edge, addr string) (Source, error) {
			src, err := get(edge, addr)
			if err != nil || src == nil {
				m.unreachable.Add(context.Background(), 1)
				return src, err
			}
			return countedEdge{src, m}, nil
		}
	}
}

type countedReplica struct {
	rs ReplicaSource
	m  *metrics
}

func (c countedReplica) Query(ctx context.Context, edges []string, q model.Query, emit func(string, model.Series) error) (model.QueryInfo, error) {
	info, err := c.rs.Query(ctx, edges, q, emit)
	c.m.leg(ctx, legReplica, err)
	return info, err
}

type countedEdge struct {
	src Source
	m   *metrics
}

func (c countedEdge) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	info, err := c.src.Query(ctx, q, emit)
	c.m.leg(ctx, legEdge, err)
	return info, err
}

func (c countedEdge) Series(ctx context.Context, ms []*labels.Matcher, limit int) ([]labels.Labels, error) {
	out, err := c.src.Series(ctx, ms, limit)
	c.m.leg(ctx, legEdge, err)
	return out, err
}

func (c countedEdge) LabelNames(ctx context.Context, ms []*labels.Matcher) ([]string, error) {
	out, err := c.src.LabelNames(ctx, ms)
	c.m.leg(ctx, legEdge, err)
	return out, err
}

func (c countedEdge) LabelValues(ctx context.Context, name string, ms []*labels.Matcher) ([]string, error) {
	out, err := c.src.LabelValues(ctx, name, ms)
	c.m.leg(ctx, legEdge, err)
	return out, err
}

// RuleGroups lists the edge's rule groups; a source that lists none
// (RuleGroupSource) answers none.
func (c countedEdge) RuleGroups(ctx context.Context, f model.RuleFilter) ([]model.RuleGroup, error) {
	rs, ok := c.src.(RuleGroupSource)
	if !ok {
		return nil, nil
	}
	out, err := rs.RuleGroups(ctx, f)
	c.m.leg(ctx, legEdge, err)
	return out, err
}

// QueryWithCoverage runs q over the fleet and calls emit per series (or
// group) in label order. Besides the answer it says, per edge, which
// sources answered and which time ranges are missing; the same is
// summarized as human-readable lines in QueryInfo.Warnings.
func (f *Frontend) QueryWithCoverage(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, Coverage, error) {
	ctx, c := f.m.begin(ctx, apiQuery)
	if q.Mode >= model.ModeRaw && q.Mode <= model.ModeLastPoint {
		c.kind = int(q.Mode-model.ModeRaw) + 1
	}
	info, cov, err := f.queryWithCoverage(ctx, q, emit)
	c.end(ctx, !cov.Complete(), err)
	return info, cov, err
}

// Series lists the series matching ms, in label order, at most limit
// (<= 0: MaxSeries): the catalog's, and those of every reachable edge (an
// edge's series created after its watermark are not in the catalog yet).
// An edge that is unreachable or fails is not asked and nothing says so:
// the listing has no channel for warnings.
func (f *Frontend) Series(ctx context.Context, ms []*labels.Matcher, limit int) ([]labels.Labels, error) {
	ctx, c := f.m.begin(ctx, apiSeries)
	out, err := f.listSeries(ctx, ms, limit)
	c.end(ctx, false, err)
	return out, err
}

// LabelNames lists the label names of the series matching ms (all series
// when ms is empty): the catalog's and every reachable edge's, as Series.
func (f *Frontend) LabelNames(ctx context.Context, ms []*labels.Matcher) ([]string, error) {
	ctx, c := f.m.begin(ctx, apiLabelNames)
	out, err := f.listLabelNames(ctx, ms)
	c.end(ctx, false, err)
	return out, err
}

// LabelValues lists the values of name among the series matching ms: the
// catalog's and every reachable edge's, as Series.
func (f *Frontend) LabelValues(ctx context.Context, name string, ms []*labels.Matcher) ([]string, error) {
	ctx, c := f.m.begin(ctx, apiLabelValues)
	out, err := f.listLabelValues(ctx, name, ms)
	c.end(ctx, false, err)
	return out, err
}
