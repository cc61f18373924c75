package replicator

import (
	"math"
	"testing"

	"github.com/tributarydb/tributary/replicator/internal/cursor"
)

// TestPlanBackfill_PiecesCoverTheGapExactly: whatever the gap, the pieces
// cover its sequence numbers and its time span exactly, in order, each
// non-empty; halving a piece keeps that. (Their points are set as they
// are built: TestBackfillPlan_CreditsWhatThePiecesHold.)
func TestPlanBackfill_PiecesCoverTheGapExactly(t *testing.T) {
	for _, g := range []cursor.Gap{
		{After: 0, Through: 1, Points: 10, MinT: 5, MaxT: 5},
		{After: 3, Through: 9, Points: 1 << 30, MinT: 1000, MaxT: 1_000_000},
		{After: 3, Through: 1000, Points: 1 << 30, MinT: 1000, MaxT: 1003},
		{After: 7, Through: 8, Points: 0},
		{After: 1, Through: 1 << 40, Points: math.MaxInt64, MinT: math.MinInt64, MaxT: math.MaxInt64},
	} {
		p := planBackfill(g, 1<<20)
		check := func(pieces []*backfillPiece, what string) {
			prev, t0 := g.After, g.MinT
			var points int64
			for i, pc := range pieces {
				if pc.prev != prev || pc.seq <= pc.prev || pc.minT != t0 || pc.maxT < pc.minT {
					t.Fatalf("gap %+v, %s: piece %d %+v does not continue at (%d, %d)", g, what, i, pc, prev, t0)
				}
				points += pc.points
				prev, t0 = pc.seq, pc.maxT+1
			}
			if prev != g.Through || pieces[len(pieces)-1].maxT != g.MaxT || points != 0 {
				t.Fatalf("gap %+v, %s: pieces end at (%d, %d) with %d points", g, what, prev, pieces[len(pieces)-1].maxT, points)
			}
		}
		check(p.pieces, "plan")
		if pc := p.pieces[0]; pc.canSplit() {
			halves := splitPiece(pc, 2)
			if halves[0].prev != pc.prev || halves[1].seq != pc.seq || halves[0].seq != halves[1].prev ||
				halves[0].minT != pc.minT || halves[1].maxT != pc.maxT || halves[0].maxT+1 != halves[1].minT {
				t.Fatalf("gap %+v: %+v split into %+v, %+v", g, pc, halves[0], halves[1])
			}
		}
	}
}

// TestBackfillPlan_CreditsWhatThePiecesHold: each piece carries the points
// its file holds, never summing past what the gap declared; a shortfall
// (points the node's retention dropped) stays a shortfall; a gap of
// unknown count credits what the files hold; a refused piece's credit is
// computed again when it is rebuilt.
func TestBackfillPlan_CreditsWhatThePiecesHold(t *testing.T) {
	plan := func(declared int64) *backfillPlan {
		p := &backfillPlan{declared: declared}
		p.pieces = splitPiece(&backfillPiece{prev: 0, seq: 3, minT: 0, maxT: 299}, 3)
		return p
	}
	send := func(p *backfillPlan, i int, filePoints int64) int64 {
		pc := p.pieces[i]
		pc.points = p.credit(pc, filePoints)
		pc.inflight = true
		return pc.points
	}
	p := plan(100)
	// Files may hold points of neighbouring segments: capped at the gap.
	if a, b, c := send(p, 0, 40), send(p, 1, 50), send(p, 2, 30); a != 40 || b != 50 || c != 10 || p.credited() != 100 {
		t.Fatalf("credits %d %d %d, total %d; want 40 50 10, 100", a, b, c, p.credited())
	}
	p = plan(100)
	if send(p, 0, 20); send(p, 1, 20) != 20 || send(p, 2, 20) != 20 || p.credited() != 60 {
		t.Fatalf("a shortfall: credited %d, want 60", p.credited())
	}
	p = plan(-1)
	if send(p, 0, 7); send(p, 1, 8) != 8 || p.credited() != 15 {
		t.Fatalf("unknown count: credited %d, want 15", p.credited())
	}
	p = plan(100)
	send(p, 0, 90)
	send(p, 1, 30)               // 10
	p.pieces[0].inflight = false // refused: rebuilt later
	if got := send(p, 2, 50); got != 50 {
		t.Fatalf("after a refusal the others may take %d, want 50 (100 - 10 in flight, file 50)", got)
	}
	if got := send(p, 0, 90); got != 40 {
		t.Fatalf("the refused piece rebuilt: %d, want 40", got)
	}
}
