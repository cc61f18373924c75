package query

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/model/aggregate"
)

// edgeResult is one edge's part of an answer.
type edgeResult struct {
	series   answer
	points   int64
	cov      EdgeCoverage
	warnings []string
	// skipped: the edge had nothing to be asked (not part of the answer).
	skipped bool
	// unreachable: an edge without catalog-matching series could not be
	// asked; the caller summarizes in one warning those whose coverage
	// then misses something.
	unreachable bool
}

// span is an inclusive time range; empty when lo > hi.
type span struct{ lo, hi int64 }

func (s span) empty() bool { return s.lo > s.hi }

func (s span) meets(lo, hi int64) bool { return !s.empty() && lo <= s.hi && hi >= s.lo }

// splitAt returns where the replicas' part of q ends for an edge whose
// watermark is wm: replicas answer [q.Start, S), the edge [S, q.End].
func splitAt(q model.Query, wm int64) int64 {
	if wm == math.MaxInt64 {
		return wm
	}
	s := wm + 1
	if q.Mode == model.ModeDownsample {
		// The start of the bucket holding wm+1: a bucket is never split
		// between two sources.
		s = aggregate.BucketStart(s, q.Step, q.Offset)
	}
	return s
}

// legPlan is how one edge's part of a query is split between the edge
// and its replicas.
type legPlan struct {
	edge string
	wm   int64 // q.Start-1 when nothing is recorded
	// replicas are those asked, in order: a replica may lack some of the
	// edge's segments (placed after them and not yet given them, or
	// missing from a write quorum and not yet repaired), so replicas
	// that hold all of repPart come first and, if any do, alone;
	// otherwise every replica, those lacking the least of repPart first.
	// Active replicas come before leaving ones, and replicas on
	// coordinators marked down last. holdings[r] says what r lacks.
	replicas []string
	holdings map[string]catalog.Holding
	placed   []string // the placement's replicas
	gaps     []gapSpan
	gapsHit  []int // gaps the replicas' part meets
	src      Source
	why      string // why src is nil
	// repPart goes to the replicas, edgePart to the edge (both the whole
	// range for last-point queries).
	repPart, edgePart span
	// first, when set, is the first replica's answer to repPart, shared
	// with the other edges that have the same first replica and repPart.
	first *sharedLeg
	// stale: the staleness allowance accepts the replicas' data through
	// wm, so the edge is not asked for what follows (repPart is the whole
	// range, edgePart empty); it stands in only when no replica answers.
	stale bool
}

// planEdge splits q for an edge with catalog-matching series. With a
// staleness allowance d (ms, 0: none) and a watermark within d of the
// end, the replicas are planned to answer the whole range (stale), unless
// they lack part of it (recorded gaps, history not copied), when the edge
// is asked as without it.
func (f *Frontend) planEdge(edge string, q model.Query, d int64) legPlan {
	p := legPlan{edge: edge, wm: q.Start - 1} // nothing recorded: nothing on the replicas
	prog, hasProg := f.o.Catalog.Progress(edge)
	if hasProg {
		p.wm = prog.WatermarkTimeMs
		p.gaps = gapsOf(prog)
	}
	var pl catalog.Placement
	if got, ok := f.o.Catalog.Placement(edge); ok {
		pl = got
		p.replicas, p.placed = pl.All(), pl.Replicas
	}
	p.src, p.why = f.edgeSource(edge)
	full := span{q.Start, q.End}
	s := splitAt(q, p.wm)
	p.repPart, p.edgePart = span{q.Start, min(s-1, q.End)}, span{max(s, q.Start), q.End}
	if q.Mode == model.ModeLastPoint {
		p.repPart, p.edgePart = full, full
	}
	if d > 0 && hasProg && p.wm < q.End && within(p.wm, q.End, d) {
		p.repPart, p.edgePart, p.stale = full, span{1, 0}, true
	}
	for i, g := range p.gaps {
		if !g.known() && !p.repPart.empty() || g.meets(p.repPart) {
			p.gapsHit = append(p.gapsHit, i)
		}
	}
	if len(p.gapsHit) > 0 && p.src != nil {
		// The replicas lack part of their range: the edge answers it all.
		p.repPart, p.edgePart = span{1, 0}, full
	}
	holdAll := f.orderReplicas(&p, pl)
	if !holdAll && !p.repPart.empty() && p.src != nil {
		// No current replica holds the older part of the range (placed
		// after the history they were not given): the edge answers it all.
		p.repPart, p.edgePart = span{1, 0}, full
	}
	p.stale = p.stale && p.edgePart.empty()
	return p
}

// orderReplicas sets p.replicas and p.holdings from the placement: the
// replicas that hold all of repPart and are not on a coordinator marked
// down, in placement order (active, then leaving), if any (it then
// reports true); otherwise all, those lacking the least of repPart first
// (those marked down last).
func (f *Frontend) orderReplicas(p *legPlan, pl catalog.Placement) bool {
	p.holdings = map[string]catalog.Holding{}
	down := map[string]bool{}
	for _, r := range p.replicas {
		h, _, _ := pl.HoldingOf(r)
		p.holdings[r] = h
		if n, ok := f.o.Catalog.Node(r); ok && n.State == catalog.NodeDown {
			down[r] = true
		}
	}
	if len(p.replicas) == 0 {
		return true // nothing to ask; planned as before
	}
	p.replicas = slices.Clone(p.replicas)
	slices.SortStableFunc(p.replicas, func(a, b string) int {
		switch {
		case down[a] == down[b]:
			return 0
		case down[a]:
			return 1
		}
		return -1
	})
	part := p.repPart
	if part.empty() {
		part = span{math.MinInt64, math.MaxInt64} // nothing planned for the replicas: prefer those lacking nothing
	}
	var all []string
	for _, r := range p.replicas {
		if !down[r] && p.holdings[r].Covers(part.lo, part.hi) {
			all = append(all, r)
		}
	}
	if len(all) > 0 {
		p.replicas = all
		return true
	}
	slices.SortStableFunc(p.replicas, func(a, b string) int {
		return cmp.Compare(lackedIn(p.holdings[a], part), lackedIn(p.holdings[b], part))
	})
	return p.repPart.empty()
}

// lackedIn is how many milliseconds of part the holding's lack runs
// cover (overlaps counted twice; only used to order replicas).
func lackedIn(h catalog.Holding, part span) uint64 {
	var n uint64
	for _, l := range h.Lacks {
		lo, hi := max(l.MinTimeMs, part.lo), min(l.MaxTimeMs, part.hi)
		if lo <= hi {
			n += uint64(hi-lo) + 1
		}
	}
	return n
}

// queryEdge answers q (no cross-series aggregation) for one edge with
// catalog-matching series, as planned: it runs the legs (runLegs), takes
// the answers of those that answered, and accounts for the rest
// (account).
func (f *Frontend) queryEdge(ctx context.Context, p legPlan, q model.Query) edgeResult {
	lastPoint := q.Mode == model.ModeLastPoint
	o := f.runLegs(ctx, &p, q, lastPoint)
	res := edgeResult{series: answer{}}
	// Ranges are disjoint, except for last points, where of equal
	// timestamps the later leg wins.
	for _, l := range []*leg{&o.rep, &o.edge, &o.repForEdge, &o.edgeForRep} {
		if l.ok() {
			res.series.absorb(l.a, lastPoint)
			res.points += l.info.Points
		}
	}
	res.cov, res.warnings = account(&p, &o, lastPoint)
	return res
}

// runLegs runs an edge's planned legs, the replicas' part concurrently
// with the edge's, then the fallbacks their failures call for
// (askReplicasForEdgePart, askEdgeForRepPart).
func (f *Frontend) runLegs(ctx context.Context, p *legPlan, q model.Query, lastPoint bool) outcomes {
	var o outcomes
	repDone := make(chan leg, 1)
	if !p.repPart.empty() {
		go func() { repDone <- f.askReplicas(ctx, p.edge, p.replicas, withRange(q, p.repPart), p.first) }()
	} else {
		repDone <- leg{}
	}
	if p.src != nil && !p.edgePart.empty() {
		o.edge = f.askEdge(ctx, p.src, withRange(q, p.edgePart))
		if o.edge.err != nil {
			f.o.Logger.Warn("query: edge leg failed", "edge", p.edge, "err", o.edge.err)
		}
	}
	o.rep = <-repDone
	if o.rep.err != nil {
		f.o.Logger.Warn("query: replica leg failed", "edge", p.edge, "err", o.rep.err)
	}
	if askReplicasForEdgePart(p, &o, lastPoint) {
		o.repForEdge = f.askReplicas(ctx, p.edge, p.replicas, withRange(q, p.edgePart), nil)
	}
	if askEdgeForRepPart(p, &o, lastPoint) {
		o.edgeForRep = f.askEdge(ctx, p.src, withRange(q, p.repPart))
	}
	return o
}

// askReplicas is replicaLeg as a leg.
func (f *Frontend) askReplicas(ctx context.Context, edge string, replicas []string, q model.Query, first *sharedLeg) leg {
	l := leg{asked: true}
	l.a, l.info, l.from, l.err = f.replicaLeg(ctx, edge, replicas, q, first)
	return l
}

// askEdge is edgeLeg as a leg.
func (f *Frontend) askEdge(ctx context.Context, src Source, q model.Query) leg {
	l := leg{asked: true}
	l.a, l.info, l.err = f.edgeLeg(ctx, src, q)
	return l
}

// queryFresh asks an edge that registered none of q's series for the
// matching series it created after its watermark (planFresh), and
// accounts for its answer (accountFresh). The replicas are not asked:
// they cannot hold unregistered series.
func (f *Frontend) queryFresh(ctx context.Context, edge string, q model.Query) edgeResult {
	p := f.planFresh(edge, q)
	if p.part.empty() {
		return edgeResult{skipped: true, cov: EdgeCoverage{Edge: edge, WatermarkMs: p.wm, Replicas: p.replicas}}
	}
	res := edgeResult{series: answer{}}
	var err error
	if p.src != nil {
		var info model.QueryInfo
		var a answer
		if a, info, err = f.edgeLeg(ctx, p.src, withRange(q, p.part)); err == nil {
			res.series, res.points = a, info.Points
		} else {
			f.o.Logger.Warn("query: edge leg failed", "edge", edge, "err", err)
		}
	}
	res.cov = accountFresh(&p, p.src != nil, err)
	res.unreachable = !res.cov.EdgeAnswered
	return res
}

// planFresh plans the leg of an edge without catalog-matching series.
// Every series with data at or before the watermark is in the catalog
// (the intake registers series before it records their range), so the
// edge is asked for [S, end] only, or for the whole range when a
// recorded gap below S may hide series the catalog never saw.
func (f *Frontend) planFresh(edge string, q model.Query) freshPlan {
	p := freshPlan{edge: edge, wm: q.Start - 1} // nothing recorded: every series is new
	prog, hasProg := f.o.Catalog.Progress(edge)
	if hasProg {
		p.wm = prog.WatermarkTimeMs
	}
	if pl, ok := f.o.Catalog.Placement(edge); ok {
		p.replicas = pl.Replicas
	}
	s := splitAt(q, p.wm)
	below := span{q.Start, min(s-1, q.End)}
	p.part = span{max(s, q.Start), q.End}
	p.unknown = []span{afterWatermark(p.wm, span{q.Start, q.End})}
	for _, g := range gapsOf(prog) {
		if !g.known() && !below.empty() || g.meets(below) {
			p.part = span{q.Start, q.End}
			p.unknown = append(p.unknown, gapRange(g, below))
		}
	}
	if !p.part.empty() {
		p.src, p.why = f.edgeSource(edge)
	}
	return p
}

func withRange(q model.Query, p span) model.Query {
	q.Start, q.End = p.lo, p.hi
	return q
}

// edgeSource returns the source of an edge, or nil and why there is none.
func (f *Frontend) edgeSource(edge string) (Source, string) {
	if f.o.Edge == nil {
		return nil, fmt.Sprintf("edge %s not queried: this coordinator does not query edges", edge)
	}
	// NB: an edge without an address may still be reachable (one running
	// in this process): Options.Edge decides.
	n, _ := f.o.Catalog.Node(edge)
	src, err := f.o.Edge(edge, n.Addr)
	switch {
	case (err != nil || src == nil) && n.Addr == "":
		return nil, fmt.Sprintf("edge %s unreachable: no address registered", edge)
	case err != nil || src == nil:
		return nil, fmt.Sprintf("edge %s unreachable: dial %s: %v", edge, n.Addr, err)
	}
	return src, ""
}

// edgeLeg asks the edge, within EdgeTimeout.
func (f *Frontend) edgeLeg(ctx context.Context, src Source, q model.Query) (answer, model.QueryInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, f.o.EdgeTimeout)
	defer cancel()
	a := answer{}
	info, err := src.Query(ctx, q, func(s model.Series) error { a.add(s); return nil })
	if err != nil {
		return nil, info, err
	}
	for _, d := range a {
		sortSeries(d)
	}
	return a, info, nil
}

// sharedLeg is one replica coordinator's answer to the same replica leg
// of several edges: asked once, on the first member's demand, for all of
// them. It is cancelled when every member is done with it.
type sharedLeg struct {
	coord string
	edges []string
	q     model.Query

	once    sync.Once
	done    chan struct{} // closed when the answer is in
	answers map[string]answer
	info    model.QueryInfo
	err     error
	cancel  context.CancelFunc
	members atomic.Int32 // members not yet done
	counted atomic.Bool  // info.Points went to a member
}

// wait starts the leg if no member has (within ReplicaTimeout of ctx, the
// query's context) and returns edge's part of the answer. Points are
// counted once, for the first member that takes them.
func (l *sharedLeg) wait(ctx, legCtx context.Context, f *Frontend, edge string) (answer, model.QueryInfo, error) {
	l.once.Do(func() {
		qctx, cancel := context.WithTimeout(ctx, f.o.ReplicaTimeout)
		l.cancel = cancel
		go func() {
			defer close(l.done)
			rs, err := f.o.Replica(l.coord)
			if err == nil && rs == nil {
				err = errors.New("no replica source")
			}
			if err != nil {
				l.err = err
				return
			}
			l.info, l.err = rs.Query(qctx, l.edges, l.q, func(e string, s model.Series) error {
				if a := l.answers[e]; a != nil {
					a.add(s)
				}
				return nil
			})
		}()
	})
	select {
	case <-l.done:
	case <-legCtx.Done():
		return nil, model.QueryInfo{}, legCtx.Err()
	}
	if l.err != nil {
		return nil, model.QueryInfo{}, l.err
	}
	var info model.QueryInfo
	if l.counted.CompareAndSwap(false, true) {
		info.Points = l.info.Points
	}
	return l.answers[edge], info, nil
}

// release says a member is done with the leg; the last one cancels it.
func (l *sharedLeg) release() {
	if l.members.Add(-1) == 0 {
		l.once.Do(func() { close(l.done) }) // never started: nothing to cancel
		if l.cancel != nil {
			l.cancel()
		}
	}
}

// shareReplicaLegs groups the planned replica legs by first replica and
// range and gives each group one sharedLeg: the first replica of many
// edges is asked once. Edges that share a split point (their watermarks
// fall in the same bucket, or last-point queries) share a leg.
func shareReplicaLegs(plans []*legPlan, q model.Query) {
	type key struct {
		coord string
		part  span
	}
	legs := map[key]*sharedLeg{}
	for _, p := range plans {
		if p.repPart.empty() || len(p.replicas) == 0 {
			continue
		}
		k := key{p.replicas[0], p.repPart}
		l := legs[k]
		if l == nil {
			l = &sharedLeg{coord: k.coord, q: withRange(q, k.part), done: make(chan struct{}), answers: map[string]answer{}}
			legs[k] = l
		}
		l.edges = append(l.edges, p.edge)
		l.answers[p.edge] = answer{}
		l.members.Add(1)
		p.first = l
	}
}

// replicaLeg asks the edge's replicas in order, hedged: the next replica
// is asked when one fails or has not answered within HedgeAfter, and the
// first complete answer wins (the others are cancelled). It returns the
// answer and which replica gave it. first, when set, is the first
// replica's shared answer for this leg; replicaLeg releases it.
func (f *Frontend) replicaLeg(ctx context.Context, edge string, replicas []string, q model.Query, first *sharedLeg) (answer, model.QueryInfo, string, error) {
	if first != nil {
		defer first.release()
	}
	if len(replicas) == 0 {
		return nil, model.QueryInfo{}, "", errors.New("no replica placed")
	}
	qctx := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		from string
		a    answer
		info model.QueryInfo
		err  error
	}
	// Buffered for every attempt: a cancelled loser never blocks.
	done := make(chan result, len(replicas))
	next, inflight := 0, 0
	start := func() {
		id := replicas[next]
		next++
		inflight++
		if next == 1 && first != nil {
			go func() {
				r := result{from: id}
				r.a, r.info, r.err = first.wait(qctx, ctx, f, edge)
				done <- r
			}()
			return
		}
		go func() {
			lctx, lcancel := context.WithTimeout(ctx, f.o.ReplicaTimeout)
			defer lcancel()
			r := result{from: id, a: answer{}}
			var rs ReplicaSource
			if rs, r.err = f.o.Replica(id); r.err == nil && rs == nil {
				r.err = errors.New("no replica source")
			}
			if r.err == nil {
				r.info, r.err = rs.Query(lctx, []string{edge}, q, func(e string, s model.Series) error {
					if e == edge {
						r.a.add(s)
					}
					return nil
				})
			}
			done <- r
		}()
	}
	start()
	hedge := time.NewTimer(f.o.HedgeAfter)
	defer hedge.Stop()
	var errs []error
	for inflight > 0 {
		select {
		case r := <-done:
			inflight--
			if r.err == nil {
				for _, d := range r.a {
					sortSeries(d)
				}
				return r.a, r.info, r.from, nil
			}
			errs = append(errs, fmt.Errorf("replica %s: %w", r.from, r.err))
			if next < len(replicas) {
				start()
			}
		case <-hedge.C:
			if next < len(replicas) {
				f.o.Logger.Debug("query: hedging replica leg", "edge", edge, "replica", replicas[next])
				f.m.hedged(ctx)
				start()
				hedge.Reset(f.o.HedgeAfter)
			}
		}
	}
	return nil, model.QueryInfo{}, "", errors.Join(errs...)
}
