package replica

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// downsampled is a 1h or 1d downsampling answer, as series → points.
func downsampled(t *testing.T, q func(model.Query, func(model.Series) error) error, minT, maxT, step int64, f rollup.Func) map[string][][2]float64 {
	t.Helper()
	out := map[string][][2]float64{}
	err := q(model.Query{Matchers: sel(t, `{__name__=~".+"}`), Start: minT, End: maxT, Mode: model.ModeDownsample, Step: step, Downsample: f}, func(s model.Series) error {
		var pts [][2]float64
		for i, ts := range s.Ts {
			pts = append(pts, [2]float64{float64(ts), s.Vs[i]})
		}
		out[s.Labels.String()] = pts
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The rollups of an edge, exported from a store directly or through a
// peer's Client and imported into a node, answer every 1h and 1d
// downsampling query over whole days as the store does, head samples
// included; another edge's series are not exported.
func TestExportRollups_ImportedAnswerEqualsTheStore(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	rng := rand.New(rand.NewPCG(11, 12))
	o1, o2 := oracle{}, oracle{}
	writeEdge(t, s, o1, "e1", rng, 6, 6, 200, 5*24*time.Hour)
	writeEdge(t, s, o2, "e2", rng, 3, 2, 50, 5*24*time.Hour)
	c := serve(t, ServerOptions{Store: s})
	day := int64(rollup.Day)
	minT := rollup.BucketStart(testNow.Add(-6*24*time.Hour).UnixMilli(), day)
	maxT := rollup.BucketStart(testNow.UnixMilli(), day) + day - 1

	for _, src := range []struct {
		name string
		r    RollupSource
	}{{"store", s}, {"peer", c}} {
		t.Run(src.name, func(t *testing.T) {
			n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "e1", Now: clock, FlushInterval: time.Hour, RetentionRaw: 30 * 24 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			var entries int
			err = src.r.ExportRollups(context.Background(), "e1", minT, maxT, func(e RollupSeries) error {
				entries++
				r, err := DecodeRollups(e)
				if err != nil {
					return err
				}
				return n.ImportRollups(r)
			})
			if err != nil {
				t.Fatal(err)
			}
			if entries != len(o1) {
				t.Fatalf("%d entries exported, want one per series of e1 (%d)", entries, len(o1))
			}
			for _, step := range []int64{rollup.Hour, day} {
				for _, f := range []rollup.Func{rollup.FuncSum, rollup.FuncCount, rollup.FuncMin, rollup.FuncLast} {
					want := downsampled(t, func(q model.Query, emit func(model.Series) error) error {
						_, err := s.Query(context.Background(), []string{"e1"}, q, func(_ string, x model.Series) error { return emit(x) })
						return err
					}, minT, maxT, step, f)
					got := downsampled(t, func(q model.Query, emit func(model.Series) error) error {
						_, err := n.Query(context.Background(), q, emit)
						return err
					}, minT, maxT, step, f)
					if len(want) != len(o1) {
						t.Fatalf("the store answers %d series of e1, want %d", len(want), len(o1))
					}
					if err := sameAnswer(got, want); err != nil {
						t.Errorf("%s per %dms: %v", f, step, err)
					}
				}
			}
		})
	}
}

// Entries that cannot be rollups are refused when decoded.
func TestDecodeRollups_RefusesBadPacks(t *testing.T) {
	var h rollup.Hourly
	day := rollup.BucketStart(testNow.UnixMilli(), rollup.Day)
	h.Hours[2] = rollup.Agg{Count: 2, Sum: 3, Min: 1, Max: 2, First: 1, Last: 2, FirstT: day + 2*rollup.Hour, LastT: day + 2*rollup.Hour + 10}
	good := h.AppendBinary(nil, day)
	cases := []RollupSeries{
		{Labels: lbl("__name__", "x"), Hourly: []RollupPack{{StartMs: day + 1, Data: good}}},
		{Labels: lbl("__name__", "x"), Hourly: []RollupPack{{StartMs: day, Data: good[:len(good)-1]}}},
		{Labels: lbl("__name__", "x"), Daily: []RollupPack{{StartMs: rollup.PackStart(day) + rollup.Day, Data: good}}},
	}
	for i, e := range cases {
		if _, err := DecodeRollups(e); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("case %d: %v, want ErrInvalidSegment", i, err)
		}
	}
	r, err := DecodeRollups(RollupSeries{Labels: lbl("__name__", "x"), Hourly: []RollupPack{{StartMs: day, Data: good}}})
	if err != nil || len(r.Hourly) != 1 || r.Hourly[0].Hours != h {
		t.Fatalf("good pack: %+v, %v", r, err)
	}
}

// FuzzDecodeRollups: any bytes at any start decode or are refused with
// ErrInvalidSegment, never a panic; what decodes encodes back to the same
// cells.
func FuzzDecodeRollups(f *testing.F) {
	var h rollup.Hourly
	day := rollup.BucketStart(testNow.UnixMilli(), rollup.Day)
	h.Hours[5] = rollup.Agg{Count: 3, Sum: 6, Min: 1, Max: 3, First: 1, Last: 3, FirstT: day + 5*rollup.Hour, LastT: day + 5*rollup.Hour + 99}
	f.Add(h.AppendBinary(nil, day), day, false)
	var d rollup.Daily
	pack := rollup.PackStart(day)
	d.Days[(day-pack)/rollup.Day] = h.Total()
	f.Add(d.AppendBinary(nil, pack), pack, true)
	f.Fuzz(func(t *testing.T, data []byte, start int64, daily bool) {
		e := RollupSeries{Labels: lbl("__name__", "x")}
		if daily {
			e.Daily = []RollupPack{{StartMs: start, Data: data}}
		} else {
			e.Hourly = []RollupPack{{StartMs: start, Data: data}}
		}
		r, err := DecodeRollups(e)
		if err != nil {
			if !errors.Is(err, ErrInvalidSegment) {
				t.Fatalf("error %v does not wrap ErrInvalidSegment", err)
			}
			return
		}
		// Compared as bytes: cells may hold NaNs.
		if daily {
			again := r.Daily[0].Days.AppendBinary(nil, start)
			d2, err := rollup.DecodeDaily(again, start)
			if err != nil || !bytes.Equal(d2.AppendBinary(nil, start), again) {
				t.Fatalf("daily pack does not round-trip: %v", err)
			}
		} else {
			again := r.Hourly[0].Hours.AppendBinary(nil, start)
			h2, err := rollup.DecodeHourly(again, start)
			if err != nil || !bytes.Equal(h2.AppendBinary(nil, start), again) {
				t.Fatalf("hourly pack does not round-trip: %v", err)
			}
		}
	})
}

// A replica given an edge's rollups from another (ImportRollups) answers
// 1h and 1d queries over them as the source does, the edge label kept
// apart; importing twice changes nothing.
func TestImportRollups_AnotherReplicaAnswersAsTheSource(t *testing.T) {
	src := openStore(t, t.TempDir())
	defer src.Close()
	dst := openStore(t, t.TempDir())
	defer dst.Close()
	rng := rand.New(rand.NewPCG(21, 22))
	writeEdge(t, src, oracle{}, "e1", rng, 4, 4, 100, 4*24*time.Hour)
	day := int64(rollup.Day)
	minT := rollup.BucketStart(testNow.Add(-5*24*time.Hour).UnixMilli(), day)
	maxT := rollup.BucketStart(testNow.UnixMilli(), day) + day - 1
	for range 2 {
		if err := src.ExportRollups(context.Background(), "e1", minT, maxT, func(e RollupSeries) error { return dst.ImportRollups("e1", e) }); err != nil {
			t.Fatal(err)
		}
		if err := dst.SyncImports(); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []int64{rollup.Hour, day} {
		query := func(s *Store) map[string][][2]float64 {
			return downsampled(t, func(q model.Query, emit func(model.Series) error) error {
				_, err := s.Query(context.Background(), []string{"e1"}, q, func(_ string, x model.Series) error { return emit(x) })
				return err
			}, minT, maxT, step, rollup.FuncSum)
		}
		want, got := query(src), query(dst)
		if len(want) == 0 {
			t.Fatal("the source answers nothing")
		}
		if err := sameAnswer(got, want); err != nil {
			t.Errorf("per %dms: %v", step, err)
		}
	}
	bad := RollupSeries{Labels: labels.FromStrings("__name__", "x", EdgeLabel, "e9"),
		Hourly: []RollupPack{{StartMs: minT, Data: (&rollup.Hourly{}).AppendBinary(nil, minT)}}}
	if err := dst.ImportRollups("e1", bad); !errors.Is(err, ErrInvalidSegment) {
		t.Fatalf("rollups carrying the edge label: %v, want ErrInvalidSegment", err)
	}
}
