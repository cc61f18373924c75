package catalog

import (
	"fmt"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// BenchmarkFSM_RegisterSeries applies batches of new series (the apply
// cost every member pays per registration).
func BenchmarkFSM_RegisterSeries(b *testing.B) {
	const batch = 1000
	for _, known := range []bool{false, true} {
		name := "new"
		if known {
			name = "known"
		}
		b.Run(name, func(b *testing.B) {
			f := newCatalogWithEdges(b, "pi-1")
			cmds := make([][]byte, 64)
			for i := range cmds {
				var ss []labels.Labels
				for j := range batch {
					ss = append(ss, series("__name__", "temperature", "sensor", fmt.Sprintf("s%d", i*batch+j), "site", fmt.Sprintf("site-%d", j%10)))
				}
				cmds[i] = EncodeCommand(RegisterSeries{Edge: "pi-1", Series: ss})
			}
			if known {
				for i, c := range cmds {
					if _, err := f.Apply(uint64(10+i), c); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !known && i%len(cmds) == 0 && i > 0 {
					b.StopTimer()
					f = newCatalogWithEdges(b, "pi-1")
					b.StartTimer()
				}
				if _, err := f.Apply(uint64(100+i), cmds[i%len(cmds)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "series/s")
		})
	}
}

// BenchmarkFSM_Snapshot encodes a catalog of 100,000 series.
func BenchmarkFSM_Snapshot(b *testing.B) {
	f := newCatalogWithEdges(b, "pi-1")
	for i := range 100 {
		var ss []labels.Labels
		for j := range 1000 {
			ss = append(ss, series("__name__", "temperature", "sensor", fmt.Sprintf("s%d", i*1000+j)))
		}
		applyOK(b, f, uint64(10+i), RegisterSeries{Edge: "pi-1", Series: ss})
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(f.Snapshot())
	}
	b.SetBytes(int64(n))
}

// BenchmarkFSM_GapsAndHeld applies, on an edge with MaxGapRuns-1 recorded
// gaps, a replayed gap (a duplicate) and a held segment past the gaps
// (the intake's steady state), each moving the automatic watermark.
func BenchmarkFSM_GapsAndHeld(b *testing.B) {
	f := newCatalogWithEdges(b, "pi-1")
	var gaps []GapRange
	for i := range uint64(MaxGapRuns - 1) {
		gaps = append(gaps, gap(2*i, 2*i+1, GapBacklogOverflow))
	}
	applyOK(b, f, 2, RecordGap{Edge: "pi-1", Gaps: gaps})
	replay := EncodeCommand(RecordGap{Edge: "pi-1", Gaps: []GapRange{gaps[len(gaps)/2]}})
	base := 2 * uint64(MaxGapRuns)
	b.ReportAllocs()
	i := uint64(0)
	for b.Loop() {
		i++
		if _, err := f.Apply(10+i, replay); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Apply(10+i, EncodeCommand(RecordHeld{Edge: "pi-1", Ranges: []HeldRange{held(base+i, base+i)}})); err != nil {
			b.Fatal(err)
		}
	}
}
