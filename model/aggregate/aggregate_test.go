package aggregate_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

func TestBucketStart_ShiftsBucketsByTheOffset(t *testing.T) {
	for _, tc := range []struct {
		name             string
		t, step, off, at int64
	}{
		{"epoch aligned", 125, 60, 0, 120},
		{"on an edge", 120, 60, 0, 120},
		{"negative time", -1, 60, 0, -60},
		{"offset", 125, 60, 7, 67},
		{"just before a shifted edge", 126, 60, 7, 67},
		{"on a shifted edge", 127, 60, 7, 127},
		{"offset beyond the step", 125, 60, 67, 67},
		{"negative offset", 125, 60, -53, 67},
		{"negative time and offset", -100, 60, 7, -113},
	} {
		if got := aggregate.BucketStart(tc.t, tc.step, tc.off); got != tc.at {
			t.Errorf("%s: BucketStart(%d, %d, %d) = %d, want %d", tc.name, tc.t, tc.step, tc.off, got, tc.at)
		}
	}
	if got := aggregate.Offset(-1, 60); got != 59 {
		t.Errorf("Offset(-1, 60) = %d, want 59", got)
	}
	if got := aggregate.Offset(5, 0); got != 0 {
		t.Errorf("Offset(5, 0) = %d, want 0", got)
	}
}

func TestDownsample_KeepsBucketsWithSamplesInOrder(t *testing.T) {
	ts := []int64{-5, 0, 9, 10, 31, 32}
	vs := []float64{1, 2, 3, 4, 5, math.NaN()}
	for _, tc := range []struct {
		fn     rollup.Func
		off    int64
		wantTs []int64
		wantVs []float64
	}{
		{rollup.FuncSum, 0, []int64{-10, 0, 10, 30}, []float64{1, 5, 4, math.NaN()}},
		{rollup.FuncCount, 0, []int64{-10, 0, 10, 30}, []float64{1, 2, 1, 2}},
		{rollup.FuncFirst, 0, []int64{-10, 0, 10, 30}, []float64{1, 2, 4, 5}},
		{rollup.FuncLast, 0, []int64{-10, 0, 10, 30}, []float64{1, 3, 4, math.NaN()}},
		{rollup.FuncMax, 0, []int64{-10, 0, 10, 30}, []float64{1, 3, 4, 5}}, // a later NaN is passed over
		{rollup.FuncMin, 1, []int64{-9, 1, 31}, []float64{1, 3, 5}},
		{rollup.FuncAvg, 1, []int64{-9, 1, 31}, []float64{1.5, 3.5, math.NaN()}},
	} {
		gotTs, gotVs := aggregate.Downsample(ts, vs, 10, tc.off, tc.fn)
		if !slices.Equal(gotTs, tc.wantTs) || !sameFloats(gotVs, tc.wantVs) {
			t.Errorf("%s offset %d: %v %v, want %v %v", tc.fn, tc.off, gotTs, gotVs, tc.wantTs, tc.wantVs)
		}
	}
	if ts, vs := aggregate.Downsample(nil, nil, 10, 0, rollup.FuncSum); ts != nil || vs != nil {
		t.Errorf("no samples: %v %v", ts, vs)
	}
}

// set is a label set without a metric name (a group's labels).
func set(kv ...string) labels.Labels {
	var ls labels.Labels
	for i := 0; i < len(kv); i += 2 {
		ls = append(ls, labels.Label{Name: kv[i], Value: kv[i+1]})
	}
	return ls
}

func sameFloats(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) })
}

func TestGroups_FoldsSeriesPerTimestampInTheOrderAdded(t *testing.T) {
	a := labels.FromStrings("__name__", "cpu", "dc", "a", "host", "1")
	b := labels.FromStrings("__name__", "cpu", "dc", "a", "host", "2")
	c := labels.FromStrings("__name__", "cpu", "host", "3") // no dc
	add := func(g *aggregate.Groups) int {
		n := g.Add(a, []int64{10, 20}, []float64{1, math.NaN()})
		n += g.Add(b, []int64{10, 30}, []float64{2, 5})
		n += g.Add(c, []int64{10}, []float64{7})
		return n
	}
	for _, tc := range []struct {
		name string
		o    aggregate.GroupOptions
		want []aggregate.Group
	}{
		{"last by dc", aggregate.GroupOptions{By: []string{"dc", "dc"}, Func: rollup.FuncLast}, []aggregate.Group{
			{Key: "dc\x00\x00", Labels: nil, Ts: []int64{10}, Vs: []float64{7}},
			{Key: "dc\x00a\x00", Labels: set("dc", "a"), Ts: []int64{10, 20, 30}, Vs: []float64{2, math.NaN(), 5}},
		}},
		{"first of all", aggregate.GroupOptions{Func: rollup.FuncFirst}, []aggregate.Group{
			{Key: "", Ts: []int64{10, 20, 30}, Vs: []float64{1, math.NaN(), 5}},
		}},
		{"sum skipping NaN", aggregate.GroupOptions{Func: rollup.FuncSum, SkipNaN: true}, []aggregate.Group{
			{Key: "", Ts: []int64{10, 20, 30}, Vs: []float64{10, math.NaN(), 5}},
		}},
		{"count by host and dc", aggregate.GroupOptions{By: []string{"host", "dc"}, Func: rollup.FuncCount}, []aggregate.Group{
			{Key: "dc\x00\x00host\x003\x00", Labels: set("host", "3"), Ts: []int64{10}, Vs: []float64{1}},
			{Key: "dc\x00a\x00host\x001\x00", Labels: set("dc", "a", "host", "1"), Ts: []int64{10, 20}, Vs: []float64{1, 1}},
			{Key: "dc\x00a\x00host\x002\x00", Labels: set("dc", "a", "host", "2"), Ts: []int64{10, 30}, Vs: []float64{1, 1}},
		}},
	} {
		g := aggregate.NewGroups(tc.o)
		cells := add(g)
		got := g.Result()
		want := 0
		for _, w := range tc.want {
			want += len(w.Ts)
		}
		if cells != want || g.Cells() != want {
			t.Errorf("%s: %d cells added, %d held, want %d", tc.name, cells, g.Cells(), want)
		}
		if !slices.EqualFunc(got, tc.want, func(x, y aggregate.Group) bool {
			return x.Key == y.Key && labels.Equal(x.Labels, y.Labels) && slices.Equal(x.Ts, y.Ts) && sameFloats(x.Vs, y.Vs)
		}) {
			t.Errorf("%s: %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// TestIntersectAndSubtract_MatchSetsOfAMap compares the merges of sorted
// lists with sets computed through a map, on random lists, also when the
// result is written over the first list.
func TestIntersectAndSubtract_MatchSetsOfAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 1))
	list := func() []uint64 {
		set := map[uint64]bool{}
		for range rng.IntN(40) {
			set[rng.Uint64N(60)] = true
		}
		out := make([]uint64, 0, len(set))
		for x := range set {
			out = append(out, x)
		}
		slices.Sort(out)
		return out
	}
	for range 500 {
		a, b := list(), list()
		inB := map[uint64]bool{}
		for _, x := range b {
			inB[x] = true
		}
		var both, only []uint64
		for _, x := range a {
			if inB[x] {
				both = append(both, x)
			} else {
				only = append(only, x)
			}
		}
		if got := aggregate.Intersect(nil, a, b); !slices.Equal(got, both) {
			t.Fatalf("Intersect(%v, %v) = %v, want %v", a, b, got, both)
		}
		if got := aggregate.Subtract(nil, a, b); !slices.Equal(got, only) {
			t.Fatalf("Subtract(%v, %v) = %v, want %v", a, b, got, only)
		}
		inPlace := slices.Clone(a)
		if got := aggregate.Intersect(inPlace[:0], inPlace, b); !slices.Equal(got, both) {
			t.Fatalf("Intersect in place(%v, %v) = %v, want %v", a, b, got, both)
		}
		inPlace = slices.Clone(a)
		if got := aggregate.Subtract(inPlace[:0], inPlace, b); !slices.Equal(got, only) {
			t.Fatalf("Subtract in place(%v, %v) = %v, want %v", a, b, got, only)
		}
	}
}
