package aggregate_test

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

func TestDist_KnownValues(t *testing.T) {
	ten := func() []float64 { return []float64{7, 3, 10, 1, 9, 2, 8, 4, 6, 5} }
	for _, tc := range []struct {
		name string
		d    aggregate.Dist
		vs   []float64
		want float64
	}{
		{"p50 of 1..10 interpolates", aggregate.Dist{Kind: aggregate.DistPercentile, P: 50}, ten(), 5.5},
		{"p75 of 1..10", aggregate.Dist{Kind: aggregate.DistPercentile, P: 75}, ten(), 8.25},
		{"p90 of 1..10", aggregate.Dist{Kind: aggregate.DistPercentile, P: 90}, ten(), 9.9},
		{"p99 of 1..10 is the largest", aggregate.Dist{Kind: aggregate.DistPercentile, P: 99}, ten(), 10},
		{"p5 of 1..10 is the smallest", aggregate.Dist{Kind: aggregate.DistPercentile, P: 5}, ten(), 1},
		{"p50 of one value", aggregate.Dist{Kind: aggregate.DistPercentile, P: 50}, []float64{4}, 4},
		{"dev population", aggregate.Dist{Kind: aggregate.DistDev}, []float64{2, 4, 4, 4, 5, 5, 7, 9}, 2},
		{"dev of one value", aggregate.Dist{Kind: aggregate.DistDev}, []float64{3}, 0},
	} {
		if got := tc.d.Value(tc.vs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if !math.IsNaN((aggregate.Dist{Kind: aggregate.DistDev}).Value(nil)) {
		t.Error("dev of nothing is not NaN")
	}
}

// naivePercentile is the legacy Commons Math estimate written from its
// definition: the value at 1-based rank pos = p(n+1)/100, clamped, by
// linear interpolation between neighbours.
func naivePercentile(vs []float64, p float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	pos := p * float64(len(s)+1) / 100
	switch {
	case pos < 1:
		return s[0]
	case pos >= float64(len(s)):
		return s[len(s)-1]
	}
	k := int(pos)
	return s[k-1] + (pos-float64(k))*(s[k]-s[k-1])
}

// naiveDev is the two-pass population standard deviation.
func naiveDev(vs []float64) float64 {
	var sum float64
	for _, v := range vs {
		sum += v
	}
	mean := sum / float64(len(vs))
	var sq float64
	for _, v := range vs {
		sq += (v - mean) * (v - mean)
	}
	return math.Sqrt(sq / float64(len(vs)))
}

// TestDist_OracleGroupsAndDownsample holds Groups and DownsampleDist with
// a Dist to the naive folds over random series.
func TestDist_OracleGroupsAndDownsample(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, d := range []aggregate.Dist{{Kind: aggregate.DistDev}, {Kind: aggregate.DistPercentile, P: 50},
		{Kind: aggregate.DistPercentile, P: 75}, {Kind: aggregate.DistPercentile, P: 90}, {Kind: aggregate.DistPercentile, P: 95},
		{Kind: aggregate.DistPercentile, P: 99}, {Kind: aggregate.DistPercentile, P: 99.9}} {
		naive := func(vs []float64) float64 {
			if d.Kind == aggregate.DistDev {
				return naiveDev(vs)
			}
			return naivePercentile(vs, d.P)
		}
		g := aggregate.NewGroups(aggregate.GroupOptions{By: []string{"host"}, Func: rollup.FuncSum, Dist: &d})
		want := map[string]map[int64][]float64{}
		for s := range 12 {
			host := []string{"a", "b", "c"}[s%3]
			ls := labels.Labels{{Name: "__name__", Value: "m"}, {Name: "host", Value: host}, {Name: "i", Value: string(rune('a' + s))}}
			var ts []int64
			var vs []float64
			for tm := int64(0); tm < 2000; tm += int64(1 + rng.IntN(40)) {
				ts, vs = append(ts, tm), append(vs, math.Round(rng.NormFloat64()*100)/4)
			}
			// Downsampled per series, then grouped.
			dts, dvs := aggregate.DownsampleDist(ts, vs, 300, 0, d)
			buckets := map[int64][]float64{}
			for i, tm := range ts {
				b := tm / 300 * 300
				buckets[b] = append(buckets[b], vs[i])
			}
			if len(dts) != len(buckets) {
				t.Fatalf("%v: %d buckets, want %d", d, len(dts), len(buckets))
			}
			for i, b := range dts {
				if w := naive(buckets[b]); math.Abs(dvs[i]-w) > 1e-9 {
					t.Fatalf("%v seed %d: bucket %d = %v, want %v", d, seed, b, dvs[i], w)
				}
			}
			g.Add(ls, dts, dvs)
			if want[host] == nil {
				want[host] = map[int64][]float64{}
			}
			for i, b := range dts {
				want[host][b] = append(want[host][b], dvs[i])
			}
		}
		for _, gr := range g.Result() {
			host := gr.Labels.Get("host")
			if len(gr.Ts) != len(want[host]) {
				t.Fatalf("%v: group %s has %d cells, want %d", d, host, len(gr.Ts), len(want[host]))
			}
			for i, tm := range gr.Ts {
				if w := naive(want[host][tm]); math.Abs(gr.Vs[i]-w) > 1e-9 {
					t.Fatalf("%v seed %d: group %s at %d = %v, want %v", d, seed, host, tm, gr.Vs[i], w)
				}
			}
		}
	}
}
