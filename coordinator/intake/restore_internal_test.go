package intake

import (
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/node/rollup"
)

const day = rollup.Day

// A restore is planned from the catalog: what is sent, from which
// replicas, and what the header says.
func TestPlanRestore(t *testing.T) {
	d0 := int64(20_000) * day // a UTC day
	held := func(first, last uint64, points uint64, lo, hi int64) catalog.HeldRange {
		return catalog.HeldRange{FirstSeq: first, LastSeq: last, Points: points, MinTimeMs: lo, MaxTimeMs: hi}
	}
	progress := catalog.EdgeProgress{Edge: "pi",
		Held: []catalog.HeldRange{held(1, 40, 4000, d0+5, d0+4*day), held(43, 50, 800, d0+4*day, d0+6*day+7)},
		Gaps: []catalog.GapRange{{AfterSeq: 50, ThroughSeq: 52, Reason: catalog.GapBacklogOverflow, Segments: 2, Points: 90}},
	}
	full := catalog.Holding{}
	lacking := catalog.Holding{Lacks: []catalog.LackRange{{FirstSeq: 43, LastSeq: 50, MinTimeMs: d0 + 4*day, MaxTimeMs: d0 + 6*day + 7}}}
	placed := func(h1, h2 catalog.Holding) catalog.Placement {
		return catalog.Placement{Edge: "pi", Replicas: []string{"c1", "c2"}, Holdings: []catalog.Holding{h1, h2}}
	}
	none := func(string) bool { return false }
	type part struct {
		lo, hi  int64
		sources string
	}
	cases := []struct {
		name         string
		req          restoreRequest
		raw, rollups []part
		rawStart     int64
		err          string // in a FAILED_PRECONDITION
		errFrom      int64  // the start of the span it names
	}{{
		name:     "everything raw, from this coordinator first",
		req:      restoreRequest{self: "c2", placement: placed(full, full), rawRetention: d0 - 30*day},
		raw:      []part{{d0 + 5, d0 + 6*day + 7, "c2,c1"}},
		rawStart: d0 + 5,
	}, {
		name:     "older days as rollups, from the day of the raw retention's start",
		req:      restoreRequest{self: "c1", placement: placed(full, full), rawRetention: d0 + 2*day + 3600_000},
		raw:      []part{{d0 + 2*day, d0 + 6*day + 7, "c1,c2"}},
		rollups:  []part{{d0, d0 + 2*day - 1, "c1,c2"}},
		rawStart: d0 + 2*day,
	}, {
		name:     "raw_start_ms asks for fewer raw days; start_ms cuts the rest",
		req:      restoreRequest{self: "c1", placement: placed(full, full), rawRetention: d0, rawStartMs: d0 + 5*day + 9, startMs: d0 + day + 1},
		raw:      []part{{d0 + 5*day, d0 + 6*day + 7, "c1,c2"}},
		rollups:  []part{{d0 + day, d0 + 5*day - 1, "c1,c2"}},
		rawStart: d0 + 5*day,
	}, {
		name:     "a replica lacking recent segments gives only the older part",
		req:      restoreRequest{self: "c1", placement: placed(lacking, full), rawRetention: d0 - day},
		raw:      []part{{d0 + 5, d0 + 4*day - 1, "c1,c2"}, {d0 + 4*day, d0 + 6*day + 7, "c2"}},
		rawStart: d0 + 5,
	}, {
		name:    "no live replica holds the recent part: refused, naming it",
		req:     restoreRequest{self: "c1", placement: placed(lacking, full), rawRetention: d0 - day, down: func(id string) bool { return id == "c2" }},
		err:     "c1 lacks segments 43..50; c2 is down",
		errFrom: d0 + 4*day,
	}, {
		name:    "no placement at all",
		req:     restoreRequest{self: "c1", rawRetention: d0 - day},
		err:     "the edge has no replicas",
		errFrom: d0 + 5,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.req
			r.edge, r.progress, r.maxFileBytes, r.oldest, r.nowMs = "pi", progress, 1<<20, math.MinInt64, d0+7*day
			if r.down == nil {
				r.down = none
			}
			plan, err := planRestore(r)
			if c.err != "" {
				want := "[" + fmtMs(c.errFrom) + ", " + fmtMs(d0+6*day+7) + "]"
				if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, want FAILED_PRECONDITION naming %s and %q", err, want, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			conv := func(ps []restorePart) []part {
				var out []part
				for _, p := range ps {
					out = append(out, part{p.lo, p.hi, strings.Join(p.sources, ",")})
				}
				return out
			}
			if got := conv(plan.raw); !slices.Equal(got, c.raw) {
				t.Errorf("raw parts %v, want %v", got, c.raw)
			}
			if got := conv(plan.rollups); !slices.Equal(got, c.rollups) {
				t.Errorf("rollup parts %v, want %v", got, c.rollups)
			}
			h := plan.header
			if h.RawStartMs != c.rawStart || h.NextSeq != 53 || h.AckedThrough != 40 || h.HeldPoints != 4800 || h.GapSegments != 2 || h.GapPoints != 90 || h.MaxTimeMs != d0+6*day+7 {
				t.Errorf("header %+v", h)
			}
			if len(h.Missing) != 1 || h.Missing[0].FirstSeq != 41 || h.Missing[0].LastSeq != 42 {
				t.Errorf("missing runs %v, want 41..42", h.Missing)
			}
			if plan.lastSeq != 52 {
				t.Errorf("files carry seq %d, want 52", plan.lastSeq)
			}
		})
	}
}

// Nothing recorded: nothing to send, and the restored WAL starts at 1.
func TestPlanRestore_NothingHeld(t *testing.T) {
	plan, err := planRestore(restoreRequest{edge: "pi", self: "c1", nowMs: 1, down: func(string) bool { return false }})
	if err != nil || plan.header.NextSeq != 1 || len(plan.raw)+len(plan.rollups) != 0 || len(plan.header.Missing) != 0 {
		t.Fatalf("plan %+v, %v", plan, err)
	}
}

// Past the limit, the last missing run widens to cover the rest.
func TestMissingRuns_Bounded(t *testing.T) {
	var p catalog.EdgeProgress
	for i := uint64(0); i < 10; i++ {
		p.Held = append(p.Held, catalog.HeldRange{FirstSeq: 3*i + 2, LastSeq: 3*i + 2})
	}
	got := missingRuns(p, 4)
	want := [][2]uint64{{1, 1}, {3, 4}, {6, 7}, {9, 28}}
	if len(got) != len(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	for i, r := range got {
		if r.FirstSeq != want[i][0] || r.LastSeq != want[i][1] {
			t.Fatalf("runs %v, want %v", got, want)
		}
	}
}

// A footer naming a time far in the future does not stretch the span the
// restore walks past what a replica can hold.
func TestPlanRestore_FarFutureFooterIsCut(t *testing.T) {
	now := int64(20_000) * day
	p := catalog.EdgeProgress{Held: []catalog.HeldRange{{FirstSeq: 1, LastSeq: 1, Points: 5, MinTimeMs: now - day, MaxTimeMs: math.MaxInt64 / 2}}}
	plan, err := planRestore(restoreRequest{edge: "pi", self: "c1", nowMs: now, oldest: math.MinInt64, progress: p,
		placement: catalog.Placement{Replicas: []string{"c1"}, Holdings: []catalog.Holding{{}}}, down: func(string) bool { return false }})
	if err != nil {
		t.Fatal(err)
	}
	if want := now + restoreFutureLimit.Milliseconds(); plan.header.MaxTimeMs != want || len(plan.raw) != 1 || plan.raw[0].hi != want {
		t.Fatalf("span ends at %d (raw parts %+v), want %d", plan.header.MaxTimeMs, plan.raw, want)
	}
}
