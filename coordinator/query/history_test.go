package query_test

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// nodeWhere is a node holding the fleet's data, of edge only the samples
// keep accepts.
func (f *fleet) nodeWhere(t *testing.T, edge string, others bool, keep func(ts int64) bool) *node.Node {
	t.Helper()
	n := openNode(t)
	merged, lsets := map[string][]sample{}, map[string]labels.Labels{}
	for _, d := range f.edges {
		if d.id != edge && !others {
			continue
		}
		for k, ss := range d.series {
			for _, s := range ss {
				if d.id != edge || keep(s.t) {
					merged[k] = append(merged[k], s)
					lsets[k] = d.lsets[k]
				}
			}
		}
	}
	for k, ss := range merged {
		slices.SortFunc(ss, func(a, b sample) int { return cmp.Compare(a.t, b.t) })
		write(t, n, lsets[k], ss)
	}
	return n
}

// movedFleet is theFleet after e2's placement changed to replicas (one of
// them, c1, placed after e2's first segment, which nothing copied to it)
// and e2 then shipped a second segment, up to wm2, stored on the new
// placement. c3, when placed, holds e2's whole history (to wm2); c1 holds
// only the second segment's data.
//
// The replicas the change replaced are leaving replicas: they hold e2's
// history up to wm. With downLeaving their coordinators are marked down
// (and their legs fail), so that no live replica holds the history.
func movedFleet(t *testing.T, replicas []string, downLeaving bool) (g *fleet, wm, wm2 int64, seg1 catalog.HeldRange) {
	t.Helper()
	f := theFleet
	d := f.edges[1]
	if d.id != "e2" {
		t.Fatalf("edge 1 is %s", d.id)
	}
	wm, wm2 = d.wm, d.wm+2*hour
	cat := catalog.New()
	if err := cat.Restore(f.cat.Snapshot()); err != nil {
		t.Fatal(err)
	}
	idx := cat.AppliedIndex()
	apply := func(c catalog.Command) {
		t.Helper()
		idx++
		if _, err := cat.ApplyCommand(idx, c); err != nil {
			t.Fatalf("apply %T: %v", c, err)
		}
	}
	prog, _ := cat.Progress("e2")
	seg1 = prog.Held[0]
	apply(catalog.SetPlacement{Edge: "e2", Replicas: replicas})
	pl, _ := cat.Placement("e2")
	var leaving []string
	for _, l := range pl.Leaving {
		leaving = append(leaving, l.ID)
	}
	lacks1 := func(pl catalog.Placement) []catalog.LackRange {
		h, _, _ := pl.HoldingOf("c1")
		return h.Lacks
	}
	if l := lacks1(pl); len(l) != 1 || l[0].FirstSeq != 1 || l[0].LastSeq != 1 {
		t.Fatalf("c1 placed late lacks %v: %+v", l, pl)
	}
	var lsets []labels.Labels
	var points uint64
	minT, maxT := int64(math.MaxInt64), int64(math.MinInt64)
	for k, ss := range d.series {
		lsets = append(lsets, d.lsets[k])
		for _, s := range ss {
			if s.t > wm && s.t <= wm2 {
				points++
				minT, maxT = min(minT, s.t), max(maxT, s.t)
			}
		}
	}
	slices.SortFunc(lsets, func(a, b labels.Labels) int { return cmp.Compare(a.String(), b.String()) })
	apply(catalog.RegisterSeries{Edge: "e2", Series: lsets})
	apply(catalog.RecordHeld{Edge: "e2", Epoch: pl.Epoch, WatermarkSeq: 2, WatermarkTimeMs: wm2,
		Ranges: []catalog.HeldRange{{FirstSeq: 2, LastSeq: 2, Points: points, MinTimeMs: minT, MaxTimeMs: maxT}}})
	if pl, _ = cat.Placement("e2"); len(lacks1(pl)) != 1 || lacks1(pl)[0].LastSeq != 1 || lacks1(pl)[0].MaxTimeMs != seg1.MaxTimeMs {
		t.Fatalf("after the second segment: %+v", pl)
	}
	if downLeaving {
		for _, c := range leaving {
			apply(catalog.SetNodeState{ID: c, State: catalog.NodeDown})
		}
	}

	g = &fleet{cat: cat, edges: f.edges, edge: f.edge, replica: f.replica, oracle: f.oracle, start: f.start, seed: f.seed,
		placed: map[string][]string{}, held: map[string]map[string]*node.Node{}}
	for c, es := range f.placed {
		for _, e := range es {
			if e != "e2" {
				g.placed[c] = append(g.placed[c], e)
			}
		}
	}
	for _, c := range replicas {
		g.placed[c] = append(g.placed[c], "e2")
		var n *node.Node
		if c == "c1" {
			n = g.nodeWhere(t, "e2", false, func(ts int64) bool { return ts > wm && ts <= wm2 })
		} else {
			n = g.nodeWhere(t, "e2", false, func(ts int64) bool { return ts <= wm2 })
		}
		g.held[c] = map[string]*node.Node{"e2": n}
	}
	for _, c := range leaving {
		g.placed[c] = append(g.placed[c], "e2")
		g.held[c] = map[string]*node.Node{"e2": g.nodeWhere(t, "e2", false, func(ts int64) bool { return ts <= wm })}
	}
	g.downLeaving = nil
	if downLeaving {
		g.downLeaving = leaving
	}
	t.Cleanup(func() {
		for _, m := range g.held {
			for _, n := range m {
				n.Close()
			}
		}
	})
	return g, wm, wm2, seg1
}

func historyQueries(t *testing.T, f *fleet) map[string]model.Query {
	now := t0.UnixMilli()
	all := []*labels.Matcher{must(t, labels.MatchRegexp, "__name__", ".+"), must(t, labels.MatchNotEqual, "host", "moved")}
	return map[string]model.Query{
		"raw":       {Matchers: all, Start: f.start, End: now, Mode: model.ModeRaw},
		"sum 1h":    {Matchers: all, Start: f.start, End: now, Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncSum},
		"avg 10m+3": {Matchers: all, Start: f.start, End: now, Mode: model.ModeDownsample, Step: 10 * minute, Downsample: rollup.FuncAvg, Offset: 3 * minute},
		"max 3h":    {Matchers: all, Start: f.start + 5*hour, End: now, Mode: model.ModeDownsample, Step: 3 * hour, Downsample: rollup.FuncMax},
		"last":      {Matchers: all, Start: 0, End: now, Mode: model.ModeLastPoint},
	}
}

func runWithCoverage(t *testing.T, fe *query.Frontend, q model.Query) ([]model.Series, model.QueryInfo, query.Coverage) {
	t.Helper()
	var cov query.Coverage
	got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
		var info model.QueryInfo
		var err error
		info, cov, err = fe.QueryWithCoverage(context.Background(), q, emit)
		return info, err
	})
	return got, info, cov
}

func rfc(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// The edge is unreachable, but a replica of the first placement holds the
// whole history: it answers, not the replica placed late (which sorts
// first and would answer only the newer data).
func TestFrontend_LateReplicaHistoryComesFromTheOtherReplica(t *testing.T) {
	g, _, wm2, _ := movedFleet(t, []string{"c1", "c3"}, false)
	fe := g.frontend(t, faults{deadEdges: []string{"e2"}}, nil)
	oracle := g.nodeWhere(t, "e2", true, func(ts int64) bool { return ts <= wm2 })
	now := t0.UnixMilli()
	for name, q := range historyQueries(t, g) {
		got, info, cov := runWithCoverage(t, fe, q)
		sameAnswer(t, name, got, answerOf(t, oracle, q))
		e2 := coverageOf(t, cov, "e2")
		if e2.ReplicaAnswered != "c3" || e2.EdgeAnswered || !slices.Equal(e2.Missing, []query.TimeRange{{StartMs: wm2 + 1, EndMs: now}}) {
			t.Fatalf("%s: e2 coverage %+v", name, e2)
		}
		want := "edge e2 unreachable: points after " + rfc(wm2) + " missing"
		if !slices.Equal(info.Warnings, []string{want}) {
			t.Fatalf("%s: warnings %q, want %q", name, info.Warnings, want)
		}
	}
}

// The active replica lacks the history and the replicas it replaced
// (leaving, still holding it) are down; the edge is reachable: the edge
// answers all of it.
func TestFrontend_LateReplicaHistoryComesFromTheEdge(t *testing.T) {
	g, wm, wm2, _ := movedFleet(t, []string{"c1"}, true)
	fe := g.frontend(t, faults{down: g.downLeaving}, nil)
	for name, q := range historyQueries(t, g) {
		got, info, cov := runWithCoverage(t, fe, q)
		sameAnswer(t, name, got, answerOf(t, g.oracle, q))
		e2 := coverageOf(t, cov, "e2")
		if !e2.EdgeAnswered || e2.ReplicaAnswered != "" || len(e2.Missing) != 0 || len(info.Warnings) != 0 || !cov.Complete() {
			t.Fatalf("%s: e2 coverage %+v, warnings %q", name, e2, info.Warnings)
		}
	}
	// A query entirely after what c1 lacks goes to c1 as usual.
	q := historyQueries(t, g)["raw"]
	q.Start, q.End = wm+1, wm2
	got, _, cov := runWithCoverage(t, fe, q)
	sameAnswer(t, "after the history", got, answerOf(t, g.oracle, q))
	if e2 := coverageOf(t, cov, "e2"); e2.ReplicaAnswered != "c1" || len(e2.Missing) != 0 {
		t.Fatalf("after the history: e2 coverage %+v", e2)
	}
}

// The history is on no live replica and the edge is unreachable: the
// answer has what c1 holds and says precisely what is missing.
func TestFrontend_LateReplicaHistoryMissingIsFlagged(t *testing.T) {
	g, wm, wm2, seg1 := movedFleet(t, []string{"c1"}, true)
	fe := g.frontend(t, faults{deadEdges: []string{"e2"}, down: g.downLeaving}, nil)
	oracle := g.nodeWhere(t, "e2", true, func(ts int64) bool { return ts > wm && ts <= wm2 })
	now := t0.UnixMilli()
	for name, q := range historyQueries(t, g) {
		got, info, cov := runWithCoverage(t, fe, q)
		sameAnswer(t, name, got, answerOf(t, oracle, q))
		e2 := coverageOf(t, cov, "e2")
		wantMissing := []query.TimeRange{{StartMs: max(q.Start, seg1.MinTimeMs), EndMs: seg1.MaxTimeMs}, {StartMs: wm2 + 1, EndMs: now}}
		if e2.ReplicaAnswered != "c1" || e2.EdgeAnswered || !slices.Equal(e2.Missing, wantMissing) || cov.Complete() {
			t.Fatalf("%s: e2 coverage %+v, want missing %+v", name, e2, wantMissing)
		}
		history := "edge e2: data from " + rfc(max(q.Start, seg1.MinTimeMs)) + " to " + rfc(seg1.MaxTimeMs) + " is not on the replica that answered (segments not copied to it yet) and the edge is unreachable"
		if !slices.Contains(info.Warnings, history) {
			t.Fatalf("%s: warnings %q lack %q", name, info.Warnings, history)
		}
		for _, w := range info.Warnings {
			if !strings.HasPrefix(w, "edge e2") {
				t.Fatalf("%s: warning %q", name, w)
			}
		}
	}
}
