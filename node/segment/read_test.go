package segment_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
)

// fileOf builds a segment of node "edge" with one record per encoder fill.
func fileOf(t *testing.T, fills ...func(e *record.Encoder)) []byte {
	t.Helper()
	var recs []wal.Record
	for _, fill := range fills {
		var e record.Encoder
		e.Reset()
		fill(&e)
		r := wal.Record{Data: e.AppendTo(nil), Points: e.Points()}
		if e.Points() > 0 {
			r.MinT, r.MaxT = e.MinT(), e.MaxT()
		}
		recs = append(recs, r)
	}
	file, _, err := wal.EncodeSegment("edge", 2, 1, recs)
	if err != nil {
		t.Fatal(err)
	}
	return file
}

func TestRead_ReturnsTheSeriesAndPointsOfABuiltFile(t *testing.T) {
	b, err := segment.NewBuilder("edge", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	cpu, mem := labels.FromStrings("__name__", "cpu", "host", "a"), labels.FromStrings("__name__", "mem", "host", "a")
	for _, ls := range []labels.Labels{cpu, mem} {
		if _, err := b.Add(ls, []int64{1, 2, 3}, []float64{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	file, info, err := b.Finish(2, 1)
	if err != nil {
		t.Fatal(err)
	}
	c, err := segment.Read("built", file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Info.Seq != info.Seq || c.Info.CRC != info.CRC || c.Info.NodeID != "edge" || c.Points != 6 || c.Info.Points != 6 {
		t.Fatalf("Read = %+v, want the footer of %+v and 6 points", c, info)
	}
	if len(c.Series) != 2 || !labels.Equal(c.Series[1], cpu) || !labels.Equal(c.Series[2], mem) {
		t.Fatalf("series %v, want 1: %v, 2: %v", c.Series, cpu, mem)
	}
}

func TestRead_RefusesInconsistentDefinitionsAndRuns(t *testing.T) {
	key := func(s ...string) []byte { return labels.FromStrings(s...).AppendKey(nil) }
	cpu, mem := key("__name__", "cpu"), key("__name__", "mem")
	refused := errors.New("refused")
	for _, tc := range []struct {
		name   string
		file   []byte
		accept func(labels.Labels) (labels.Labels, error)
		want   string
	}{
		{"redefined", fileOf(t,
			func(e *record.Encoder) { e.DefineSeries(1, cpu) },
			func(e *record.Encoder) { e.DefineSeries(1, mem) }), nil, "record 2: series 1 redefined with other labels"},
		{"undefined run", fileOf(t,
			func(e *record.Encoder) { e.DefineSeries(1, cpu); e.AddRun(2, []int64{5}, []float64{1}) }), nil, "record 1: run of series 2, which the segment does not define"},
		{"bad key", fileOf(t,
			func(e *record.Encoder) { e.DefineSeries(1, []byte{9}) }), nil, "record 1: series 1: decode labels"},
		{"not accepted", fileOf(t,
			func(e *record.Encoder) { e.DefineSeries(3, cpu) }), func(labels.Labels) (labels.Labels, error) { return nil, refused }, "record 1: series 3: refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := segment.Read("x", tc.file, tc.accept)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read: %v, want %q", err, tc.want)
			}
		})
	}
	// The same definition twice is fine.
	file := fileOf(t, func(e *record.Encoder) { e.DefineSeries(1, cpu) }, func(e *record.Encoder) { e.DefineSeries(1, cpu) })
	if _, err := segment.Read("x", file, nil); err != nil {
		t.Fatalf("a repeated definition: %v", err)
	}
}

// TestReadRuns_HandsOverEveryRunInFileOrder: the runs come with their
// series' ids, in the file's order, every point once; an error of fn
// stops the read and is returned wrapped.
func TestReadRuns_HandsOverEveryRunInFileOrder(t *testing.T) {
	cpu := labels.FromStrings("__name__", "cpu").AppendKey(nil)
	mem := labels.FromStrings("__name__", "mem").AppendKey(nil)
	file := fileOf(t,
		func(e *record.Encoder) {
			e.DefineSeries(1, cpu)
			e.DefineSeries(2, mem)
			e.AddRun(1, []int64{1, 2}, []float64{10, 20})
			e.AddRun(2, []int64{1}, []float64{5})
		},
		func(e *record.Encoder) { e.AddRun(1, []int64{3}, []float64{30}) })
	type run struct {
		id uint64
		ts []int64
		vs []float64
	}
	var got []run
	c, err := segment.ReadRuns("x", file, nil, func(id uint64, ts []int64, vs []float64) error {
		got = append(got, run{id, append([]int64(nil), ts...), append([]float64(nil), vs...)})
		return nil
	})
	if err != nil || c.Points != 4 || len(c.Series) != 2 {
		t.Fatalf("ReadRuns = %+v, %v", c, err)
	}
	want := []run{{1, []int64{1, 2}, []float64{10, 20}}, {2, []int64{1}, []float64{5}}, {1, []int64{3}, []float64{30}}}
	if len(got) != len(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	for i := range want {
		if got[i].id != want[i].id || !slices.Equal(got[i].ts, want[i].ts) || !slices.Equal(got[i].vs, want[i].vs) {
			t.Fatalf("run %d: %v, want %v", i, got[i], want[i])
		}
	}
	stop := errors.New("stop")
	if _, err := segment.ReadRuns("x", file, nil, func(uint64, []int64, []float64) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("fn's error: %v", err)
	}
}
