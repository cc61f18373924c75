package replica

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var testNow = time.Date(2026, 4, 10, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return testNow }

// shipped is one sealed WAL segment of an edge, as it would be shipped.
type shipped struct {
	seq  uint64
	crc  uint32
	file []byte
}

// edgeSegments writes each group with one Write on a fresh node named edge
// and returns the sealed segments, one per group: the segment age is 1 ms
// and the WAL cuts before a write into a segment older than that.
func edgeSegments(t testing.TB, edge string, groups ...[]model.Batch) []shipped {
	t.Helper()
	return edgeSegmentsFormat(t, edge, 0, groups...)
}

// edgeSegmentsFormat is edgeSegments from an edge whose WAL writes format
// version format (0: the node's default).
func edgeSegmentsFormat(t testing.TB, edge string, format uint8, groups ...[]model.Batch) []shipped {
	t.Helper()
	n, err := node.Open(node.Options{
		DataDir: t.TempDir(), NodeID: edge, Now: clock, WALFormat: format,
		WALSegmentAge: time.Millisecond, WALRetention: func() uint64 { return 1 },
		FlushInterval: time.Hour, OutOfOrderWindow: 30 * 24 * time.Hour, RetentionRaw: 60 * 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	write := func(bs []model.Batch) {
		time.Sleep(2 * time.Millisecond)
		if _, err := n.Write(context.Background(), bs); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range groups {
		write(g)
	}
	// One more write seals the last group's segment.
	write([]model.Batch{{Labels: lbl("__name__", "seal"), Ts: []int64{testNow.UnixMilli()}, Vs: []float64{0}}})
	var out []shipped
	for i := 0; len(out) < len(groups); i++ {
		if i > 2000 {
			t.Fatalf("only %d of %d segments sealed: %+v", len(out), len(groups), n.WALSegments())
		}
		out = out[:0]
		for _, s := range n.WALSegments() {
			if s.Sealed && len(out) < len(groups) {
				b, info, err := n.ReadWALSegment(s.Seq)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, shipped{info.Seq, info.CRC, b})
			}
		}
		if len(out) < len(groups) {
			time.Sleep(time.Millisecond)
		}
	}
	return out
}

func lbl(nv ...string) []labels.Label {
	var out []labels.Label
	for i := 0; i < len(nv); i += 2 {
		out = append(out, labels.Label{Name: nv[i], Value: nv[i+1]})
	}
	return out
}

// points makes n points one minute apart, ending at end.
func points(end time.Time, n int, val func(i int) float64) ([]int64, []float64) {
	ts, vs := make([]int64, n), make([]float64, n)
	for i := range n {
		ts[i] = end.Add(-time.Duration(n-1-i) * time.Minute).UnixMilli()
		vs[i] = val(i)
	}
	return ts, vs
}

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, CoordinatorID: "coord-1", Now: clock, RetentionRaw: 30 * 24 * time.Hour,
		HeadMaxBytes: 8 << 20, BlockCacheBytes: 8 << 20, WriteBufferBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type got struct {
	edge string
	s    model.Series
}

func queryAll(t *testing.T, s interface {
	Query(context.Context, []string, model.Query, func(string, model.Series) error) (model.QueryInfo, error)
}, edges []string, q model.Query) ([]got, model.QueryInfo) {
	t.Helper()
	var out []got
	info, err := s.Query(context.Background(), edges, q, func(e string, x model.Series) error {
		out = append(out, got{e, x})
		return nil
	})
	if err != nil {
		t.Fatalf("query %v: %v", edges, err)
	}
	return out, info
}

func sel(t *testing.T, s string) []*labels.Matcher {
	ms, err := labels.ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func rawQuery(t *testing.T) model.Query {
	return model.Query{Matchers: sel(t, `temp`), Start: 0, End: testNow.UnixMilli() + 1, Mode: model.ModeRaw}
}

func mustApply(t *testing.T, s *Store, edge string, seg shipped) Applied {
	t.Helper()
	a, err := s.Apply(context.Background(), edge, seg.seq, seg.crc, seg.file)
	if err != nil {
		t.Fatalf("apply segment %d of %s: %v", seg.seq, edge, err)
	}
	return a
}

func TestApply_QueryBackExactlyPerEdge(t *testing.T) {
	ts, vs := points(testNow, 300, func(i int) float64 { return float64(i) * 0.5 })
	ts2, vs2 := points(testNow, 300, func(i int) float64 { return -float64(i) })
	// Two edges with the same label set, different values; edge b also
	// has a second series.
	segA := edgeSegments(t, "edge-a", []model.Batch{{Labels: lbl("__name__", "temp", "room", "1"), Ts: ts, Vs: vs}})
	segB := edgeSegments(t, "edge-b", []model.Batch{
		{Labels: lbl("__name__", "temp", "room", "1"), Ts: ts2, Vs: vs2},
		{Labels: lbl("__name__", "temp", "room", "2"), Ts: ts[:10], Vs: vs[:10]},
	})
	s := openStore(t, t.TempDir())
	defer s.Close()
	a := mustApply(t, s, "edge-a", segA[0])
	if a.Points != 300 || a.Rejected != 0 || a.Duplicate || a.MinTimeMs != ts[0] || a.MaxTimeMs != ts[299] ||
		len(a.Series) != 1 || a.Series[0].String() != `temp{room="1"}` {
		t.Fatalf("applied %+v", a)
	}
	b := mustApply(t, s, "edge-b", segB[0])
	if b.Points != 310 || len(b.Series) != 2 || b.Series[1].String() != `temp{room="2"}` {
		t.Fatalf("applied %+v", b)
	}

	res, info := queryAll(t, s, []string{"edge-a"}, rawQuery(t))
	if len(res) != 1 || res[0].edge != "edge-a" || !slices.Equal(res[0].s.Ts, ts) || !slices.Equal(res[0].s.Vs, vs) ||
		res[0].s.Labels.String() != `temp{room="1"}` || info.Series != 1 || info.Points != 300 {
		t.Fatalf("edge-a raw: %+v %+v", res, info)
	}
	res, _ = queryAll(t, s, []string{"edge-b", "edge-a"}, rawQuery(t))
	var order []string
	for _, r := range res {
		order = append(order, r.s.Labels.String()+"@"+r.edge)
		if r.s.Labels.Get(EdgeLabel) != "" {
			t.Fatalf("answer shows the edge label: %s", r.s.Labels)
		}
	}
	want := []string{`temp{room="1"}@edge-a`, `temp{room="1"}@edge-b`, `temp{room="2"}@edge-b`}
	if !slices.Equal(order, want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	if !slices.Equal(res[1].s.Vs, vs2) {
		t.Fatal("edge-b's series holds other values")
	}

	// Downsampled: 1-hour buckets of avg, against a naive computation.
	q := model.Query{Matchers: sel(t, `temp{room="1"}`), Start: 0, End: testNow.UnixMilli() + 1,
		Mode: model.ModeDownsample, Step: time.Hour.Milliseconds(), Downsample: rollup.FuncAvg}
	res, _ = queryAll(t, s, []string{"edge-a"}, q)
	sums, counts := map[int64]float64{}, map[int64]float64{}
	for i, tm := range ts {
		b := tm - tm%q.Step
		sums[b] += vs[i]
		counts[b]++
	}
	if len(res) != 1 || len(res[0].s.Ts) != len(sums) {
		t.Fatalf("downsample: %+v, want %d buckets", res, len(sums))
	}
	for i, b := range res[0].s.Ts {
		if w := sums[b] / counts[b]; res[0].s.Vs[i] != w {
			t.Fatalf("bucket %d: %v, want %v", b, res[0].s.Vs[i], w)
		}
	}

	// Aggregate across the two edges: sum per timestamp, edge "".
	q = rawQuery(t)
	q.Matchers = sel(t, `temp{room="1"}`)
	q.Aggregate = rollup.FuncSum
	res, _ = queryAll(t, s, []string{"edge-a", "edge-b"}, q)
	if len(res) != 1 || res[0].edge != "" || len(res[0].s.Ts) != 300 || res[0].s.Vs[299] != vs[299]+vs2[299] {
		t.Fatalf("aggregate: %+v", res)
	}
	st := s.Stats()
	if st.SegmentsApplied != 2 || st.Points != 610 || st.Series != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestQuery_BadRequests(t *testing.T) {
	s := openStore(t, t.TempDir())
	defer s.Close()
	for name, tc := range map[string]struct {
		edges []string
		q     model.Query
	}{
		"no edges":              {nil, rawQuery(t)},
		"empty edge":            {[]string{""}, rawQuery(t)},
		"matcher on edge label": {[]string{"a"}, model.Query{Matchers: sel(t, `temp{__edge__="a"}`), End: 1, Mode: model.ModeRaw}},
		"group by edge label":   {[]string{"a"}, model.Query{Matchers: sel(t, `temp`), End: 1, Mode: model.ModeRaw, Aggregate: rollup.FuncSum, GroupBy: []string{EdgeLabel}}},
		"engine refuses":        {[]string{"a"}, model.Query{Matchers: sel(t, `temp`), Start: 2, End: 1, Mode: model.ModeRaw}},
	} {
		_, err := s.Query(context.Background(), tc.edges, tc.q, func(string, model.Series) error { return nil })
		if !errors.Is(err, model.ErrBadQuery) {
			t.Errorf("%s: %v, want ErrBadQuery", name, err)
		}
	}
}

func TestApply_DuplicateChangesNothingAndConflictIsRefused(t *testing.T) {
	ts, vs := points(testNow, 50, func(i int) float64 { return float64(i) })
	seg := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts, Vs: vs}})[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	mustApply(t, s, "e", seg)
	a := mustApply(t, s, "e", seg)
	if !a.Duplicate || a.Points != 0 || len(a.Series) != 1 {
		t.Fatalf("second apply: %+v, want a duplicate that writes nothing", a)
	}
	res, _ := queryAll(t, s, []string{"e"}, rawQuery(t))
	if len(res) != 1 || !slices.Equal(res[0].s.Ts, ts) || !slices.Equal(res[0].s.Vs, vs) {
		t.Fatalf("after a duplicate: %+v", res)
	}
	// Another segment under the same seq (an edge whose disk was wiped).
	ts2, vs2 := points(testNow, 5, func(i int) float64 { return 99 })
	other := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts2, Vs: vs2}})[0]
	if other.seq != seg.seq || other.crc == seg.crc {
		t.Fatalf("test setup: segments %d/%08x and %d/%08x", seg.seq, seg.crc, other.seq, other.crc)
	}
	if _, err := s.Apply(context.Background(), "e", other.seq, other.crc, other.file); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting segment: %v, want ErrConflict", err)
	}
	res, _ = queryAll(t, s, []string{"e"}, rawQuery(t))
	if !slices.Equal(res[0].s.Vs, vs) {
		t.Fatal("a conflicting segment changed the data")
	}
	if crc, ok, err := s.SegmentCRC("e", seg.seq); err != nil || !ok || crc != seg.crc {
		t.Fatalf("SegmentCRC = %08x, %v, %v; want %08x", crc, ok, err, seg.crc)
	}
	st := s.Stats()
	if st.SegmentsApplied != 1 || st.Duplicates != 1 || st.Conflicts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestApply_InvalidSegmentStoresNothing(t *testing.T) {
	ts, vs := points(testNow, 50, func(i int) float64 { return float64(i) })
	seg := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts, Vs: vs}})[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	flipped := slices.Clone(seg.file)
	flipped[len(flipped)/2] ^= 0x40
	cases := map[string]struct {
		edge string
		seq  uint64
		crc  uint32
		file []byte
	}{
		"flipped byte":  {"e", seg.seq, seg.crc, flipped},
		"truncated":     {"e", seg.seq, seg.crc, seg.file[:len(seg.file)-3]},
		"empty":         {"e", seg.seq, seg.crc, nil},
		"other edge":    {"f", seg.seq, seg.crc, seg.file},
		"other seq":     {"e", seg.seq + 1, seg.crc, seg.file},
		"other crc":     {"e", seg.seq, seg.crc + 1, seg.file},
		"seq 0":         {"e", 0, seg.crc, seg.file},
		"empty edge id": {"", seg.seq, seg.crc, seg.file},
	}
	for name, c := range cases {
		_, err := s.Apply(context.Background(), c.edge, c.seq, c.crc, c.file)
		if !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("%s: %v, want ErrInvalidSegment", name, err)
		}
	}
	if _, ok, _ := s.SegmentCRC("e", seg.seq); ok {
		t.Fatal("an invalid segment was recorded")
	}
	if st := s.Stats(); st.Series != 0 || st.Points != 0 || st.Invalid != int64(len(cases)) {
		t.Fatalf("invalid segments stored something: %+v", st)
	}
}

// TestApply_OnlyRawRetentionLimitsAge: a point from an edge's skewed
// clock weeks ahead does not make the series refuse older points; only
// points older than the raw retention are refused, and the counts are
// exact.
func TestApply_OnlyRawRetentionLimitsAge(t *testing.T) {
	day := 24 * time.Hour
	build := func(seq uint64, ts ...int64) shipped {
		b, err := segment.NewBuilder("e", 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Add(labels.Labels(lbl("__name__", "temp")), ts, make([]float64, len(ts))); err != nil {
			t.Fatal(err)
		}
		file, info, err := b.Finish(seq, seq-1)
		if err != nil {
			t.Fatal(err)
		}
		return shipped{seq, info.CRC, file}
	}
	at := func(d time.Duration) int64 { return testNow.Add(d).UnixMilli() }
	s := openStore(t, t.TempDir()) // raw retention 30 days
	defer s.Close()
	if a := mustApply(t, s, "e", build(1, at(20*day))); a.Points != 1 || a.Rejected != 0 {
		t.Fatalf("a point 20 days ahead: %+v", a)
	}
	a := mustApply(t, s, "e", build(2, at(-time.Hour), at(-25*day), at(-31*day), at(-29*day)))
	if a.Points != 3 || a.Rejected != 1 {
		t.Fatalf("after a point 20 days ahead: %+v; want 3 stored and the one older than the raw retention rejected", a)
	}
	res, _ := queryAll(t, s, []string{"e"}, model.Query{Matchers: sel(t, `temp`), Start: 0, End: at(30 * day), Mode: model.ModeRaw})
	if want := []int64{at(-29 * day), at(-25 * day), at(-time.Hour), at(20 * day)}; len(res) != 1 || !slices.Equal(res[0].s.Ts, want) {
		t.Fatalf("stored %v", res)
	}
}

func TestApply_BacklogOlderSegmentAfterNewerOnes(t *testing.T) {
	day := 24 * time.Hour
	old1, oldv := points(testNow.Add(-10*day), 100, func(i int) float64 { return 1 })
	mid, midv := points(testNow.Add(-5*day), 100, func(i int) float64 { return 2 })
	fresh, freshv := points(testNow, 100, func(i int) float64 { return 3 })
	tooOld, tooOldv := points(testNow.Add(-40*day), 7, func(i int) float64 { return 4 })
	segs := edgeSegments(t, "e",
		[]model.Batch{{Labels: lbl("__name__", "temp"), Ts: append(tooOld, old1...), Vs: append(tooOldv, oldv...)}},
		[]model.Batch{{Labels: lbl("__name__", "temp"), Ts: mid, Vs: midv}},
		[]model.Batch{{Labels: lbl("__name__", "temp"), Ts: fresh, Vs: freshv}},
	)
	s := openStore(t, t.TempDir())
	defer s.Close()
	mustApply(t, s, "e", segs[2]) // fresh data first, then the backlog
	mustApply(t, s, "e", segs[1])
	a := mustApply(t, s, "e", segs[0])
	if a.Points != 100 || a.Rejected != 7 {
		t.Fatalf("oldest segment: %+v; want 100 points and the 7 older than retention rejected", a)
	}
	res, _ := queryAll(t, s, []string{"e"}, rawQuery(t))
	want := slices.Concat(old1, mid, fresh)
	if len(res) != 1 || !slices.Equal(res[0].s.Ts, want) {
		t.Fatalf("backlog: %d series, %d points, want %d", len(res), len(res[0].s.Ts), len(want))
	}
}

func TestStore_RestartKeepsDataAndIndex(t *testing.T) {
	ts, vs := points(testNow, 80, func(i int) float64 { return float64(i) / 3 })
	segs := edgeSegments(t, "e",
		[]model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts[:40], Vs: vs[:40]}},
		[]model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts[40:], Vs: vs[40:]}},
	)
	dir := t.TempDir()
	s := openStore(t, dir)
	mustApply(t, s, "e", segs[0])
	mustApply(t, s, "e", segs[1])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	for _, seg := range segs {
		if crc, ok, err := s.SegmentCRC("e", seg.seq); err != nil || !ok || crc != seg.crc {
			t.Fatalf("after restart SegmentCRC(%d) = %08x, %v, %v", seg.seq, crc, ok, err)
		}
	}
	if a := mustApply(t, s, "e", segs[1]); !a.Duplicate {
		t.Fatalf("after restart a resend is not a duplicate: %+v", a)
	}
	res, _ := queryAll(t, s, []string{"e"}, rawQuery(t))
	if len(res) != 1 || !slices.Equal(res[0].s.Ts, ts) || !slices.Equal(res[0].s.Vs, vs) {
		t.Fatalf("after restart: %+v", res)
	}
}

// TestApply_MutatedBytesNeverPanic: random damage to a segment is refused
// as invalid (the CRCs catch it), never a panic, and stores nothing.
func TestApply_MutatedBytesNeverPanic(t *testing.T) {
	ts, vs := points(testNow, 64, func(i int) float64 { return float64(i) })
	seg := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp", "k", "v"), Ts: ts, Vs: vs}})[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for i := range 500 {
		b := slices.Clone(seg.file)
		switch rng.IntN(3) {
		case 0:
			for range 1 + rng.IntN(4) {
				b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			}
		case 1:
			b = b[:rng.IntN(len(b))]
		default:
			at := rng.IntN(len(b))
			b = slices.Insert(b, at, byte(rng.IntN(256)))
		}
		if _, err := s.Apply(context.Background(), "e", seg.seq, seg.crc, b); err == nil {
			t.Fatalf("case %d: damaged segment accepted", i)
		}
	}
	if st := s.Stats(); st.Points != 0 || st.Series != 0 {
		t.Fatalf("damaged segments stored something: %+v", st)
	}
	mustApply(t, s, "e", seg) // the intact one still applies
}

func TestOptions_Validate(t *testing.T) {
	for name, o := range map[string]Options{
		"no dir":    {CoordinatorID: "c"},
		"no id":     {Dir: "x"},
		"negative":  {Dir: "x", CoordinatorID: "c", MaxSeries: -1},
		"short raw": {Dir: "x", CoordinatorID: "c", RetentionRaw: time.Minute},
		"tiny head": {Dir: "x", CoordinatorID: "c", HeadMaxBytes: 1},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	o := Options{Dir: "x", CoordinatorID: "c", RetentionRaw: 48 * time.Hour}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	no := o.nodeOptions()
	if no.OutOfOrderWindow != no.Retention1d || no.Retention1d < 365*24*time.Hour || no.RetentionRaw != 48*time.Hour || no.MaxSeries != DefaultMaxSeries || no.Limits.MaxLabels != labels.DefaultLimits.MaxLabels+1 || !no.NoIdleCompact {
		t.Fatalf("engine options %+v", no)
	}
}

// TestApply_WritingTwiceChangesNothing: a crash between writing a
// segment's points and recording it makes the resend write them again;
// that must not change any answer, also with duplicate timestamps inside
// the segment (last write wins). Both ways of writing: the points kept
// from the verifying pass, and a file too large for that decoded again.
func TestApply_WritingTwiceChangesNothing(t *testing.T) {
	for _, keep := range []int64{applyKeepPoints, 7} {
		t.Run(fmt.Sprintf("keep-%d", keep), func(t *testing.T) { testWritingTwiceChangesNothing(t, keep) })
	}
}

func testWritingTwiceChangesNothing(t *testing.T, keep int64) {
	ts, vs := points(testNow, 30, func(i int) float64 { return float64(i) })
	dupT := []int64{ts[5], ts[5], ts[6]}
	dupV := []float64{100, 200, 300}
	seg := edgeSegments(t, "e", []model.Batch{
		{Labels: lbl("__name__", "temp"), Ts: ts, Vs: vs},
		{Labels: lbl("__name__", "temp"), Ts: dupT, Vs: dupV},
	})[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	d, err := decodeSegment("e", "e", seg.file, keep)
	if err != nil {
		t.Fatal(err)
	}
	if kept := keep >= 33; (d.runs != nil) != kept {
		t.Fatalf("points kept from the verifying pass: %v, want %v", d.runs != nil, kept)
	}
	var a Applied
	if err := s.write(context.Background(), "e", seg.file, d, &a, 5); err != nil { // the write before the "crash"
		t.Fatal(err)
	}
	first, _ := queryAll(t, s, []string{"e"}, rawQuery(t))
	mustApply(t, s, "e", seg) // the resend
	second, _ := queryAll(t, s, []string{"e"}, rawQuery(t))
	if len(first) != 1 || len(second) != 1 || !slices.Equal(first[0].s.Ts, second[0].s.Ts) || !slices.Equal(first[0].s.Vs, second[0].s.Vs) {
		t.Fatalf("writing a segment twice changed the answer:\n%+v\n%+v", first, second)
	}
	want := slices.Clone(vs)
	want[5], want[6] = 200, 300
	if !slices.Equal(second[0].s.Ts, ts) || !slices.Equal(second[0].s.Vs, want) {
		t.Fatalf("duplicate timestamps: got %v, want %v", second[0].s.Vs, want)
	}
	if err := s.eng.Flush(); err != nil { // and once flushed to the store
		t.Fatal(err)
	}
	third, _ := queryAll(t, s, []string{"e"}, rawQuery(t))
	if !slices.Equal(third[0].s.Vs, want) {
		t.Fatalf("after a flush: %v, want %v", third[0].s.Vs, want)
	}
}

// TestApply_ConcurrentSameSegmentAppliesOnce: the index check and the
// write are serialised per (edge, seq).
func TestApply_ConcurrentSameSegmentAppliesOnce(t *testing.T) {
	ts, vs := points(testNow, 30, func(i int) float64 { return float64(i) })
	seg := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts, Vs: vs}})[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := s.Apply(context.Background(), "e", seg.seq, seg.crc, seg.file)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.SegmentsApplied != 1 || st.Duplicates != n-1 || st.Points != 30 {
		t.Fatalf("stats %+v; want one application and %d duplicates", st, n-1)
	}
}

// FuzzApply: any bytes are refused with ErrInvalidSegment, never a
// panic. The corpus starts from a real segment; one store serves every
// input.
func FuzzApply(f *testing.F) {
	ts, vs := points(testNow, 16, func(i int) float64 { return float64(i) })
	seg := edgeSegments(f, "e", []model.Batch{{Labels: lbl("__name__", "temp", "k", "v"), Ts: ts, Vs: vs}})[0]
	f.Add(seg.file)
	f.Add(seg.file[:len(seg.file)/2])
	s := openStore(f, f.TempDir())
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, file []byte) {
		// crc 0 never matches a real footer, so nothing can be stored.
		if _, err := s.Apply(context.Background(), "e", seg.seq, 0, file); !errors.Is(err, ErrInvalidSegment) {
			t.Fatalf("%d bytes: %v, want ErrInvalidSegment", len(file), err)
		}
	})
}

// TestApply_BothSegmentFormats: segments of WAL format 1 (raw records)
// and 2 (compressed records) of the same writes, unsorted and with a
// duplicate timestamp, apply to the same points.
func TestApply_BothSegmentFormats(t *testing.T) {
	ts, vs := points(testNow, 200, func(i int) float64 { return float64(i%17) * 0.25 })
	// Newest first, and the last timestamp written twice (the second wins).
	slices.Reverse(ts)
	slices.Reverse(vs)
	ts = append(ts, ts[0])
	vs = append(vs, 99)
	batch := []model.Batch{{Labels: lbl("__name__", "temp", "room", "1"), Ts: ts, Vs: vs}}
	s := openStore(t, t.TempDir())
	defer s.Close()
	var answers [][]got
	for i, format := range []uint8{wal.FormatV1, wal.FormatV2} {
		edge := fmt.Sprint("edge-", format)
		seg := edgeSegmentsFormat(t, edge, format, batch)[0]
		if seg.file[4] != format {
			t.Fatalf("segment of format %d has header version %d", format, seg.file[4])
		}
		a := mustApply(t, s, edge, seg)
		if a.Points != int64(len(ts))-int64(i) || a.Rejected != 0 {
			t.Fatalf("format %d applied %+v", format, a)
		}
		res, _ := queryAll(t, s, []string{edge}, rawQuery(t))
		answers = append(answers, res)
	}
	for i, res := range answers {
		if len(res) != 1 || len(res[0].s.Ts) != 200 || res[0].s.Vs[199] != 99 {
			t.Fatalf("format %d: %+v", i+1, res)
		}
	}
	if !slices.Equal(answers[0][0].s.Ts, answers[1][0].s.Ts) || !slices.Equal(answers[0][0].s.Vs, answers[1][0].s.Vs) {
		t.Fatal("the two formats applied to different points")
	}
}
