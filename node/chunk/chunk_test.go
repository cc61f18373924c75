package chunk

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// sameBits reports whether two value slices are equal bit for bit (so NaN
// payloads and -0.0 count).
func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

func sameInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkRoundTrip encodes the samples and checks that every way of reading
// the chunk gives them back bit for bit. It returns the chunk.
func checkRoundTrip(t testing.TB, ts []int64, vs []float64) []byte {
	t.Helper()
	prefix := []byte("prefix")
	b := Encode(append([]byte(nil), prefix...), ts, vs)
	if string(b[:len(prefix)]) != string(prefix) {
		t.Fatalf("Encode overwrote dst")
	}
	b = b[len(prefix):]

	// Decode appends after what the slices hold.
	gotTs, gotVs, err := Decode(b, []int64{7}, []float64{7})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if gotTs[0] != 7 || gotVs[0] != 7 {
		t.Fatalf("Decode overwrote the slices' existing samples")
	}
	gotTs, gotVs = gotTs[1:], gotVs[1:]
	if !sameInts(gotTs, ts) {
		t.Fatalf("timestamps differ:\n got %v\nwant %v", head(gotTs), head(ts))
	}
	if !sameBits(gotVs, vs) {
		t.Fatalf("values differ:\n got %v\nwant %v", head(gotVs), head(vs))
	}

	n, minT, maxT, err := Info(b)
	if err != nil || n != len(ts) || minT != ts[0] || maxT != ts[len(ts)-1] {
		t.Fatalf("Info = %d, %d, %d, %v; want %d, %d, %d", n, minT, maxT, err, len(ts), ts[0], ts[len(ts)-1])
	}

	it := NewIterator(b)
	i := 0
	for it.Next() {
		tt, v := it.At()
		if i >= len(ts) || tt != ts[i] || math.Float64bits(v) != math.Float64bits(vs[i]) {
			t.Fatalf("Iterator sample %d = (%d, %v), want (%d, %v)", i, tt, v, ts[min(i, len(ts)-1)], vs[min(i, len(vs)-1)])
		}
		i++
	}
	if it.Err() != nil || i != len(ts) {
		t.Fatalf("Iterator stopped after %d of %d samples: %v", i, len(ts), it.Err())
	}
	return b
}

func head[T any](s []T) []T { return s[:min(len(s), 10)] }

func seq(n int, f func(i int) int64) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

func vals(n int, f func(i int) float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

func regular(n int) []int64 { return seq(n, func(i int) int64 { return startMs + int64(i)*15_000 }) }

func TestEncode_RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	nan1 := math.Float64frombits(0x7ff8_0000_0000_0001) // quiet NaN with a payload
	snan := math.Float64frombits(0x7ff0_0000_0000_0001) // signalling NaN
	negNaN := math.Float64frombits(0xfff8_0000_0000_0000)
	tests := []struct {
		name string
		ts   []int64
		vs   []float64
	}{
		{"single sample", []int64{startMs}, []float64{21.5}},
		{"single NaN", []int64{-5}, []float64{math.NaN()}},
		{"single negative zero", []int64{0}, []float64{math.Copysign(0, -1)}},
		{"single max int64", []int64{math.MaxInt64}, []float64{1}},
		{"single min int64", []int64{math.MinInt64}, []float64{-1}},
		{"two samples", []int64{1, 2}, []float64{1.5, 2.5}},
		{"constant", regular(120), vals(120, func(int) float64 { return 42.5 })},
		{"constant pi", regular(120), vals(120, func(int) float64 { return math.Pi })},
		{"constant NaN", regular(50), vals(50, func(int) float64 { return math.NaN() })},
		{"constant zero", regular(50), vals(50, func(int) float64 { return 0 })},
		{"regular", regular(1024), vals(1024, func(i int) float64 { return float64(i % 7) })},
		{"regular with gap", seq(100, func(i int) int64 {
			if i >= 50 {
				return int64(i+10) * 1000
			}
			return int64(i) * 1000
		}), vals(100, func(i int) float64 { return float64(i) })},
		{"irregular", seq(300, func(i int) int64 { return int64(i*i*37 + i) }), vals(300, func(i int) float64 { return float64(i) / 3 })},
		{"jittery", seq(500, func(i int) int64 { return startMs + int64(i)*10_000 + r.Int64N(41) - 20 }), walk(r, 500, 1, 213, 1)},
		{"negative timestamps", seq(200, func(i int) int64 { return -1_000_000 + int64(i)*9_999 }), walk(r, 200, 2, -500, 3)},
		{"timestamps across zero", seq(9, func(i int) int64 { return int64(i-4) * 3 }), vals(9, func(i int) float64 { return float64(i) })},
		{"min and max timestamps", []int64{math.MinInt64, math.MaxInt64}, []float64{1, 2}},
		{"deltas overflowing int64", []int64{math.MinInt64, math.MinInt64 + 1, math.MaxInt64 - 1, math.MaxInt64}, []float64{1, 2, 3, 4}},
		{"delta of delta overflowing", []int64{math.MinInt64, 0, 1, math.MaxInt64}, []float64{1, 1, 1, 1}},
		{"evenly spaced over the whole range", seq(4, func(i int) int64 { return math.MinInt64 + int64(i)*(math.MaxInt64/3*2) }), vals(4, func(i int) float64 { return float64(i) })},
		{"special floats", regular(9), []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, nan1, snan, negNaN, math.MaxFloat64}},
		{"negative zero among decimals", regular(5), []float64{1.5, 2.5, math.Copysign(0, -1), 3.5, 4.5}},
		{"NaN among decimals", regular(5), []float64{1.5, 2.5, math.NaN(), 3.5, 4.5}},
		{"subnormals", regular(6), []float64{math.SmallestNonzeroFloat64, 2 * math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 1e-310, 0, 1e-320}},
		{"huge and tiny exponents", regular(6), []float64{1e300, -1e300, 1e-300, math.MaxFloat64, -math.MaxFloat64, 1e308}},
		{"large integers", regular(5), []float64{1 << 52, 1<<53 - 1, -(1<<53 - 1), 1 << 53, 1<<53 + 2}},
		{"integers at the decimal limit", regular(3), []float64{1<<53 - 1, -(1<<53 - 1), 0}},
		{"15 fractional digits", regular(4), []float64{0.123456789012345, 0.000000000000001, -0.999999999999999, 0}},
		{"16 fractional digits", regular(3), []float64{0.1234567890123456, 0.5, 0.25}},
		{"decimal then noise", regular(200), vals(200, func(i int) float64 {
			if i < 150 {
				return float64(200+i%5) / 10
			}
			return r.NormFloat64()
		})},
		{"noise", regular(300), vals(300, func(int) float64 { return r.NormFloat64() * 1e3 })},
		{"random bits", regular(300), vals(300, func(int) float64 { return math.Float64frombits(r.Uint64()) })},
		{"alternating extremes", regular(100), vals(100, func(i int) float64 { return float64(i%2)*2e6 - 1e6 })},
		{"counter", regular(1024), vals(1024, func(i int) float64 { return float64(i * i) })},
		{"smooth", regular(600), vals(600, func(i int) float64 { return math.Round(1000*math.Sin(float64(i)/40)) / 100 })},
		{"sparse big jumps", regular(400), vals(400, func(i int) float64 { return float64(i/100) * 1e9 })},
		{"float32 values", regular(100), vals(100, func(int) float64 { return float64(float32(r.Float64())) })},
		{"max samples", seq(MaxSamples, func(i int) int64 { return int64(i) * 2 }), vals(MaxSamples, func(i int) float64 { return float64(i%1000) / 100 })},
	}
	for digits := range 7 {
		tests = append(tests, struct {
			name string
			ts   []int64
			vs   []float64
		}{fmt.Sprintf("decimal %d digits", digits), regular(240), walk(r, 240, digits, 123456, 50)})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRoundTrip(t, tt.ts, tt.vs)
			// Each value encoding alone must also round-trip.
			for enc := range numVal {
				b := encode(nil, tt.ts, tt.vs, 1<<enc)
				gotTs, gotVs, err := Decode(b, nil, nil)
				if err != nil || !sameInts(gotTs, tt.ts) || !sameBits(gotVs, tt.vs) {
					t.Fatalf("encoding %d alone: %v", enc, err)
				}
			}
		})
	}
}

func TestEncode_ChoosesTheSmallestEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		vs   []float64
		want uint8
	}{
		{"sensor decimals", walk(r, 120, 1, 213, 1), valDecimal},
		{"integers", vals(120, func(i int) float64 { return float64(i * 3) }), valDecimal},
		{"constant decimal", vals(120, func(int) float64 { return 1.5 }), valDecimal},
		{"constant pi", vals(120, func(int) float64 { return math.Pi }), valConst},
		{"constant NaN", vals(120, func(int) float64 { return math.NaN() }), valConst},
		{"noise", vals(120, func(int) float64 { return 20 + r.NormFloat64() }), valXOR},
		{"random bits", vals(120, func(int) float64 { return math.Float64frombits(r.Uint64()) }), valRaw},
		{"repeating pi then e", vals(120, func(i int) float64 { return []float64{math.Pi, math.E}[i/60] }), valXOR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Encode(nil, regular(len(tt.vs)), tt.vs)
			if got := b[0] & encMask; got != tt.want {
				t.Errorf("value encoding = %d, want %d", got, tt.want)
			}
			// And it is no bigger than any encoding alone.
			for enc := range numVal {
				if alone := encode(nil, regular(len(tt.vs)), tt.vs, 1<<enc); len(alone) < len(b) {
					t.Errorf("encoding %d alone takes %d bytes, the chosen one %d", enc, len(alone), len(b))
				}
			}
		})
	}
}

func TestEncode_PanicsOnBadInput(t *testing.T) {
	tests := []struct {
		name string
		ts   []int64
		vs   []float64
	}{
		{"no samples", nil, nil},
		{"length mismatch", []int64{1, 2}, []float64{1}},
		{"duplicate timestamp", []int64{1, 2, 2}, []float64{1, 2, 3}},
		{"decreasing timestamp", []int64{1, 3, 2}, []float64{1, 2, 3}},
		{"too many samples", make([]int64, MaxSamples+1), make([]float64, MaxSamples+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "BUG: ") {
					t.Fatalf("recovered %v, want a BUG: panic", r)
				}
			}()
			Encode(nil, tt.ts, tt.vs)
		})
	}
}

// randomSeries draws samples from a mix of shapes, including nasty ones.
func randomSeries(r *rand.Rand) ([]int64, []float64) {
	n := 1 + r.IntN(300)
	if r.IntN(10) == 0 {
		n = 1 + r.IntN(3)
	}
	ts := make([]int64, n)
	t := r.Int64() >> r.UintN(64)
	if r.IntN(2) == 0 {
		t = -t
	}
	step := int64(1) << r.UintN(20)
	for i := range ts {
		ts[i] = t
		var d int64
		switch r.IntN(4) {
		case 0:
			d = step
		case 1:
			d = step + r.Int64N(step+1)
		case 2:
			d = 1 + r.Int64N(1<<r.UintN(40))
		default:
			d = step
			if r.IntN(20) == 0 {
				d = step * int64(1+r.IntN(50))
			}
		}
		if t > math.MaxInt64-d-int64(n) {
			d = 1
		}
		t += d
	}
	vs := make([]float64, n)
	digits := r.IntN(7)
	m := r.Int64N(1_000_000) - 500_000
	kind := r.IntN(6)
	for i := range vs {
		switch kind {
		case 0: // decimal walk
			m += r.Int64N(5) - 2
			vs[i] = float64(m) / pow10[digits]
		case 1: // noise
			vs[i] = r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10))
		case 2: // random bits
			vs[i] = math.Float64frombits(r.Uint64())
		case 3: // mostly decimal, sometimes special
			vs[i] = float64(m+int64(i)) / pow10[digits]
			if r.IntN(30) == 0 {
				vs[i] = []float64{math.NaN(), math.Inf(1), math.Copysign(0, -1), 1e300}[r.IntN(4)]
			}
		case 4: // counter with resets
			m += r.Int64N(1000)
			if r.IntN(100) == 0 {
				m = 0
			}
			vs[i] = float64(m)
		default: // few distinct values
			vs[i] = []float64{0, 1, 2.5, -7}[r.IntN(4)]
		}
	}
	return ts, vs
}

func TestEncode_RandomRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(20260101, 1))
	runs := 3000
	if testing.Short() {
		runs = 300
	}
	for range runs {
		ts, vs := randomSeries(r)
		checkRoundTrip(t, ts, vs)
	}
}

func TestDecode_TruncatedOrExtendedIsCorrupt(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, s := range shapes {
		tss, vss := series(s, 120, 1)
		b := Encode(nil, tss[0], vss[0])
		t.Run(s.name, func(t *testing.T) {
			for l := range len(b) {
				if _, _, err := Decode(b[:l], nil, nil); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Decode of the first %d of %d bytes: %v, want ErrCorrupt", l, len(b), err)
				}
				it := NewIterator(b[:l])
				drain(it)
				if !errors.Is(it.Err(), ErrCorrupt) {
					t.Fatalf("Iterator over the first %d of %d bytes: %v, want ErrCorrupt", l, len(b), it.Err())
				}
			}
			for _, extra := range [][]byte{{0}, {1}, {0x80}, {0, 0, 0, 0, 0, 0, 0, 0, 0}} {
				if _, _, err := Decode(append(append([]byte(nil), b...), extra...), nil, nil); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Decode with %x appended: %v, want ErrCorrupt", extra, err)
				}
			}
			// Flipped bits must never panic; what decodes must be valid.
			for range 2000 {
				c := append([]byte(nil), b...)
				for range 1 + r.IntN(3) {
					c[r.IntN(len(c))] ^= 1 << r.UintN(8)
				}
				checkDecodeConsistent(t, c)
			}
		})
	}
}

// drain reads an iterator to the end and returns how many samples it gave.
func drain(it *Iterator) int {
	n := 0
	for it.Next() {
		n++
	}
	return n
}

// checkDecodeConsistent decodes arbitrary bytes. If Decode accepts them,
// the samples must be a valid chunk's: Info agrees, timestamps increase,
// the Iterator gives the same samples, and they encode and decode again.
func checkDecodeConsistent(t testing.TB, b []byte) {
	t.Helper()
	ts, vs, err := Decode(b, nil, nil)
	it := NewIterator(b)
	var its []int64
	var ivs []float64
	for it.Next() {
		tt, v := it.At()
		its, ivs = append(its, tt), append(ivs, v)
	}
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode error %v does not wrap ErrCorrupt", err)
		}
		if len(ts) != 0 || len(vs) != 0 {
			t.Fatalf("Decode returned samples with an error")
		}
		if !errors.Is(it.Err(), ErrCorrupt) {
			t.Fatalf("Decode failed with %v but the Iterator with %v", err, it.Err())
		}
		return
	}
	if it.Err() != nil || !sameInts(its, ts) || !sameBits(ivs, vs) {
		t.Fatalf("Iterator (%d samples, %v) disagrees with Decode (%d samples)", len(its), it.Err(), len(ts))
	}
	n, minT, maxT, err := Info(b)
	if err != nil || n != len(ts) || n != len(vs) || minT != ts[0] || maxT != ts[n-1] {
		t.Fatalf("Info = %d, %d, %d, %v; Decode gave %d samples from %d to %d", n, minT, maxT, err, len(ts), ts[0], ts[len(ts)-1])
	}
	for i := 1; i < n; i++ {
		if ts[i] <= ts[i-1] {
			t.Fatalf("decoded timestamps do not increase at %d: %d then %d", i, ts[i-1], ts[i])
		}
	}
	checkRoundTrip(t, ts, vs)
}

func TestDecode_CraftedCorruption(t *testing.T) {
	valid := Encode(nil, regular(3), []float64{1, 2, 3})
	xorChunk := Encode(nil, []int64{1, 5, 6}, []float64{math.Pi, math.E, 1})
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"unknown version", append([]byte{valid[0] + 1<<versionShift}, valid[1:]...), "version"},
		{"unknown value encoding", append([]byte{valid[0] | 0xf}, valid[1:]...), "value encoding"},
		{"zero samples", []byte{formatVersion << versionShift, 0, 0}, "sample count"},
		{"too many samples", []byte{formatVersion << versionShift, 0x81, 0x80, 0x04, 0}, "sample count"},
		{"unterminated count", []byte{formatVersion << versionShift, 0x80}, "sample count"},
		{"span too small", []byte{formatVersion<<versionShift | flagRegular | valConst, 3, 0, 1}, "span"},
		{"span past max int64", []byte{formatVersion<<versionShift | flagRegular | valConst, 2, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, "span"},
		{"uneven regular span", []byte{formatVersion<<versionShift | flagRegular | valConst, 3, 0, 3}, "multiple"},
		{"regular single sample", []byte{formatVersion<<versionShift | flagRegular | valConst, 1, 0}, "evenly"},
		{"values too short for the count", []byte{formatVersion<<versionShift | flagRegular | valRaw, 100, 0, 99, 0, 0, 0, 0, 0, 0, 0, 0}, "need at least"},
		{"timestamp stream past the end", append(append([]byte(nil), xorChunk[:4]...), 0x7f), "timestamp stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Decode(tt.b, nil, nil)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode: %v, want ErrCorrupt about %q", err, tt.want)
			}
		})
	}
}

func TestDecode_BadCountFailsBeforeAllocating(t *testing.T) {
	// A raw-value chunk claiming MaxSamples samples but holding one.
	b := []byte{formatVersion<<versionShift | flagRegular | valRaw, 0x80, 0x80, 0x04, 0, 0xff, 0xff, 0x03}
	b = append(b, make([]byte, 8)...)
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := Decode(b, nil, nil); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode: %v, want ErrCorrupt", err)
		}
	})
	// The error itself allocates a little; the samples would be 1 MiB.
	if allocs > 8 {
		t.Fatalf("Decode allocated %v times for a corrupt count", allocs)
	}
}

func TestInfo_ReadsOnlyTheHeader(t *testing.T) {
	b := Encode(nil, []int64{-7, 3, 1_000}, []float64{1, 2, 3})
	// Info does not look past the header, so a damaged body still answers.
	n, minT, maxT, err := Info(b[:5])
	if err != nil || n != 3 || minT != -7 || maxT != 1_000 {
		t.Fatalf("Info = %d, %d, %d, %v", n, minT, maxT, err)
	}
	if _, _, _, err := Info(nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Info(nil): %v, want ErrCorrupt", err)
	}
}

func TestDecode_KeepsSlicesOnError(t *testing.T) {
	ts, vs := []int64{1, 2}, []float64{3, 4}
	b := Encode(nil, regular(50), walk(rand.New(rand.NewPCG(1, 1)), 50, 1, 10, 1))
	gotTs, gotVs, err := Decode(b[:len(b)-1], ts, vs)
	if !errors.Is(err, ErrCorrupt) || !sameInts(gotTs, ts) || !sameBits(gotVs, vs) {
		t.Fatalf("Decode of a truncated chunk = %v, %v, %v; want the slices unchanged and ErrCorrupt", gotTs, gotVs, err)
	}
}

func TestIterator_ResetDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	var chunks [][]byte
	for _, s := range shapes {
		tss, vss := series(s, 200, 1)
		chunks = append(chunks, Encode(nil, tss[0], vss[0]))
	}
	it := NewIterator(chunks[0])
	allocs := testing.AllocsPerRun(50, func() {
		for _, c := range chunks {
			it.Reset(c)
			if drain(it) != 200 || it.Err() != nil {
				t.Fatalf("Iterator: %v", it.Err())
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("Reset and Next allocated %v times", allocs)
	}
}

func TestIterator_AfterTheEnd(t *testing.T) {
	it := NewIterator(Encode(nil, []int64{10, 20}, []float64{1, 2}))
	if drain(it) != 2 {
		t.Fatal("want 2 samples")
	}
	if it.Next() || it.Err() != nil {
		t.Fatalf("Next after the end = true or error %v", it.Err())
	}
	if tt, v := it.At(); tt != 20 || v != 2 {
		t.Fatalf("At after the end = %d, %v; want the last sample", tt, v)
	}
	it.Reset([]byte{0xff})
	if it.Next() || !errors.Is(it.Err(), ErrCorrupt) {
		t.Fatalf("Iterator over garbage: %v", it.Err())
	}
}

func TestEncode_DoesNotAllocateBeyondDst(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop scratch memory")
	}
	tss, vss := series(shapeByName("sensor-decimal"), 1024, 1)
	buf := Encode(nil, tss[0], vss[0])
	allocs := testing.AllocsPerRun(50, func() { buf = Encode(buf[:0], tss[0], vss[0]) })
	if allocs != 0 {
		t.Fatalf("Encode allocated %v times", allocs)
	}
}

func TestEncode_ConcurrentUse(t *testing.T) {
	// Encode shares pooled scratch memory; concurrent calls must not see
	// each other's.
	done := make(chan error)
	for g := range 4 {
		go func() {
			r := rand.New(rand.NewPCG(uint64(g), 99))
			var err error
			for range 200 {
				ts, vs := randomSeries(r)
				gotTs, gotVs, derr := Decode(Encode(nil, ts, vs), nil, nil)
				if derr != nil || !sameInts(gotTs, ts) || !sameBits(gotVs, vs) {
					err = fmt.Errorf("goroutine %d: round trip failed: %v", g, derr)
					break
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// TestIterator_NextBatchMixedWithNext reads every shape with Next and
// NextBatch chosen at random for each step: together they must return
// every sample once, in order, bit for bit, and end as Next does.
func TestIterator_NextBatchMixedWithNext(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, s := range shapes {
		for _, n := range []int{1, 2, 63, 64, 65, 200, 1024} {
			tss, vss := series(s, n, 1)
			it := NewIterator(Encode(nil, tss[0], vss[0]))
			var gotT []int64
			var gotV []float64
			for {
				if rng.IntN(2) == 0 {
					if !it.Next() {
						break
					}
					tm, v := it.At()
					gotT, gotV = append(gotT, tm), append(gotV, v)
					continue
				}
				ts, vs, ok := it.NextBatch()
				if !ok {
					break
				}
				if len(ts) == 0 || len(ts) != len(vs) {
					t.Fatalf("%s n=%d: NextBatch returned %d times and %d values", s.name, n, len(ts), len(vs))
				}
				gotT, gotV = append(gotT, ts...), append(gotV, vs...)
				if tm, v := it.At(); tm != ts[len(ts)-1] || math.Float64bits(v) != math.Float64bits(vs[len(vs)-1]) {
					t.Fatalf("%s n=%d: At after NextBatch = %d, %v; want its last sample", s.name, n, tm, v)
				}
			}
			if it.Err() != nil {
				t.Fatalf("%s n=%d: %v", s.name, n, it.Err())
			}
			if !slices.Equal(gotT, tss[0]) || !slices.EqualFunc(gotV, vss[0], func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
				t.Fatalf("%s n=%d: read %d samples, want the %d written", s.name, n, len(gotT), n)
			}
			if _, _, ok := it.NextBatch(); ok || it.Next() {
				t.Fatalf("%s n=%d: more samples after the end", s.name, n)
			}
		}
	}
}
