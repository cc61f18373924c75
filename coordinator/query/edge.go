package query

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tributarydb/tributary/node"
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
func splitAt(q node.Query, wm int64) int64 {
	if wm == math.MaxInt64 {
		return wm
	}
	s := wm + 1
	if q.Mode == node.ModeDownsample {
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

// queryEdge answers q (no cross-series aggregation) for one edge.
func (f *Frontend) queryEdge(ctx context.Context, edge string, q node.Query) edgeResult {
	res := edgeResult{series: answer{}, cov: EdgeCoverage{Edge: edge}}
	cov := &res.cov
	lastPoint := q.Mode == node.ModeLastPoint
	wm := q.Start - 1 // nothing recorded: nothing on the replicas
	prog, hasProg := f.o.Catalog.Progress(edge)
	if hasProg {
		wm = prog.WatermarkTimeMs
	}
	cov.WatermarkMs = wm
	if pl, ok := f.o.Catalog.Placement(edge); ok {
		cov.Replicas = pl.Replicas
	}
	var gaps []gapSpan
	if hasProg {
		gaps = gapsOf(prog)
	}
	var reasons []string
	src, why := f.edgeSource(edge)

	full := span{q.Start, q.End}
	s := splitAt(q, wm)
	repPart := span{q.Start, min(s-1, q.End)}
	edgePart := span{max(s, q.Start), q.End}
	if lastPoint {
		repPart, edgePart = full, full
	}
	var gapsHit []int // gaps the replicas' part meets
	for i, g := range gaps {
		if !g.known() && !repPart.empty() || g.meets(repPart) {
			gapsHit = append(gapsHit, i)
		}
	}
	if len(gapsHit) > 0 && src != nil {
		// The replicas lack part of their range: the edge answers it all.
		repPart, edgePart = span{1, 0}, full
	}

	type legOut struct {
		a    answer
		info node.QueryInfo
		from string
		err  error
	}
	runRep := func(p span) legOut {
		a, info, from, err := f.replicaLeg(ctx, edge, cov.Replicas, withRange(q, p))
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
	if repOK {
		take(rep)
		cov.ReplicaAnswered = rep.from
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
func (f *Frontend) queryFresh(ctx context.Context, edge string, q node.Query) edgeResult {
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

func withRange(q node.Query, p span) node.Query {
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
	n, ok := f.o.Catalog.Node(edge)
	if !ok || n.Addr == "" {
		return nil, fmt.Sprintf("edge %s unreachable: no address registered", edge)
	}
	src, err := f.o.Edge(edge, n.Addr)
	if err != nil || src == nil {
		return nil, fmt.Sprintf("edge %s unreachable: dial %s: %v", edge, n.Addr, err)
	}
	return src, ""
}

// edgeLeg asks the edge, within EdgeTimeout.
func (f *Frontend) edgeLeg(ctx context.Context, src Source, q node.Query) (answer, node.QueryInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, f.o.EdgeTimeout)
	defer cancel()
	a := answer{}
	info, err := src.Query(ctx, q, func(s node.Series) error { a.add(s); return nil })
	if err != nil {
		return nil, info, err
	}
	for _, d := range a {
		sortSeries(d)
	}
	return a, info, nil
}

// replicaLeg asks the edge's replicas in order, hedged: the next replica
// is asked when one fails or has not answered within HedgeAfter, and the
// first complete answer wins (the others are cancelled). It returns the
// answer and which replica gave it.
func (f *Frontend) replicaLeg(ctx context.Context, edge string, replicas []string, q node.Query) (answer, node.QueryInfo, string, error) {
	if len(replicas) == 0 {
		return nil, node.QueryInfo{}, "", errors.New("no replica placed")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		from string
		a    answer
		info node.QueryInfo
		err  error
	}
	// Buffered for every attempt: a cancelled loser never blocks.
	done := make(chan result, len(replicas))
	next, inflight := 0, 0
	start := func() {
		id := replicas[next]
		next++
		inflight++
		go func() {
			lctx, lcancel := context.WithTimeout(ctx, f.o.ReplicaTimeout)
			defer lcancel()
			r := result{from: id, a: answer{}}
			var rs ReplicaSource
			if rs, r.err = f.o.Replica(id); r.err == nil && rs == nil {
				r.err = errors.New("no replica source")
			}
			if r.err == nil {
				r.info, r.err = rs.Query(lctx, []string{edge}, q, func(e string, s node.Series) error {
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
				start()
				hedge.Reset(f.o.HedgeAfter)
			}
		}
	}
	return nil, node.QueryInfo{}, "", errors.Join(errs...)
}
