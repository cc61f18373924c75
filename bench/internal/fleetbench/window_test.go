package fleetbench

import (
	"testing"
	"time"
)

func TestWindow_CountsOnlyWhatFallsInIt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	var w window
	w.sealed(at(-1), 100) // before the window: not offered
	w.open(at(0))
	w.acked(at(1), pendingSeg{seq: 1, points: 100, at: at(-1)}) // sealed before: no lag, but acknowledged in it
	w.sealed(at(2), 50)
	w.acked(at(2.5), pendingSeg{seq: 2, points: 50, at: at(2)}) // lag 0.5
	w.sealed(at(4), 50)
	w.sealed(at(6), 50)
	w.acked(at(7), pendingSeg{seq: 3, points: 50, at: at(4)}) // lag 3
	if d := w.close(at(10)); d != 10*time.Second {
		t.Fatalf("window of %v", d)
	}
	w.sealed(at(11), 50)                                        // after: not offered
	w.acked(at(12), pendingSeg{seq: 5, points: 50, at: at(11)}) // after: nothing
	if !w.sealedIn(at(6)) || w.sealedIn(at(11)) || w.sealedIn(at(-1)) {
		t.Fatal("sealedIn is wrong about the window's bounds")
	}
	w.unresolved(at(16), []pendingSeg{{seq: 4, points: 50, at: at(6)}}) // lag 10, unresolved

	var r RunResult
	w.fill(&r, shipperTotals{gapPoints: 7, refusals: 2, shippedBytes: 300, shippedPoints: 200},
		measurement{cpu0: time.Second, cpu1: 3 * time.Second, load: [2]float64{0.5, 1.5}, elapsed: 10})
	if r.LagSegments != 3 || r.LagUnresolved != 1 || r.LagP50S != 3 || r.LagMaxS != 10 {
		t.Errorf("lags: %d segments, %d unresolved, p50 %v, max %v; want 3, 1, 3, 10", r.LagSegments, r.LagUnresolved, r.LagP50S, r.LagMaxS)
	}
	if r.PointsPerS != 20 || r.SegmentsPerS != 0.3 || r.OfferedPointsPerS != 15 || r.OfferedSegmentsPerS != 0.3 {
		t.Errorf("rates: acked %v pts/s %v seg/s, offered %v pts/s %v seg/s; want 20, 0.3, 15, 0.3",
			r.PointsPerS, r.SegmentsPerS, r.OfferedPointsPerS, r.OfferedSegmentsPerS)
	}
	if r.GapPoints != 7 || r.Refusals != 2 || r.BytesPerPointShipped != 1.5 || r.EdgesCores != 0.2 || r.WindowS != 10 || r.LoadAvg1 != [2]float64{0.5, 1.5} {
		t.Errorf("totals: %+v", r)
	}
}
