package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/chunk"
	"github.com/tributarydb/tributary/node/labels"
)

// lww is what replaying runs in order leaves: per series, per timestamp,
// the bits of the last value.
func lww(runs []run) map[uint64]map[int64]uint64 {
	m := map[uint64]map[int64]uint64{}
	for _, r := range runs {
		if m[r.id] == nil {
			m[r.id] = map[int64]uint64{}
		}
		for i, t := range r.ts {
			m[r.id][t] = math.Float64bits(r.vs[i])
		}
	}
	return m
}

func compressedEncoder() *Encoder {
	e := new(Encoder)
	e.SetKind(KindCompressed)
	return e
}

// TestCompressed_ReplaysLikeTheInput: for random runs (unsorted,
// duplicate timestamps, several runs of a series, extreme timestamps and
// values), decoding a compressed payload gives sorted runs whose
// last-write-wins replay equals the input's, and every definition back.
func TestCompressed_ReplaysLikeTheInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	e := compressedEncoder()
	for iter := range 400 {
		e.Reset()
		defs := map[uint64][]byte{}
		for range rng.IntN(20) {
			id := rng.Uint64() >> rng.IntN(64)
			var key []byte
			if rng.IntN(4) == 0 {
				key = make([]byte, rng.IntN(40)) // not a labels key
				for i := range key {
					key[i] = byte(rng.IntN(256))
				}
			} else {
				ls := labels.Labels{{Name: "__name__", Value: "m"}, {Name: "host", Value: fmt.Sprint("h", rng.IntN(5))}}
				key = ls.AppendKey(nil)
			}
			if _, ok := defs[id]; !ok {
				defs[id] = key
				e.DefineSeries(id, key)
			}
		}
		var in []run
		var points int64
		base := int64(1_700_000_000_000)
		if iter%10 == 0 {
			base = math.MinInt64 + 10
		}
		for range rng.IntN(30) {
			id := uint64(rng.IntN(6))
			n := 1 + rng.IntN(50)
			r := run{id: id, ts: make([]int64, n), vs: make([]float64, n)}
			for i := range n {
				switch rng.IntN(10) {
				case 0:
					r.ts[i] = base + rng.Int64N(20) // duplicates
				case 1:
					r.ts[i] = math.MaxInt64 - rng.Int64N(3)
				default:
					r.ts[i] = base + int64(i)*1000 + rng.Int64N(3)
				}
				switch rng.IntN(6) {
				case 0:
					r.vs[i] = math.NaN()
				case 1:
					r.vs[i] = math.Copysign(0, -1)
				default:
					r.vs[i] = float64(rng.IntN(1000)) / 10
				}
			}
			e.AddRun(r.id, r.ts, r.vs)
			in = append(in, r)
			points += int64(n)
		}
		if e.Points() != points {
			t.Fatalf("Points() = %d, want %d", e.Points(), points)
		}
		b := e.AppendTo(nil)
		gotDefs, out, err := decodeAll(t, b)
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		if len(gotDefs) != len(defs) {
			t.Fatalf("%d definitions back, want %d", len(gotDefs), len(defs))
		}
		for id, k := range defs {
			if !bytes.Equal(gotDefs[id], k) {
				t.Fatalf("definition %d = %x, want %x", id, gotDefs[id], k)
			}
		}
		var decoded int64
		for _, r := range out {
			decoded += int64(len(r.ts))
			for i := 1; i < len(r.ts); i++ {
				if r.ts[i] <= r.ts[i-1] {
					t.Fatalf("run of series %d not strictly increasing: %v", r.id, r.ts)
				}
			}
		}
		if decoded != e.EncodedPoints() {
			t.Fatalf("decoded %d samples, EncodedPoints %d", decoded, e.EncodedPoints())
		}
		want, got := lww(in), lww(out)
		if len(want) != len(got) {
			t.Fatalf("%d series back, want %d", len(got), len(want))
		}
		for id, w := range want {
			g := got[id]
			if len(g) != len(w) {
				t.Fatalf("series %d: %d timestamps back, want %d", id, len(g), len(w))
			}
			for ts, v := range w {
				if gv, ok := g[ts]; !ok || gv != v {
					t.Fatalf("series %d at %d: %x (present %v), want %x", id, ts, gv, ok, v)
				}
			}
		}
	}
}

// TestCompressed_LongRunsSplit: more samples of a series than a chunk
// holds become several runs, in order.
func TestCompressed_LongRunsSplit(t *testing.T) {
	e := compressedEncoder()
	n := chunk.MaxSamples*2 + 5
	ts, vs := make([]int64, n), make([]float64, n)
	for i := range n {
		ts[i], vs[i] = int64(i)*10, float64(i%7)
	}
	e.DefineSeries(3, []byte("k"))
	e.AddRun(3, ts[:100], vs[:100])
	e.AddRun(3, ts[100:], vs[100:])
	_, out, err := decodeAll(t, e.AppendTo(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 3 {
		t.Fatalf("%d runs, want 3", len(out))
	}
	var all []int64
	for _, r := range out {
		all = append(all, r.ts...)
	}
	if !slices.Equal(all, ts) {
		t.Fatal("split runs do not give the samples back in order")
	}
}

func TestCompressed_TruncationIsCorrupt(t *testing.T) {
	e := compressedEncoder()
	e.DefineSeries(1, labels.Labels{{Name: "a", Value: "b"}}.AppendKey(nil))
	e.DefineSeries(2, []byte("literal"))
	e.AddRun(1, []int64{1, 2, 3}, []float64{1, 2, 3})
	e.AddRun(2, []int64{5, 4}, []float64{1, 2})
	b := e.AppendTo(nil)
	for i := 0; i < len(b); i++ {
		if _, _, err := decodeAll(t, b[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: err=%v, want ErrCorrupt", i, err)
		}
	}
	// A string index past the table.
	bad := slices.Clone(b)
	bad[1] = 0 // no strings
	if _, _, err := decodeAll(t, bad); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("definition with indexes past the table: err=%v, want ErrCorrupt", err)
	}
}

// tsbsLike is a record of series×n samples of TSBS-like cpu series: 10
// fields of each host, eleven labels, values that move by small steps.
func tsbsLike(e *Encoder, hosts, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	ts, vs := make([]int64, n), make([]float64, n)
	fields := []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}
	id := uint64(0)
	for h := range hosts {
		for _, f := range fields {
			id++
			ls := labels.Labels{
				{Name: "__name__", Value: "cpu_" + f}, {Name: "arch", Value: []string{"x64", "x86"}[h%2]},
				{Name: "datacenter", Value: fmt.Sprintf("us-east-1%c", 'a'+h%3)}, {Name: "hostname", Value: fmt.Sprint("host_", h)},
				{Name: "os", Value: "Ubuntu16.04LTS"}, {Name: "rack", Value: fmt.Sprint(h % 100)},
				{Name: "region", Value: "us-east-1"}, {Name: "service", Value: fmt.Sprint(h % 20)},
				{Name: "service_environment", Value: "production"}, {Name: "service_version", Value: fmt.Sprint(h % 2)},
				{Name: "team", Value: "SF"},
			}
			e.DefineSeries(id, ls.AppendKey(nil))
			v := float64(rng.IntN(100))
			for i := range n {
				ts[i] = 1_700_000_000_000 + int64(i)*10_000
				v = max(0, min(100, v+float64(rng.IntN(3)-1)))
				vs[i] = v
			}
			e.AddRun(id, ts, vs)
		}
	}
}

// TestCompressed_Size: TSBS-like records take a fraction of kind 1's
// bytes, and a definition of eleven shared labels a few dozen bytes.
func TestCompressed_Size(t *testing.T) {
	var raw Encoder
	raw.Reset()
	tsbsLike(&raw, 100, 100)
	e := compressedEncoder()
	tsbsLike(e, 100, 100)
	rb, cb := raw.AppendTo(nil), e.AppendTo(nil)
	perPoint := float64(len(cb)) / float64(e.Points())
	t.Logf("10,000 points of 1,000 series: kind 1 %d bytes (%.2f/point), kind 2 %d bytes (%.2f/point)", len(rb), float64(len(rb))/float64(raw.Points()), len(cb), perPoint)
	if perPoint > 1.5 {
		t.Fatalf("kind 2 takes %.2f bytes/point, want at most 1.5", perPoint)
	}
	// Definitions alone: 1,000 series of 11 labels.
	d := compressedEncoder()
	raw.Reset()
	tsbsLike(d, 100, 1)
	tsbsLike(&raw, 100, 1)
	defsOnly := len(d.AppendTo(nil)) - len(d.c.chunkb)
	perDef := float64(defsOnly) / 1000
	t.Logf("1,000 definitions: kind 2 %.1f bytes each (kind 1: %.1f)", perDef, float64(len(raw.defs))/1000)
	if perDef > 40 {
		t.Fatalf("a definition takes %.1f bytes, want at most 40", perDef)
	}
}

func FuzzCompressedRoundTrip(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Derive runs from the bytes: 3 bytes a sample (series, timestamp, value).
		e := compressedEncoder()
		var in []run
		for len(b) >= 3 {
			id := uint64(b[0] % 4)
			in = append(in, run{id, []int64{int64(int8(b[1])) * 1000}, []float64{float64(int8(b[2])) / 4}})
			e.AddRun(id, in[len(in)-1].ts, in[len(in)-1].vs)
			b = b[3:]
		}
		_, out, err := decodeAll(t, e.AppendTo(nil))
		if err != nil {
			t.Fatal(err)
		}
		want, got := lww(in), lww(out)
		if fmt.Sprint(want) != fmt.Sprint(got) {
			t.Fatalf("replay differs: %v, want %v", got, want)
		}
	})
}

// bombRecord is a kind 2 record whose string table holds one string of
// strLen bytes and whose nDefs definitions each name m-1 labels made of
// that string alone: a few bytes that stand for nDefs × 2(m-1) × strLen.
func bombRecord(strLen int, nDefs, m uint64) []byte {
	b := []byte{KindCompressed}
	b = binary.AppendUvarint(b, 1)
	b = binary.AppendUvarint(b, uint64(strLen))
	b = append(b, bytes.Repeat([]byte{'a'}, strLen)...)
	b = binary.AppendUvarint(b, nDefs)
	for id := range nDefs {
		b = binary.AppendUvarint(b, id+1)
		b = binary.AppendUvarint(b, m)
		for range 2 * (m - 1) {
			b = binary.AppendUvarint(b, 0)
		}
	}
	b = binary.AppendVarint(b, 0)
	return binary.AppendUvarint(b, 0)
}

func TestCompressed_RebuiltKeysAreBounded(t *testing.T) {
	defined := func(b []byte) (int, error) {
		var d Decoder
		total := 0
		err := d.Decode(b, func(_ uint64, key []byte) error { total += len(key); return nil },
			func(uint64, []int64, []float64) error { return nil })
		return total, err
	}
	// Within both bounds: 4 labels of a 1 KiB string, 100 series.
	if n, err := defined(bombRecord(1024, 100, 5)); err != nil || n < 100*8*1024 {
		t.Fatalf("a record within the bounds: %d key bytes, %v", n, err)
	}
	// One key of 16 × 64 KiB: over MaxKeyBytes.
	one := bombRecord(64<<10, 1, 9)
	if _, err := defined(one); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("a %d-byte record standing for a 1 MiB key: want a corrupt record naming the bound, got %v", len(one), err)
	}
	// 200 keys of 8 × 64 KiB (512 KiB each, 100 MiB in all): over
	// MaxDefinedKeyBytes, refused before the callback has seen them all.
	many := bombRecord(64<<10, 200, 5)
	n, err := defined(many)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "rebuilt keys exceed") {
		t.Fatalf("a %d-byte record standing for 100 MiB of keys: want a corrupt record naming the bound, got %v", len(many), err)
	}
	if n > MaxDefinedKeyBytes {
		t.Fatalf("%d key bytes passed to the callback, over the bound %d", n, MaxDefinedKeyBytes)
	}
}

// The encoder never writes a definition the decoder's bounds refuse: a
// key over MaxKeyBytes is stored literally, and so are the keys past
// MaxDefinedKeyBytes in one record.
func TestCompressed_EncoderStaysWithinTheKeyBounds(t *testing.T) {
	long := labels.FromStrings("__name__", "m", "a", strings.Repeat("x", MaxKeyBytes)).AppendKey(nil)
	var e Encoder
	e.SetKind(KindCompressed)
	e.DefineSeries(1, long)
	e.AddRun(1, []int64{1}, []float64{1})
	b := e.AppendTo(nil)
	var d Decoder
	var got []byte
	if err := d.Decode(b, func(_ uint64, key []byte) error { got = slices.Clone(key); return nil },
		func(uint64, []int64, []float64) error { return nil }); err != nil {
		t.Fatalf("a %d-byte key: %v", len(long), err)
	}
	if !bytes.Equal(got, long) {
		t.Fatalf("the %d-byte key came back as %d bytes", len(long), len(got))
	}
}
