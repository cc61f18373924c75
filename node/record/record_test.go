package record

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/internal/binread"
)

type run struct {
	id uint64
	ts []int64
	vs []float64
}

func decodeAll(t testing.TB, b []byte) (map[uint64][]byte, []run, error) {
	var d Decoder
	defs := map[uint64][]byte{}
	var runs []run
	err := d.Decode(b, func(id uint64, key []byte) error {
		defs[id] = bytes.Clone(key)
		return nil
	}, func(id uint64, ts []int64, vs []float64) error {
		runs = append(runs, run{id, slices.Clone(ts), slices.Clone(vs)})
		return nil
	})
	return defs, runs, err
}

func TestRecord_RoundTrip(t *testing.T) {
	cases := []struct {
		name string
		defs map[uint64]string
		runs []run
	}{
		{"empty", nil, nil},
		{"defs only", map[uint64]string{7: "abc"}, nil},
		{"one run", map[uint64]string{1: "k1"}, []run{{1, []int64{100, 200, 300}, []float64{1, 2, 3}}}},
		{"unsorted and duplicate", nil, []run{{3, []int64{300, 100, 100, math.MinInt64 + 5}, []float64{1, math.NaN(), math.Inf(-1), math.Copysign(0, -1)}}}},
		{"many runs", map[uint64]string{1: "a", 2: "b"}, []run{{1, []int64{1}, []float64{1}}, {2, []int64{-5, 5}, []float64{2, 3}}, {1, []int64{2}, []float64{4}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e Encoder
			e.Reset()
			for _, id := range slices.Sorted(mapsKeys(c.defs)) {
				e.DefineSeries(id, []byte(c.defs[id]))
			}
			var points int64
			for _, r := range c.runs {
				e.AddRun(r.id, r.ts, r.vs)
				points += int64(len(r.ts))
			}
			if e.Points() != points {
				t.Fatalf("Points()=%d want %d", e.Points(), points)
			}
			defs, runs, err := decodeAll(t, e.AppendTo(nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(defs) != len(c.defs) {
				t.Fatalf("defs %v want %v", defs, c.defs)
			}
			for id, k := range c.defs {
				if string(defs[id]) != k {
					t.Fatalf("def %d = %q want %q", id, defs[id], k)
				}
			}
			if len(runs) != len(c.runs) {
				t.Fatalf("%d runs want %d", len(runs), len(c.runs))
			}
			for i, r := range runs {
				w := c.runs[i]
				if r.id != w.id || !slices.Equal(r.ts, w.ts) || len(r.vs) != len(w.vs) {
					t.Fatalf("run %d = %+v want %+v", i, r, w)
				}
				for j := range r.vs {
					if math.Float64bits(r.vs[j]) != math.Float64bits(w.vs[j]) {
						t.Fatalf("run %d value %d = %v want %v", i, j, r.vs[j], w.vs[j])
					}
				}
			}
		})
	}
}

func mapsKeys(m map[uint64]string) func(func(uint64) bool) {
	return func(yield func(uint64) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestRecord_TruncationIsCorrupt(t *testing.T) {
	var e Encoder
	e.Reset()
	e.DefineSeries(1, []byte("key"))
	e.AddRun(1, []int64{1, 2, 3}, []float64{1, 2, 3})
	b := e.AppendTo(nil)
	for i := 0; i < len(b); i++ {
		if _, _, err := decodeAll(t, b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: err=%v, want ErrCorrupt", i, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	var e Encoder
	e.Reset()
	e.DefineSeries(1, []byte("key"))
	e.AddRun(1, []int64{1, 2, 3}, []float64{1, 2, 3})
	f.Add(e.AppendTo(nil))
	f.Add([]byte{1, 0, 1, 1, 200, 1})
	e.SetKind(KindCompressed)
	e.DefineSeries(1, []byte{1, 1, 'a', 1, 'b'})
	e.DefineSeries(2, []byte("literal"))
	e.AddRun(1, []int64{3, 1, 2, 2}, []float64{1, 2, 3, 4})
	f.Add(e.AppendTo(nil))
	e.SetKind(KindSamples)
	f.Fuzz(func(t *testing.T, b []byte) {
		defs, runs, err := decodeAll(t, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		// Re-encode what decoded: it must decode to the same again.
		var e Encoder
		e.Reset()
		for id, k := range defs {
			e.DefineSeries(id, k)
		}
		for _, r := range runs {
			e.AddRun(r.id, r.ts, r.vs)
		}
		_, runs2, err := decodeAll(t, e.AppendTo(nil))
		if err != nil || len(runs2) != len(runs) {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
	})
}

// TestEncoder_SizesArePredictedExactly: Len is the payload's length, and
// DefBytes and FitRun say exactly what DefineSeries and AddRun add (plus
// the growth of the counts), for random ids, keys and timestamps,
// including counts that cross a varint boundary.
func TestEncoder_SizesArePredictedExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var e Encoder
	for iter := range 300 {
		if iter%50 == 0 {
			e.Reset()
		}
		if e.Len() != len(e.AppendTo(nil)) {
			t.Fatalf("Len %d, payload %d bytes", e.Len(), len(e.AppendTo(nil)))
		}
		id := rng.Uint64() >> rng.IntN(64)
		if rng.IntN(3) == 0 {
			key := make([]byte, rng.IntN(300))
			before, cnt := e.Len(), binread.UvarintLen(uint64(e.nDefs+1))-binread.UvarintLen(uint64(e.nDefs))
			e.DefineSeries(id, key)
			if got, want := e.Len()-before, DefBytes(id, key)+cnt; got != want {
				t.Fatalf("DefineSeries added %d bytes, predicted %d", got, want)
			}
			continue
		}
		ts := make([]int64, 1+rng.IntN(300))
		for i := range ts {
			ts[i] = rng.Int64N(1<<uint(1+rng.IntN(62))) - 1<<40
		}
		budget := rng.IntN(4000)
		n, b := FitRun(id, ts, budget)
		if n > 0 && b > budget || n == 0 && b != 0 {
			t.Fatalf("FitRun(budget %d) = %d samples in %d bytes", budget, n, b)
		}
		if n < len(ts) {
			// One more sample must not fit.
			if n2, _ := FitRun(id, ts[:n+1], budget); n2 != n {
				t.Fatalf("FitRun fits %d of %d, but %d of the first %d", n, len(ts), n2, n+1)
			}
		}
		if n == 0 {
			continue
		}
		before, cnt := e.Len(), binread.UvarintLen(uint64(e.nRuns+1))-binread.UvarintLen(uint64(e.nRuns))
		e.AddRun(id, ts[:n], make([]float64, n))
		if got := e.Len() - before; got != b+cnt {
			t.Fatalf("AddRun of %d samples added %d bytes, FitRun said %d (+%d count)", n, got, b, cnt)
		}
	}
}
