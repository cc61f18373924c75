package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
)

// The healing scenarios (heal_test.go) run a fleet laid out as the Helm
// chart lays it out (cluster.NewHosts: every coordinator on its own
// loopback address, all on the same ports, so that --rejoin and
// --auto-join find the members), several edges each written by its own
// writer with its own ledger and metric, and three watchers running
// throughout:
//
//   - an acknowledgement watch (cluster.AckWatch): every edge's
//     acked-through gauge every 250 ms, for the longest pause between
//     two acknowledgements;
//   - a prober: every probeEvery (1 s), one running coordinator's query front
//     end is asked for one edge's raw points over a window of
//     acknowledged history, compared with that edge's ledger (the naive
//     oracle): an answer missing acknowledged points must say so in a
//     warning (it may not claim a completeness it does not have), and no
//     answer may hold a point twice, a point never written or a wrong
//     value;
//   - a placement sampler: every sampleEvery (1 s), `tributary cluster edges
//     --format json`; for every edge, the segments it lacks on each
//     replica: some replica on a running coordinator (whose disk is its
//     own) must lack none of the held segments (no range loses its last
//     cloud copy), and what the catalog credits such a replica with must
//     be in its store (ReplicaService/Holdings asked of that store).
//
// They run only with TRIBUTARY_E2E_HEAL=1 (make e2e sets it): they take
// minutes and a good part of two cores.

const (
	healRF      = 3 // the fleet's default replication factor
	probeEvery  = time.Second
	sampleEvery = time.Second
)

// healOptions describe a healing scenario's fleet and load.
type healOptions struct {
	coordinators    int
	maxCoordinators int
	edges           int
	// Each edge's writer: series × points every interval (timestamps at
	// the clock's pace).
	series, points  int
	interval        time.Duration
	deadAfter       time.Duration
	coordinatorArgs []string
	edgeArgs        []string
	edgeTargets     func(edge string, intakes []string) ([]string, error)
	noLoad          bool // the scenario writes by itself
}

// healFleet is a running healing scenario.
type healFleet struct {
	t       *testing.T
	o       healOptions
	c       *cluster.Cluster
	startMs int64
	writers map[string]*cluster.Writer // by edge id
	wopts   map[string]cluster.WriterOptions
	acks    *cluster.AckWatch
	probe   *prober
	sampler *sampler

	mu      sync.Mutex
	suspect map[string]string // coordinator id → the store id its lost disk held
}

// metricOf is the metric edge's writer writes.
func metricOf(edge string) string { return "heal_" + strings.ReplaceAll(edge, "-", "_") }

// loadLine describes o's load.
func (o healOptions) pointsPerSecond() float64 {
	return float64(o.edges*o.series*o.points) / o.interval.Seconds()
}

// requireHealEnabled skips the scenario unless TRIBUTARY_E2E_HEAL=1.
func requireHealEnabled(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	if os.Getenv("TRIBUTARY_E2E_HEAL") != "1" {
		t.Skip("healing scenario: set TRIBUTARY_E2E_HEAL=1 (make e2e does) to run it; it takes minutes")
	}
}

// startHealFleet starts the fleet, the writers (unless noLoad) and the
// watchers, and waits until every edge has a segment acknowledged and
// healRF replicas.
func startHealFleet(t *testing.T, o healOptions) *healFleet {
	t.Helper()
	requireHealEnabled(t)
	if o.deadAfter == 0 {
		o.deadAfter = 30 * time.Second
	}
	if o.interval == 0 {
		o.series, o.points, o.interval = 4, 10, 100*time.Millisecond
	}
	c, err := cluster.NewHosts(cluster.HostsOptions{Bin: bin, Dir: t.TempDir(), Coordinators: o.coordinators,
		MaxCoordinators: o.maxCoordinators, Edges: o.edges,
		CoordinatorArgs: append([]string{"--dead-after", o.deadAfter.String()}, o.coordinatorArgs...),
		EdgeArgs:        o.edgeArgs, EdgeTargets: o.edgeTargets})
	if err != nil {
		t.Fatal(err)
	}
	h := &healFleet{t: t, o: o, c: c, writers: map[string]*cluster.Writer{}, wopts: map[string]cluster.WriterOptions{},
		suspect: map[string]string{}}
	t.Cleanup(c.KillAll)
	t.Cleanup(func() {
		// Processes added later are reported too.
		if t.Failed() {
			for _, p := range c.Processes() {
				t.Logf("--- last 25 lines of %s (%s):\n%s", p.Name, p.LogPath, p.LogTail(25))
			}
		}
	})
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("fleet of %d coordinators (%s) and %d edges ready in %v; load %.0f points/s; dead-after %v; load average %s",
		len(c.Coordinators), c.Coordinators[0].Cluster, len(c.Edges), time.Since(start).Round(time.Millisecond),
		o.pointsPerSecond(), o.deadAfter, loadAvg())
	h.startMs = time.Now().UnixMilli() - 1000
	for _, e := range c.Edges {
		wo := cluster.WriterOptions{Addr: e.GRPC, Metric: metricOf(e.ID), Series: o.series, PointsPerSeries: o.points,
			Interval: o.interval, StepMs: max(1, o.interval.Milliseconds()/int64(o.points))}
		w, err := cluster.NewWriter(wo)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		h.writers[e.ID], h.wopts[e.ID] = w, wo
	}
	if !o.noLoad {
		for _, w := range h.writers {
			w.Start()
		}
	}
	h.acks = cluster.WatchAcks(c.Edges, 250*time.Millisecond)
	t.Cleanup(h.acks.Stop)
	if !o.noLoad {
		h.waitEdges("every edge acknowledged with its replicas placed", 60*time.Second, func(v cluster.EdgesView) string {
			for _, e := range c.Edges {
				ev, ok := v.Edge(e.ID)
				if !ok || ev.AckedThrough == 0 || len(activeReplicas(ev)) < min(healRF, o.coordinators) {
					return fmt.Sprintf("%s: %+v", e.ID, ev)
				}
			}
			return ""
		})
		h.probe = startProber(h)
		t.Cleanup(h.probe.stop)
	}
	h.sampler = startSampler(h)
	t.Cleanup(h.sampler.stop)
	return h
}

// markWiped records that co lost its disk: until the catalog registers a
// store other than oldStore for it, it is not a live holder of anything.
func (h *healFleet) markWiped(co *cluster.Coordinator, oldStore string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.suspect[co.ID] = oldStore
}

// isSuspect reports whether id's disk was lost and its new store is not
// registered yet; it asks a coordinator's member list to find out.
func (h *healFleet) isSuspect(ctx context.Context, id string) bool {
	h.mu.Lock()
	old, ok := h.suspect[id]
	h.mu.Unlock()
	if !ok {
		return false
	}
	for _, co := range h.c.Coordinators {
		if !co.Running() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		m, err := cluster.Members(cctx, co)
		cancel()
		if err != nil || m.LeaderRaftId == 0 {
			continue
		}
		for _, mem := range m.Members {
			if mem.NodeId == id && mem.StoreId != "" && mem.StoreId != old {
				h.mu.Lock()
				delete(h.suspect, id)
				h.mu.Unlock()
				return false
			}
		}
		return true
	}
	return true
}

// coordinator returns the coordinator of node id id.
func (h *healFleet) coordinator(id string) *cluster.Coordinator {
	for _, co := range h.c.Coordinators {
		if co.ID == id {
			return co
		}
	}
	return nil
}

// live reports whether the replica on coordinator id may be counted on:
// its process runs and its disk is its own (not a wiped one whose new
// store the catalog has not registered yet).
func (h *healFleet) live(ctx context.Context, id string) bool {
	co := h.coordinator(id)
	return co != nil && co.Running() && !h.isSuspect(ctx, id)
}

// activeReplicas lists an edge's active (not leaving) replicas.
func activeReplicas(ev cluster.EdgeView) []cluster.ReplicaView {
	var out []cluster.ReplicaView
	for _, r := range ev.Replicas {
		if !r.Leaving {
			out = append(out, r)
		}
	}
	return out
}

// edges asks the running coordinators in turn for `cluster edges`.
func (h *healFleet) edges(ctx context.Context) (cluster.EdgesView, error) {
	var errs []string
	cos := slices.Clone(h.c.Coordinators)
	rand.Shuffle(len(cos), func(i, j int) { cos[i], cos[j] = cos[j], cos[i] })
	for _, co := range cos {
		if !co.Running() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		v, err := h.c.ClusterEdges(cctx, co)
		cancel()
		if err == nil {
			return v, nil
		}
		errs = append(errs, err.Error())
	}
	return cluster.EdgesView{}, fmt.Errorf("cluster edges: no running coordinator answered: %s", strings.Join(errs, "; "))
}

// waitEdges polls `cluster edges` every second until pending (the reason
// the condition does not hold yet, "" once it does) returns "", and
// returns when it held; it fails the test after timeout.
func (h *healFleet) waitEdges(what string, timeout time.Duration, pending func(cluster.EdgesView) string) time.Time {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		v, err := h.edges(context.Background())
		if err == nil {
			if last = pending(v); last == "" {
				return time.Now()
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not within %v: %s", what, timeout, last)
		}
		time.Sleep(time.Second)
	}
}

// healthy reports why v does not show every edge with rf active
// replicas on live coordinators in state active ("" when it does); with
// whole, also every edge's history held by each of them (no lacking
// replica, no leaving replica, nothing under-replicated or unsourced).
func (h *healFleet) healthy(v cluster.EdgesView, rf int, whole bool) string {
	ctx := context.Background()
	for _, e := range h.c.Edges {
		ev, ok := v.Edge(e.ID)
		if !ok {
			return e.ID + " is not in the catalog"
		}
		n := 0
		for _, r := range activeReplicas(ev) {
			if r.State == "active" && h.live(ctx, r.Coordinator) {
				n++
			}
		}
		if n < rf {
			return fmt.Sprintf("%s has %d healthy active replicas of %d: %s", e.ID, n, rf, replicaLine(ev))
		}
		if !whole {
			continue
		}
		if len(ev.Replicas) != n || ev.UnderReplicatedSegments > 0 || ev.UnsourcedSegments > 0 {
			return fmt.Sprintf("%s: %s; under-replicated %d, unsourced %d", e.ID, replicaLine(ev), ev.UnderReplicatedSegments, ev.UnsourcedSegments)
		}
		for _, r := range ev.Replicas {
			if r.LackingSegments > 0 {
				return fmt.Sprintf("%s: %s", e.ID, replicaLine(ev))
			}
		}
	}
	return ""
}

// replicaLine describes an edge's replicas as `cluster edges` does.
func replicaLine(ev cluster.EdgeView) string {
	var parts []string
	for _, r := range ev.Replicas {
		s := r.Coordinator
		if r.Leaving {
			s += "*"
		}
		if r.State != "active" {
			s += "(" + r.State + ")"
		}
		if r.LackingSegments > 0 {
			s += fmt.Sprintf(" lacks %d", r.LackingSegments)
		}
		parts = append(parts, s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// loads counts each coordinator's active replicas.
func loads(v cluster.EdgesView) map[string]int {
	out := map[string]int{}
	for _, e := range v.Edges {
		for _, r := range activeReplicas(e) {
			out[r.Coordinator]++
		}
	}
	return out
}

// balanceError says how far the coordinators' shares of active replicas
// are from even, if any is beyond ±10% ("" when none is).
func balanceError(v cluster.EdgesView, coordinators []string) string {
	l := loads(v)
	total := 0
	for _, n := range l {
		total += n
	}
	even := float64(total) / float64(len(coordinators))
	var bad []string
	for _, id := range coordinators {
		if d := float64(l[id]) - even; d > 0.1*even || -d > 0.1*even {
			bad = append(bad, fmt.Sprintf("%s %d", id, l[id]))
		}
	}
	for id := range l {
		if !slices.Contains(coordinators, id) {
			bad = append(bad, fmt.Sprintf("%s %d (not expected to hold replicas)", id, l[id]))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	sort.Strings(bad)
	return fmt.Sprintf("active replicas %v, even share %.1f ±10%%: off: %s", l, even, strings.Join(bad, ", "))
}

// stopLoad stops every writer and returns their statistics; it fails the
// run as INVALID when they did not hold 90% of their target, and when a
// write failed (the edges write locally: coordinators do not matter).
func (h *healFleet) stopLoad() map[string]cluster.WriterStats {
	h.t.Helper()
	out := map[string]cluster.WriterStats{}
	var written, elapsed float64
	failed, acked := 0, 0
	for id, w := range h.writers {
		st := w.Stop()
		out[id] = st
		written += float64(st.Acked + st.InDoubt)
		elapsed = max(elapsed, st.Elapsed.Seconds())
		failed += st.Failed
		acked += st.Acked
		if st.Failed > 0 {
			h.t.Errorf("%d writes to %s failed: %v", st.Failed, id, st.FirstErr)
		}
	}
	if h.o.noLoad {
		return out
	}
	rate := written / elapsed
	h.t.Logf("load: %.0f points/s written over %.0f s (target %.0f), %d points acknowledged, %d writes failed",
		rate, elapsed, h.o.pointsPerSecond(), acked, failed)
	if rate < 0.9*h.o.pointsPerSecond() {
		h.t.Errorf("INVALID run: the writers held %.0f points/s, below 90%% of the target %.0f", rate, h.o.pointsPerSecond())
	}
	return out
}

// replicaCheck is one replica store's answer about one edge.
type replicaCheck struct {
	coordinator, edge string
	r                 cluster.CheckResult
}

// settleAndCheck stops the load and the watchers, waits until the cloud
// holds every acknowledged point of every edge on rf healthy replicas
// lacking nothing, then checks every replica separately: each active
// replica's store, asked alone (ReplicaService/Query), must answer its
// edge's acknowledged points exactly once (lost, duplicated, phantom and
// wrong values 0), and its own holdings must cover every acknowledged
// segment. Then the edges are killed and every running coordinator's
// query front end must answer every edge's acknowledged points exactly
// once from the replicas. It returns the replica checks.
func (h *healFleet) settleAndCheck(rf int, timeout time.Duration) []replicaCheck {
	h.t.Helper()
	t := h.t
	ctx := context.Background()
	stats := h.stopLoad()
	settleStart := time.Now()
	h.waitEdges("every acknowledged point held by every replica", timeout, func(v cluster.EdgesView) string {
		for _, e := range h.c.Edges {
			ev, _ := v.Edge(e.ID)
			if acked := h.writers[e.ID].Ledger.Acked(); ev.HeldPoints < uint64(acked) {
				return fmt.Sprintf("%s: the cloud holds %d of %d acknowledged points", e.ID, ev.HeldPoints, acked)
			}
		}
		return h.healthy(v, rf, true)
	})
	v, err := h.edges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("settled %v after the load stopped; load average %s", time.Since(settleStart).Round(time.Millisecond), loadAvg())
	for _, e := range h.c.Edges {
		ev, _ := v.Edge(e.ID)
		st := stats[e.ID]
		if ev.HeldPoints > uint64(st.Acked+st.InDoubt) {
			t.Errorf("%s: the cloud counts %d points held, only %d were written", e.ID, ev.HeldPoints, st.Acked+st.InDoubt)
		}
		requireEdgeGauges(t, e, ev.AckedThrough)
	}
	h.sampler.stop()
	if h.probe != nil {
		h.probe.stop()
	}
	var out []replicaCheck
	endMs := time.Now().Add(time.Hour).UnixMilli()
	for _, e := range h.c.Edges {
		ev, _ := v.Edge(e.ID)
		l := h.writers[e.ID].Ledger
		for _, r := range ev.Replicas {
			co := h.coordinator(r.Coordinator)
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			ans, err := cluster.ReplicaQueryRaw(cctx, co.Cluster, e.ID, metricOf(e.ID), 0, endMs)
			var runs []cluster.SeqRun
			if err == nil {
				runs, err = cluster.ReplicaHoldings(cctx, co.Cluster, e.ID)
			}
			cancel()
			if err != nil {
				t.Errorf("replica %s of %s: %v", co.ID, e.ID, err)
				continue
			}
			res := cluster.Compare(ans, l)
			res.Addr = co.ID + "'s replica store"
			out = append(out, replicaCheck{co.ID, e.ID, res})
			if !res.OK() || res.Returned < l.Acked() {
				t.Errorf("replica %s of %s, asked alone: %v", co.ID, e.ID, res)
			}
			if !cluster.Covers(runs, 1, ev.AckedThrough) {
				t.Errorf("replica %s of %s: its store holds segments %v, not all of 1..%d that the catalog credits it with", co.ID, e.ID, runs, ev.AckedThrough)
			}
		}
	}
	var lost, dup, phantom int
	for _, rc := range out {
		lost, dup, phantom = lost+rc.r.Lost, dup+rc.r.Duplicated, phantom+rc.r.Phantom+rc.r.WrongValue
	}
	t.Logf("per replica: %d replica stores checked alone (%d edges × %d replicas); lost %d, duplicated %d, phantom or wrong %d",
		len(out), len(h.c.Edges), rf, lost, dup, phantom)
	// The front ends, from the replicas alone.
	for _, e := range h.c.Edges {
		e.Kill()
	}
	for _, co := range h.c.Coordinators {
		if !co.Running() {
			continue
		}
		for _, e := range h.c.Edges {
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			res, err := cluster.Check(cctx, co.GRPC, metricOf(e.ID), h.writers[e.ID].Ledger, 0, endMs)
			cancel()
			if err != nil {
				t.Errorf("%s's answer for %s: %v", co.ID, e.ID, err)
				continue
			}
			if !res.OK() {
				t.Errorf("%s's answer for %s (edges stopped): %v", co.ID, e.ID, res)
			}
		}
	}
	return out
}

// requireEdgeGauges requires e's replication gauges to agree with the
// catalog's acked_through, with no backlog and no points given up.
func requireEdgeGauges(t *testing.T, e *cluster.Edge, ackedThrough uint64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		m, err := cluster.Metrics(context.Background(), e.HTTP, "tributary_replication_")
		if err == nil && m["tributary_replication_acked_through_seq"] == float64(ackedThrough) && m["tributary_replication_backlog_segments"] == 0 {
			if m["tributary_replication_gap_points"] != 0 || m["tributary_replication_dropped_points"] != 0 {
				t.Errorf("%s gave up points: %v", e.ID, m)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s's replication gauges do not match the catalog's acked_through %d: %v %v", e.ID, ackedThrough, m, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// prober compares query answers with the ledgers while the scenario runs.
type prober struct {
	h      *healFleet
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu          sync.Mutex
	probes      int
	complete    int // every acknowledged point, nothing else, no warning
	flagged     int // points missing and a warning says so
	falseAlarms int // complete, yet warned
	errors      int // the query failed (no answer claimed anything)
	violations  []string
	errSamples  []string
	alarmSample []string
}

func startProber(h *healFleet) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{h: h, cancel: cancel, done: make(chan struct{})}
	go p.run(ctx)
	return p
}

func (p *prober) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.probeOnce(ctx, i)
	}
}

// probeOnce asks coordinator i mod n (running ones) about edge i mod m,
// over a window of the acknowledged history: all of it every 20th probe,
// else a random stretch of a fifth of it, at most 10 minutes.
func (p *prober) probeOnce(ctx context.Context, i int) {
	h := p.h
	var cos []*cluster.Coordinator
	for _, co := range h.c.Coordinators {
		if co.Running() {
			cos = append(cos, co)
		}
	}
	if len(cos) == 0 {
		return
	}
	co := cos[i%len(cos)]
	e := h.c.Edges[(i/len(cos))%len(h.c.Edges)]
	l := h.writers[e.ID].Ledger
	lo, hi := l.OldestAckedMs(), l.NewestAckedMs()
	if hi == 0 {
		return
	}
	if i%20 != 0 {
		span := min((hi-lo)/5, 10*time.Minute.Milliseconds())
		start := lo + rand.Int64N(hi-lo-span+1)
		lo, hi = start, start+span
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ans, err := cluster.QueryRaw(cctx, co.GRPC, metricOf(e.ID), lo, hi)
	cancel()
	if ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probes++
	if err != nil {
		p.errors++
		if len(p.errSamples) < 5 {
			p.errSamples = append(p.errSamples, fmt.Sprintf("%s about %s: %v", co.ID, e.ID, err))
		}
		return
	}
	r := cluster.CompareWindow(ans, l, lo, hi)
	switch {
	case r.Duplicated+r.Phantom+r.WrongValue > 0:
		p.violations = append(p.violations, fmt.Sprintf("%s %s about %s [%d, %d]: wrong points: %v", time.Now().Format("15:04:05.000"), co.ID, e.ID, lo, hi, r))
	case r.Lost > 0 && len(r.Warnings) == 0:
		p.violations = append(p.violations, fmt.Sprintf("%s %s about %s [%d, %d]: %d acknowledged points missing without a warning: %v", time.Now().Format("15:04:05.000"), co.ID, e.ID, lo, hi, r.Lost, r))
	case r.Lost > 0:
		p.flagged++
	case len(r.Warnings) > 0:
		p.falseAlarms++
		if len(p.alarmSample) < 5 {
			p.alarmSample = append(p.alarmSample, fmt.Sprintf("%s about %s: %q", co.ID, e.ID, r.Warnings))
		}
	default:
		p.complete++
	}
}

func (p *prober) stop() {
	p.once.Do(func() {
		p.cancel()
		<-p.done
	})
}

// report logs what the prober saw and fails the test on a violation.
func (p *prober) report(t *testing.T) (probes, wrong int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("query oracle: %d answers compared with the ledgers: %d complete, %d incomplete and flagged, %d complete with a warning (false alarm), %d failed, %d wrong",
		p.probes, p.complete, p.flagged, p.falseAlarms, p.errors, len(p.violations))
	if len(p.errSamples) > 0 {
		t.Logf("query failures (no answer, nothing claimed), first ones: %s", strings.Join(p.errSamples, "; "))
	}
	if len(p.alarmSample) > 0 {
		t.Logf("false alarms, first ones: %s", strings.Join(p.alarmSample, "; "))
	}
	for i, v := range p.violations {
		if i == 10 {
			t.Errorf("... and %d more wrong answers", len(p.violations)-10)
			break
		}
		t.Errorf("wrong answer: %s", v)
	}
	if p.probes == 0 {
		t.Errorf("the query oracle compared no answer")
	}
	return p.probes, len(p.violations)
}

// sampler checks the catalog's placement while the scenario runs.
type sampler struct {
	h      *healFleet
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu         sync.Mutex
	samples    int
	failed     int
	violations []string
	history    []loadSample
}

// loadSample is one sample's active replicas per coordinator.
type loadSample struct {
	at    time.Time
	loads map[string]int
}

func startSampler(h *healFleet) *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{h: h, cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

func (s *sampler) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.sampleOnce(ctx)
	}
}

// sampleOnce reads `cluster edges` once and checks that every edge's held
// segments are on some live replica that does not lack them, and that
// each live replica's store holds what the catalog credits it with.
func (s *sampler) sampleOnce(ctx context.Context) {
	h := s.h
	v, err := h.edges(ctx)
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	s.samples++
	if err != nil {
		s.failed++
		s.mu.Unlock()
		return
	}
	s.history = append(s.history, loadSample{time.Now(), loads(v)})
	s.mu.Unlock()
	var bad []string
	for _, ev := range v.Edges {
		if ev.AckedThrough == 0 {
			continue
		}
		var live []cluster.ReplicaView
		for _, r := range ev.Replicas {
			if h.live(ctx, r.Coordinator) {
				live = append(live, r)
			}
		}
		if len(live) == 0 {
			bad = append(bad, fmt.Sprintf("%s: no live replica holds its %d acknowledged segments: %s", ev.NodeID, ev.AckedThrough, replicaLine(ev)))
			continue
		}
		if common := commonLacks(live); len(common) > 0 {
			bad = append(bad, fmt.Sprintf("%s: segments %v are lacked by every live replica: %s", ev.NodeID, common, replicaLine(ev)))
		}
		for _, r := range live {
			co := h.coordinator(r.Coordinator)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			runs, err := cluster.ReplicaHoldings(cctx, co.Cluster, ev.NodeID)
			cancel()
			if err != nil || ctx.Err() != nil {
				continue // it may have stopped since; the end checks every replica
			}
			if missing := credited(r, ev.AckedThrough, runs); len(missing) > 0 {
				bad = append(bad, fmt.Sprintf("%s: the catalog credits %s with segments %v its store does not hold (store: %v)", ev.NodeID, r.Coordinator, missing, runs))
			}
		}
	}
	if len(bad) > 0 {
		s.mu.Lock()
		for _, b := range bad {
			s.violations = append(s.violations, time.Now().Format("15:04:05.000")+" "+b)
		}
		s.mu.Unlock()
	}
}

// commonLacks are the segments every replica of rs lacks.
func commonLacks(rs []cluster.ReplicaView) []cluster.SeqRun {
	var acc []cluster.SeqRun
	for i, r := range rs {
		var runs []cluster.SeqRun
		for _, l := range r.Lacks {
			runs = append(runs, cluster.SeqRun{First: l.FirstSeq, Last: l.LastSeq})
		}
		if i == 0 {
			acc = runs
			continue
		}
		acc = intersectRuns(acc, runs)
	}
	return acc
}

// intersectRuns intersects two ascending lists of disjoint runs.
func intersectRuns(a, b []cluster.SeqRun) []cluster.SeqRun {
	var out []cluster.SeqRun
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].First, b[j].First), min(a[i].Last, b[j].Last)
		if lo <= hi {
			out = append(out, cluster.SeqRun{First: lo, Last: hi})
		}
		if a[i].Last < b[j].Last {
			i++
		} else {
			j++
		}
	}
	return out
}

// credited returns the segments of 1..through the catalog credits r with
// (those it does not lack) that the store's runs do not hold.
func credited(r cluster.ReplicaView, through uint64, store []cluster.SeqRun) []cluster.SeqRun {
	var missing []cluster.SeqRun
	next := uint64(1)
	check := func(first, last uint64) {
		for s := first; s <= last; s++ {
			if !cluster.Covers(store, s, s) {
				if n := len(missing); n > 0 && missing[n-1].Last+1 == s {
					missing[n-1].Last = s
				} else {
					missing = append(missing, cluster.SeqRun{First: s, Last: s})
				}
			}
		}
	}
	for _, l := range r.Lacks {
		if l.FirstSeq > next {
			check(next, min(l.FirstSeq-1, through))
		}
		next = max(next, l.LastSeq+1)
	}
	if next <= through {
		check(next, through)
	}
	return missing
}

func (s *sampler) stop() {
	s.once.Do(func() {
		s.cancel()
		<-s.done
	})
}

// report logs the sampler's findings and fails the test on a violation.
func (s *sampler) report(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Logf("placement sampler: %d samples of cluster edges (%d failed), %d violations", s.samples, s.failed, len(s.violations))
	for i, v := range s.violations {
		if i == 10 {
			t.Errorf("... and %d more placement violations", len(s.violations)-10)
			break
		}
		t.Errorf("placement: %s", v)
	}
	if s.samples-s.failed == 0 {
		t.Errorf("the placement sampler read no answer")
	}
}

// storeID returns the store id the members list gives co.
func (h *healFleet) storeID(co *cluster.Coordinator) string {
	h.t.Helper()
	m, err := cluster.Members(context.Background(), co)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mem := range m.Members {
		if mem.NodeId == co.ID {
			return mem.StoreId
		}
	}
	h.t.Fatalf("%s is not in its own member list: %v", co.ID, m.Members)
	return ""
}

// follower returns a running coordinator that is not the leader.
func (h *healFleet) follower(leader *cluster.Coordinator) *cluster.Coordinator {
	for _, co := range h.c.Coordinators {
		if co != leader && co.Running() {
			return co
		}
	}
	h.t.Fatal("no running follower")
	return nil
}

// TestHealSampler_LacksAndCredits checks the sampler's arithmetic without
// processes: the segments every live replica lacks, the segments the
// catalog credits a replica with that its store misses, and the balance.
func TestHealSampler_LacksAndCredits(t *testing.T) {
	lack := func(runs ...uint64) []cluster.LackRun {
		var out []cluster.LackRun
		for i := 0; i+1 < len(runs); i += 2 {
			out = append(out, cluster.LackRun{FirstSeq: runs[i], LastSeq: runs[i+1]})
		}
		return out
	}
	rs := []cluster.ReplicaView{{Coordinator: "c1", Lacks: lack(1, 10, 20, 30)}, {Coordinator: "c2", Lacks: lack(5, 25)}}
	if got := commonLacks(rs); fmt.Sprint(got) != "[{5 10} {20 25}]" {
		t.Errorf("common lacks %v, want [{5 10} {20 25}]", got)
	}
	rs = append(rs, cluster.ReplicaView{Coordinator: "c3"})
	if got := commonLacks(rs); len(got) != 0 {
		t.Errorf("a replica lacking nothing: common lacks %v", got)
	}
	// c1 lacks 3..4: it is credited with 1..2 and 5..9; its store holds
	// 1..2 and 5..7.
	got := credited(cluster.ReplicaView{Lacks: lack(3, 4)}, 9, []cluster.SeqRun{{First: 1, Last: 2}, {First: 5, Last: 7}})
	if fmt.Sprint(got) != "[{8 9}]" {
		t.Errorf("credited but missing %v, want [{8 9}]", got)
	}
	if got := credited(cluster.ReplicaView{Lacks: lack(1, 9)}, 9, nil); len(got) != 0 {
		t.Errorf("a replica lacking everything is credited with %v", got)
	}
	v := cluster.EdgesView{Edges: []cluster.EdgeView{
		{NodeID: "e1", Replicas: []cluster.ReplicaView{{Coordinator: "c1"}, {Coordinator: "c2"}, {Coordinator: "c3", Leaving: true}}},
		{NodeID: "e2", Replicas: []cluster.ReplicaView{{Coordinator: "c1"}, {Coordinator: "c2"}}},
	}}
	if s := balanceError(v, []string{"c1", "c2"}); s != "" {
		t.Errorf("even loads reported off: %s", s)
	}
	if s := balanceError(v, []string{"c1", "c2", "c3"}); s == "" {
		t.Error("c3 holding no active replica of 4 over 3 coordinators is within ±10%?")
	}
}
