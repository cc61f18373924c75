package ackwatch

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPausesOverlappingTheWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	sources := []Source{{ID: "e1"}, {ID: "e2"}, {ID: "e3"}}
	adv := map[string][]time.Time{"e1": {at(0), at(1), at(2), at(6.5), at(7)}, "e2": {at(0), at(1)}}
	ps := pauses(sources, adv, at(8), time.Time{}, time.Time{})
	if len(ps) != 2 || ps[0].Edge != "e2" || ps[0].Pause != 7*time.Second || ps[1].Edge != "e1" || ps[1].Pause != 4500*time.Millisecond {
		t.Fatalf("pauses %v: want e2 7s (open until the stop), e1 4.5s", ps)
	}
	ps = pauses(sources, adv, at(8), at(6.6), at(8))
	if ps[0].Edge != "e2" || ps[1].Pause != time.Second {
		t.Fatalf("pauses within [6.6, 8]: %v", ps)
	}
}

func TestWatchRecordsAdvancesSkipsAndErrors(t *testing.T) {
	var n atomic.Int64
	moving := Source{ID: "moving", Read: func(context.Context) (float64, bool, error) { return float64(n.Add(1)), true, nil }}
	stuck := Source{ID: "stuck", Read: func(context.Context) (float64, bool, error) { return 5, true, nil }}
	down := Source{ID: "down", Read: func(context.Context) (float64, bool, error) { return 0, false, nil }}
	failing := Source{ID: "failing", Read: func(context.Context) (float64, bool, error) { return 0, false, errors.New("boom") }}
	w := Start(2*time.Millisecond, moving, stuck, down, failing)
	time.Sleep(50 * time.Millisecond)
	w.Stop()
	acks := w.Acks()
	if acks["moving"] < 3 || acks["stuck"] != 1 || acks["down"] != 0 || acks["failing"] != 0 {
		t.Errorf("acks %v: want several for moving, one for stuck, none for the others", acks)
	}
	if w.Errors() < 3 {
		t.Errorf("errors %d, want one per round of the failing source", w.Errors())
	}
	ps := w.Pauses(time.Time{}, time.Time{})
	if len(ps) != 2 || ps[0].Edge != "stuck" {
		t.Errorf("pauses %v: want stuck's (open since its one advance) first, then moving's", ps)
	}
}
