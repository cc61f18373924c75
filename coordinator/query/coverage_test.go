package query

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/coordinator/catalog"
)

// someSource stands for a reachable edge in a plan; account never calls it.
type someSource struct{ Source }

// TestAccount_FallbackMatrix holds the accounting of one edge's legs to
// the fallback matrix of the package doc: which fallback legs are asked,
// what the answer is said to lack, and the warnings, for each way the
// planned legs can fail. Times are small: the query is [0, 1000] unless a
// case says otherwise.
func TestAccount_FallbackMatrix(t *testing.T) {
	const edge = "e1"
	refused := errors.New("connection refused")
	down := errors.New("coordinator c1 is down")
	at := fmtMs
	// plan is e1 split at its watermark wm: the replicas answer [0, s-1],
	// the edge [s, 1000].
	plan := func(wm, s int64, reachable bool) legPlan {
		p := legPlan{edge: edge, wm: wm, placed: []string{"c1", "c2"}, replicas: []string{"c1", "c2"},
			holdings: map[string]catalog.Holding{}, repPart: span{0, min(s-1, 1000)}, edgePart: span{max(s, 0), 1000}}
		if reachable {
			p.src = someSource{}
		} else {
			p.why = "edge e1 unreachable: dial e1:7070: connection refused"
		}
		return p
	}
	gap := gapSpan{minMs: 100, maxMs: 200, points: 12, reason: "backlog overflow"}
	unknownGap := gapSpan{points: -1, reason: "missing"}
	withGap := func(p legPlan, g gapSpan) legPlan {
		p.gaps, p.gapsHit = []gapSpan{g}, []int{0}
		return p
	}
	lastPoint := func(p legPlan) legPlan {
		p.repPart, p.edgePart = span{0, 1000}, span{0, 1000}
		return p
	}
	// stale is p planned under a staleness allowance that accepts its
	// watermark: the replicas answer the whole range, the edge nothing.
	stale := func(p legPlan) legPlan {
		p.repPart, p.edgePart, p.stale = span{0, 1000}, span{1, 0}, true
		return p
	}
	lacking := func(p legPlan) legPlan { // c1 was placed late: it lacks [50, 300]
		p.holdings["c1"] = catalog.Holding{Lacks: []catalog.LackRange{{FirstSeq: 1, LastSeq: 3, MinTimeMs: 50, MaxTimeMs: 300}}}
		return p
	}
	for _, tc := range []struct {
		name      string
		p         legPlan
		lastPoint bool
		// Errors of the legs, when they are asked.
		rep, edge, repForEdge, edgeForRep error
		// The fallbacks asked.
		askRepForEdge, askEdgeForRep bool
		replicaAnswered              string
		edgeAnswered                 bool
		staleTail                    bool
		missing                      []TimeRange
		warnings                     []string
		reason                       string // a part of Reason ("" : Reason is empty)
	}{
		{name: "as planned", p: plan(600, 601, true),
			replicaAnswered: "c1", edgeAnswered: true},
		{name: "edge unreachable: the replicas answer its part, what is after the watermark is missing", p: plan(600, 601, false),
			askRepForEdge: true, replicaAnswered: "c1",
			missing: []TimeRange{{601, 1000}}, warnings: []string{"edge e1 unreachable: points after " + at(600) + " missing"}, reason: "dial e1:7070"},
		{name: "edge leg fails: the same", p: plan(600, 601, true), edge: refused,
			askRepForEdge: true, replicaAnswered: "c1",
			missing: []TimeRange{{601, 1000}}, warnings: []string{"edge e1 unreachable: points after " + at(600) + " missing"}, reason: "edge e1 unreachable: connection refused"},
		{name: "edge unreachable, replicas hold past the end (bucket split before it): complete", p: plan(1200, 900, false),
			askRepForEdge: true, replicaAnswered: "c1", reason: "dial e1:7070"},
		{name: "edge unreachable, replicas hold past the end (raw): nothing asked of the edge", p: plan(1200, 1201, false),
			replicaAnswered: "c1"},
		{name: "edge unreachable, watermark at the end of time", p: plan(1<<63-1, 900, false),
			askRepForEdge: true, replicaAnswered: "c1", reason: "dial e1:7070"},
		{name: "no replica answers: the edge answers their part too", p: plan(600, 601, true), rep: down,
			askEdgeForRep: true, edgeAnswered: true, reason: "no replica of edge e1 answered: coordinator c1 is down"},
		{name: "no replica answers and the edge fails their part", p: plan(600, 601, true), rep: down, edgeForRep: refused,
			askEdgeForRep: true, edgeAnswered: true, missing: []TimeRange{{0, 600}},
			warnings: []string{"edge e1: points between " + at(0) + " and " + at(600) + " missing (no replica of edge e1 answered: coordinator c1 is down; edge e1 unreachable: connection refused)"},
			reason:   "coordinator c1 is down"},
		{name: "neither answers", p: plan(600, 601, true), rep: down, edge: refused,
			missing:  []TimeRange{{0, 1000}},
			warnings: []string{"edge e1: neither the edge nor a replica (c1, c2) answered: its series are missing from the answer"},
			reason:   "edge e1 unreachable: connection refused; no replica of edge e1 answered: coordinator c1 is down"},
		{name: "neither: edge without an address, replicas down, nothing planned for the edge", p: plan(1200, 1201, false), rep: down,
			missing:  []TimeRange{{0, 1000}},
			warnings: []string{"edge e1: neither the edge nor a replica (c1, c2) answered: its series are missing from the answer"},
			reason:   "coordinator c1 is down; edge e1 unreachable: dial"},
		{name: "edge unreachable and the replicas fail its part", p: plan(600, 601, false), repForEdge: down,
			askRepForEdge: true, replicaAnswered: "c1", missing: []TimeRange{{601, 1000}},
			warnings: []string{"edge e1: points between " + at(601) + " and " + at(1000) + " missing (edge e1 unreachable: dial e1:7070: connection refused; no replica of edge e1 answered: coordinator c1 is down)"},
			reason:   "dial e1:7070"},
		{name: "gap on the replicas, edge reachable: the edge answers it all", p: withGap(plan(600, 0, true), gap),
			edgeAnswered: true},
		{name: "gap on the replicas, edge unreachable: the gap and the tail are missing", p: withGap(plan(600, 601, false), gap),
			askRepForEdge: true, replicaAnswered: "c1", missing: []TimeRange{{100, 200}, {601, 1000}},
			warnings: []string{"edge e1 unreachable: points after " + at(600) + " missing", "edge e1: gap of 12 points (backlog overflow) between " + at(100) + " and " + at(200) + " not on replicas"},
			reason:   "dial"},
		{name: "gap at an unknown time, edge unreachable: everything may lack", p: withGap(plan(600, 601, false), unknownGap),
			askRepForEdge: true, replicaAnswered: "c1", missing: []TimeRange{{0, 1000}},
			warnings: []string{"edge e1 unreachable: points after " + at(600) + " missing", "edge e1: gap of an unknown number of points (missing) at an unknown time not on replicas"},
			reason:   "dial"},
		{name: "replica lacking history answers, edge unreachable", p: lacking(plan(600, 601, false)),
			askRepForEdge: true, replicaAnswered: "c1", missing: []TimeRange{{50, 300}, {601, 1000}},
			warnings: []string{"edge e1: data from " + at(50) + " to " + at(300) + " is not on the replica that answered (segments not copied to it yet) and the edge is unreachable",
				"edge e1 unreachable: points after " + at(600) + " missing"},
			reason: "dial"},
		{name: "last point as planned", p: lastPoint(plan(600, 601, true)), lastPoint: true,
			replicaAnswered: "c1", edgeAnswered: true},
		{name: "last point, edge unreachable: newer points may be missing", p: lastPoint(plan(600, 601, false)), lastPoint: true,
			replicaAnswered: "c1", missing: []TimeRange{{601, 1000}},
			warnings: []string{"edge e1 unreachable: points after " + at(600) + " missing"}, reason: "dial"},
		{name: "last point, edge unreachable, replicas hold past the end", p: lastPoint(plan(1200, 1201, false)), lastPoint: true,
			replicaAnswered: "c1", reason: "dial"},
		{name: "last point, no replica answers: the edge's answer stands", p: lastPoint(plan(600, 601, true)), lastPoint: true, rep: down,
			edgeAnswered: true, reason: "coordinator c1 is down"},
		{name: "last point, lacking replica, edge answers: nothing lacks", p: lacking(lastPoint(plan(600, 601, true))), lastPoint: true,
			replicaAnswered: "c1", edgeAnswered: true},
		{name: "stale: the replicas answer it all, the tail is not asked for and not missing", p: stale(plan(600, 601, true)),
			replicaAnswered: "c1", staleTail: true},
		{name: "stale, edge unreachable: the same", p: stale(plan(600, 601, false)),
			replicaAnswered: "c1", staleTail: true},
		{name: "stale, no replica answers: the edge answers it all", p: stale(plan(600, 601, true)), rep: down,
			askEdgeForRep: true, edgeAnswered: true, reason: "no replica of edge e1 answered: coordinator c1 is down"},
		{name: "stale, no replica answers and the edge fails", p: stale(plan(600, 601, true)), rep: down, edgeForRep: refused,
			askEdgeForRep: true, missing: []TimeRange{{0, 1000}},
			warnings: []string{"edge e1: neither the edge nor a replica (c1, c2) answered: its series are missing from the answer"},
			reason:   "no replica of edge e1 answered: coordinator c1 is down; edge e1 unreachable: connection refused"},
		{name: "stale, no replica answers, edge unreachable", p: stale(plan(600, 601, false)), rep: down,
			missing:  []TimeRange{{0, 1000}},
			warnings: []string{"edge e1: neither the edge nor a replica (c1, c2) answered: its series are missing from the answer"},
			reason:   "coordinator c1 is down; edge e1 unreachable: dial"},
		{name: "stale last point: the replicas' newest points stand", p: stale(plan(600, 601, true)), lastPoint: true,
			replicaAnswered: "c1", staleTail: true},
		{name: "stale last point, no replica answers: the edge answers", p: stale(plan(600, 601, true)), lastPoint: true, rep: down,
			askEdgeForRep: true, edgeAnswered: true, reason: "coordinator c1 is down"},
	} {
		p := tc.p
		var o outcomes
		replica := func(err error) leg {
			l := leg{asked: true, err: err}
			if err == nil {
				l.from = "c1"
			}
			return l
		}
		if !p.repPart.empty() {
			o.rep = replica(tc.rep)
		}
		if p.src != nil && !p.edgePart.empty() {
			o.edge = leg{asked: true, err: tc.edge}
		}
		if got := askReplicasForEdgePart(&p, &o, tc.lastPoint); got != tc.askRepForEdge {
			t.Errorf("%s: replicas asked for the edge's part: %v, want %v", tc.name, got, tc.askRepForEdge)
		} else if got {
			o.repForEdge = replica(tc.repForEdge)
		}
		if got := askEdgeForRepPart(&p, &o, tc.lastPoint); got != tc.askEdgeForRep {
			t.Errorf("%s: edge asked for the replicas' part: %v, want %v", tc.name, got, tc.askEdgeForRep)
		} else if got {
			o.edgeForRep = leg{asked: true, err: tc.edgeForRep}
		}
		cov, warnings := account(&p, &o, tc.lastPoint)
		if cov.Edge != edge || !slices.Equal(cov.Replicas, p.placed) || cov.WatermarkMs != p.wm {
			t.Errorf("%s: coverage names %+v", tc.name, cov)
		}
		if cov.ReplicaAnswered != tc.replicaAnswered || cov.EdgeAnswered != tc.edgeAnswered || cov.StaleTail != tc.staleTail {
			t.Errorf("%s: answered by replica %q, edge %v, stale tail %v; want %q, %v, %v", tc.name, cov.ReplicaAnswered, cov.EdgeAnswered, cov.StaleTail,
				tc.replicaAnswered, tc.edgeAnswered, tc.staleTail)
		}
		if !slices.Equal(cov.Missing, tc.missing) {
			t.Errorf("%s: missing %v, want %v", tc.name, cov.Missing, tc.missing)
		}
		if !slices.Equal(warnings, tc.warnings) {
			t.Errorf("%s: warnings\n%q\nwant\n%q", tc.name, warnings, tc.warnings)
		}
		if tc.reason == "" && cov.Reason != "" || !strings.Contains(cov.Reason, tc.reason) {
			t.Errorf("%s: reason %q, want it to hold %q", tc.name, cov.Reason, tc.reason)
		}
	}
}

// TestAccountFresh_MissingOnlyWhereUnknownSeriesMayLie covers the edges
// without catalog-matching series: when one cannot be asked, only the
// time after its watermark and its recorded gaps may hide series the
// catalog does not know.
func TestAccountFresh_MissingOnlyWhereUnknownSeriesMayLie(t *testing.T) {
	refused := errors.New("connection refused")
	for _, tc := range []struct {
		name    string
		p       freshPlan
		asked   bool
		err     error
		missing []TimeRange
	}{
		{name: "answered", p: freshPlan{part: span{601, 1000}, unknown: []span{{601, 1000}}}, asked: true},
		{name: "fails after its watermark", p: freshPlan{wm: 600, part: span{601, 1000}, unknown: []span{{601, 1000}}}, asked: true, err: refused,
			missing: []TimeRange{{601, 1000}}},
		{name: "no address, nothing recorded", p: freshPlan{wm: -1, part: span{0, 1000}, unknown: []span{{0, 1000}}, why: "no address"},
			missing: []TimeRange{{0, 1000}}},
		// The false alarm of old: the bucket holding the watermark reaches
		// back into the range, but the range ends before the watermark.
		{name: "replicated past the end, asked for a bucket", p: freshPlan{wm: 1200, part: span{900, 1000}, unknown: []span{{1201, 1000}}}, asked: true, err: refused},
		{name: "bucket aligned before the watermark", p: freshPlan{wm: 950, part: span{900, 1000}, unknown: []span{{951, 1000}}}, asked: true, err: refused,
			missing: []TimeRange{{951, 1000}}},
		{name: "a gap below the watermark", p: freshPlan{wm: 600, part: span{0, 1000}, unknown: []span{{601, 1000}, {100, 200}}}, asked: true, err: refused,
			missing: []TimeRange{{100, 200}, {601, 1000}}},
	} {
		tc.p.edge = "e9"
		cov := accountFresh(&tc.p, tc.asked, tc.err)
		if cov.EdgeAnswered != (tc.asked && tc.err == nil) || !slices.Equal(cov.Missing, tc.missing) {
			t.Errorf("%s: coverage %+v; want missing %v", tc.name, cov, tc.missing)
		}
		if !cov.EdgeAnswered && !strings.HasPrefix(cov.Reason, "unreachable; no replicated series match: ") {
			t.Errorf("%s: reason %q", tc.name, cov.Reason)
		}
	}
}
