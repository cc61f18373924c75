package query

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tributarydb/tributary/model"
)

// The accounting of a query: what the outcomes of an edge's legs mean for
// the answer (missing ranges, warnings, coverage). It is pure: it reads a
// plan and the outcomes and asks nothing, so the fallback matrix of the
// package doc is a table test (coverage_test.go). Execution (edge.go)
// runs the legs and takes their answers; it decides nothing about
// coverage.

// leg is the outcome of one request of an edge's plan.
type leg struct {
	asked bool
	a     answer
	info  model.QueryInfo
	from  string // the replica that answered (replica legs)
	err   error
}

func (l leg) ok() bool { return l.asked && l.err == nil }

// outcomes are the legs run for one edge with catalog-matching series:
// the planned ones, then the fallbacks their failures called for.
type outcomes struct {
	rep  leg // the replicas, for repPart
	edge leg // the edge, for edgePart
	// repForEdge: the replicas, for edgePart (the edge did not answer);
	// edgeForRep: the edge, for repPart (no replica answered).
	repForEdge, edgeForRep leg
}

// askReplicasForEdgePart says whether the replicas are asked for the
// edge's part: the edge did not answer it, the replicas were not asked
// for their own part or answered it (a replica that failed is not asked
// again), and the query is not for last points (the replicas' answer to
// the whole range then stands for the edge's).
func askReplicasForEdgePart(p *legPlan, o *outcomes, lastPoint bool) bool {
	return !p.edgePart.empty() && !o.edge.ok() && !lastPoint && (p.repPart.empty() || o.rep.ok())
}

// askEdgeForRepPart says whether the edge is asked for the replicas' part:
// no replica answered it, and either the plan left the edge unasked for
// staleness (it then answers the whole range, if it can be asked) or the
// edge answered its own part and the query is not for last points (the
// edge's answer to the whole range then stands for the replicas').
func askEdgeForRepPart(p *legPlan, o *outcomes, lastPoint bool) bool {
	if p.repPart.empty() || o.rep.ok() {
		return false
	}
	if p.stale {
		return p.src != nil
	}
	return o.edge.ok() && !lastPoint
}

// tally collects what one edge's answer lacks.
type tally struct {
	p        *legPlan
	missing  []TimeRange
	warnings []string
	reasons  []string
	// gapWarned: gaps already warned of; historyWarned: the history
	// warning was given.
	gapWarned     map[int]bool
	historyWarned bool
}

func (t *tally) miss(s span) {
	if !s.empty() {
		t.missing = append(t.missing, TimeRange{s.lo, s.hi})
	}
}

// missGap reports the part of part that recorded gap i covers.
func (t *tally) missGap(i int, part span) {
	g := t.p.gaps[i]
	if r := gapRange(g, part); !r.empty() {
		t.miss(r)
		if !t.gapWarned[i] {
			t.gapWarned[i] = true
			t.warnings = append(t.warnings, gapWarning(t.p.edge, g))
		}
	}
}

// missHistory reports what replica from, which answered part, may lack
// of it (segments not copied to it yet): the edge could not be asked for
// them, or the plan would have sent it there.
func (t *tally) missHistory(from string, part span) {
	if r := t.p.historyMissing(from, part); !r.empty() {
		t.miss(r)
		if !t.historyWarned {
			t.historyWarned = true
			t.warnings = append(t.warnings, historyWarning(t.p.edge, r))
		}
	}
}

// account is the coverage of one edge's part of an answer and the
// warnings it calls for, given the plan and the legs' outcomes. A range
// is reported missing only when data in it may be absent from the answer:
// the edge's data after its watermark when the edge did not answer,
// recorded gaps the replicas answered across, history the answering
// replica lacks, and any part nobody answered.
func account(p *legPlan, o *outcomes, lastPoint bool) (EdgeCoverage, []string) {
	cov := EdgeCoverage{Edge: p.edge, WatermarkMs: p.wm, Replicas: p.placed}
	t := tally{p: p, gapWarned: map[int]bool{}}
	if o.edge.asked && o.edge.err != nil {
		t.reasons = append(t.reasons, fmt.Sprintf("edge %s unreachable: %v", p.edge, o.edge.err))
	}
	if o.rep.asked && o.rep.err != nil {
		t.reasons = append(t.reasons, fmt.Sprintf("no replica of edge %s answered: %v", p.edge, o.rep.err))
	}
	cov.EdgeAnswered = o.edge.ok() || o.edgeForRep.ok()
	// The allowance accepted the replicas' data through the watermark: what
	// follows was not asked for (not missing).
	cov.StaleTail = p.stale && o.rep.ok()
	if o.rep.ok() {
		cov.ReplicaAnswered = o.rep.from
		if !(lastPoint && o.edge.ok()) { // the edge's last points cover what the replica lacks
			t.missHistory(o.rep.from, p.repPart)
		}
	}
	if !p.edgePart.empty() && !o.edge.ok() {
		t.edgePartUnanswered(o, lastPoint, &cov)
	}
	if !p.repPart.empty() && !o.rep.ok() {
		t.repPartUnanswered(o, lastPoint)
	}
	if o.rep.ok() {
		for _, i := range p.gapsHit {
			t.missGap(i, p.repPart)
		}
	}
	cov.Missing = normalize(t.missing)
	cov.Reason = strings.Join(t.reasons, "; ")
	switch {
	case !cov.EdgeAnswered && cov.ReplicaAnswered == "":
		t.warnings = append(t.warnings, fmt.Sprintf("edge %s: neither the edge nor a replica (%s) answered: its series are missing from the answer",
			p.edge, strings.Join(cov.Replicas, ", ")))
	case len(cov.Missing) > 0 && len(t.warnings) == 0:
		for _, m := range cov.Missing {
			t.warnings = append(t.warnings, fmt.Sprintf("edge %s: points between %s and %s missing (%s)", p.edge, fmtMs(m.StartMs), fmtMs(m.EndMs), cov.Reason))
		}
	}
	return cov, t.warnings
}

// edgePartUnanswered accounts for the edge's part when the edge did not
// answer it: the replicas stand in for it up to the watermark (except the
// recorded gaps), or nobody answered it.
func (t *tally) edgePartUnanswered(o *outcomes, lastPoint bool, cov *EdgeCoverage) {
	p := t.p
	if p.src == nil {
		t.reasons = append(t.reasons, p.why)
	}
	replicasCover := lastPoint && o.rep.ok()
	if o.repForEdge.asked {
		if o.repForEdge.ok() {
			cov.ReplicaAnswered = o.repForEdge.from
			t.missHistory(o.repForEdge.from, p.edgePart)
			replicasCover = true
		} else {
			t.reasons = append(t.reasons, fmt.Sprintf("no replica of edge %s answered: %v", p.edge, o.repForEdge.err))
		}
	}
	if !replicasCover {
		t.miss(p.edgePart)
		return
	}
	// The replicas hold the edge's data up to its watermark, recorded gaps
	// excepted: only what is after it may be missing.
	if after := afterWatermark(p.wm, p.edgePart); !after.empty() {
		t.miss(after)
		t.warnings = append(t.warnings, fmt.Sprintf("edge %s unreachable: points after %s missing", p.edge, fmtMs(after.lo-1)))
	}
	for i := range p.gaps {
		t.missGap(i, p.edgePart)
	}
}

// repPartUnanswered accounts for the replicas' part when no replica
// answered it: the edge stands in for it, or nobody answered it.
func (t *tally) repPartUnanswered(o *outcomes, lastPoint bool) {
	p := t.p
	switch {
	case lastPoint && o.edge.ok():
		// The edge's last points over the whole range stand.
	case o.edgeForRep.asked:
		if !o.edgeForRep.ok() {
			t.reasons = append(t.reasons, fmt.Sprintf("edge %s unreachable: %v", p.edge, o.edgeForRep.err))
			t.miss(p.repPart)
		}
	default:
		if p.src == nil && p.edgePart.empty() {
			t.reasons = append(t.reasons, p.why)
		}
		t.miss(p.repPart)
	}
}

// afterWatermark is the part of part after wm.
func afterWatermark(wm int64, part span) span {
	if wm == math.MaxInt64 {
		return span{1, 0}
	}
	return span{max(wm+1, part.lo), part.hi}
}

// freshPlan is how an edge without catalog-matching series is asked.
type freshPlan struct {
	edge     string
	wm       int64 // q.Start-1 when nothing is recorded
	replicas []string
	// part is what the edge is asked for (empty: nothing); unknown is
	// where series the catalog does not know may lie: after the
	// watermark, and in recorded gaps (all of the range below the
	// watermark for a gap of unknown time).
	part    span
	unknown []span
	src     Source
	why     string
}

// accountFresh is the coverage of an edge without catalog-matching series
// (asked for part, with err its leg's error when it was asked). When it
// did not answer, what is missing is where series the catalog does not
// know may lie: possibly nothing.
func accountFresh(p *freshPlan, asked bool, err error) EdgeCoverage {
	cov := EdgeCoverage{Edge: p.edge, WatermarkMs: p.wm, Replicas: p.replicas}
	if asked && err == nil {
		cov.EdgeAnswered = true
		return cov
	}
	why := p.why
	if asked {
		why = fmt.Sprintf("edge %s unreachable: %v", p.edge, err)
	}
	cov.Reason = "unreachable; no replicated series match: " + why
	var missing []TimeRange
	for _, s := range p.unknown {
		if s = (span{max(s.lo, p.part.lo), min(s.hi, p.part.hi)}); !s.empty() {
			missing = append(missing, TimeRange{s.lo, s.hi})
		}
	}
	cov.Missing = normalize(missing)
	return cov
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
	rs = slices.Clone(rs)
	slices.SortStableFunc(rs, func(a, b TimeRange) int { return cmp.Compare(a.StartMs, b.StartMs) })
	out := make([]TimeRange, 0, len(rs))
	for _, r := range rs {
		if n := len(out); n > 0 && r.StartMs <= out[n-1].EndMs+1 {
			out[n-1].EndMs = max(out[n-1].EndMs, r.EndMs)
			continue
		}
		out = append(out, r)
	}
	return out
}
