package chunk

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// headChunkSamples is how many samples the head puts in an open chunk.
const headChunkSamples = 240

// sensorAt returns a sensor series, a thermometer read to 0.1 °C, at an
// interval.
func sensorAt(intervalMs int64) func(r *rand.Rand, n int) ([]int64, []float64) {
	return func(r *rand.Rand, n int) ([]int64, []float64) {
		return seq(n, func(i int) int64 { return startMs + int64(i)*intervalMs }), walk(r, n, 1, 213, 1)
	}
}

// appenderShapes are the chunk benchmark shapes, plus sensor series at the
// intervals the head sees most.
var appenderShapes = append(slices.Clone(shapes),
	shape{"sensor-1s", sensorAt(1_000)},
	shape{"sensor-100ms", sensorAt(100)},
)

func appenderShape(name string) shape {
	for _, s := range appenderShapes {
		if s.name == name {
			return s
		}
	}
	panic("no shape " + name)
}

// samples is what an Appender and a Sealed have in common.
type samples interface {
	Len() int
	FirstT() int64
	LastT() int64
	AppendSamples(ts []int64, vs []float64) ([]int64, []float64)
}

var (
	_ samples = (*Appender)(nil)
	_ samples = Sealed{}
)

// checkSamples requires s to hold exactly ts and vs, bit for bit.
func checkSamples(t testing.TB, what string, s samples, ts []int64, vs []float64) {
	t.Helper()
	if s.Len() != len(ts) {
		t.Fatalf("%s: Len() = %d, want %d", what, s.Len(), len(ts))
	}
	if s.FirstT() != ts[0] || s.LastT() != ts[len(ts)-1] {
		t.Fatalf("%s: FirstT, LastT = %d, %d; want %d, %d", what, s.FirstT(), s.LastT(), ts[0], ts[len(ts)-1])
	}
	// AppendSamples appends after what the slices hold.
	gotTs, gotVs := s.AppendSamples([]int64{7}, []float64{7})
	if gotTs[0] != 7 || gotVs[0] != 7 {
		t.Fatalf("%s: AppendSamples overwrote the slices' samples", what)
	}
	gotTs, gotVs = gotTs[1:], gotVs[1:]
	if !sameInts(gotTs, ts) {
		i := firstDiff(len(gotTs), len(ts), func(i int) bool { return gotTs[i] == ts[i] })
		t.Fatalf("%s: %d timestamps, want %d; first difference at %d:\n got %v\nwant %v", what, len(gotTs), len(ts), i, around(gotTs, i), around(ts, i))
	}
	if !sameBits(gotVs, vs) {
		i := firstDiff(len(gotVs), len(vs), func(i int) bool { return math.Float64bits(gotVs[i]) == math.Float64bits(vs[i]) })
		t.Fatalf("%s: values differ first at %d:\n got %v\nwant %v", what, i, around(gotVs, i), around(vs, i))
	}
}

func firstDiff(n, m int, same func(i int) bool) int {
	i := 0
	for i < min(n, m) && same(i) {
		i++
	}
	return i
}

func around[T any](s []T, i int) []T { return s[max(0, min(i, len(s))-3):min(len(s), i+3)] }

// checkAppender appends the samples one at a time, checking what the
// Appender holds after 1, 2, 4, ... of them and after the last; then it
// seals it, checks the Sealed and that the Appender is left empty.
func checkAppender(t testing.TB, ts []int64, vs []float64) Sealed {
	t.Helper()
	var a Appender
	next := 1
	for i := range ts {
		a.Append(ts[i], vs[i])
		if i+1 == next || i+1 == len(ts) {
			next *= 2
			checkSamples(t, fmt.Sprintf("Appender after %d samples", i+1), &a, ts[:i+1], vs[:i+1])
		}
	}
	size := a.SizeBytes()
	s := a.Seal()
	checkSamples(t, "Sealed", s, ts, vs)
	if s.SizeBytes() != size-int(unsafe.Sizeof(a))+int(unsafe.Sizeof(s)) {
		t.Fatalf("Sealed holds %d bytes, the Appender held %d: Seal did not hand the buffer over", s.SizeBytes(), size)
	}
	checkEmpty(t, &a)
	return s
}

// checkEmpty requires a to be empty and to hold no buffer.
func checkEmpty(t testing.TB, a *Appender) {
	t.Helper()
	if a.Len() != 0 {
		t.Fatalf("Len() = %d, want 0", a.Len())
	}
	if got, want := a.SizeBytes(), int(unsafe.Sizeof(*a)); got != want {
		t.Fatalf("an empty Appender holds %d bytes, want %d", got, want)
	}
	if ts, vs := a.AppendSamples(nil, nil); len(ts) != 0 || len(vs) != 0 {
		t.Fatalf("an empty Appender decodes %d samples", len(ts))
	}
}

func TestAppender_RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	nan1 := math.Float64frombits(0x7ff8_0000_0000_0001) // quiet NaN with a payload
	snan := math.Float64frombits(0x7ff0_0000_0000_0001) // signalling NaN
	negNaN := math.Float64frombits(0xfff8_0000_0000_0000)
	negZero := math.Copysign(0, -1)
	const maxM = 1<<53 - 1 // the largest decimal mantissa
	type test struct {
		name string
		ts   []int64
		vs   []float64
	}
	tests := []test{
		{"single sample", []int64{startMs}, []float64{21.5}},
		{"single zero", []int64{0}, []float64{0}},
		{"single NaN", []int64{-5}, []float64{math.NaN()}},
		{"single negative zero", []int64{0}, []float64{negZero}},
		{"single max int64", []int64{math.MaxInt64}, []float64{1}},
		{"single min int64", []int64{math.MinInt64}, []float64{-1}},
		{"two samples", []int64{1, 2}, []float64{1.5, 2.5}},
		{"sensor every second", seq(240, func(i int) int64 { return startMs + int64(i)*1000 }), walk(r, 240, 1, 213, 1)},
		{"sensor every 100 ms", seq(240, func(i int) int64 { return startMs + int64(i)*100 }), walk(r, 240, 1, -53, 1)},
		{"constant", regular(120), vals(120, func(int) float64 { return 42.5 })},
		{"constant pi", regular(120), vals(120, func(int) float64 { return math.Pi })},
		{"constant NaN", regular(150), vals(150, func(int) float64 { return math.NaN() })},
		{"constant negative zero", regular(150), vals(150, func(int) float64 { return negZero })},
		{"irregular", seq(300, func(i int) int64 { return int64(i*i*37 + i) }), vals(300, func(i int) float64 { return float64(i) / 3 })},
		{"jittery", seq(500, func(i int) int64 { return startMs + int64(i)*10_000 + r.Int64N(41) - 20 }), walk(r, 500, 1, 213, 1)},
		{"negative timestamps", seq(200, func(i int) int64 { return -1_000_000 + int64(i)*9_999 }), walk(r, 200, 2, -500, 3)},
		{"timestamps across zero", seq(9, func(i int) int64 { return int64(i-4) * 3 }), vals(9, func(i int) float64 { return float64(i) })},
		{"min and max timestamps", []int64{math.MinInt64, math.MaxInt64}, []float64{1, 2}},
		{"deltas overflowing int64", []int64{math.MinInt64, math.MinInt64 + 1, math.MaxInt64 - 1, math.MaxInt64}, []float64{1, 2, 3, 4}},
		{"delta of delta overflowing", []int64{math.MinInt64, 0, 1, math.MaxInt64}, []float64{1, 1, 1, 1}},
		{"huge gaps back and forth", []int64{math.MinInt64, -1 << 62, -1<<62 + 1, 1 << 62, 1<<62 + 5, math.MaxInt64}, []float64{1, 2, 3, 4, 5, 6}},
		{"timestamp code boundaries", tsAtBoundaries(), vals(len(tsAtBoundaries()), func(i int) float64 { return float64(i % 3) })},
		{"value code boundaries", regular(len(valuesAtBoundaries())), valuesAtBoundaries()},
		{"special floats", regular(9), []float64{math.NaN(), math.Inf(1), math.Inf(-1), negZero, 0, nan1, snan, negNaN, math.MaxFloat64}},
		{"negative zero among decimals", regular(5), []float64{1.5, 2.5, negZero, 3.5, 4.5}},
		{"NaN among decimals", regular(5), []float64{1.5, 2.5, math.NaN(), 3.5, 4.5}},
		{"an exception keeps the mantissa", regular(6), []float64{1.5, math.NaN(), 1.5, 1.6, math.Inf(1), 1.6}},
		{"subnormals", regular(6), []float64{math.SmallestNonzeroFloat64, 2 * math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 1e-310, 0, 1e-320}},
		{"huge and tiny exponents", regular(6), []float64{1e300, -1e300, 1e-300, math.MaxFloat64, -math.MaxFloat64, 1e308}},
		{"large integers", regular(6), []float64{1 << 52, maxM, -maxM, 1 << 53, 1<<53 + 2, maxM}},
		{"mantissa extremes", regular(4), []float64{-maxM, maxM, -maxM, 0}},
		{"15 fractional digits", regular(4), []float64{0.123456789012345, 0.000000000000001, -0.999999999999999, 0}},
		{"16 fractional digits", regular(3), []float64{0.1234567890123456, 0.5, 0.25}},
		{"first value needs a raise", regular(4), []float64{21.3, 21.4, 21.3, 21.3}},
		{"raise by one", regular(6), []float64{21.3, 21.4, 21.45, 21.5, 21.55, 21.6}},
		{"raise by the most allowed", regular(4), []float64{21.3, 21.4, 21.4125, 21.4}},
		{"raise too far is an exception", regular(5), []float64{21.3, 21.4, 21.412345, 21.4, 21.5}},
		{"raise from zero by many digits", regular(4), []float64{0, 0, 47.123456, 47.123457}},
		{"raise that would overflow the mantissa", regular(4), []float64{maxM, 0.5, maxM - 1, 0.25}},
		{"raise to the largest exponent", regular(3), []float64{0, 0.000000000000001, 0.000000000000002}},
		{"two exceptions switch to XOR and back", regular(400), vals(400, func(i int) float64 {
			if i == 10 || i == 11 {
				return math.NaN()
			}
			return float64(200+i%7) / 10
		})},
		{"NaN runs", regular(600), vals(600, func(i int) float64 {
			if i/50%2 == 1 {
				return math.NaN()
			}
			return float64(i%9) / 4
		})},
		{"decimal then noise", regular(200), vals(200, func(i int) float64 {
			if i < 150 {
				return float64(200+i%5) / 10
			}
			return r.NormFloat64()
		})},
		{"noise then decimal", regular(700), vals(700, func(i int) float64 {
			if i < 100 {
				return r.NormFloat64()
			}
			return float64(200+i%5) / 10
		})},
		{"alternating noise and decimals", regular(300), vals(300, func(i int) float64 {
			if i%2 == 0 {
				return r.NormFloat64()
			}
			return float64(i) / 10
		})},
		{"noise", regular(300), vals(300, func(int) float64 { return r.NormFloat64() * 1e3 })},
		{"random bits", regular(300), vals(300, func(int) float64 { return math.Float64frombits(r.Uint64()) })},
		{"alternating extremes", regular(100), vals(100, func(i int) float64 { return float64(i%2)*2e6 - 1e6 })},
		{"counter", regular(1024), vals(1024, func(i int) float64 { return float64(i * i) })},
		{"smooth", regular(600), vals(600, func(i int) float64 { return math.Round(1000*math.Sin(float64(i)/40)) / 100 })},
		{"float32 values", regular(100), vals(100, func(int) float64 { return float64(float32(r.Float64())) })},
		{"max samples of decimals", seq(MaxSamples, func(i int) int64 { return int64(i) * 2 }), vals(MaxSamples, func(i int) float64 { return float64(i%1000) / 100 })},
		{"max samples of noise", seq(MaxSamples, func(i int) int64 { return startMs + int64(i)*1000 + r.Int64N(900) }), vals(MaxSamples, func(int) float64 { return r.NormFloat64() })},
	}
	for digits := range 7 {
		tests = append(tests, test{fmt.Sprintf("decimal %d digits", digits), regular(240), walk(r, 240, digits, 123456, 50)})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAppender(t, tt.ts, tt.vs)
		})
	}
}

// TestAppender_ValueModes checks the rules that pick value codes (see
// "Appender streams" in the package doc) by the state they leave.
func TestAppender_ValueModes(t *testing.T) {
	nan := math.NaN()
	decimals := func(n int) []float64 { return vals(n, func(i int) float64 { return float64(200+i%3) / 10 }) }
	tests := []struct {
		name        string
		vs          []float64
		wantE       uint8
		wantMisses  uint8
		wantXORLeft uint16
	}{
		{"sensor decimals", []float64{21.3, 21.4, 21.3}, 1, 0, 0},
		{"integers", []float64{3, 4, 5}, 0, 0, 0},
		{"raise by one", []float64{21.3, 21.35}, 2, 0, 0},
		{"raise too far is an exception", []float64{21.3, 21.4, 21.412345}, 1, 1, 0},
		{"raise from zero has no limit", []float64{0, 47.123456}, 6, 0, 0},
		{"one exception", []float64{1.5, nan}, 1, 1, 0},
		{"exceptions apart", []float64{1.5, nan, 1.5, nan}, 1, 1, 0},
		{"two exceptions switch to XOR", []float64{1.5, nan, nan}, 1, 0, firstXORRun},
		{"noise from the start", []float64{1.0 / 3, 2.0 / 3}, 0, 0, firstXORRun},
		{"15 digits are a decimal", []float64{math.Pi, math.E}, 15, 0, 0},
		{"an XOR run", append([]float64{1.5, nan, nan}, decimals(firstXORRun-1)...), 1, 0, 1},
		{"probation after an XOR run", append([]float64{1.5, nan, nan}, decimals(firstXORRun)...), 1, maxMisses - 1, 0},
		{"decimal after an XOR run", append([]float64{1.5, nan, nan}, decimals(firstXORRun+1)...), 1, 0, 0},
		{"the next run is twice as long", append(append([]float64{1.5, nan, nan}, decimals(firstXORRun)...), nan), 1, 0, 2 * firstXORRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a Appender
			ts := regular(len(tt.vs))
			appendAll(&a, ts, tt.vs)
			if got := a.vals; got.e != tt.wantE || got.misses != tt.wantMisses || got.xorLeft != tt.wantXORLeft {
				t.Errorf("e, misses, xorLeft = %d, %d, %d; want %d, %d, %d", got.e, got.misses, got.xorLeft, tt.wantE, tt.wantMisses, tt.wantXORLeft)
			}
			checkSamples(t, "Appender", &a, ts, tt.vs)
		})
	}
}

// tsAtBoundaries returns timestamps whose deltas of deltas fall on both
// sides of every tsCode bucket boundary, and of smallCodes, both signs.
func tsAtBoundaries() []int64 {
	var dods []int64
	for j := 1; j <= tsWide; j++ {
		lo := int64(tsCode.c.lo[j]) // a zigzag value: dod ±lo/2
		for _, u := range []int64{lo - 1, lo, lo + 1} {
			dods = append(dods, u/2, -u/2, -(u+1)/2)
		}
	}
	dods = append(dods, smallCodes/2-1, smallCodes/2, -smallCodes/2, -smallCodes/2-1)
	ts := []int64{0, 1 << 40}
	d := int64(1 << 40)
	for _, dod := range dods {
		// Keep the delta positive and large: alternate with a big jump.
		d += dod
		ts = append(ts, ts[len(ts)-1]+d)
		d -= dod
		ts = append(ts, ts[len(ts)-1]+d)
	}
	return ts
}

// valuesAtBoundaries returns integers whose mantissa deltas fall on both
// sides of every valueCode bucket boundary, and of smallCodes.
func valuesAtBoundaries() []float64 {
	vs := []float64{0}
	m := int64(0)
	for j := 1; j < valueEscapeJ; j++ {
		lo := int64(valueCode.c.lo[j])
		for _, u := range []int64{lo - 1, lo, lo + 1, smallCodes - 1, smallCodes} {
			for _, dm := range []int64{u / 2, -u / 2, -(u + 1) / 2} {
				m += dm
				vs = append(vs, float64(m))
				m -= dm
				vs = append(vs, float64(m))
			}
		}
	}
	return vs
}

// spliceValues returns n values made of a few runs of different kinds.
func spliceValues(r *rand.Rand, n int) []float64 {
	var vs []float64
	for len(vs) < n {
		_, more := randomSeries(r)
		vs = append(vs, more...)
	}
	return vs[:n]
}

func TestAppender_RandomRoundTrips(t *testing.T) {
	const seed = 20261122
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	runs := 2000
	if testing.Short() {
		runs = 200
	}
	for i := range runs {
		ts, vs := randomSeries(r)
		if i%2 == 1 {
			vs = spliceValues(r, len(ts))
		}
		s := checkAppender(t, ts, vs)
		// The flush re-encodes what it reads.
		sts, svs := s.AppendSamples(nil, nil)
		gotTs, gotVs, err := Decode(Encode(nil, sts, svs), nil, nil)
		if err != nil || !sameInts(gotTs, ts) || !sameBits(gotVs, vs) {
			t.Fatalf("run %d: Encode of the Sealed samples does not round-trip: %v", i, err)
		}
	}
}

func TestAppender_SealLeavesItEmptyAndReusable(t *testing.T) {
	tss, vss := series(appenderShape("sensor-1s"), headChunkSamples, 2)
	noiseTs, noiseVs := series(shapeByName("noisy-float"), headChunkSamples, 1)

	var a Appender
	appendAll(&a, tss[0], vss[0])
	s := a.Seal()
	checkEmpty(t, &a)
	checkSamples(t, "Sealed", s, tss[0], vss[0])

	// Readers of s run while the Appender is refilled, sealed again,
	// reset and refilled; under -race this also checks that Seal shares
	// nothing with the Appender.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 2 {
		wg.Go(func() {
			var ts []int64
			var vs []float64
			for {
				select {
				case <-stop:
					return
				default:
				}
				ts, vs = s.AppendSamples(ts[:0], vs[:0])
				if !sameInts(ts, tss[0]) || !sameBits(vs, vss[0]) || s.Len() != headChunkSamples {
					errs <- fmt.Errorf("a reader saw the Sealed change")
					return
				}
			}
		})
	}
	for range 50 {
		appendAll(&a, tss[1], vss[1])
		checkSamples(t, "refilled Appender", &a, tss[1], vss[1])
		s2 := a.Seal()
		a.Append(noiseTs[0][0], noiseVs[0][0]) // a fresh buffer, not s2's
		checkSamples(t, "second Sealed", s2, tss[1], vss[1])
		a.Reset()
		appendAll(&a, noiseTs[0], noiseVs[0])
		checkSamples(t, "Appender after Reset", &a, noiseTs[0], noiseVs[0])
		a.Reset()
		if a.Len() != 0 || a.SizeBytes() <= int(unsafe.Sizeof(a)) {
			t.Fatalf("after Reset: Len() = %d and %d bytes held; want 0 and the buffer kept", a.Len(), a.SizeBytes())
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkSamples(t, "Sealed at the end", s, tss[0], vss[0])
}

func appendAll(a *Appender, ts []int64, vs []float64) {
	for i := range ts {
		a.Append(ts[i], vs[i])
	}
}

func TestAppender_ZeroValueHoldsNothing(t *testing.T) {
	var a Appender
	checkEmpty(t, &a)
	a.Reset()
	checkEmpty(t, &a)
	s := a.Seal()
	checkEmpty(t, &a)
	if s.Len() != 0 || s.SizeBytes() != int(unsafe.Sizeof(s)) {
		t.Fatalf("Seal of an empty Appender: %d samples, %d bytes", s.Len(), s.SizeBytes())
	}
	if ts, vs := s.AppendSamples(nil, nil); len(ts) != 0 || len(vs) != 0 {
		t.Fatalf("an empty Sealed decodes %d samples", len(ts))
	}
	if s := (Sealed{}); s.Len() != 0 || s.SizeBytes() != int(unsafe.Sizeof(s)) {
		t.Fatalf("the zero Sealed: %d samples, %d bytes", s.Len(), s.SizeBytes())
	}
}

func TestAppender_PanicsOnMisuse(t *testing.T) {
	full := func() *Appender {
		a := new(Appender)
		for i := range MaxSamples {
			a.Append(int64(i), 1)
		}
		return a
	}
	tests := []struct {
		name string
		f    func()
	}{
		{"equal timestamp", func() { a := new(Appender); a.Append(5, 1); a.Append(5, 2) }},
		{"decreasing timestamp", func() { a := new(Appender); a.Append(5, 1); a.Append(4, 2) }},
		{"from max to min timestamp", func() { a := new(Appender); a.Append(math.MaxInt64, 1); a.Append(math.MinInt64, 2) }},
		{"more than MaxSamples", func() { full().Append(MaxSamples, 1) }},
		{"FirstT of an empty Appender", func() { new(Appender).FirstT() }},
		{"LastT of an empty Appender", func() { new(Appender).LastT() }},
		{"FirstT of an empty Sealed", func() { Sealed{}.FirstT() }},
		{"LastT of an empty Sealed", func() { Sealed{}.LastT() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "BUG: ") {
					t.Fatalf("recovered %v, want a BUG: panic", r)
				}
			}()
			tt.f()
		})
	}
	// A bad Append leaves the samples as they were.
	a := new(Appender)
	a.Append(5, 1)
	func() {
		defer func() { _ = recover() }()
		a.Append(5, 2)
	}()
	checkSamples(t, "Appender after a bad Append", a, []int64{5}, []float64{1})
}

func TestAppender_AppendDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, s := range appenderShapes {
		t.Run(s.name, func(t *testing.T) {
			tss, vss := series(s, headChunkSamples, 1)
			ts, vs := tss[0], vss[0]
			var a Appender
			appendAll(&a, ts, vs) // grows the buffer
			a.Reset()
			if allocs := testing.AllocsPerRun(20, func() {
				appendAll(&a, ts, vs)
				a.Reset()
			}); allocs != 0 {
				t.Errorf("Append into a kept buffer allocated %v times per chunk", allocs)
			}
			// From nothing, the buffer grows in a few steps.
			allocs := testing.AllocsPerRun(20, func() {
				var a Appender
				appendAll(&a, ts, vs)
			})
			words := (a.SizeBytes() - int(unsafe.Sizeof(a))) / 8
			if want := growthSteps(words); allocs > float64(want) {
				t.Errorf("a chunk of %d words took %v allocations, want at most %d", words, allocs, want)
			}
		})
	}
}

// growthSteps is how many allocations growing a buffer to words takes.
func growthSteps(words int) int {
	n := 1
	for c := minStreamWords; c < words; c += c / streamGrowthFrac {
		n++
	}
	return n
}

func TestAppender_GrowsInSmallSteps(t *testing.T) {
	tss, vss := series(shapeByName("noisy-float"), MaxSamples, 1)
	var a Appender
	prev := 0
	for i := range tss[0] {
		a.Append(tss[0][i], vss[0][i])
		c := cap(a.words)
		if c != prev {
			// A quarter more, rounded up to a size class (at most an
			// eighth more again), from at least minStreamWords.
			// Past 32 KiB, whole 8 KiB pages.
			limit := max(minStreamWords, prev+prev/4)
			if limit*8 <= 32<<10 {
				limit = limit*9/8 + 2
			} else {
				limit = (limit + 1023) / 1024 * 1024
			}
			if prev != 0 && c > limit {
				t.Fatalf("the buffer grew from %d to %d words, want at most %d", prev, c, limit)
			}
			prev = c
		}
	}
	if slack := cap(a.words) - len(a.words); slack > len(a.words)/2+2 {
		t.Fatalf("a full buffer of %d words has %d spare", len(a.words), slack)
	}
}

// TestAppender_BytesPerSample checks the memory an open head chunk of
// headChunkSamples costs, buffer slack and the Appender included, and
// logs it for every shape (go test -v).
func TestAppender_BytesPerSample(t *testing.T) {
	// Upper bounds in bytes per sample of SizeBytes; the head's budget is 2.
	limits := map[string]float64{
		"sensor-decimal": 1.0,
		"sensor-2dp":     1.1,
		"sensor-1s":      1.0,
		"sensor-100ms":   1.0,
		"constant":       0.8,
		"jittery-ts":     2.3,
		"counter":        2.8,
		"noisy-float":    8.5,
	}
	for _, s := range appenderShapes {
		tss, vss := series(s, headChunkSamples, benchChunks)
		var open, sealed, stream, gorilla int
		var a Appender // one series: each chunk starts at the last one's size
		for i := range tss {
			appendAll(&a, tss[i], vss[i])
			open += a.SizeBytes()
			stream += int(a.nbits+7) / 8
			sealed += a.Seal().SizeBytes()
			gorilla += (gorillaBits(tss[i], vss[i]) + 7) / 8
		}
		per := func(b int) float64 { return float64(b) / float64(headChunkSamples*benchChunks) }
		t.Logf("%-15s n=%d: open %.3f B/sample, sealed %.3f, stream %.3f (Gorilla %.3f)", s.name, headChunkSamples, per(open), per(sealed), per(stream), per(gorilla))
		limit, ok := limits[s.name]
		if !ok {
			t.Errorf("%s: no limit", s.name)
		}
		if per(open) > limit || per(sealed) > limit {
			t.Errorf("%s: open %.3f, sealed %.3f B/sample; limit %.3f", s.name, per(open), per(sealed), limit)
		}
	}
}

// FuzzAppender derives samples from the fuzzer's bytes (strictly
// increasing timestamps by construction) and requires the Appender and
// the Sealed to give them back bit for bit.
func FuzzAppender(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x05\x05\x05\x01\x01\x02abcdefgh\x03\x07\x0b"))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x7f\x01"))                                     // starts at MaxInt64
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x80\xc1\xff\xff\xff\xff\xff\xff\xff\xff\x01")) // MinInt64, huge delta
	f.Add([]byte("\x10\x27\x00\x00\x00\x00\x00\x00\x89\x01\x85\x02\x81\xfe\xe1\x05\xe5\x7f\x0d\x11\x15\x19\x1d"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\xf8\x7f\x02\x01\x00\x00\x00\x00\x00\xf0\x7f"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x03\x03\x07\x07\x0b\x0b\x01\x01\x01\x01\x01\x01")) // exceptions, then decimals
	f.Add(append([]byte("\x00\x00\x00\x00\x00\x00\x00\x00"), slices.Repeat([]byte("\x02\x01\x23\x45\x67\x89\xab\xcd\xef"), 100)...))
	f.Add(append([]byte("\x00\x00\x00\x00\x00\x00\x00\x00"), slices.Repeat([]byte("\xc5\x01\x00\x00\x00\x00\x00\x00\x00\x09\xff"), 40)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, vs := samplesFromBytes(data)
		if len(ts) == 0 {
			return
		}
		checkAppender(t, ts, vs)
	})
}

func BenchmarkAppender_Append(b *testing.B) {
	for _, s := range appenderShapes {
		tss, vss := series(s, headChunkSamples, benchChunks)
		total := 0
		var a Appender
		for i := range tss {
			appendAll(&a, tss[i], vss[i])
			total += a.SizeBytes()
			a.Seal()
		}
		perSample := float64(total) / float64(headChunkSamples*benchChunks)
		// buffer=new is the head's way: Seal each chunk and grow a new
		// buffer for the next; buffer=kept refills one after Reset.
		for _, kept := range []bool{false, true} {
			name := fmt.Sprintf("%s/n=%d/buffer=new", s.name, headChunkSamples)
			if kept {
				name = fmt.Sprintf("%s/n=%d/buffer=kept", s.name, headChunkSamples)
			}
			b.Run(name, func(b *testing.B) {
				var a Appender
				b.ReportAllocs()
				b.SetBytes(16 * headChunkSamples)
				i := 0
				var sealed Sealed
				for b.Loop() {
					ts, vs := tss[i], vss[i]
					for k := range ts {
						a.Append(ts[k], vs[k])
					}
					if kept {
						a.Reset()
					} else {
						sealed = a.Seal()
					}
					i = (i + 1) % benchChunks
				}
				_ = sealed
				b.ReportMetric(perSample, "B/sample")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*headChunkSamples), "ns/sample")
			})
		}
	}
}

func BenchmarkAppender_Decode(b *testing.B) {
	for _, s := range appenderShapes {
		b.Run(fmt.Sprintf("%s/n=%d", s.name, headChunkSamples), func(b *testing.B) {
			tss, vss := series(s, headChunkSamples, benchChunks)
			sealed := make([]Sealed, len(tss))
			total := 0
			var a Appender
			for i := range tss {
				appendAll(&a, tss[i], vss[i])
				sealed[i] = a.Seal()
				total += sealed[i].SizeBytes()
			}
			ts, vs := make([]int64, 0, headChunkSamples), make([]float64, 0, headChunkSamples)
			b.ReportAllocs()
			b.SetBytes(16 * headChunkSamples)
			i := 0
			for b.Loop() {
				ts, vs = sealed[i].AppendSamples(ts[:0], vs[:0])
				i = (i + 1) % benchChunks
			}
			b.ReportMetric(float64(total)/float64(headChunkSamples*benchChunks), "B/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*headChunkSamples), "ns/sample")
		})
	}
}
