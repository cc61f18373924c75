package query

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/rollup"
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
	// asked; the caller summarizes these in one warning.
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
		off := q.Offset % q.Step
		if off < 0 {
			off += q.Step
		}
		s = rollup.BucketStart(s-off, q.Step) + off
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
}

// planEdge splits q for an edge with catalog-matching series.
func (f *Frontend) planEdge(edge string, q model.Query) legPlan {
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

// historyMissing is the part of part that replica from, which answered
// it, may lack (segments not on it yet): the span from the earliest to
// the newest time of its lack runs that meet part, clipped to part.
func (p *legPlan) historyMissing(from string, part span) span {
	h, ok := p.holdings[from]
	if !ok || part.empty() {
		return span{1, 0}
	}
	out := span{1, 0}
	for _, l := range h.Lacks {
		lo, hi := max(l.MinTimeMs, part.lo), min(l.MaxTimeMs, part.hi)
		if lo > hi {
			continue
		}
		if out.empty() {
			out = span{lo, hi}
		} else {
			out = span{min(out.lo, lo), max(out.hi, hi)}
		}
	}
	return out
}

func historyWarning(edge string, missing span) string {
	return fmt.Sprintf("edge %s: data from %s to %s is not on the replica that answered (segments not copied to it yet) and the edge is unreachable",
		edge, fmtMs(missing.lo), fmtMs(missing.hi))
}

// queryEdge answers q (no cross-series aggregation) for one edge with
// catalog-matching series, as planned.
func (f *Frontend) queryEdge(ctx context.Context, p legPlan, q model.Query) edgeResult {
	edge := p.edge
	res := edgeResult{series: answer{}, cov: EdgeCoverage{Edge: edge, WatermarkMs: p.wm, Replicas: p.placed}}
	cov := &res.cov
	lastPoint := q.Mode == model.ModeLastPoint
	wm, gaps, gapsHit, src, why := p.wm, p.gaps, p.gapsHit, p.src, p.why
	repPart, edgePart := p.repPart, p.edgePart
	var reasons []string

	type legOut struct {
		a    answer
		info model.QueryInfo
		from string
		err  error
	}
	first := p.first // for the first replica leg only, which asks for repPart
	runRep := func(part span) legOut {
		a, info, from, err := f.replicaLeg(ctx, edge, p.replicas, withRange(q, part), first)
		first = nil
		return legOut{a, info, from, err}
	}
	runEdge := func(p span) legOut {
		a, info, err := f.edgeLeg(ctx, src, withRange(q, p))
		return legOut{a: a, info: info, err: err}
	}
	var rep, ed legOut
	repCh := make(chan legOut, 1)
	if !repPart.empty() {
		go func() { repCh <- runRep(repPart) }()
	} else {
		repCh <- legOut{}
	}
	edgeOK := false
	if src != nil && !edgePart.empty() {
		ed = runEdge(edgePart)
		edgeOK = ed.err == nil
		if ed.err != nil {
			reasons = append(reasons, fmt.Sprintf("edge %s unreachable: %v", edge, ed.err))
			f.o.Logger.Warn("query: edge leg failed", "edge", edge, "err", ed.err)
		}
	}
	rep = <-repCh
	repOK := !repPart.empty() && rep.err == nil
	if !repPart.empty() && rep.err != nil {
		reasons = append(reasons, fmt.Sprintf("no replica of edge %s answered: %v", edge, rep.err))
		f.o.Logger.Warn("query: replica leg failed", "edge", edge, "err", rep.err)
	}
	take := func(l legOut) {
		res.series.absorb(l.a, lastPoint)
		res.points += l.info.Points
	}
	var missing []TimeRange
	miss := func(p span) {
		if !p.empty() {
			missing = append(missing, TimeRange{p.lo, p.hi})
		}
	}
	warned := map[int]bool{} // gaps reported
	missGap := func(i int, p span) {
		if r := gapRange(gaps[i], p); !r.empty() {
			miss(r)
			if !warned[i] {
				warned[i] = true
				res.warnings = append(res.warnings, gapWarning(edge, gaps[i]))
			}
		}
	}
	historyWarned := false
	missHistory := func(from string, part span) {
		// The replica that answered part lacks segments in it (not
		// copied to it yet); the edge could not be asked for them (or
		// the plan would have sent it there).
		if r := p.historyMissing(from, part); !r.empty() && !(lastPoint && edgeOK) {
			miss(r)
			if !historyWarned {
				historyWarned = true
				res.warnings = append(res.warnings, historyWarning(edge, r))
			}
		}
	}
	if repOK {
		take(rep)
		cov.ReplicaAnswered = rep.from
		missHistory(rep.from, repPart)
	}
	if edgeOK {
		take(ed)
		cov.EdgeAnswered = true
	}
	replicasCoverAll := false // the replicas answered what the edge should have
	if !edgeOK && !edgePart.empty() {
		if src == nil {
			reasons = append(reasons, why)
		}
		switch {
		case lastPoint && repOK:
			replicasCoverAll = true
		case repPart.empty() || repOK:
			r := runRep(edgePart)
			if r.err == nil {
				take(r)
				cov.ReplicaAnswered = r.from
				missHistory(r.from, edgePart)
				replicasCoverAll = true
			} else {
				reasons = append(reasons, fmt.Sprintf("no replica of edge %s answered: %v", edge, r.err))
			}
		}
		if replicasCoverAll {
			// The replicas hold up to the watermark (and recorded gaps are
			// not on them).
			if after := (span{max(wm+1, edgePart.lo), edgePart.hi}); !after.empty() {
				miss(after)
				res.warnings = append(res.warnings, fmt.Sprintf("edge %s unreachable: points after %s missing", edge, fmtMs(after.lo-1)))
			}
			for i := range gaps {
				missGap(i, edgePart)
			}
		} else {
			miss(edgePart)
		}
	}
	if !repPart.empty() && !repOK {
		switch {
		case lastPoint && edgeOK:
		case edgeOK:
			r := runEdge(repPart)
			if r.err == nil {
				take(r)
			} else {
				reasons = append(reasons, fmt.Sprintf("edge %s unreachable: %v", edge, r.err))
				miss(repPart)
			}
		default:
			if src == nil && edgePart.empty() {
				reasons = append(reasons, why)
			}
			miss(repPart)
		}
	}
	if repOK && !(len(gapsHit) > 0 && src != nil) {
		for _, i := range gapsHit {
			missGap(i, repPart)
		}
	}
	cov.Missing = normalize(missing)
	cov.Reason = strings.Join(reasons, "; ")
	if !cov.EdgeAnswered && cov.ReplicaAnswered == "" {
		res.warnings = append(res.warnings, fmt.Sprintf("edge %s: neither the edge nor a replica (%s) answered: its series are missing from the answer", edge, strings.Join(cov.Replicas, ", ")))
	} else if len(cov.Missing) > 0 && len(res.warnings) == 0 {
		for _, m := range cov.Missing {
			res.warnings = append(res.warnings, fmt.Sprintf("edge %s: points between %s and %s missing (%s)", edge, fmtMs(m.StartMs), fmtMs(m.EndMs), cov.Reason))
		}
	}
	return res
}

// queryFresh asks an edge that registered none of q's series for the
// matching series it created after its watermark. Every series with data
// at or before the watermark is in the catalog (the intake registers
// series before it records their range), so the edge is asked for [S,
// end] only, or for the whole range when a recorded gap may hide series
// the catalog never saw. The replicas are not asked: they cannot hold
// unregistered series.
func (f *Frontend) queryFresh(ctx context.Context, edge string, q model.Query) edgeResult {
	res := edgeResult{series: answer{}, cov: EdgeCoverage{Edge: edge}}
	cov := &res.cov
	wm := q.Start - 1 // nothing recorded: every series is new
	prog, hasProg := f.o.Catalog.Progress(edge)
	if hasProg {
		wm = prog.WatermarkTimeMs
	}
	cov.WatermarkMs = wm
	if pl, ok := f.o.Catalog.Placement(edge); ok {
		cov.Replicas = pl.Replicas
	}
	s := splitAt(q, wm)
	below := span{q.Start, min(s-1, q.End)}
	part := span{max(s, q.Start), q.End}
	if hasProg {
		for _, g := range gapsOf(prog) {
			if !g.known() && !below.empty() || g.meets(below) {
				part = span{q.Start, q.End}
				break
			}
		}
	}
	if part.empty() {
		res.skipped = true
		return res
	}
	src, why := f.edgeSource(edge)
	if src != nil {
		a, info, err := f.edgeLeg(ctx, src, withRange(q, part))
		if err == nil {
			res.series, res.points = a, info.Points
			cov.EdgeAnswered = true
			return res
		}
		why = fmt.Sprintf("edge %s unreachable: %v", edge, err)
		f.o.Logger.Warn("query: edge leg failed", "edge", edge, "err", err)
	}
	res.unreachable = true
	// Missing says where series may be missing: nothing is known of them.
	cov.Missing = []TimeRange{{part.lo, part.hi}}
	cov.Reason = "unreachable; no replicated series match: " + why
	return res
}

func withRange(q model.Query, p span) model.Query {
	q.Start, q.End = p.lo, p.hi
	return q
}

func (g gapSpan) meets(p span) bool { return g.known() && p.meets(g.minMs, g.maxMs) }

// gapRange is the part of p a gap covers (all of p if its span is unknown).
func gapRange(g gapSpan, p span) span {
	if !g.known() {
		return p
	}
	return span{max(p.lo, g.minMs), min(p.hi, g.maxMs)}
}

func gapWarning(edge string, g gapSpan) string {
	n := "an unknown number of points"
	if g.points >= 0 {
		n = fmt.Sprintf("%d points", g.points)
	}
	if !g.known() {
		return fmt.Sprintf("edge %s: gap of %s (%s) at an unknown time not on replicas", edge, n, g.reason)
	}
	return fmt.Sprintf("edge %s: gap of %s (%s) between %s and %s not on replicas", edge, n, g.reason, fmtMs(g.minMs), fmtMs(g.maxMs))
}

// normalize sorts and merges overlapping or adjacent ranges.
func normalize(rs []TimeRange) []TimeRange {
	if len(rs) == 0 {
		return nil
	}
	out := make([]TimeRange, 0, len(rs))
	sortRanges(rs)
	for _, r := range rs {
		if n := len(out); n > 0 && r.StartMs <= out[n-1].EndMs+1 {
			out[n-1].EndMs = max(out[n-1].EndMs, r.EndMs)
			continue
		}
		out = append(out, r)
	}
	return out
}

func sortRanges(rs []TimeRange) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].StartMs < rs[j-1].StartMs; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
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
