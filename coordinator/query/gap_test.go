package query_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// withGap returns a copy of the fleet's catalog in which e1 recorded a gap
// of 120 points between its hours 6 and 5 before the watermark.
func withGap(t *testing.T, f *fleet) (*catalog.FSM, catalog.GapRange) {
	t.Helper()
	cat := catalog.New()
	if err := cat.Restore(f.cat.Snapshot()); err != nil {
		t.Fatal(err)
	}
	wm := f.edges[0].wm
	g := catalog.GapRange{AfterSeq: 1, ThroughSeq: 3, Reason: catalog.GapBacklogOverflow, Segments: 2, Points: 120,
		MinTimeMs: wm - 6*hour, MaxTimeMs: wm - 5*hour}
	if _, err := cat.ApplyCommand(cat.AppliedIndex()+1, catalog.RecordGap{Edge: "e1", Gaps: []catalog.GapRange{g}}); err != nil {
		t.Fatal(err)
	}
	if p, _ := cat.Progress("e1"); p.WatermarkTimeMs != wm || len(p.Gaps) != 1 {
		t.Fatalf("progress after the gap: %+v", p)
	}
	return cat, g
}

func TestFrontend_GapOnReplicasIsAnsweredByTheEdgeOrFlagged(t *testing.T) {
	f := theFleet
	cat, g := withGap(t, f)
	ctx := context.Background()
	now := t0.UnixMilli()
	q := model.Query{Matchers: []*labels.Matcher{must(t, labels.MatchRegexp, "host", "e1-.*")}, Start: f.start, End: now,
		Mode: model.ModeDownsample, Step: hour, Downsample: rollup.FuncCount}
	run := func(fe *query.Frontend) ([]model.Series, model.QueryInfo, query.Coverage) {
		var cov query.Coverage
		got, info := collect(t, func(emit func(model.Series) error) (model.QueryInfo, error) {
			var info model.QueryInfo
			var err error
			info, cov, err = fe.QueryWithCoverage(ctx, q, emit)
			return info, err
		})
		return got, info, cov
	}

	// Edge reachable: it answers the whole range, nothing is missing.
	fe := f.frontend(t, faults{}, func(o *query.Options) { o.Catalog = cat })
	got, info, cov := run(fe)
	sameAnswer(t, "edge answers the gap", got, answerOf(t, f.oracle, q))
	if e1 := coverageOf(t, cov, "e1"); !e1.EdgeAnswered || e1.ReplicaAnswered != "" || len(e1.Missing) != 0 || len(info.Warnings) != 0 {
		t.Fatalf("reachable: coverage %+v, warnings %q", e1, info.Warnings)
	}

	// Edge unreachable: the replicas answer, the gap and the tail are
	// reported missing.
	fe = f.frontend(t, faults{deadEdges: []string{"e1"}}, func(o *query.Options) { o.Catalog = cat })
	_, info, cov = run(fe)
	e1 := coverageOf(t, cov, "e1")
	wm := f.edges[0].wm
	wantMissing := []query.TimeRange{{StartMs: g.MinTimeMs, EndMs: g.MaxTimeMs}, {StartMs: wm + 1, EndMs: now}}
	if e1.EdgeAnswered || e1.ReplicaAnswered != "c1" || !slices.Equal(e1.Missing, wantMissing) {
		t.Fatalf("unreachable: coverage %+v, want missing %v", e1, wantMissing)
	}
	fmt := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
	wantWarn := "edge e1: gap of 120 points (backlog overflow) between " + fmt(g.MinTimeMs) + " and " + fmt(g.MaxTimeMs) + " not on replicas"
	if len(info.Warnings) != 2 || !slices.Contains(info.Warnings, wantWarn) || !strings.HasPrefix(info.Warnings[0]+info.Warnings[1], "edge e1") {
		t.Fatalf("warnings %q, want %q among them", info.Warnings, wantWarn)
	}
}

// TestFrontend_UnreachableEdgeReplicatedPastTheEndIsNoAlarm: e3's
// replicas hold its data past the query's end, so with e3 unreachable
// the answer is complete and must say so: no warning, nothing missing.
// The 3h buckets make e3's split point (the start of the bucket holding
// its watermark) fall before the end, so e3 is asked, and fails, both
// when its series match and when none do (it may have created series
// since its watermark, but not before it).
func TestFrontend_UnreachableEdgeReplicatedPastTheEndIsNoAlarm(t *testing.T) {
	f := theFleet
	e3 := f.edges[2]
	now := t0.UnixMilli()
	if e3.id != "e3" || e3.wm <= now || rollup.BucketStart(e3.wm+1, 3*hour) > now {
		t.Fatalf("the fleet changed: e3's watermark %d, now %d", e3.wm, now)
	}
	fe := f.frontend(t, faults{deadEdges: []string{"e3"}}, nil)
	hosts := must(t, labels.MatchRegexp, "host", "e3-.*|e1-0")
	disk := must(t, labels.MatchEqual, "__name__", "disk") // none on e3
	for name, q := range map[string]model.Query{
		"e3's series, 3h sum":  {Matchers: []*labels.Matcher{hosts}, Start: f.start, End: now, Mode: model.ModeDownsample, Step: 3 * hour, Downsample: rollup.FuncSum},
		"e3's series, raw":     {Matchers: []*labels.Matcher{hosts}, Start: f.start, End: now, Mode: model.ModeRaw},
		"e3's series, last":    {Matchers: []*labels.Matcher{hosts}, Start: 0, End: now, Mode: model.ModeLastPoint},
		"none of e3's, 3h max": {Matchers: []*labels.Matcher{disk}, Start: f.start, End: now, Mode: model.ModeDownsample, Step: 3 * hour, Downsample: rollup.FuncMax},
	} {
		got, info, cov := runWithCoverage(t, fe, q)
		sameAnswer(t, name, got, answerOf(t, f.oracle, q))
		if len(info.Warnings) != 0 || !cov.Complete() {
			t.Errorf("%s: warnings %q, coverage %+v", name, info.Warnings, cov)
		}
	}
}
