package segment_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
)

type series struct {
	ls labels.Labels
	ts []int64
	vs []float64
}

// randomSeries makes n series with random (unsorted, duplicate) points.
func randomSeries(rng *rand.Rand, n, maxPoints int) []series {
	out := make([]series, n)
	for i := range out {
		ls := labels.Labels{{Name: "__name__", Value: fmt.Sprintf("m%d", i%7)}, {Name: "host", Value: fmt.Sprintf("h%03d", i)}}
		k := 1 + rng.IntN(maxPoints)
		s := series{ls: ls, ts: make([]int64, k), vs: make([]float64, k)}
		t := rng.Int64N(1 << 41)
		for j := range k {
			switch rng.IntN(10) {
			case 0: // duplicate
			case 1:
				t -= rng.Int64N(100_000) // out of order
			default:
				t += rng.Int64N(20_000)
			}
			s.ts[j], s.vs[j] = t, rng.NormFloat64()
		}
		out[i] = s
	}
	return out
}

// decodeFiles reads files back: every series' points in file order, and
// checks that each file defines each of its series exactly once.
func decodeFiles(t *testing.T, files [][]byte) map[string]*series {
	t.Helper()
	got := map[string]*series{}
	for fi, f := range files {
		keys := map[uint64]string{}
		var dec record.Decoder
		info, err := wal.VerifySegment(fmt.Sprint(fi), f, func(r wal.Record) error {
			return dec.Decode(r.Data, func(id uint64, key []byte) error {
				if _, ok := keys[id]; ok {
					return fmt.Errorf("series %d defined twice in one file", id)
				}
				keys[id] = string(key)
				return nil
			}, func(id uint64, ts []int64, vs []float64) error {
				k, ok := keys[id]
				if !ok {
					return fmt.Errorf("run of undefined series %d", id)
				}
				s := got[k]
				if s == nil {
					s = &series{}
					got[k] = s
				}
				s.ts = append(s.ts, ts...)
				s.vs = append(s.vs, vs...)
				return nil
			})
		})
		if err != nil {
			t.Fatalf("file %d: %v", fi, err)
		}
		if info.NodeID != "edge-1" || info.Seq != 9 || info.PrevSeq != 4 {
			t.Fatalf("file %d: header %+v", fi, info)
		}
	}
	return got
}

// TestBuilder_FilesHoldEveryPointInOrderWithinTheLimit: a stream of
// series cut into files of a random limit holds every point once, in the
// order added, no file over the limit, every file but the last full to
// within a frame and a run's definition.
func TestBuilder_FilesHoldEveryPointInOrderWithinTheLimit(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		in := randomSeries(rng, 1+rng.IntN(40), 1+rng.IntN(30_000))
		limit := int64(300 + rng.IntN(1<<uint(10+rng.IntN(11))))
		b, err := segment.NewBuilder("edge-1", limit)
		if err != nil {
			t.Fatal(err)
		}
		var files [][]byte
		var sizes []int64
		finish := func() {
			bound := b.Bytes()
			f, info, err := b.Finish(9, 4)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(f)) > limit || int64(len(f)) > bound || info.Bytes != int64(len(f)) {
				t.Fatalf("seed %d: file of %d bytes, limit %d, Bytes() said at most %d", seed, len(f), limit, bound)
			}
			files, sizes = append(files, f), append(sizes, int64(len(f)))
		}
		for _, s := range in {
			ts, vs := s.ts, s.vs
			for len(ts) > 0 {
				n, err := b.Add(s.ls, ts, vs)
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				ts, vs = ts[n:], vs[n:]
				if len(ts) > 0 {
					finish()
				}
			}
		}
		finish()
		got := decodeFiles(t, files)
		if len(got) != len(in) {
			t.Fatalf("seed %d: %d series back, want %d", seed, len(got), len(in))
		}
		for _, s := range in {
			g := got[string(s.ls.AppendKey(nil))]
			if g == nil || !slices.Equal(g.ts, s.ts) || !slices.Equal(g.vs, s.vs) {
				t.Fatalf("seed %d: series %s does not come back as added", seed, s.ls)
			}
		}
		// A full file leaves room for less than one point with its
		// definition (about 60 bytes here) plus the frame slack.
		for i, n := range sizes[:len(sizes)-1] {
			if limit-n > 150 {
				t.Fatalf("seed %d: file %d of %d bytes is not full (limit %d)", seed, i, n, limit)
			}
		}
	}
}

// TestBuilder_SameInputSameBytes: building twice gives identical files,
// and Finish resets the Builder (an empty file next).
func TestBuilder_SameInputSameBytes(t *testing.T) {
	in := randomSeries(rand.New(rand.NewPCG(3, 3)), 30, 50_000)
	build := func() ([]byte, wal.SegmentInfo) {
		b, err := segment.NewBuilder("edge-1", 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range in {
			if n, err := b.Add(s.ls, s.ts, s.vs); err != nil || n != len(s.ts) {
				t.Fatalf("Add = %d, %v; want all %d", n, err, len(s.ts))
			}
		}
		f, info, err := b.Finish(9, 4)
		if err != nil {
			t.Fatal(err)
		}
		if f2, info2, err := b.Finish(9, 4); err != nil || info2.Points != 0 || info2.Records != 0 || len(f2) >= len(f) {
			t.Fatalf("second Finish: %+v, %v; want an empty file", info2, err)
		}
		return f, info
	}
	f1, i1 := build()
	f2, i2 := build()
	if !bytes.Equal(f1, f2) || i1.CRC != i2.CRC {
		t.Fatal("the same points built two different files")
	}
	if i1.Records < 2 {
		t.Fatalf("%d records; the test wants several (records close at %d bytes)", i1.Records, segment.RecordBytes)
	}
}

// TestBuilder_RefusesWhatCannotFit: a series whose definition and one
// point cannot fit an empty file is ErrSeriesTooLarge and adds nothing;
// bad arguments are errors.
func TestBuilder_RefusesWhatCannotFit(t *testing.T) {
	b, err := segment.NewBuilder("edge-1", 400)
	if err != nil {
		t.Fatal(err)
	}
	big := labels.Labels{{Name: "__name__", Value: strings.Repeat("x", 500)}}
	if n, err := b.Add(big, []int64{1}, []float64{1}); n != 0 || !errors.Is(err, segment.ErrSeriesTooLarge) {
		t.Fatalf("Add of a too large series = %d, %v; want ErrSeriesTooLarge", n, err)
	}
	if b.Points() != 0 {
		t.Fatalf("%d points after a refused Add", b.Points())
	}
	small := labels.Labels{{Name: "__name__", Value: "m"}}
	if _, err := b.Add(small, []int64{1, 2}, []float64{1}); err == nil {
		t.Fatal("Add with 2 timestamps and 1 value accepted")
	}
	if n, err := b.Add(small, []int64{1, 2}, []float64{1, 2}); n != 2 || err != nil {
		t.Fatalf("Add = %d, %v", n, err)
	}
	// Not empty any more: a series that does not fit makes the file full.
	if n, err := b.Add(big, []int64{1}, []float64{1}); n != 0 || err != nil {
		t.Fatalf("Add to a non-empty file = %d, %v; want 0, nil (full)", n, err)
	}
	for _, c := range []struct {
		id    string
		limit int64
	}{{"", 1 << 20}, {strings.Repeat("n", wal.MaxNodeIDBytes+1), 1 << 20}, {"e", 10}, {"e", 2 << 30}} {
		if _, err := segment.NewBuilder(c.id, c.limit); err == nil {
			t.Errorf("NewBuilder(%d-byte id, %d) accepted", len(c.id), c.limit)
		}
	}
	if _, _, err := b.Finish(3, 3); err == nil {
		t.Fatal("Finish with prevSeq = seq accepted")
	}
}
