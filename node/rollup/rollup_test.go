package rollup

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestAgg_MergeOfPartsEqualsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		n := 1 + rng.IntN(50)
		var whole, left, right Agg
		cut := rng.IntN(n + 1)
		perm := rng.Perm(n)
		for i, p := range perm {
			ts := int64(p) * 1000
			v := float64(rng.IntN(1000)) - 500
			whole.Add(ts, v)
			if i < cut {
				left.Add(ts, v)
			} else {
				right.Add(ts, v)
			}
		}
		left.Merge(right)
		if left != whole {
			t.Fatalf("round %d: merged %+v, whole %+v", round, left, whole)
		}
	}
}

func TestAgg_EncodingRoundTrip(t *testing.T) {
	cases := []struct {
		name    string
		bucket  int64
		samples [][2]float64
	}{
		{"one", 3600_000, [][2]float64{{3600_500, 1.5}}},
		{"negative bucket", -7200_000, [][2]float64{{-7100_000, -2}, {-7000_000, math.Inf(1)}}},
		{"many", 0, [][2]float64{{10, 3}, {5, 1}, {70, 9}, {20, -4}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var a Agg
			for _, s := range c.samples {
				a.Add(int64(s[0]), s[1])
			}
			got, err := Decode(a.AppendBinary(nil, c.bucket), c.bucket)
			if err != nil {
				t.Fatal(err)
			}
			if got != a {
				t.Fatalf("got %+v want %+v", got, a)
			}
		})
	}
}

func TestDecode_RejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, {0}, {1}, {1, 0, 0, 1, 2, 3}, make([]byte, 100)} {
		if _, err := Decode(b, 0); err == nil {
			t.Errorf("Decode(%x) succeeded", b)
		}
	}
}

func TestBucketStart(t *testing.T) {
	cases := []struct{ t, step, want int64 }{
		{0, Hour, 0}, {Hour - 1, Hour, 0}, {Hour, Hour, Hour}, {-1, Hour, -Hour}, {-Hour, Hour, -Hour},
	}
	for _, c := range cases {
		if got := BucketStart(c.t, c.step); got != c.want {
			t.Errorf("BucketStart(%d,%d)=%d want %d", c.t, c.step, got, c.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	var a Agg
	a.Add(5, 1)
	f.Add(a.AppendBinary(nil, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Decode(b, 1000)
		if err != nil {
			return
		}
		if a.Count <= 0 || a.LastT < a.FirstT {
			t.Fatalf("decoded inconsistent aggregate %+v", a)
		}
	})
}
