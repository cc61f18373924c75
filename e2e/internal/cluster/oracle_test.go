package cluster

import (
	"testing"
)

func TestCovers_RunsHoldEveryNumber(t *testing.T) {
	runs := []SeqRun{{1, 5}, {6, 9}, {12, 20}}
	for _, c := range [][2]uint64{{1, 9}, {3, 4}, {1, 10}, {10, 11}, {12, 20}, {9, 12}, {21, 21}, {1, 20}} {
		c := struct{ first, last uint64 }{c[0], c[1]}
		want := c.first >= 12 && c.last <= 20 || c.last <= 9
		if got := Covers(runs, c.first, c.last); got != want {
			t.Errorf("Covers(%v, %d, %d) = %v, want %v", runs, c.first, c.last, got, want)
		}
	}
	if Covers(nil, 1, 1) {
		t.Error("no runs cover 1")
	}
}

func TestCompareWindow_OnlyTheWindowIsWanted(t *testing.T) {
	l := NewLedger()
	ts := []int64{100, 101, 102, 103, 104}
	vs := make([]float64, len(ts))
	for i, x := range ts {
		vs[i] = Value("a", x)
	}
	l.Ack("a", ts, vs)
	l.Doubt("a", []int64{105}, []float64{Value("a", 105)})
	if l.NewestAckedMs() != 104 || l.OldestAckedMs() != 100 || l.AckedIn(101, 103) != 3 {
		t.Fatalf("bounds %d..%d, %d in [101, 103]", l.OldestAckedMs(), l.NewestAckedMs(), l.AckedIn(101, 103))
	}
	pts := func(xs ...int64) RawAnswer {
		a := RawAnswer{Points: map[string][]Sample{}}
		for _, x := range xs {
			a.Points["a"] = append(a.Points["a"], Sample{x, Value("a", x)})
		}
		return a
	}
	for _, c := range []struct {
		name                          string
		ans                           RawAnswer
		lost, dup, phantom, wrong, in int
	}{
		{"exact window", pts(101, 102, 103), 0, 0, 0, 0, 0},
		{"one missing", pts(101, 103), 1, 0, 0, 0, 0},
		{"outside the window", pts(100, 101, 102, 103), 0, 0, 1, 0, 0},
		{"duplicate", pts(101, 102, 102, 103), 0, 1, 0, 0, 0},
		{"wrong value", RawAnswer{Points: map[string][]Sample{"a": {{101, 1}, {102, Value("a", 102)}, {103, Value("a", 103)}}}}, 0, 0, 0, 1, 0},
	} {
		r := CompareWindow(c.ans, l, 101, 103)
		if r.Lost != c.lost || r.Duplicated != c.dup || r.Phantom != c.phantom || r.WrongValue != c.wrong || r.InDoubt != c.in {
			t.Errorf("%s: %v", c.name, r)
		}
	}
	if r := CompareWindow(pts(104, 105), l, 104, 110); !r.OK() || r.InDoubt != 1 {
		t.Errorf("in-doubt point in the window: %v", r)
	}
}

func TestCounts_NaiveDailyCounts(t *testing.T) {
	l := NewLedger()
	day := int64(86_400_000)
	ts := []int64{day - 1, day, day + 5, 3*day + 7}
	vs := make([]float64, len(ts))
	l.Ack("a", ts, vs)
	got := l.Counts(0, 4*day, day)
	want := map[string]map[int64]float64{"a": {0: 1, day: 2, 3 * day: 1}}
	if diffs, n := DiffCounts(got, want, 10); n != 0 {
		t.Fatalf("counts %v: %v", got, diffs)
	}
	got["a"][day] = 3
	got["b"] = map[int64]float64{0: 1}
	if _, n := DiffCounts(got, want, 10); n != 2 {
		t.Fatalf("DiffCounts found %d differences, want 2", n)
	}
}
