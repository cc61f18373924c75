package segment_test

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
)

// lowRateSegment builds a format 2 segment as a node writes it at a low
// rate: one record per write, each series defined in the first record
// that uses it, one point per series per record, and, when messy, some
// out-of-order and duplicate timestamps. It returns the file and, per
// series key, the samples replaying its records in order leaves (last
// write wins).
func lowRateSegment(t testing.TB, writes, nSeries int, messy bool) ([]byte, map[string]map[int64]float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	want := map[string]map[int64]float64{}
	defined := map[uint64]bool{}
	var recs []wal.Record
	for w := range writes {
		var e record.Encoder
		e.SetKind(record.KindCompressed)
		for s := range nSeries {
			id := uint64(s + 1)
			key := string(labels.FromStrings("__name__", "temp", "sensor", string(rune('a'+s))).AppendKey(nil))
			if !defined[id] {
				e.DefineSeries(id, []byte(key))
				defined[id] = true
			}
			ts := int64(1_700_000_000_000) + int64(w)*1000
			if messy && rng.IntN(5) == 0 {
				ts -= int64(rng.IntN(3)) * 1000 // a late or repeated sample
			}
			v := float64(int(20*100+rng.IntN(300))) / 100
			e.AddRun(id, []int64{ts}, []float64{v})
			if want[key] == nil {
				want[key] = map[int64]float64{}
			}
			want[key][ts] = v
		}
		data := e.AppendTo(nil)
		recs = append(recs, wal.Record{Data: data, MinT: e.MinT(), MaxT: e.MaxT(), Points: e.EncodedPoints()})
	}
	file, _, err := wal.EncodeSegmentVersion(wal.FormatV2, "edge-1", 42, 40, recs)
	if err != nil {
		t.Fatal(err)
	}
	return file, want
}

// replayed is what reading a file's runs in order leaves per series key.
func replayed(t *testing.T, file []byte) (map[string]map[int64]float64, segment.Contents) {
	t.Helper()
	got := map[string]map[int64]float64{}
	c, err := segment.Read("compacted", file, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[uint64]string{}
	for id, ls := range c.Series {
		keys[id] = string(ls.AppendKey(nil))
	}
	if _, err := segment.ReadRuns("compacted", file, nil, func(id uint64, ts []int64, vs []float64) error {
		m := got[keys[id]]
		if m == nil {
			m = map[int64]float64{}
			got[keys[id]] = m
		}
		for i, t := range ts {
			m[t] = vs[i]
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got, c
}

func TestCompact_OneRecordThatReplaysAsTheSegment(t *testing.T) {
	for _, messy := range []bool{false, true} {
		file, want := lowRateSegment(t, 30, 8, messy)
		out, info, ok, err := segment.Compact(file)
		if err != nil || !ok {
			t.Fatalf("messy=%v: Compact = ok %v, %v", messy, ok, err)
		}
		if info.Seq != 42 || info.PrevSeq != 40 || info.NodeID != "edge-1" || info.Version != wal.FormatV2 || info.Records != 1 {
			t.Fatalf("messy=%v: compacted info %+v", messy, info)
		}
		if len(out) >= len(file) || int64(len(out)) != info.Bytes {
			t.Fatalf("messy=%v: %d bytes compacted from %d (info says %d)", messy, len(out), len(file), info.Bytes)
		}
		got, c := replayed(t, out)
		if len(got) != len(want) {
			t.Fatalf("messy=%v: %d series, want %d", messy, len(got), len(want))
		}
		var points int64
		for k, m := range want {
			points += int64(len(m))
			if !maps.Equal(got[k], m) {
				t.Fatalf("messy=%v: series %q replays as %v, want %v", messy, k, got[k], m)
			}
		}
		if info.Points != points || c.Points != points {
			t.Fatalf("messy=%v: %d points in the footer, %d read, want %d", messy, info.Points, c.Points, points)
		}
		again, _, _, err := segment.Compact(file)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("messy=%v: a second compaction differs (%v)", messy, err)
		}
	}
}

func TestCompact_LeavesWhatItCannotImprove(t *testing.T) {
	one, _ := lowRateSegment(t, 1, 8, false)
	if _, _, ok, err := segment.Compact(one); ok || err != nil {
		t.Fatalf("a one-record segment: ok %v, %v", ok, err)
	}
	var e record.Encoder // kind 1
	e.DefineSeries(1, labels.FromStrings("__name__", "x").AppendKey(nil))
	e.AddRun(1, []int64{1}, []float64{1})
	r := wal.Record{Data: e.AppendTo(nil), MinT: 1, MaxT: 1, Points: 1}
	v1, _, err := wal.EncodeSegment("edge-1", 3, 2, []wal.Record{r, r})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := segment.Compact(v1); ok || err != nil {
		t.Fatalf("a format 1 segment: ok %v, %v", ok, err)
	}
	big, _ := lowRateSegment(t, segment.MaxCompactPoints/8+1, 8, false)
	if _, _, ok, err := segment.Compact(big); ok || err != nil {
		t.Fatalf("a segment over MaxCompactPoints: ok %v, %v", ok, err)
	}
	file, _ := lowRateSegment(t, 10, 2, false)
	bad := slices.Clone(file)
	bad[len(bad)/2] ^= 0xff
	if _, _, ok, err := segment.Compact(bad); ok || err == nil {
		t.Fatalf("a damaged segment: ok %v, err %v", ok, err)
	}
}

// FuzzCompact: Compact never panics on any input, and what it compacts is
// a valid segment of one record holding the points it says.
func FuzzCompact(f *testing.F) {
	for _, n := range []int{2, 5} {
		file, _ := lowRateSegment(f, n, 3, true)
		f.Add(file)
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		out, info, ok, err := segment.Compact(file)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("ok with an error: %v", err)
		}
		c, err := segment.Read("compacted", out, nil)
		if err != nil {
			t.Fatalf("the compacted file does not read: %v", err)
		}
		if c.Info.Records != 1 || c.Points != info.Points || c.Info.CRC != info.CRC || len(out) >= len(file) {
			t.Fatalf("compacted %+v, read %+v (%d points)", info, c.Info, c.Points)
		}
	})
}
