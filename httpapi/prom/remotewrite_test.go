package prom

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"google.golang.org/protobuf/encoding/protowire"

	nlabels "github.com/tributarydb/tributary/node/labels"
)

// randomWriteRequest builds a request with every feature the decoder
// reads: labels, samples with special values, exemplars, histograms,
// metadata, series without samples.
func randomWriteRequest(rng *rand.Rand) *prompb.WriteRequest {
	req := &prompb.WriteRequest{}
	for i := range rng.IntN(6) {
		ts := prompb.TimeSeries{}
		for j := range rng.IntN(5) {
			ts.Labels = append(ts.Labels, prompb.Label{Name: []string{"__name__", "job", "instance", "a", "é"}[j], Value: strings.Repeat("v", rng.IntN(4))})
		}
		for k := range rng.IntN(5) {
			v := []float64{0, 1.5, -2, math.NaN(), math.Inf(1), math.Float64frombits(staleNaNBits), rng.NormFloat64()}[rng.IntN(7)]
			t := []int64{0, -1, math.MaxInt64, math.MinInt64, int64(k) * 1000, rng.Int64()}[rng.IntN(6)]
			ts.Samples = append(ts.Samples, prompb.Sample{Value: v, Timestamp: t})
		}
		if rng.IntN(3) == 0 {
			ts.Exemplars = append(ts.Exemplars, prompb.Exemplar{Labels: lbls("trace_id", "t"), Value: 1, Timestamp: int64(i)})
		}
		if rng.IntN(3) == 0 {
			ts.Histograms = append(ts.Histograms, intHistogram(int64(i)))
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	if rng.IntN(2) == 0 {
		req.Metadata = append(req.Metadata, prompb.MetricMetadata{Type: prompb.MetricMetadata_MetricType(rng.IntN(9)), MetricFamilyName: "m", Help: "h", Unit: "u"})
	}
	return req
}

// checkAgainstPrompb requires that got holds exactly the float samples,
// labels (those with a value), histogram and exemplar counts and metadata
// of want, less the series lim refuses, which must be counted as refused.
func checkAgainstPrompb(t testing.TB, got *writeRequest, want *prompb.WriteRequest, lim nlabels.Limits) {
	t.Helper()
	if got.Series != len(want.Timeseries) {
		t.Fatalf("%d series, want %d", got.Series, len(want.Timeseries))
	}
	b := 0
	var samples, hists, exs, refused int64
	for i, ts := range want.Timeseries {
		hists += int64(len(ts.Histograms))
		exs += int64(len(ts.Exemplars))
		if len(ts.Samples) == 0 {
			continue
		}
		var valued []prompb.Label
		tooLong := false
		for _, l := range ts.Labels {
			if l.Value != "" {
				valued = append(valued, l)
				tooLong = tooLong || lim.MaxNameBytes > 0 && len(l.Name) > lim.MaxNameBytes || lim.MaxValueBytes > 0 && len(l.Value) > lim.MaxValueBytes
			}
		}
		if tooLong || lim.MaxLabels > 0 && len(valued) > lim.MaxLabels {
			refused += int64(len(ts.Samples))
			samples += int64(len(ts.Samples))
			if b < len(got.Batches) && got.Index[b] == i {
				t.Fatalf("series %d breaks the label limits but has a batch", i)
			}
			continue
		}
		if b >= len(got.Batches) || got.Index[b] != i {
			t.Fatalf("series %d has samples but no batch (index %v)", i, got.Index)
		}
		g := got.Batches[b]
		b++
		if len(g.Labels) != len(valued) {
			t.Fatalf("series %d: %d labels, want %d", i, len(g.Labels), len(valued))
		}
		for j, l := range valued {
			if g.Labels[j].Name != l.Name || g.Labels[j].Value != l.Value {
				t.Fatalf("series %d label %d: %v, want %v", i, j, g.Labels[j], l)
			}
		}
		if len(g.Ts) != len(ts.Samples) || len(g.Vs) != len(ts.Samples) {
			t.Fatalf("series %d: %d/%d samples, want %d", i, len(g.Ts), len(g.Vs), len(ts.Samples))
		}
		for j, s := range ts.Samples {
			if g.Ts[j] != s.Timestamp || !floatsEqual(g.Vs[j], s.Value) {
				t.Fatalf("series %d sample %d: %d %x, want %d %x", i, j, g.Ts[j], math.Float64bits(g.Vs[j]), s.Timestamp, math.Float64bits(s.Value))
			}
			samples++
		}
	}
	if b != len(got.Batches) || samples != got.Samples || hists != got.Histograms || exs != got.Exemplars || refused != got.RefusedSamples {
		t.Fatalf("batches %d/%d samples %d/%d histograms %d/%d exemplars %d/%d refused samples %d/%d",
			len(got.Batches), b, got.Samples, samples, got.Histograms, hists, got.Exemplars, exs, got.RefusedSamples, refused)
	}
	if len(got.Metadata) != len(want.Metadata) {
		t.Fatalf("%d metadata, want %d", len(got.Metadata), len(want.Metadata))
	}
	for i, md := range want.Metadata {
		g := got.Metadata[i]
		if g.Family != md.MetricFamilyName || g.Help != md.Help || g.Unit != md.Unit {
			t.Fatalf("metadata %d: %+v, want %+v", i, g, md)
		}
		if wantType := strings.ToLower(md.Type.String()); int(md.Type) < len(metricTypes) && g.Type != wantType {
			t.Fatalf("metadata %d: type %q, want %q", i, g.Type, wantType)
		}
	}
}

// TestDecode_MatchesPrompb: random requests marshalled by prompb decode to
// exactly their content.
func TestDecode_MatchesPrompb(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		want := randomWriteRequest(rng)
		raw, err := want.Marshal()
		must(t, err)
		got, err := decodeWriteRequest(raw, rwLimits{})
		must(t, err)
		checkAgainstPrompb(t, got, want, nlabels.Limits{})
	}
}

// TestDecode_ProtoRules checks proto3 corner cases by hand-built messages.
func TestDecode_ProtoRules(t *testing.T) {
	tag := func(b []byte, num protowire.Number, typ protowire.Type) []byte {
		return protowire.AppendTag(b, num, typ)
	}
	msg := func(b []byte, num protowire.Number, body []byte) []byte {
		return protowire.AppendBytes(tag(b, num, protowire.BytesType), body)
	}
	label := func(n, v string) []byte {
		return msg(msg(nil, 1, []byte(n)), 2, []byte(v))
	}
	sample := func(v float64, ts int64) []byte {
		b := protowire.AppendFixed64(tag(nil, 1, protowire.Fixed64Type), math.Float64bits(v))
		return protowire.AppendVarint(tag(b, 2, protowire.VarintType), uint64(ts))
	}
	series := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	name := msg(nil, 1, label("__name__", "m"))
	for _, tc := range []struct {
		name    string
		req     []byte
		wantT   []int64
		wantV   []float64
		wantErr string
	}{
		{"empty sample is zero", msg(nil, 1, series(name, msg(nil, 2, nil))), []int64{0}, []float64{0}, ""},
		{"last scalar wins", msg(nil, 1, series(name, msg(nil, 2, append(sample(1, 5), sample(2, 7)...)))), []int64{7}, []float64{2}, ""},
		{"unknown fields skipped", append(protowire.AppendVarint(tag(nil, 9, protowire.VarintType), 3),
			msg(nil, 1, series(name, protowire.AppendFixed32(tag(nil, 7, protowire.Fixed32Type), 1), msg(nil, 2, sample(3, 4))))...), []int64{4}, []float64{3}, ""},
		{"group skipped", append(tag(tag(nil, 8, protowire.StartGroupType), 8, protowire.EndGroupType),
			msg(nil, 1, series(name, msg(nil, 2, sample(3, 4))))...), []int64{4}, []float64{3}, ""},
		{"negative timestamp", msg(nil, 1, series(name, msg(nil, 2, sample(1, -5)))), []int64{-5}, []float64{1}, ""},
		{"end group alone", tag(nil, 8, protowire.EndGroupType), nil, nil, "end-group tag"},
		{"sample value as varint", msg(nil, 1, series(name, msg(nil, 2, protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1)))), nil, nil,
			"timeseries 0 sample at byte"},
		{"label as varint", msg(nil, 1, protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1)), nil, nil, "timeseries 0 at byte"},
		{"truncated fixed64", msg(nil, 1, series(name, msg(nil, 2, []byte{0x09, 1, 2}))), nil, nil, "field 1: unexpected EOF"},
		{"length past the end", []byte{0x0a, 0x05, 0x0a}, nil, nil, "field 1: unexpected EOF"},
		{"field number zero", []byte{0x00}, nil, nil, "bad field tag"},
		{"overlong varint", append([]byte{0x0a, 0x0b, 0x12, 0x09, 0x10}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), nil, nil, "timeseries 0 sample"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeWriteRequest(tc.req, rwLimits{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			must(t, err)
			if len(got.Batches) != 1 {
				t.Fatalf("%d batches", len(got.Batches))
			}
			b := got.Batches[0]
			if len(b.Ts) != len(tc.wantT) || b.Ts[0] != tc.wantT[0] || b.Vs[0] != tc.wantV[0] {
				t.Fatalf("got %v %v, want %v %v", b.Ts, b.Vs, tc.wantT, tc.wantV)
			}
		})
	}
}

// TestDecode_SampleLimitBeforeAllocation: a request over the sample limit
// is refused by the first pass.
func TestDecode_SampleLimitBeforeAllocation(t *testing.T) {
	ts := prompb.TimeSeries{Labels: lbls("__name__", "m")}
	for i := range 100 {
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: int64(i)})
	}
	raw, err := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}}).Marshal()
	must(t, err)
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := decodeWriteRequest(raw, rwLimits{maxSamples: 99}); err == nil {
			t.Fatal("100 samples accepted with a limit of 99")
		}
	})
	if allocs > 5 {
		t.Fatalf("%v allocations to refuse an oversized request", allocs)
	}
	if _, err := decodeWriteRequest(raw, rwLimits{maxSamples: 100}); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecodeWriteRequest feeds arbitrary bodies through the snappy and
// protobuf decoder. It must never panic; whatever it accepts must equal
// what prompb decodes from the same bytes (when prompb accepts them), stay
// within the sample limit and use memory proportional to the input; and
// the series that the node's label validation accepts have a metric name,
// valid names and UTF-8 values.
func FuzzDecodeWriteRequest(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		raw, err := randomWriteRequest(rng).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		body := snappy.Encode(nil, raw)
		f.Add(body)
		f.Add(body[:len(body)/2])
	}
	f.Add(binary.AppendUvarint(nil, 1<<31))
	f.Add(snappy.Encode(nil, []byte{0x0a, 0x02, 0x12, 0x00}))
	f.Add([]byte{})
	const maxBytes, maxSamples = 1 << 20, 1000
	lim := rwLimits{maxSamples: maxSamples, maxSeries: 100, labels: nlabels.DefaultLimits}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, decoded, e := decodeBody(body, nil, maxBytes, lim)
		if e != nil {
			if e.status != 400 && e.status != 413 {
				t.Fatalf("status %d for a bad body: %v", e.status, e)
			}
			return
		}
		if len(decoded) > maxBytes {
			t.Fatalf("decoded %d bytes past the limit", len(decoded))
		}
		if req.Samples > maxSamples {
			t.Fatalf("%d samples past the limit", req.Samples)
		}
		// Memory: every sample, label and string of the answer comes from
		// bytes of the decoded message.
		var labelsCount, bytesCount int
		for _, b := range req.Batches {
			labelsCount += len(b.Labels)
			for _, l := range b.Labels {
				bytesCount += len(l.Name) + len(l.Value)
			}
		}
		if labelsCount*2 > len(decoded) || int(req.Samples)*2 > len(decoded) || bytesCount > len(decoded)*len(req.Batches)+len(decoded) {
			t.Fatalf("%d labels, %d samples, %d label bytes from %d decoded bytes", labelsCount, req.Samples, bytesCount, len(decoded))
		}
		var want prompb.WriteRequest
		if err := want.Unmarshal(decoded); err == nil {
			checkAgainstPrompb(t, req, &want, lim.labels)
		}
		for _, b := range req.Batches {
			ls, err := nlabels.New(b.Labels, nlabels.DefaultLimits)
			if err != nil {
				continue
			}
			if ls.Get(nlabels.MetricName) == "" {
				t.Fatalf("accepted series without a metric name: %v", ls)
			}
			for _, l := range ls {
				if !utf8.ValidString(l.Value) || l.Name == "" || (l.Name[0] >= '0' && l.Name[0] <= '9') {
					t.Fatalf("accepted invalid label %q=%q", l.Name, l.Value)
				}
			}
		}
	})
}

// allocated returns the bytes f allocates on the heap, from the TotalAlloc
// counter of runtime.MemStats, read before and after f. The counter adds
// up every heap allocation; a garbage collection while f runs does not
// lower it, so the count does not depend on when the collector runs. It
// does count other goroutines' allocations too (the fuzzing engine's, a
// finalizer's): f runs twice and the smaller count is kept, so f must
// allocate the same each time (build fresh state inside it).
func allocated(f func()) uint64 {
	least := uint64(math.MaxUint64)
	var before, after runtime.MemStats
	for range 2 {
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if after.HeapAlloc > 256<<20 {
		runtime.GC() // see steadyAllocations
	}
	return least
}

// steadyAllocations makes an allocation fuzz target see the same code
// paths for the same input: one P and no automatic garbage collection
// (allocated collects past 256 MiB), so that the sync.Pools the decoder
// reaches (fmt's printers) are not emptied at random moments or missed on
// another P. Otherwise their refills come and go in the coverage, and the
// fuzzing engine spends its time minimizing inputs that are not new. The
// measured bytes do not depend on it.
func steadyAllocations(f *testing.F) {
	procs := runtime.GOMAXPROCS(1)
	gc := debug.SetGCPercent(-1)
	f.Cleanup(func() {
		debug.SetGCPercent(gc)
		runtime.GOMAXPROCS(procs)
	})
}

// The allocation bound of decodeBody: rwAllocPerDecodedByte bytes per
// byte of the decoded message (the decoded buffer itself, 16 bytes a
// sample of at least 2 bytes, label headers bounded by the label limits),
// plus rwAllocPerSeries per series with samples (batch, index) and per
// metadata entry kept (each at most the series limit), plus rwAllocFixed.
// The decoded size is at most 64/3 of the body (decodeSnappy refuses
// more) and at most the body limit.
const (
	rwAllocPerDecodedByte = 16
	rwAllocPerSeries      = 512
	rwAllocFixed          = 16 << 10
)

// rwAllocSeeds are the worst cases known for memory per byte.
func rwAllocSeeds() [][]byte {
	var out [][]byte
	add := func(req *prompb.WriteRequest) {
		raw, err := req.Marshal()
		if err != nil {
			panic(err)
		}
		out = append(out, snappy.Encode(nil, raw))
	}
	one := prompb.TimeSeries{Labels: lbls("__name__", "m")}
	for range 5000 {
		one.Samples = append(one.Samples, prompb.Sample{})
	}
	add(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{one}})
	many := &prompb.WriteRequest{}
	for i := range 200 {
		many.Timeseries = append(many.Timeseries, prompb.TimeSeries{Labels: lbls("__name__", "m", "i", fmt.Sprint(i)), Samples: []prompb.Sample{{}}})
	}
	add(many)
	wide := prompb.TimeSeries{Samples: []prompb.Sample{{}}}
	for i := range 5000 {
		wide.Labels = append(wide.Labels, prompb.Label{Name: fmt.Sprint("l", i), Value: "v"})
	}
	add(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{wide}})
	atLimit := prompb.TimeSeries{Samples: []prompb.Sample{{}}}
	for i := range 32 {
		atLimit.Labels = append(atLimit.Labels, prompb.Label{Name: fmt.Sprint("l", i), Value: fmt.Sprint(i)})
	}
	add(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{atLimit, atLimit, atLimit}})
	distinct := &prompb.WriteRequest{} // every label value new to the interner
	for i := range 100 {
		ts := prompb.TimeSeries{Samples: []prompb.Sample{{}}}
		for j := range 32 {
			ts.Labels = append(ts.Labels, prompb.Label{Name: fmt.Sprint("l", j), Value: fmt.Sprint(i*32 + j)})
		}
		distinct.Timeseries = append(distinct.Timeseries, ts)
	}
	add(distinct)
	empties := prompb.TimeSeries{Labels: lbls("__name__", "m"), Samples: []prompb.Sample{{}}}
	for range 5000 {
		empties.Labels = append(empties.Labels, prompb.Label{})
	}
	add(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{empties}})
	meta := &prompb.WriteRequest{}
	for range 500 {
		meta.Metadata = append(meta.Metadata, prompb.MetricMetadata{})
	}
	add(meta)
	out = append(out, binary.AppendUvarint(nil, 1<<20), append(binary.AppendUvarint(nil, 64), 0xfe, 0x00, 0x00))
	return out
}

// FuzzDecodeWriteRequestAllocations holds decodeBody to its memory bound
// (see rwAllocPerDecodedByte) for any body.
func FuzzDecodeWriteRequestAllocations(f *testing.F) {
	steadyAllocations(f)
	for _, b := range rwAllocSeeds() {
		f.Add(b)
	}
	lim := rwLimits{maxSamples: 1 << 16, maxSeries: 100, labels: nlabels.DefaultLimits, maxMetadata: 100}
	f.Fuzz(func(t *testing.T, body []byte) {
		var decoded []byte
		alloc := allocated(func() { _, decoded, _ = decodeBody(body, nil, 1<<20, lim) })
		declared, _ := snappy.DecodedLen(body)
		if declared > len(body)*64/3 && len(decoded) > 0 {
			t.Fatalf("a %d-byte body decoded to %d bytes", len(body), declared)
		}
		bound := uint64(rwAllocPerDecodedByte*min(declared, len(body)*64/3) + rwAllocPerSeries*(lim.maxSeries+lim.maxMetadata) + rwAllocFixed)
		if alloc > bound {
			t.Fatalf("a %d-byte body declaring %d decoded bytes allocated %d bytes, bound %d", len(body), declared, alloc, bound)
		}
	})
}
