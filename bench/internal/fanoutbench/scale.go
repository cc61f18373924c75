package fanoutbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/node/labels"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// scaleMeasurement is what the fleet-scale phase measured.
type scaleMeasurement struct {
	ran         bool
	simEdges    int
	unreachable int
	readyS      float64 // from starting the simulated edges until all are listed with a registration watermark

	// One series over 1 h, 1-minute average, ending at the current
	// minute (as a dashboard aligns its range to the step).
	oneLatency  []time.Duration
	edgeLegs    int64 // edge requests the coordinators sent for them
	simCalls    int64 // Query requests the simulated edges received
	oneQueries  int
	oneWrong    int
	nowEdgeLegs int64 // the same query ending now: edge requests
	nowLatency  time.Duration
	// The same query ending now with the staleness allowance
	// endNowStaleness: edge requests, latency, warnings, and how far the
	// answer's freshness was behind its end.
	staleAsked    bool
	staleEdgeLegs int64
	staleLatency  time.Duration
	staleWarnings int
	staleBehind   time.Duration
	nowWarnings   int
	nowAsked      bool
	listComplete  bool // listing of every simulated edge, from the catalog
	listWarnings  []string
	listLegs      int64
	flagged       int // edges a listing warned about once the unreachable ones went offline
	visible       []time.Duration
}

// edgeLegsMetric counts the requests a coordinator's front end sent to
// edges (kind="edge"), whatever their outcome.
const edgeLegsMetric = `tributary_query_legs_total{`

// edgeLegs sums, over the running coordinators, the edge requests their
// query front ends sent.
func (c *cluster) edgeLegs(ctx context.Context) (int64, error) {
	var total int64
	for _, p := range c.coords {
		if p.Current() == nil {
			continue
		}
		url := "http://" + p.httpAddr + "/metrics"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			return 0, fmt.Errorf("get metrics of %s: %w", p.Name, err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, edgeLegsMetric) || !strings.Contains(line, `kind="edge"`) {
				continue
			}
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				resp.Body.Close()
				return 0, fmt.Errorf("metrics of %s: %q: %w", p.Name, line, err)
			}
			total += int64(v)
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return 0, fmt.Errorf("read metrics of %s: %w", p.Name, err)
		}
	}
	return total, nil
}

// scale is the fleet-scale phase: Edges-ProcessEdges simulated edges
// (UnreachableEdges of them not queryable) announce their series to the
// coordinators; then it times one-series queries and counts the edges
// they ask, checks a listing from the catalog, takes the unreachable
// edges offline and checks that a listing flags them, and times new
// series until the coordinators list them.
func (r *runner) scale(ctx context.Context, dir string) (err error) {
	o := r.o
	n := o.simEdges()
	if n == 0 {
		return nil
	}
	sm := &r.m.scale
	sm.ran, sm.simEdges, sm.unreachable = true, n, o.unreachable()
	intakes := make([]string, len(r.c.coords))
	for i, p := range r.c.coords {
		intakes[i] = p.intake
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("simulated edges: %w", err)
	}
	quiet := slog.New(slog.DiscardHandler)
	edges := make([]*simEdge, n)
	for i := range n {
		// The unreachable ones are spread over the ids.
		reachable := true
		if u := sm.unreachable; u > 0 {
			step := n / u
			reachable = i%step != step-1 || i/step >= u
		}
		edges[i] = newSimEdge(&r.o, fmt.Sprintf("sim-%04d", i), o.SeriesPerEdge, reachable)
	}
	defer func() {
		var errs []error
		for _, e := range edges {
			if cerr := e.close(); cerr != nil {
				errs = append(errs, cerr)
			}
		}
		err = errors.Join(err, errors.Join(errs...))
	}()
	var unreachable, reachable []*simEdge
	for _, e := range edges {
		if e.reachable {
			reachable = append(reachable, e)
		} else {
			unreachable = append(unreachable, e)
		}
	}
	r.logger.Info("starting simulated edges", "n", n, "unreachable", len(unreachable))
	t0 := time.Now()
	for _, e := range edges {
		if err := e.start(dir, intakes, quiet); err != nil {
			return err
		}
	}
	conns, closeConns, err := dialAll(r.c.coords)
	if err != nil {
		return err
	}
	defer closeConns()
	qc := tributaryv1.NewQueryServiceClient(conns[0])
	ids := make([]string, n)
	for i, e := range edges {
		ids[i] = e.id
	}
	listed := func() ([]string, []string, error) {
		cctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
		defer cancel()
		resp, err := qc.LabelValues(cctx, &tributaryv1.LabelValuesRequest{Name: simEdgeName,
			Matchers: []*tributaryv1.Matcher{{Type: tributaryv1.Matcher_EQUAL, Name: "__name__", Value: simMetric}}})
		return resp.GetValues(), resp.GetWarnings(), err
	}
	for {
		vals, _, err := listed()
		registered := 0
		for _, e := range edges {
			if e.shipper.Stats().RegisteredThroughMs > 0 {
				registered++
			}
		}
		if err == nil && len(vals) == n && registered == n {
			break
		}
		if time.Since(t0) > o.ReplicationTimeout {
			return fmt.Errorf("simulated edges: %d of %d listed, %d with a registration watermark, after %v (last error %v)",
				len(vals), n, registered, o.ReplicationTimeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	sm.readyS = time.Since(t0).Seconds()
	r.logger.Info("simulated edges announced", "n", n, "s", sm.readyS)

	var errs []error
	if err := r.oneSeries(ctx, qc, reachable); err != nil {
		errs = append(errs, err)
	}
	if err := r.listings(ctx, listed, ids, unreachable); err != nil {
		errs = append(errs, err)
	}
	if err := r.visibility(ctx, qc, reachable); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// oneSpec is the one-series query: probe p0 of edge, the hour before
// endMs, 1-minute average.
func oneSpec(edge string, endMs int64) querySpec {
	return querySpec{name: "one_series_avg_1m", match: map[string]string{"__name__": simMetric, simEdgeName: edge, simProbe: "p0"},
		startMs: endMs - time.Hour.Milliseconds() + 1, endMs: endMs,
		mode: tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE, stepMs: minuteMs, downsample: tributaryv1.Aggregate_AGGREGATE_AVG}
}

// oneSeries times Queries one-series queries ending at the current
// minute on random reachable simulated edges, checking each answer, and
// counts the edges they ask; then one ending now.
func (r *runner) oneSeries(ctx context.Context, qc tributaryv1.QueryServiceClient, reachable []*simEdge) error {
	sm := &r.m.scale
	rng := rand.New(rand.NewPCG(r.o.Seed, 0x5ca1e))
	simCalls := func() int64 {
		var n int64
		for _, e := range reachable {
			n += e.calls.Load()
		}
		return n
	}
	var errs []error
	ask := func(e *simEdge, endMs int64) (nodeclient.Answer, time.Duration, error) {
		q := oneSpec(e.id, endMs)
		cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
		defer cancel()
		t0 := time.Now()
		got, err := nodeclient.Query(cctx, qc, q.request())
		d := time.Since(t0)
		if err != nil {
			return got, d, err
		}
		want, err := expected(e.data(q.match, q.startMs, q.endMs), q)
		if err == nil {
			err = compare(q, got, want)
		}
		return got, d, err
	}
	for i := range r.o.WarmupQueries {
		e := reachable[rng.IntN(len(reachable))]
		if _, _, err := ask(e, time.Now().Truncate(time.Minute).UnixMilli()-1); err != nil && i == 0 {
			errs = append(errs, fmt.Errorf("one-series warm-up: %w", err))
		}
	}
	legs0, err := r.c.edgeLegs(ctx)
	if err != nil {
		return err
	}
	calls0 := simCalls()
	for range r.o.Queries {
		e := reachable[rng.IntN(len(reachable))]
		got, d, err := ask(e, time.Now().Truncate(time.Minute).UnixMilli()-1)
		sm.oneQueries++
		if err == nil && len(got.Warnings) > 0 {
			err = fmt.Errorf("warnings: %s", strings.Join(got.Warnings, "; "))
		}
		if err != nil {
			sm.oneWrong++
			if len(errs) < 3 {
				errs = append(errs, fmt.Errorf("one-series query on %s: %w", e.id, err))
			}
			continue
		}
		sm.oneLatency = append(sm.oneLatency, d)
	}
	legs1, err := r.c.edgeLegs(ctx)
	if err != nil {
		return err
	}
	sm.edgeLegs, sm.simCalls = legs1-legs0, simCalls()-calls0
	r.m.checked += sm.oneQueries
	r.m.wrong += sm.oneWrong

	// Ending now: past every edge's registration watermark, so every
	// edge is asked (the unreachable ones until the edge timeout).
	e := reachable[rng.IntN(len(reachable))]
	got, d, err := ask(e, time.Now().UnixMilli())
	legs2, lerr := r.c.edgeLegs(ctx)
	if err == nil {
		err = lerr
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("one-series query ending now: %w", err))
	} else {
		sm.nowAsked, sm.nowEdgeLegs, sm.nowLatency, sm.nowWarnings = true, legs2-legs1, d, len(got.Warnings)
	}
	if err := r.endNowStale(ctx, qc, reachable[rng.IntN(len(reachable))]); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// endNowStaleness is the staleness allowance of the one-series query
// ending now that endNowStale times.
const endNowStaleness = 30 * time.Second

// endNowStale asks the one-series query ending now on e with the
// staleness allowance endNowStaleness: the edges whose data and series
// the coordinators hold within it of now are not asked. The answer must
// say it is fresh through a time within the allowance, and be right
// through it: every bucket that ends by then is checked.
func (r *runner) endNowStale(ctx context.Context, qc tributaryv1.QueryServiceClient, e *simEdge) error {
	sm := &r.m.scale
	legs0, err := r.c.edgeLegs(ctx)
	if err != nil {
		return err
	}
	end := time.Now().UnixMilli()
	q := oneSpec(e.id, end)
	req := q.request()
	req.MaxStalenessMs = proto.Int64(endNowStaleness.Milliseconds())
	cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	defer cancel()
	t0 := time.Now()
	got, err := nodeclient.Query(cctx, qc, req)
	d := time.Since(t0)
	if err != nil {
		return fmt.Errorf("one-series query ending now with max staleness %s: %w", endNowStaleness, err)
	}
	legs1, err := r.c.edgeLegs(ctx)
	if err != nil {
		return err
	}
	r.m.checked++
	fresh := got.FreshThroughMs
	if fresh < end-endNowStaleness.Milliseconds() || fresh > end {
		r.m.wrong++
		return fmt.Errorf("one-series query ending now with max staleness %s: fresh through %d ms, want within [%d, %d]", endNowStaleness, fresh, end-endNowStaleness.Milliseconds(), end)
	}
	// The buckets that end by the freshness time hold all their points.
	through := q
	through.endMs = (fresh+1)/q.stepMs*q.stepMs - 1
	want, err := expected(e.data(q.match, q.startMs, through.endMs), through)
	if err == nil {
		err = compare(through, clip(got, through.endMs), want)
	}
	if err != nil {
		r.m.wrong++
		return fmt.Errorf("one-series query ending now with max staleness %s: %w", endNowStaleness, err)
	}
	sm.staleAsked, sm.staleEdgeLegs, sm.staleLatency, sm.staleWarnings = true, legs1-legs0, d, len(got.Warnings)
	sm.staleBehind = time.Duration(end-fresh) * time.Millisecond
	return nil
}

// clip returns a copy of a with the points after endMs left out.
func clip(a nodeclient.Answer, endMs int64) nodeclient.Answer {
	out := a
	out.Series = make([]nodeclient.Series, len(a.Series))
	for i, s := range a.Series {
		n := 0
		for n < len(s.TimestampsMs) && s.TimestampsMs[n] <= endMs {
			n++
		}
		out.Series[i] = nodeclient.Series{Labels: s.Labels, TimestampsMs: s.TimestampsMs[:n], Values: s.Values[:n]}
	}
	return out
}

// listings checks that the coordinators list every simulated edge from
// the catalog, asking none and warning of nothing; then takes the
// unreachable edges offline and checks that a listing flags them once
// their registration watermarks are older than the front end's listing
// lag (5 s).
func (r *runner) listings(ctx context.Context, listed func() ([]string, []string, error), ids []string, unreachable []*simEdge) error {
	sm := &r.m.scale
	legs0, err := r.c.edgeLegs(ctx)
	if err != nil {
		return err
	}
	vals, warns, err := listed()
	if err != nil {
		return fmt.Errorf("listing: %w", err)
	}
	legs1, err := r.c.edgeLegs(ctx)
	if err != nil {
		return err
	}
	sm.listLegs = legs1 - legs0
	sm.listComplete = slices.Equal(vals, ids)
	sm.listWarnings = warns
	if !sm.listComplete {
		return fmt.Errorf("listing: %d simulated edges listed, want %d", len(vals), len(ids))
	}
	if len(unreachable) == 0 {
		return nil
	}
	for _, e := range unreachable {
		if err := e.offline(); err != nil {
			return err
		}
	}
	const lag = 5 * time.Second // query.Options.ListingLag's default
	deadline := time.Now().Add(lag + 30*time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		vals, warns, err := listed()
		if err != nil {
			return fmt.Errorf("listing with edges offline: %w", err)
		}
		if !slices.Equal(vals, ids) {
			return fmt.Errorf("listing with edges offline: %d simulated edges listed, want %d", len(vals), len(ids))
		}
		for _, w := range warns {
			if k, _, ok := strings.Cut(w, " edges have not announced"); ok {
				sm.flagged, _ = strconv.Atoi(k)
			} else if strings.HasPrefix(w, "1 edge has not announced") {
				sm.flagged = 1
			}
		}
		if sm.flagged >= len(unreachable) {
			return nil
		}
	}
	return fmt.Errorf("listing: %d of the %d offline edges flagged", sm.flagged, len(unreachable))
}

// visibility creates VisibilityTrials new series, each on a random
// reachable simulated edge, and times each until a coordinator lists it.
func (r *runner) visibility(ctx context.Context, qc tributaryv1.QueryServiceClient, reachable []*simEdge) error {
	sm := &r.m.scale
	rng := rand.New(rand.NewPCG(r.o.Seed, 0x715))
	for k := range r.o.VisibilityTrials {
		e := reachable[rng.IntN(len(reachable))]
		id := fmt.Sprintf("v%d", k)
		t0 := time.Now()
		e.create(labels.FromStrings("__name__", simNewName, simEdgeName, e.id, "trial", id))
		for {
			cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
			resp, err := qc.Series(cctx, &tributaryv1.SeriesRequest{Matchers: []*tributaryv1.Matcher{
				{Type: tributaryv1.Matcher_EQUAL, Name: "__name__", Value: simNewName},
				{Type: tributaryv1.Matcher_EQUAL, Name: "trial", Value: id}}})
			cancel()
			if err != nil {
				return fmt.Errorf("visibility: list series: %w", err)
			}
			if len(resp.GetSeries()) == 1 {
				sm.visible = append(sm.visible, time.Since(t0))
				break
			}
			if time.Since(t0) > r.o.ReplicationTimeout {
				return fmt.Errorf("visibility: series %s on %s not listed after %v", id, e.id, r.o.ReplicationTimeout)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
		// Trials start at different points of the edges' announce
		// intervals.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(rng.Int64N(int64(time.Second)))):
		}
	}
	return nil
}

// simDir is where the simulated edges keep their cursors.
func simDir(dataDir string) string { return filepath.Join(dataDir, "sim-edges") }
