package rollup

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// aggEqual compares bit for bit, so that NaN equals the same NaN and -0
// differs from +0.
func aggEqual(a, b Agg) bool {
	fb := math.Float64bits
	return a.Count == b.Count && a.FirstT == b.FirstT && a.LastT == b.LastT &&
		fb(a.Sum) == fb(b.Sum) && fb(a.Min) == fb(b.Min) && fb(a.Max) == fb(b.Max) &&
		fb(a.First) == fb(b.First) && fb(a.Last) == fb(b.Last)
}

// diffAggs describes the first slot where got and want differ, or "".
func diffAggs(got, want []Agg) string {
	for i := range want {
		if !aggEqual(got[i], want[i]) {
			return fmt.Sprintf("slot %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	return ""
}

// tier lets one test drive Hourly and Daily alike.
type tier struct {
	name   string
	slots  int
	width  int64
	span   int64 // width of the whole pack
	encode func(dst []byte, aggs []Agg, start int64) []byte
	decode func(b []byte, start int64) ([]Agg, error)
	// bench decodes without moving the result to the heap.
	bench func(b []byte, start int64) error
}

var tiers = []tier{
	{
		name: "hourly", slots: 24, width: Hour, span: Day,
		encode: func(dst []byte, aggs []Agg, start int64) []byte {
			var d Hourly
			copy(d.Hours[:], aggs)
			return d.AppendBinary(dst, start)
		},
		decode: func(b []byte, start int64) ([]Agg, error) {
			d, err := DecodeHourly(b, start)
			return d.Hours[:], err
		},
		bench: func(b []byte, start int64) error {
			_, err := DecodeHourly(b, start)
			return err
		},
	},
	{
		name: "daily", slots: 32, width: Day, span: DailySpan,
		encode: func(dst []byte, aggs []Agg, start int64) []byte {
			var d Daily
			copy(d.Days[:], aggs)
			return d.AppendBinary(dst, start)
		},
		decode: func(b []byte, start int64) ([]Agg, error) {
			d, err := DecodeDaily(b, start)
			return d.Days[:], err
		},
		bench: func(b []byte, start int64) error {
			_, err := DecodeDaily(b, start)
			return err
		},
	},
}

// oldPackSize is the length of the former row layout of a pack: a uvarint
// mask and one single-aggregate value per non-empty slot.
func oldPackSize(aggs []Agg, start, width int64) int {
	var mask uint64
	n := 0
	for i, a := range aggs {
		if a.Count > 0 {
			mask |= 1 << i
			n += len(a.AppendBinary(nil, start+int64(i)*width))
		}
	}
	return n + len(binary.AppendUvarint(nil, mask))
}

func TestPack_RoundTrip(t *testing.T) {
	nan1 := math.Float64frombits(0x7ff8_0000_0000_0123) // quiet NaN with a payload
	nan2 := math.Float64frombits(0xfff0_0000_0000_0001) // signalling, negative
	negZero := math.Copysign(0, -1)
	inf := math.Inf(1)
	cases := []struct {
		name  string
		start int64 // in pack spans
		fill  func(aggs []Agg, start, width int64)
	}{
		{"empty pack", 3, func([]Agg, int64, int64) {}},
		{"first slot only", 0, func(aggs []Agg, start, _ int64) {
			aggs[0].Add(start, 1.5)
		}},
		{"last slot only at its last ms", 7, func(aggs []Agg, start, width int64) {
			n := int64(len(aggs))
			aggs[n-1].Add(start+n*width-1, -2.25)
		}},
		{"all present sensor walk", 12, func(aggs []Agg, start, width int64) {
			x := 215
			for i := range aggs {
				for s := range int64(60) {
					x += int(s%3) - 1
					aggs[i].Add(start+int64(i)*width+s*(width/60), float64(x)/10)
				}
			}
		}},
		{"sparse", 5, func(aggs []Agg, start, width int64) {
			for _, i := range []int{1, 7, 8, len(aggs) - 2} {
				aggs[i].Add(start+int64(i)*width+17, float64(i)*0.125)
				aggs[i].Add(start+int64(i+1)*width-1, -float64(i))
			}
		}},
		{"nan inf and negative zero", 1, func(aggs []Agg, start, width int64) {
			specials := []float64{nan1, nan2, inf, -inf, negZero, 0, math.NaN()}
			for i := range aggs {
				s := specials[i%len(specials)]
				aggs[i] = Agg{Count: 2, Sum: s, Min: negZero, Max: specials[(i+1)%len(specials)],
					First: s, Last: 1.5, FirstT: start + int64(i)*width, LastT: start + int64(i)*width + 5}
			}
		}},
		{"negative start", -40, func(aggs []Agg, start, width int64) {
			for i := range aggs {
				aggs[i].Add(start+int64(i)*width+width/2, -float64(i)/10)
				aggs[i].Add(start+int64(i)*width, 3)
			}
		}},
		{"values needing the xor fallback", 2, func(aggs []Agg, start, width int64) {
			rng := rand.New(rand.NewPCG(7, 7))
			for i := range aggs {
				for range 3 {
					v := math.Float64frombits(rng.Uint64())
					aggs[i].Add(start+int64(i)*width+rng.Int64N(width), v)
				}
			}
		}},
		{"decimals with 0 to 3 digits", 9, func(aggs []Agg, start, width int64) {
			for i := range aggs {
				aggs[i].Add(start+int64(i)*width, float64(i*37))
				aggs[i].Add(start+int64(i)*width+1, float64(i)/10)
				aggs[i].Add(start+int64(i)*width+2, float64(i)/100)
				aggs[i].Add(start+int64(i)*width+3, -float64(i)/1000)
			}
		}},
		{"sums crossing zero", 4, func(aggs []Agg, start, width int64) {
			for i := range aggs {
				for s, v := range []float64{0.1, 0.2, -0.3, float64(i%3-1) * 0.1} {
					aggs[i].Add(start+int64(i)*width+int64(s), v)
				}
			}
		}},
		{"huge counts and wrapping deltas", 6, func(aggs []Agg, start, width int64) {
			for i := range aggs {
				c := int64(math.MaxInt64)
				if i%2 == 1 {
					c = 1
				}
				aggs[i] = Agg{Count: c, Sum: 1e300, Min: -1, Max: 1, First: 0.5, Last: 0.25,
					FirstT: start + int64(i)*width, LastT: start + int64(i+1)*width - 1}
			}
		}},
		{"extreme magnitudes", 8, func(aggs []Agg, start, width int64) {
			vals := []float64{5e-324, math.MaxFloat64, -1e-300, 1 << 53, -(1<<53 - 1), 4503599627370495.5, 123456789.987}
			for i := range aggs {
				aggs[i].Add(start+int64(i)*width, vals[i%len(vals)])
				aggs[i].Add(start+int64(i)*width+1, vals[(i+3)%len(vals)])
			}
		}},
		{"constant values", 10, func(aggs []Agg, start, width int64) {
			for i := range aggs {
				aggs[i].Add(start+int64(i)*width+1000, 42.5)
			}
		}},
	}
	for _, tr := range tiers {
		for _, c := range cases {
			t.Run(tr.name+"/"+c.name, func(t *testing.T) {
				start := c.start * tr.span
				want := make([]Agg, tr.slots)
				c.fill(want, start, tr.width)
				b := tr.encode(nil, want, start)
				got, err := tr.decode(b, start)
				if err != nil {
					t.Fatalf("decode %x: %v", b, err)
				}
				if d := diffAggs(got, want); d != "" {
					t.Fatal(d)
				}
				t.Logf("%d bytes, %d in the row layout", len(b), oldPackSize(want, start, tr.width))
			})
		}
	}
}

func TestHourly_TotalMergesTheHours(t *testing.T) {
	day := 3 * Day
	var d Hourly
	for _, h := range []int{0, 5, 23} {
		d.Hours[h].Add(day+int64(h)*Hour+17, float64(h))
		d.Hours[h].Add(day+int64(h)*Hour+3599_000, -1)
	}
	got, err := DecodeHourly(d.AppendBinary(nil, day), day)
	if err != nil {
		t.Fatal(err)
	}
	if got != d {
		t.Fatalf("got %+v want %+v", got, d)
	}
	if tot := got.Total(); tot.Count != 6 || tot.First != 0 || tot.Last != -1 {
		t.Fatalf("total %+v", tot)
	}
}

func TestPackStart(t *testing.T) {
	cases := []struct{ t, want int64 }{
		{0, 0}, {DailySpan - 1, 0}, {DailySpan, DailySpan}, {-1, -DailySpan}, {-DailySpan, -DailySpan},
		{40 * Day, DailySpan},
	}
	for _, c := range cases {
		if got := PackStart(c.t); got != c.want {
			t.Errorf("PackStart(%d)=%d want %d", c.t, got, c.want)
		}
	}
}

// randomValue draws from a mix of what sensors send and what they should not.
func randomValue(rng *rand.Rand, style int) float64 {
	switch style {
	case 0: // decimal with 0–3 digits, mixed within a pack
		return float64(rng.IntN(200_000)-100_000) / pow10[rng.IntN(4)]
	case 1: // any bit pattern: NaN payloads, infinities, subnormals, -0
		return math.Float64frombits(rng.Uint64())
	case 2: // specials among decimals
		return [...]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 0.1, -0.1}[rng.IntN(7)]
	}
	return rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
}

var randomSeed = flag.Uint64("rollup.seed", 1, "seed of the random round-trip test; 0 picks one from the clock")

func TestPack_RandomAggsRoundTrip(t *testing.T) {
	seed := *randomSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -rollup.seed=%[1]d)", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, tr := range tiers {
		for round := range 2000 {
			start := (rng.Int64N(2000) - 1000) * tr.span
			aggs := make([]Agg, tr.slots)
			style := rng.IntN(4)
			density := rng.Float64()
			for i := range aggs {
				if rng.Float64() > density {
					continue
				}
				slot := start + int64(i)*tr.width
				step := []int64{1, 1000, 60_000, tr.width / 7}[rng.IntN(4)]
				for range 1 + rng.IntN(40) {
					ts := slot + rng.Int64N(tr.width/step)*step
					aggs[i].Add(ts, randomValue(rng, style))
				}
			}
			b := tr.encode(nil, aggs, start)
			got, err := tr.decode(b, start)
			if err != nil {
				t.Fatalf("%s round %d (seed %d): %v", tr.name, round, seed, err)
			}
			if d := diffAggs(got, aggs); d != "" {
				t.Fatalf("%s round %d (seed %d): %s", tr.name, round, seed, d)
			}
		}
	}
}

// sensorAggs fills aggs from a random walk in steps of 0.1 from 21.5,
// sampled once a minute from start, each timestamp moved by up to jitterMs
// (keeping it inside its minute); x carries the walk across calls.
func sensorAggs(rng *rand.Rand, aggs []Agg, start, width int64, x *int, jitterMs int64) {
	end := start + int64(len(aggs))*width
	for t := start; t < end; t += 60_000 {
		*x += rng.IntN(3) - 1
		ts := t
		if jitterMs > 0 {
			ts += rng.Int64N(jitterMs)
		}
		aggs[(ts-start)/width].Add(ts, float64(*x)/10)
	}
}

func TestPack_SensorDataIsThreeTimesSmaller(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tr := range tiers {
		x := 215
		aggs := make([]Agg, tr.slots)
		sensorAggs(rng, aggs, 0, tr.width, &x, 0)
		n, old := len(tr.encode(nil, aggs, 0)), oldPackSize(aggs, 0, tr.width)
		if 3*n > old {
			t.Errorf("%s: %d bytes, want at most a third of the row layout's %d", tr.name, n, old)
		}
	}
}

// packBytes builds a one-slot hourly value (slot 0) column by column.
func packBytes(count, off, span int64, floatCol []byte) []byte {
	b := []byte{1, 1, 0, 0}
	for _, x := range []int64{count, off, span} {
		b = binary.AppendVarint(append(b, intConst), x)
	}
	for range 5 {
		b = append(b, floatCol...)
	}
	return b
}

func TestDecodePack_RejectsCorrupt(t *testing.T) {
	one := []byte{floatDecimal, intConst, 2} // the float 1
	good := packBytes(3, 5, 7, one)
	if _, err := DecodeHourly(good, 0); err != nil {
		t.Fatalf("hand-built value: %v", err)
	}
	var daily Daily
	daily.Days[0].Add(5, 1)
	cases := []struct {
		name string
		b    []byte
	}{
		{"nil", nil},
		{"format only", []byte{1}},
		{"unknown format", append([]byte{9}, good[1:]...)},
		{"daily value", daily.AppendBinary(nil, 0)},
		{"mask beyond 24 hours", []byte{1, 0, 0, 1}},
		{"empty mask with trailing byte", []byte{1, 0, 0, 0, 0}},
		{"trailing byte", append(packBytes(3, 5, 7, one), 0)},
		{"count zero", packBytes(0, 5, 7, one)},
		{"negative count", packBytes(-1, 5, 7, one)},
		{"first before the hour", packBytes(1, -1, 0, one)},
		{"first after the hour", packBytes(1, Hour, 0, one)},
		{"last after the hour", packBytes(1, Hour-10, 10, one)},
		{"negative span", packBytes(1, 10, -1, one)},
		{"unknown int kind", packBytes(1, 0, 0, []byte{floatDecimal, 3, 2})},
		{"unknown float scheme", packBytes(1, 0, 0, []byte{0x30, intConst, 2})},
		{"xor with an exponent", packBytes(1, 0, 0, []byte{floatXOR | 1, 0})},
		{"xor entry over 8 bytes", packBytes(1, 0, 0, []byte{floatXOR, 0x45, 1, 2, 3, 4, 5})},
		{"xor entry of 9 bytes", packBytes(1, 0, 0, []byte{floatXOR, 0x09, 1, 2, 3, 4, 5, 6, 7, 8, 9})},
		{"xor zero with trailing zeros", packBytes(1, 0, 0, []byte{floatXOR, 0x10})},
		{"xor entry truncated", packBytes(1, 0, 0, []byte{floatXOR, 0x08, 1, 2, 3})},
		{"ulps column missing", packBytes(1, 0, 0, []byte{floatULP, intConst, 2})[:len(good)-5]},
		{"varint over 64 bits", append([]byte{1, 1, 0, 0, intConst}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02)},
		{"varint truncated", []byte{1, 1, 0, 0, intConst, 0x80}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d, err := DecodeHourly(c.b, 0); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("DecodeHourly(%x) = %+v, %v; want ErrCorrupt", c.b, d.Hours[0], err)
			}
		})
	}
	var hourly Hourly
	hourly.Hours[0].Add(5, 1)
	if _, err := DecodeDaily(hourly.AppendBinary(nil, 0), 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("DecodeDaily of an hourly value: %v, want ErrCorrupt", err)
	}
}

func TestDecodePack_RejectsEveryTruncation(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tr := range tiers {
		for style := range 4 {
			aggs := make([]Agg, tr.slots)
			for i := range aggs {
				if i%3 != 1 {
					aggs[i].Add(int64(i)*tr.width+rng.Int64N(tr.width), randomValue(rng, style))
				}
			}
			b := tr.encode(nil, aggs, 0)
			for n := range len(b) {
				if _, err := tr.decode(b[:n], 0); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s style %d: %d of %d bytes decoded: %v", tr.name, style, n, len(b), err)
				}
			}
		}
	}
}

// seedPacks returns encodings that cover every column kind, for fuzzing.
func seedPacks(tr tier) [][]byte {
	rng := rand.New(rand.NewPCG(8, 9))
	seeds := [][]byte{tr.encode(nil, make([]Agg, tr.slots), 0)}
	x := 215
	sensor := make([]Agg, tr.slots)
	sensorAggs(rng, sensor, 0, tr.width, &x, 0)
	seeds = append(seeds, tr.encode(nil, sensor, 0))
	for style := range 4 {
		aggs := make([]Agg, tr.slots)
		for i := range aggs {
			if i%4 != 0 {
				aggs[i].Add(int64(i)*tr.width+rng.Int64N(tr.width), randomValue(rng, style))
				aggs[i].Add(int64(i)*tr.width+rng.Int64N(tr.width), randomValue(rng, style))
			}
		}
		seeds = append(seeds, tr.encode(nil, aggs, 0))
	}
	return seeds
}

// fuzzDecode checks that decoding b never panics, and that a value it
// accepts holds consistent slots and survives a re-encoding bit for bit.
func fuzzDecode(t *testing.T, tr tier, b []byte) {
	got, err := tr.decode(b, 0)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v is not ErrCorrupt", err)
		}
		return
	}
	for i, a := range got {
		slot := int64(i) * tr.width
		if a.Count != 0 && (a.Count < 0 || a.FirstT < slot || a.LastT < a.FirstT || a.LastT >= slot+tr.width) {
			t.Fatalf("slot %d inconsistent: %+v", i, a)
		}
	}
	again, err := tr.decode(tr.encode(nil, got, 0), 0)
	if err != nil {
		t.Fatalf("re-encoded value does not decode: %v", err)
	}
	if d := diffAggs(again, got); d != "" {
		t.Fatalf("re-encoded value differs: %s", d)
	}
}

func FuzzDecodeHourly(f *testing.F) {
	for _, s := range seedPacks(tiers[0]) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, tiers[0], b) })
}

func FuzzDecodeDaily(f *testing.F) {
	for _, s := range seedPacks(tiers[1]) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) { fuzzDecode(t, tiers[1], b) })
}

// FuzzDaily_EncodeRoundTrip builds packs from fuzz bytes, so that the
// encoder's choice of scheme meets values nobody thought of.
func FuzzDaily_EncodeRoundTrip(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	f.Add([]byte("\x05\x00\x00\x80 sensor 21.5 21.6 21.4"))
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func(n int) uint64 {
			var buf [8]byte
			copy(buf[:n], data)
			data = data[min(n, len(data)):]
			return binary.LittleEndian.Uint64(buf[:])
		}
		value := func() float64 {
			sel := next(1)
			switch sel % 3 {
			case 0:
				return math.Float64frombits(next(8))
			case 1:
				return float64(int32(next(4))) / pow10[sel/3%5]
			}
			return float64(int64(next(8))) / pow10[sel/3%16]
		}
		const start = -3 * DailySpan
		var d Daily
		mask := uint32(next(4))
		for i := range d.Days {
			if mask&(1<<i) == 0 {
				continue
			}
			first := start + int64(i)*Day + int64(next(4)%uint64(Day))
			last := first + int64(next(4)%uint64(start+int64(i+1)*Day-first))
			d.Days[i] = Agg{
				Count: max(1, int64(next(8)>>1)), FirstT: first, LastT: last,
				Sum: value(), Min: value(), Max: value(), First: value(), Last: value(),
			}
		}
		got, err := DecodeDaily(d.AppendBinary(nil, start), start)
		if err != nil {
			t.Fatal(err)
		}
		if diff := diffAggs(got.Days[:], d.Days[:]); diff != "" {
			t.Fatal(diff)
		}
	})
}

// benchPacks returns 64 consecutive packs of one series (the whole pack
// span each) with their starts, for the data set named by data:
//
//	sensor  a random walk in steps of 0.1, one sample a minute
//	jitter  the same with each sample up to 30 s late
//	noise   full-precision floats that no decimal fits exactly
func benchPacks(tr tier, data string) (packs [][]Agg, starts []int64) {
	rng := rand.New(rand.NewPCG(11, 12))
	x := 215
	for p := range int64(64) {
		start := (20_000 + p) * tr.span
		aggs := make([]Agg, tr.slots)
		switch data {
		case "sensor":
			sensorAggs(rng, aggs, start, tr.width, &x, 0)
		case "jitter":
			sensorAggs(rng, aggs, start, tr.width, &x, 30_000)
		case "noise":
			for ts := start; ts < start+tr.span; ts += 60_000 {
				aggs[(ts-start)/tr.width].Add(ts, 20+rng.NormFloat64())
			}
		}
		packs = append(packs, aggs)
		starts = append(starts, start)
	}
	return packs, starts
}

var benchData = []string{"sensor", "jitter", "noise"}

func benchmarkDecode(b *testing.B, tr tier) {
	for _, data := range benchData {
		b.Run("data="+data, func(b *testing.B) {
			packs, starts := benchPacks(tr, data)
			enc := make([][]byte, len(packs))
			size, old := 0, 0
			for i, p := range packs {
				enc[i] = tr.encode(nil, p, starts[i])
				size += len(enc[i])
				old += oldPackSize(p, starts[i], tr.width)
			}
			b.ReportAllocs()
			b.SetBytes(int64(size / len(enc)))
			i := 0
			for b.Loop() {
				if err := tr.bench(enc[i], starts[i]); err != nil {
					b.Fatal(err)
				}
				i = (i + 1) % len(enc)
			}
			b.ReportMetric(float64(size)/float64(len(enc)), "B/pack")
			b.ReportMetric(float64(old)/float64(len(enc)), "oldB/pack")
		})
	}
}

func benchmarkEncode(b *testing.B, tr tier) {
	for _, data := range benchData {
		b.Run("data="+data, func(b *testing.B) {
			packs, starts := benchPacks(tr, data)
			buf := make([]byte, 0, 4096)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				buf = tr.encode(buf[:0], packs[i], starts[i])
				i = (i + 1) % len(packs)
			}
			_ = buf
		})
	}
}

func BenchmarkHourly_Decode(b *testing.B) { benchmarkDecode(b, tiers[0]) }
func BenchmarkDaily_Decode(b *testing.B)  { benchmarkDecode(b, tiers[1]) }
func BenchmarkHourly_Encode(b *testing.B) { benchmarkEncode(b, tiers[0]) }
func BenchmarkDaily_Encode(b *testing.B)  { benchmarkEncode(b, tiers[1]) }
