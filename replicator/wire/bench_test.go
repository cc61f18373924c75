package wire

import (
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
)

// sensorSegment seals a segment of about 4 MiB (the node's default size)
// of sensor-like samples as the node writes them: 100 series, one record a
// write of 10 points per series, values a random walk with two decimals.
func sensorSegment(b *testing.B) ([]byte, wal.SegmentInfo) {
	b.Helper()
	l, err := wal.Open(wal.Options{Dir: b.TempDir(), NodeID: "pi-7"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(42, 7))
	const series = 100
	keys := make([][]byte, series)
	vals := make([]float64, series)
	for i := range keys {
		keys[i] = labels.FromStrings("__name__", "temperature", "sensor", string(rune('a'+i%26))+string(rune('a'+i/26))).AppendKey(nil)
		vals[i] = 20
	}
	var enc record.Encoder
	ts0 := int64(1_767_225_600_000)
	ts := make([]int64, 10)
	vs := make([]float64, 10)
	for w := 0; l.Segments()[0].Bytes < 4<<20; w++ {
		enc.Reset()
		for s := range series {
			if w == 0 {
				enc.DefineSeries(uint64(s+1), keys[s])
			}
			for k := range ts {
				ts[k] = ts0 + int64(w*10+k)*1000
				vals[s] += float64(rng.IntN(21)-10) / 100
				vs[k] = float64(int64(vals[s]*100)) / 100
			}
			enc.AddRun(uint64(s+1), ts, vs)
		}
		if _, err := l.Append(wal.Record{Data: enc.AppendTo(nil), MinT: enc.MinT(), MaxT: enc.MaxT(), Points: enc.Points()}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := l.Cut(); err != nil {
		b.Fatal(err)
	}
	file, info, err := l.ReadSealed(l.Segments()[0].Seq)
	if err != nil {
		b.Fatal(err)
	}
	return file, info
}

func BenchmarkEncode(b *testing.B) {
	file, info := sensorSegment(b)
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		b.Run(lvl.String(), func(b *testing.B) {
			e, err := NewEncoder(lvl)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			b.ReportAllocs()
			b.SetBytes(int64(len(file)))
			var out Encoded
			for b.Loop() {
				if out, err = e.Encode("pi-7", info, file, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.CompressedBytes)/float64(info.Points), "wireB/point")
			b.ReportMetric(float64(len(file))/float64(info.Points), "walB/point")
		})
	}
}

func BenchmarkAssemble(b *testing.B) {
	file, info := sensorSegment(b)
	e, err := NewEncoder(zstd.SpeedFastest)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := e.Encode("pi-7", info, file, 0)
	e.Close()
	if err != nil {
		b.Fatal(err)
	}
	a, err := NewAssembler("pi-7", Limits{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	b.ReportAllocs()
	b.SetBytes(int64(len(file)))
	for b.Loop() {
		var seg *Segment
		for _, p := range enc.Parts {
			var werr *Error
			if seg, werr = a.Add(p); werr != nil {
				b.Fatal(werr)
			}
		}
		if seg == nil {
			b.Fatal("no segment")
		}
	}
}
