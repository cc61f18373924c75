package prom

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"mime"
	"net/http"
	"strings"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// remote_read (POST /api/v1/read).
//
// Request: a snappy block holding a protobuf prometheus.ReadRequest
// (prompb), at most Options.MaxReadRequestBytes compressed and decoded.
// Each of its queries has a time range (inclusive, ms), label matchers and
// optional hints. The answer holds every raw sample of every matching
// series in the range, which is right whatever function the hints name;
// the one hint used is func "series" (Prometheus's /api/v1/series over
// remote_read), answered with the series' labels and no samples.
//
// The response type is the first of the request's accepted_response_types
// that is served (SAMPLES when the list is empty):
//
//   - SAMPLES: one snappy block holding a prometheus.ReadResponse, one
//     QueryResult per query in request order, Content-Type
//     application/x-protobuf, Content-Encoding snappy. It is built in
//     memory (11 to 20 bytes a sample, then its snappy copy), which is
//     what the sample limit bounds.
//   - STREAMED_XOR_CHUNKS: Content-Type application/x-streamed-protobuf;
//     proto=prometheus.ChunkedReadResponse, a sequence of frames
//
//     uvarint(len(msg)) | CRC-32 Castagnoli of msg, big-endian uint32 | msg
//
//     where msg is a protobuf prometheus.ChunkedReadResponse holding one
//     series (labels and XOR chunks of at most 120 samples, in time order)
//     and the index of its query. A series whose chunks pass
//     maxReadFrameBytes continues in the next frame. Queries are answered
//     in request order, series in label order. A frame is written as soon
//     as its series is read, so memory holds one series at a time. The
//     stream ends when the body ends; an error once frames have been sent
//     cannot change the status any more, so the connection is then cut
//     without ending the chunked body, and the client sees a failed read,
//     never a short answer.
//
// Limits: Options.MaxReadSamples samples per request (all queries
// together), --max-series-per-query series per query; past either the
// request fails (400 before any frame is sent). remote_read shares the
// query slots (Options.MaxConcurrentQueries) with the query API.

// Content types of remote_read answers.
const (
	contentTypeProtobuf     = "application/x-protobuf"
	contentTypeStreamedRead = "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse"
)

// maxReadFrameBytes bounds the message of one streamed frame, as
// Prometheus's own server does by default.
const maxReadFrameBytes = 1 << 20

// maxSamplesPerChunk is the size Prometheus cuts its XOR chunks at.
const maxSamplesPerChunk = 120

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readError is a remote_read failure with its HTTP status.
type readError struct {
	status int
	msg    string
}

func (e *readError) Error() string { return e.msg }

func readErrorf(status int, format string, a ...any) *readError {
	return &readError{status: status, msg: "remote_read: " + fmt.Sprintf(format, a...)}
}

// checkReadHeaders accepts snappy-compressed protobuf bodies.
func checkReadHeaders(r *http.Request) *readError {
	if enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc != "" && enc != "snappy" {
		return readErrorf(http.StatusUnsupportedMediaType, "Content-Encoding %q is not supported: remote_read bodies are snappy-compressed", enc)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != contentTypeProtobuf {
			return readErrorf(http.StatusUnsupportedMediaType, "Content-Type %q is not supported: remote_read sends %s", ct, contentTypeProtobuf)
		}
	}
	return nil
}

// decodeRead reads and decodes a ReadRequest within the request limit.
func (a *API) decodeRead(r *http.Request) (*prompb.ReadRequest, *readError) {
	maxBytes := a.opts.MaxReadRequestBytes
	body, e := readBody(r, maxBytes, nil)
	if e != nil {
		return nil, &readError{status: e.status, msg: "remote_read: " + e.msg}
	}
	raw, e := decodeSnappy(nil, body, maxBytes)
	if e != nil {
		return nil, &readError{status: e.status, msg: "remote_read: " + strings.ReplaceAll(e.msg, "remote_write", "remote_read")}
	}
	var req prompb.ReadRequest
	if err := req.Unmarshal(raw); err != nil {
		return nil, readErrorf(http.StatusBadRequest, "body is not a protobuf prometheus.ReadRequest: %v", err)
	}
	return &req, nil
}

// negotiateReadType picks the first accepted response type served here.
func negotiateReadType(accepted []prompb.ReadRequest_ResponseType) (prompb.ReadRequest_ResponseType, *readError) {
	if len(accepted) == 0 {
		return prompb.ReadRequest_SAMPLES, nil
	}
	for _, t := range accepted {
		if t == prompb.ReadRequest_SAMPLES || t == prompb.ReadRequest_STREAMED_XOR_CHUNKS {
			return t, nil
		}
	}
	return 0, readErrorf(http.StatusBadRequest, "none of the accepted response types %v is served; served are SAMPLES and STREAMED_XOR_CHUNKS", accepted)
}

// readMatchers converts a query's matchers to the node's.
func (a *API) readMatchers(q *prompb.Query) ([]*nlabels.Matcher, error) {
	ms := make([]*labels.Matcher, 0, len(q.Matchers))
	for _, m := range q.Matchers {
		var t labels.MatchType
		switch m.Type {
		case prompb.LabelMatcher_EQ:
			t = labels.MatchEqual
		case prompb.LabelMatcher_NEQ:
			t = labels.MatchNotEqual
		case prompb.LabelMatcher_RE:
			t = labels.MatchRegexp
		case prompb.LabelMatcher_NRE:
			t = labels.MatchNotRegexp
		default:
			return nil, fmt.Errorf("unknown matcher type %d", m.Type)
		}
		pm, err := labels.NewMatcher(t, m.Name, m.Value)
		if err != nil {
			return nil, err
		}
		ms = append(ms, pm)
	}
	return a.nodeMatchers(ms)
}

func (a *API) serveRead(w http.ResponseWriter, r *http.Request) {
	a.stats.Inc(StatReadRequests)
	if e := checkReadHeaders(r); e != nil {
		a.failRead(w, e)
		return
	}
	release, err := acquire(r.Context(), a.queries)
	if err != nil {
		a.stats.Inc(httpapi.ViolationOverloaded)
		writeText(w, http.StatusServiceUnavailable, "1",
			fmt.Sprintf("remote_read: too many concurrent queries (limit %d); retry later", a.opts.MaxConcurrentQueries))
		return
	}
	defer release()
	req, e := a.decodeRead(r)
	if e == nil {
		e = a.checkReadQueries(req)
	}
	if e != nil {
		a.failRead(w, e)
		return
	}
	typ, e := negotiateReadType(req.AcceptedResponseTypes)
	if e != nil {
		a.failRead(w, e)
		return
	}
	rd := &reader{api: a, ctx: model.WithQueryAPI(r.Context(), model.QueryAPIPromQL)}
	if typ == prompb.ReadRequest_STREAMED_XOR_CHUNKS {
		a.streamRead(w, rd, req)
		return
	}
	a.sampledRead(w, rd, req)
}

// checkReadQueries validates every query before any is run.
func (a *API) checkReadQueries(req *prompb.ReadRequest) *readError {
	if len(req.Queries) == 0 {
		return readErrorf(http.StatusBadRequest, "the request has no queries")
	}
	for i, q := range req.Queries {
		if q.EndTimestampMs < q.StartTimestampMs {
			return readErrorf(http.StatusBadRequest, "query %d: end %d is before start %d", i, q.EndTimestampMs, q.StartTimestampMs)
		}
		if _, err := a.readMatchers(q); err != nil {
			return readErrorf(http.StatusBadRequest, "query %d: bad matcher: %v", i, err)
		}
	}
	return nil
}

func (a *API) failRead(w http.ResponseWriter, e *readError) {
	switch e.status {
	case http.StatusRequestEntityTooLarge:
		a.stats.Inc(httpapi.ViolationBodyTooLarge)
	case http.StatusBadRequest, http.StatusUnsupportedMediaType:
		a.stats.Inc(httpapi.ViolationBadRequest)
	}
	a.stats.Inc(StatReadErrors)
	retry := ""
	if e.status == http.StatusServiceUnavailable || e.status == http.StatusTooManyRequests {
		retry = "1"
	}
	writeText(w, e.status, retry, e.msg)
}

// reader runs the queries of one remote_read request and counts the
// samples they return against Options.MaxReadSamples.
type reader struct {
	api     *API
	ctx     context.Context
	samples int64
}

// errReadSamples: the request would return more than MaxReadSamples.
var errReadSamples = errors.New("too many samples")

// each calls emit for every series query i matches, in label order, with
// its samples (none for a "series" hint).
func (rd *reader) each(i int, q *prompb.Query, emit func(ls nlabels.Labels, ts []int64, vs []float64) error) *readError {
	ms, err := rd.api.readMatchers(q)
	if err != nil {
		return readErrorf(http.StatusBadRequest, "query %d: bad matcher: %v", i, err)
	}
	limit := rd.api.cfg.Limits.MaxSeriesPerQuery
	if q.Hints != nil && q.Hints.Func == "series" {
		list, err := rd.api.b.Series(rd.ctx, ms, limit+1)
		if err != nil {
			return rd.storageError(i, err)
		}
		if len(list) > limit {
			return readErrorf(http.StatusBadRequest, "query %d matches more than %d series (--max-series-per-query); narrow its matchers", i, limit)
		}
		for _, ls := range list {
			if err := emit(ls, nil, nil); err != nil {
				return rd.storageError(i, err)
			}
		}
		return nil
	}
	nq := model.Query{Matchers: ms, Start: q.StartTimestampMs, End: q.EndTimestampMs, Mode: model.ModeRaw, LimitSeries: limit}
	info, err := rd.api.b.Query(rd.ctx, nq, func(s model.Series) error {
		rd.samples += int64(len(s.Ts))
		rd.api.stats.Add(StatSamplesRead, int64(len(s.Ts)))
		if rd.samples > rd.api.opts.MaxReadSamples {
			return errReadSamples
		}
		return emit(s.Labels, s.Ts, s.Vs)
	})
	if err != nil {
		return rd.storageError(i, err)
	}
	if len(info.Warnings) > 0 {
		// remote_read cannot carry a warning: a partial answer (a
		// coordinator that could not reach a node) is a failed one.
		return readErrorf(http.StatusServiceUnavailable, "query %d: the answer would be partial: %s", i, strings.Join(info.Warnings, "; "))
	}
	return nil
}

// storageError says why query i failed, with the status to answer.
func (rd *reader) storageError(i int, err error) *readError {
	if errors.Is(err, errReadSamples) {
		return readErrorf(http.StatusBadRequest, "the request would return more than %d samples (the remote_read sample limit); ask for a shorter time range or fewer series", rd.api.opts.MaxReadSamples)
	}
	var re *readError
	if errors.As(err, &re) {
		return re
	}
	ae := classifyStorage(err)
	status := ae.status
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	return readErrorf(status, "query %d: %v", i, err)
}

func promLabels(ls nlabels.Labels) []prompb.Label {
	out := make([]prompb.Label, len(ls))
	for i, l := range ls {
		out[i] = prompb.Label{Name: l.Name, Value: l.Value}
	}
	return out
}

// sampledRead answers with one ReadResponse of samples. The message is
// encoded as the series arrive, without an intermediate prompb value per
// sample (which would hold about 50 bytes a sample instead of 11 to 20):
//
//	ReadResponse { repeated QueryResult results = 1; }
//	QueryResult  { repeated TimeSeries timeseries = 1; }
//	TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
//	Label        { string name = 1; string value = 2; }
//	Sample       { double value = 1; int64 timestamp = 2; }
func (a *API) sampledRead(w http.ResponseWriter, rd *reader, req *prompb.ReadRequest) {
	var resp, result, ts []byte
	for i, q := range req.Queries {
		result = result[:0]
		e := rd.each(i, q, func(ls nlabels.Labels, tss []int64, vs []float64) error {
			ts = appendTimeSeries(ts[:0], ls, tss, vs)
			result = protowire.AppendTag(result, 1, protowire.BytesType)
			result = protowire.AppendBytes(result, ts)
			return nil
		})
		if e != nil {
			a.failRead(w, e)
			return
		}
		resp = protowire.AppendTag(resp, 1, protowire.BytesType)
		resp = protowire.AppendBytes(resp, result)
	}
	h := w.Header()
	h.Set("Content-Type", contentTypeProtobuf)
	h.Set("Content-Encoding", "snappy")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(snappy.Encode(nil, resp))
}

// appendTimeSeries appends the encoding of a prometheus.TimeSeries.
func appendTimeSeries(b []byte, ls nlabels.Labels, ts []int64, vs []float64) []byte {
	for _, l := range ls {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)+protowire.SizeBytes(len(l.Name))+protowire.SizeTag(2)+protowire.SizeBytes(len(l.Value))))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, l.Name)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, l.Value)
	}
	for i, t := range ts {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(protowire.SizeTag(1)+protowire.SizeFixed64()+protowire.SizeTag(2)+protowire.SizeVarint(uint64(t))))
		b = protowire.AppendTag(b, 1, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(vs[i]))
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(t))
	}
	return b
}

// streamRead answers with frames of XOR chunks, one series at a time.
func (a *API) streamRead(w http.ResponseWriter, rd *reader, req *prompb.ReadRequest) {
	fw := &frameWriter{w: w}
	for i, q := range req.Queries {
		e := rd.each(i, q, func(ls nlabels.Labels, ts []int64, vs []float64) error {
			return fw.series(int64(i), promLabels(ls), ts, vs)
		})
		if e == nil {
			continue
		}
		if !fw.started {
			a.failRead(w, e)
			return
		}
		a.stats.Inc(StatReadErrors)
		a.opts.Logger.Warn("remote_read: cutting a streamed answer short", "error", e.msg)
		// The status is sent: cut the connection so that the client
		// sees a failed read rather than a complete, shorter answer.
		panic(http.ErrAbortHandler)
	}
	if !fw.started {
		// No series: an empty stream, with its content type.
		fw.start()
	}
}

// frameWriter writes the frames of a streamed remote_read answer.
type frameWriter struct {
	w       http.ResponseWriter
	started bool
	buf     []byte
}

func (fw *frameWriter) start() {
	fw.w.Header().Set("Content-Type", contentTypeStreamedRead)
	fw.w.WriteHeader(http.StatusOK)
	fw.started = true
}

// series writes one series as XOR chunks, in as many frames as their
// size needs.
func (fw *frameWriter) series(queryIndex int64, lbls []prompb.Label, ts []int64, vs []float64) error {
	cs := &prompb.ChunkedSeries{Labels: lbls}
	size := cs.Size()
	for start := 0; start < len(ts); start += maxSamplesPerChunk {
		end := min(start+maxSamplesPerChunk, len(ts))
		chk, err := xorChunk(ts[start:end], vs[start:end])
		if err != nil {
			return err
		}
		if size+chk.Size()+16 > maxReadFrameBytes && len(cs.Chunks) > 0 {
			if err := fw.frame(queryIndex, cs); err != nil {
				return err
			}
			cs.Chunks = cs.Chunks[:0]
			size = cs.Size()
		}
		cs.Chunks = append(cs.Chunks, chk)
		size += chk.Size() + 16
	}
	return fw.frame(queryIndex, cs)
}

// frame writes one ChunkedReadResponse frame and flushes it.
func (fw *frameWriter) frame(queryIndex int64, cs *prompb.ChunkedSeries) error {
	if !fw.started {
		fw.start()
	}
	msg := prompb.ChunkedReadResponse{ChunkedSeries: []*prompb.ChunkedSeries{cs}, QueryIndex: queryIndex}
	n := msg.Size()
	fw.buf = fw.buf[:0]
	fw.buf = binary.AppendUvarint(fw.buf, uint64(n))
	crcAt := len(fw.buf)
	fw.buf = append(fw.buf, 0, 0, 0, 0)
	fw.buf = append(fw.buf, make([]byte, n)...)
	if _, err := msg.MarshalToSizedBuffer(fw.buf[crcAt+4:]); err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	binary.BigEndian.PutUint32(fw.buf[crcAt:], crc32.Checksum(fw.buf[crcAt+4:], castagnoli))
	if _, err := fw.w.Write(fw.buf); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	if f, ok := fw.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// xorChunk encodes samples as one Prometheus XOR chunk.
func xorChunk(ts []int64, vs []float64) (prompb.Chunk, error) {
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		return prompb.Chunk{}, fmt.Errorf("xor chunk: %w", err)
	}
	for i := range ts {
		app.Append(0, ts[i], vs[i])
	}
	return prompb.Chunk{MinTimeMs: ts[0], MaxTimeMs: ts[len(ts)-1], Type: prompb.Chunk_XOR, Data: c.Bytes()}, nil
}
