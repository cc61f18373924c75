package prom

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// readSeries is one series of a remote_read answer, decoded.
type readSeries struct {
	lset   string
	ts     []int64
	vs     []float64
	chunks int
}

// postRead sends a remote_read request and returns the status, the
// Content-Type and the raw body.
func (e *testEnv) postRead(req *prompb.ReadRequest, hdr map[string]string) (int, string, []byte) {
	e.t.Helper()
	raw, err := req.Marshal()
	must(e.t, err)
	hr, err := http.NewRequest(http.MethodPost, e.srv.URL+"/api/v1/read", bytes.NewReader(snappy.Encode(nil, raw)))
	must(e.t, err)
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("X-Prometheus-Remote-Read-Version", "0.1.0")
	for k, v := range hdr {
		hr.Header.Set(k, v)
	}
	resp, err := e.srv.Client().Do(hr)
	must(e.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		// A streamed answer cut short by the server.
		return -1, resp.Header.Get("Content-Type"), body
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// decodeSampled decodes a SAMPLES answer.
func decodeSampled(t testing.TB, body []byte) [][]readSeries {
	t.Helper()
	raw, err := snappy.Decode(nil, body)
	must(t, err)
	var resp prompb.ReadResponse
	must(t, resp.Unmarshal(raw))
	out := make([][]readSeries, len(resp.Results))
	for i, res := range resp.Results {
		for _, ts := range res.Timeseries {
			s := readSeries{lset: promLabelsString(ts.Labels)}
			for _, smp := range ts.Samples {
				s.ts, s.vs = append(s.ts, smp.Timestamp), append(s.vs, smp.Value)
			}
			out[i] = append(out[i], s)
		}
	}
	return out
}

// nextFrame reads one frame of a streamed answer as Prometheus's
// ChunkedReader does: uvarint size, big-endian CRC-32C, message.
func nextFrame(r *bytes.Reader, msg *prompb.ChunkedReadResponse) error {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return err // io.EOF at a frame boundary: the end
	}
	if n > maxReadFrameBytes {
		return fmt.Errorf("frame of %d bytes", n)
	}
	var crc [4]byte
	if _, err := io.ReadFull(r, crc[:]); err != nil {
		return fmt.Errorf("frame crc: %w", io.ErrUnexpectedEOF)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return fmt.Errorf("frame data: %w", io.ErrUnexpectedEOF)
	}
	if crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(crc[:]) {
		return errors.New("frame checksum mismatch")
	}
	return msg.Unmarshal(data)
}

// decodeStreamed decodes a STREAMED_XOR_CHUNKS answer; a series split over
// frames is joined.
func decodeStreamed(t testing.TB, body []byte, queries int) ([][]readSeries, error) {
	t.Helper()
	out := make([][]readSeries, queries)
	r := bytes.NewReader(body)
	for {
		var msg prompb.ChunkedReadResponse
		if err := nextFrame(r, &msg); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return out, err
		}
		qi := msg.QueryIndex
		for _, cs := range msg.ChunkedSeries {
			lset := promLabelsString(cs.Labels)
			if n := len(out[qi]); n == 0 || out[qi][n-1].lset != lset {
				out[qi] = append(out[qi], readSeries{lset: lset})
			}
			s := &out[qi][len(out[qi])-1]
			for _, c := range cs.Chunks {
				chk, err := chunkenc.FromData(chunkenc.EncXOR, c.Data)
				must(t, err)
				s.chunks++
				it := chk.Iterator(nil)
				for it.Next() == chunkenc.ValFloat {
					ts, v := it.At()
					s.ts, s.vs = append(s.ts, ts), append(s.vs, v)
				}
				if chk.NumSamples() > maxSamplesPerChunk || c.MinTimeMs != s.ts[len(s.ts)-chk.NumSamples()] || c.MaxTimeMs != s.ts[len(s.ts)-1] {
					t.Fatalf("%s: chunk of %d samples claims [%d, %d]", lset, chk.NumSamples(), c.MinTimeMs, c.MaxTimeMs)
				}
			}
		}
	}
}

func promLabelsString(ls []prompb.Label) string {
	b := labels.NewScratchBuilder(len(ls))
	for _, l := range ls {
		b.Add(l.Name, l.Value)
	}
	return b.Labels().String()
}

// refRead is what the reference storage holds for a query.
func refRead(t testing.TB, ref *refStorage, q *prompb.Query) []readSeries {
	t.Helper()
	var ms []*labels.Matcher
	for _, m := range q.Matchers {
		pm, err := labels.NewMatcher(labels.MatchType(m.Type), m.Name, m.Value)
		must(t, err)
		ms = append(ms, pm)
	}
	qr, err := ref.Querier(q.StartTimestampMs, q.EndTimestampMs)
	must(t, err)
	set := qr.Select(t.Context(), true, nil, ms...)
	var out []readSeries
	for set.Next() {
		s := readSeries{lset: set.At().Labels().String()}
		it := set.At().Iterator(nil)
		for it.Next() == chunkenc.ValFloat {
			ts, v := it.At()
			s.ts, s.vs = append(s.ts, ts), append(s.vs, v)
		}
		out = append(out, s)
	}
	return out
}

func sameSeries(a, b []readSeries) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d series, want %d", len(a), len(b))
	}
	for i := range a {
		if a[i].lset != b[i].lset || len(a[i].ts) != len(b[i].ts) {
			return fmt.Errorf("series %d: %s with %d samples, want %s with %d", i, a[i].lset, len(a[i].ts), b[i].lset, len(b[i].ts))
		}
		for k := range a[i].ts {
			if a[i].ts[k] != b[i].ts[k] || !floatsEqual(a[i].vs[k], b[i].vs[k]) {
				return fmt.Errorf("%s sample %d: %d %v, want %d %v", a[i].lset, k, a[i].ts[k], a[i].vs[k], b[i].ts[k], b[i].vs[k])
			}
		}
	}
	return nil
}

func readQueries() []*prompb.Query {
	end := ms(testNow)
	m := func(t prompb.LabelMatcher_Type, n, v string) *prompb.LabelMatcher {
		return &prompb.LabelMatcher{Type: t, Name: n, Value: v}
	}
	return []*prompb.Query{
		{StartTimestampMs: end - 3*3600_000, EndTimestampMs: end, Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_EQ, "__name__", "gauge")}},
		{StartTimestampMs: end - 1800_000, EndTimestampMs: end - 600_000, Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_RE, "__name__", "counter_total|sparse"), m(prompb.LabelMatcher_NEQ, "host", "h1")}},
		{StartTimestampMs: end - 3600_000, EndTimestampMs: end, Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_EQ, "__name__", "special")},
			Hints: &prompb.ReadHints{Func: "rate", StartMs: end - 3600_000, EndMs: end, StepMs: 60_000, RangeMs: 300_000}},
		{StartTimestampMs: end - 3600_000, EndTimestampMs: end, Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_NRE, "dc", "a|"), m(prompb.LabelMatcher_EQ, "__name__", "gauge")}},
		{StartTimestampMs: end - 60_000, EndTimestampMs: end - 59_000, Matchers: []*prompb.LabelMatcher{m(prompb.LabelMatcher_EQ, "__name__", "nothing")}},
	}
}

// TestRemoteRead_BothResponseTypesMatchStoredSamples: every query of a
// request answers exactly the stored samples of the matching series in its
// range, in label order, sampled or as streamed XOR chunks as negotiated.
func TestRemoteRead_BothResponseTypesMatchStoredSamples(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	ref := &refStorage{}
	e.writeChunked(genData(rand.New(rand.NewPCG(3, 4))), ref)
	qs := readQueries()
	for _, tc := range []struct {
		name     string
		accepted []prompb.ReadRequest_ResponseType
		ct       string
	}{
		{"default is sampled", nil, "application/x-protobuf"},
		{"sampled", []prompb.ReadRequest_ResponseType{prompb.ReadRequest_SAMPLES}, "application/x-protobuf"},
		{"streamed first", []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS, prompb.ReadRequest_SAMPLES}, contentTypeStreamedRead},
		{"unknown type skipped", []prompb.ReadRequest_ResponseType{7, prompb.ReadRequest_STREAMED_XOR_CHUNKS}, contentTypeStreamedRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ct, body := e.postRead(&prompb.ReadRequest{Queries: qs, AcceptedResponseTypes: tc.accepted}, nil)
			if st != http.StatusOK || ct != tc.ct {
				t.Fatalf("%d %q %s", st, ct, body)
			}
			var got [][]readSeries
			if ct == contentTypeStreamedRead {
				var err error
				if got, err = decodeStreamed(t, body, len(qs)); err != nil {
					t.Fatal(err)
				}
			} else {
				got = decodeSampled(t, body)
			}
			if len(got) != len(qs) {
				t.Fatalf("%d results for %d queries", len(got), len(qs))
			}
			total := 0
			for i, q := range qs {
				if err := sameSeries(got[i], refRead(t, ref, q)); err != nil {
					t.Fatalf("query %d: %v", i, err)
				}
				for _, s := range got[i] {
					total += len(s.ts)
					if ct == contentTypeStreamedRead && s.chunks != (len(s.ts)+maxSamplesPerChunk-1)/maxSamplesPerChunk {
						t.Fatalf("%s: %d samples in %d chunks", s.lset, len(s.ts), s.chunks)
					}
				}
			}
			if total < 1000 || len(got[4]) != 0 {
				t.Fatalf("%d samples in all, %d series for a metric never written", total, len(got[4]))
			}
		})
	}
}

// TestRemoteRead_SeriesHintAnswersLabelsOnly: the "series" hint (a
// /api/v1/series over remote_read) gets the series and no samples.
func TestRemoteRead_SeriesHintAnswersLabelsOnly(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	e.writeChunked(genData(rand.New(rand.NewPCG(3, 4))), nil)
	q := &prompb.Query{StartTimestampMs: 0, EndTimestampMs: ms(testNow),
		Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "gauge"}}, Hints: &prompb.ReadHints{Func: "series"}}
	for _, typ := range []prompb.ReadRequest_ResponseType{prompb.ReadRequest_SAMPLES, prompb.ReadRequest_STREAMED_XOR_CHUNKS} {
		st, ct, body := e.postRead(&prompb.ReadRequest{Queries: []*prompb.Query{q}, AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{typ}}, nil)
		if st != http.StatusOK {
			t.Fatalf("%v: %d %s", typ, st, body)
		}
		var got [][]readSeries
		if ct == contentTypeStreamedRead {
			var err error
			got, err = decodeStreamed(t, body, 1)
			must(t, err)
		} else {
			got = decodeSampled(t, body)
		}
		if len(got[0]) != 4 || len(got[0][0].ts) != 0 || got[0][0].lset != `{__name__="gauge", dc="a", host="h0"}` {
			t.Fatalf("%v: %+v", typ, got[0])
		}
	}
}

// TestRemoteRead_Refusals: bad and oversized requests get a clear error
// before anything is read; a streamed answer that passes the sample limit
// after frames were sent is cut, never answered short.
func TestRemoteRead_Refusals(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{Limits: httpapi.Limits{MaxSeriesPerQuery: 5}}, Options{MaxReadSamples: 3000, MaxReadRequestBytes: 4096})
	e.writeChunked(genData(rand.New(rand.NewPCG(3, 4))), nil)
	end := ms(testNow)
	gauge := []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "__name__", Value: "gauge"}}
	short := &prompb.Query{StartTimestampMs: end - 600_000, EndTimestampMs: end, Matchers: gauge}
	long := &prompb.Query{StartTimestampMs: 0, EndTimestampMs: end, Matchers: gauge}
	huge := &prompb.Query{Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: "x", Value: strings.Repeat("y", 8000)}}}
	sampled := []prompb.ReadRequest_ResponseType{prompb.ReadRequest_SAMPLES}
	streamed := []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}
	for _, tc := range []struct {
		name     string
		req      *prompb.ReadRequest
		hdr      map[string]string
		status   int
		contains string
	}{
		{"fits", &prompb.ReadRequest{Queries: []*prompb.Query{short}}, nil, 200, ""},
		{"no queries", &prompb.ReadRequest{}, nil, 400, "no queries"},
		{"end before start", &prompb.ReadRequest{Queries: []*prompb.Query{{StartTimestampMs: 10, EndTimestampMs: 5, Matchers: gauge}}}, nil, 400, "before start"},
		{"bad regexp", &prompb.ReadRequest{Queries: []*prompb.Query{{Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "a", Value: "("}}}}}, nil, 400, "bad matcher"},
		{"matches everything", &prompb.ReadRequest{Queries: []*prompb.Query{{EndTimestampMs: end, Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "a", Value: ".*"}}}}}, nil, 400, ""},
		{"too many series", &prompb.ReadRequest{Queries: []*prompb.Query{{EndTimestampMs: end, Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_RE, Name: "host", Value: ".+"}}}}}, nil, 400, "series"},
		{"too many samples, sampled", &prompb.ReadRequest{Queries: []*prompb.Query{long}, AcceptedResponseTypes: sampled}, nil, 400, "more than 3000 samples"},
		{"too many samples, streamed", &prompb.ReadRequest{Queries: []*prompb.Query{long}, AcceptedResponseTypes: streamed}, nil, -1, ""},
		{"body too large", &prompb.ReadRequest{Queries: []*prompb.Query{huge}}, nil, 413, "limit is 4096"},
		{"not snappy", &prompb.ReadRequest{Queries: []*prompb.Query{short}}, map[string]string{"Content-Encoding": "gzip"}, 415, "snappy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _, body := e.postRead(tc.req, tc.hdr)
			if st != tc.status || !strings.Contains(string(body), tc.contains) {
				t.Fatalf("%d %s, want %d containing %q", st, body, tc.status, tc.contains)
			}
		})
	}
	if e.stats.Get(StatReadErrors) < 8 || e.stats.Get(StatReadRequests) != 10 {
		t.Fatalf("counters: %v", e.stats.Snapshot())
	}
}

// partialBackend answers like its backend, plus a warning that a node
// could not be reached.
type partialBackend struct{ backend.Backend }

func (b partialBackend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	info, err := b.Backend.Query(ctx, q, emit)
	info.Warnings = append(info.Warnings, "node edge-3 did not answer")
	return info, err
}

// TestRemoteRead_PartialAnswerFails: remote_read cannot carry a warning,
// so an answer the backend says is partial is refused (503), or cut when
// streamed frames were already sent.
func TestRemoteRead_PartialAnswerFails(t *testing.T) {
	full := newTestEnv(t, nil, httpapi.Config{}, Options{})
	full.writeChunked(genData(rand.New(rand.NewPCG(3, 4))), nil)
	e := newTestEnvFor(t, full.node, partialBackend{full.node}, httpapi.Config{}, Options{})
	q := readQueries()[0]
	st, _, body := e.postRead(&prompb.ReadRequest{Queries: []*prompb.Query{q}}, nil)
	if st != http.StatusServiceUnavailable || !strings.Contains(string(body), "edge-3") {
		t.Fatalf("sampled: %d %s", st, body)
	}
	st, _, body = e.postRead(&prompb.ReadRequest{Queries: []*prompb.Query{q}, AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS}}, nil)
	if st != -1 {
		t.Fatalf("streamed: %d %s, want the connection cut", st, body)
	}
}

// TestRemoteRead_SampledEncodingMatchesPrompb: the hand-written encoding
// of a TimeSeries is byte for byte what prompb's generated code writes
// (zero timestamps and values included, which proto3 may omit: both
// decode the same, so those are compared decoded).
func TestRemoteRead_SampledEncodingMatchesPrompb(t *testing.T) {
	ls := nlabels.Labels{{Name: "__name__", Value: "m"}, {Name: "a", Value: strings.Repeat("x", 300)}}
	ts := []int64{1, -5, 1 << 40}
	vs := []float64{0.5, math.Inf(-1), math.Float64frombits(staleNaNBits)}
	got := appendTimeSeries(nil, ls, ts, vs)
	want := prompb.TimeSeries{Labels: promLabels(ls)}
	for i := range ts {
		want.Samples = append(want.Samples, prompb.Sample{Timestamp: ts[i], Value: vs[i]})
	}
	raw, err := want.Marshal()
	must(t, err)
	if !bytes.Equal(got, raw) {
		t.Fatalf("encoding differs:\n got %x\nwant %x", got, raw)
	}
	var back prompb.TimeSeries
	must(t, back.Unmarshal(appendTimeSeries(nil, ls, []int64{0}, []float64{0})))
	if len(back.Samples) != 1 || back.Samples[0].Timestamp != 0 || back.Samples[0].Value != 0 || len(back.Labels) != 2 {
		t.Fatalf("zero sample: %+v", back)
	}
}
