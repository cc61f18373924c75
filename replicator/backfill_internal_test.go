package replicator

import (
	"math"
	"testing"

	"github.com/tributarydb/tributary/replicator/internal/cursor"
)

// TestPlanBackfill_PiecesCoverTheGapExactly: whatever the gap, the pieces
// cover its sequence numbers and its time span exactly, in order, each
// non-empty, with the gap's points on the last; halving a piece keeps
// that.
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
				if pc.points != 0 && i != len(pieces)-1 {
					t.Fatalf("gap %+v, %s: points on piece %d of %d", g, what, i, len(pieces))
				}
				points += pc.points
				prev, t0 = pc.seq, pc.maxT+1
			}
			if prev != g.Through || pieces[len(pieces)-1].maxT != g.MaxT || points != max(g.Points, 0) {
				t.Fatalf("gap %+v, %s: pieces end at (%d, %d) with %d points", g, what, prev, pieces[len(pieces)-1].maxT, points)
			}
		}
		check(p.pieces, "plan")
		if pc := p.pieces[0]; pc.canSplit() {
			halves := splitPiece(pc, 2)
			if halves[0].prev != pc.prev || halves[1].seq != pc.seq || halves[0].seq != halves[1].prev ||
				halves[0].minT != pc.minT || halves[1].maxT != pc.maxT || halves[0].maxT+1 != halves[1].minT ||
				halves[0].points+halves[1].points != pc.points {
				t.Fatalf("gap %+v: %+v split into %+v, %+v", g, pc, halves[0], halves[1])
			}
		}
	}
}
