package prom

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// The remote_write decoder; the wire format it reads is specified in the
// package documentation (doc.go).

// rwError is a remote_write request that cannot be stored as sent: status
// is the HTTP status to answer with, violation the httpapi counter.
type rwError struct {
	status    int
	violation string
	msg       string
}

func (e *rwError) Error() string { return e.msg }

// rwErrorf makes an *rwError counted as the status suggests: 413 a body
// too large, 415 a bad encoding, anything else a bad request.
func rwErrorf(status int, format string, a ...any) *rwError {
	v := httpapi.ViolationBadRequest
	switch status {
	case http.StatusRequestEntityTooLarge:
		v = httpapi.ViolationBodyTooLarge
	case http.StatusUnsupportedMediaType:
		v = httpapi.ViolationBadEncoding
	}
	return &rwError{status: status, violation: v, msg: fmt.Sprintf(format, a...)}
}

func (e *rwError) counted(violation string) *rwError {
	e.violation = violation
	return e
}

// decodeSnappy checks the declared decoded length of a snappy block against
// maxBytes before allocating, then decodes into dst (reused when large
// enough).
func decodeSnappy(dst, body []byte, maxBytes int64) ([]byte, *rwError) {
	// The block starts with the decoded length as a uvarint, at most
	// 2^32-1. Read it here rather than with snappy.DecodedLen, which also
	// refuses lengths over the int range and so on 32-bit machines would
	// turn an oversize body into a decoding error instead of a 413.
	declared, hdr := binary.Uvarint(body)
	if hdr <= 0 || declared > math.MaxUint32 {
		return nil, rwErrorf(http.StatusBadRequest, "body is not a snappy block (remote_write bodies are snappy block-compressed, not framed): bad decoded-length header").
			counted(httpapi.ViolationBadEncoding)
	}
	if declared > uint64(maxBytes) {
		return nil, rwErrorf(http.StatusRequestEntityTooLarge, "snappy body declares %d decoded bytes, limit is %d", declared, maxBytes)
	}
	// A snappy element yields at most 64 bytes for 3 (a copy with a
	// 2-byte offset): a block cannot decode to more than 64/3 times its
	// elements. Refusing a larger claim here keeps a few bytes from making
	// the decoder allocate up to maxBytes.
	if elems := uint64(len(body) - hdr); declared > elems*64/3 {
		return nil, rwErrorf(http.StatusBadRequest, "body is not valid snappy: %d bytes cannot decode to the %d bytes it declares", len(body), declared).
			counted(httpapi.ViolationBadEncoding)
	}
	n := int(declared)
	if cap(dst) < n {
		dst = make([]byte, n)
	}
	out, err := snappy.Decode(dst[:cap(dst)], body)
	if err != nil {
		return nil, rwErrorf(http.StatusBadRequest, "body is not valid snappy (truncated or corrupt): %v", err).
			counted(httpapi.ViolationBadEncoding)
	}
	return out, nil
}

// writeRequest is a decoded remote_write request.
type writeRequest struct {
	// Batches holds one batch per time series that has float samples, in
	// request order; Index[i] is the position of Batches[i] among the
	// request's time series.
	Batches []model.Batch
	Index   []int
	// Series counts all time series entries, Samples their float samples.
	Series  int
	Samples int64
	// Histograms and Exemplars count what was sent but cannot be stored;
	// HistogramSeries and ExemplarSeries the series carrying them.
	Histograms, Exemplars           int64
	HistogramSeries, ExemplarSeries int
	Metadata                        []metricMetadata
	// Refused counts the series with samples that break the label limits,
	// RefusedSamples their samples (also in Samples); RefusedWhy says why
	// for the first maxReportDetails of them, as "timeseries N: ...".
	Refused        int
	RefusedSamples int64
	RefusedWhy     []string
	// MetadataDropped counts the metadata entries past rwLimits.maxMetadata.
	MetadataDropped int
}

// rwLimits bound what the decoder builds; zero fields are no limit.
type rwLimits struct {
	maxSamples int64         // float samples of the request: more is a 413
	maxSeries  int           // series with samples: more is a 413
	labels     labels.Limits // a series beyond them is refused, not built
	// maxMetadata bounds the metadata entries kept; the others are
	// counted in MetadataDropped.
	maxMetadata int
}

// metricMetadata is one MetricMetadata entry.
type metricMetadata struct {
	Type, Family, Help, Unit string
}

// The field numbers of the messages above.
const (
	fieldWriteTimeseries = 1
	fieldWriteMetadata   = 3

	fieldSeriesLabels     = 1
	fieldSeriesSamples    = 2
	fieldSeriesExemplars  = 3
	fieldSeriesHistograms = 4

	fieldLabelName  = 1
	fieldLabelValue = 2

	fieldSampleValue     = 1
	fieldSampleTimestamp = 2

	fieldMetaType   = 1
	fieldMetaFamily = 2
	fieldMetaHelp   = 4
	fieldMetaUnit   = 5
)

// metricTypes are the MetricMetadata.MetricType names, as the metadata API
// reports them.
var metricTypes = [...]string{"unknown", "counter", "gauge", "histogram", "gaugehistogram", "summary", "info", "stateset"}

// msgReader walks one protobuf message; base is the offset of buf in the
// whole decoded request, series the index of the time series it belongs to
// (-1: none), what the message's name: the last three only make error
// messages.
type msgReader struct {
	buf    []byte
	pos    int
	base   int
	series int
	what   string
}

func (r *msgReader) done() bool { return r.pos >= len(r.buf) }

func (r *msgReader) errorf(format string, a ...any) error {
	what := r.what
	if r.series >= 0 {
		what = strings.TrimSpace(fmt.Sprintf("timeseries %d %s", r.series, r.what))
	}
	return rwErrorf(http.StatusBadRequest, "invalid protobuf WriteRequest: %s at byte %d: %s", what, r.base+r.pos, fmt.Sprintf(format, a...))
}

// next reads a field tag.
func (r *msgReader) next() (protowire.Number, protowire.Type, error) {
	num, typ, n := protowire.ConsumeTag(r.buf[r.pos:])
	if n < 0 {
		return 0, 0, r.errorf("bad field tag: %v", protowire.ParseError(n))
	}
	r.pos += n
	return num, typ, nil
}

// bytes reads a length-delimited field value of the field num, and its
// offset in the whole decoded request.
func (r *msgReader) bytes(num protowire.Number, typ protowire.Type) ([]byte, int, error) {
	if err := r.wantType(num, typ, protowire.BytesType); err != nil {
		return nil, 0, err
	}
	v, n := protowire.ConsumeBytes(r.buf[r.pos:])
	if err := r.advance(num, n); err != nil {
		return nil, 0, err
	}
	return v, r.base + r.pos - len(v), nil
}

func (r *msgReader) varint(num protowire.Number, typ protowire.Type) (uint64, error) {
	if err := r.wantType(num, typ, protowire.VarintType); err != nil {
		return 0, err
	}
	v, n := protowire.ConsumeVarint(r.buf[r.pos:])
	return v, r.advance(num, n)
}

func (r *msgReader) fixed64(num protowire.Number, typ protowire.Type) (uint64, error) {
	if err := r.wantType(num, typ, protowire.Fixed64Type); err != nil {
		return 0, err
	}
	v, n := protowire.ConsumeFixed64(r.buf[r.pos:])
	return v, r.advance(num, n)
}

// skip consumes the value of an unknown field.
func (r *msgReader) skip(num protowire.Number, typ protowire.Type) error {
	if typ == protowire.EndGroupType {
		return r.errorf("end-group tag for field %d without a start", num)
	}
	return r.advance(num, protowire.ConsumeFieldValue(num, typ, r.buf[r.pos:]))
}

// wireTypeNames name the wire types the decoder reads, for errors.
var wireTypeNames = map[protowire.Type]string{
	protowire.VarintType:  "varint",
	protowire.Fixed64Type: "fixed64",
	protowire.BytesType:   "length-delimited",
}

// wantType checks that field num has the wire type want.
func (r *msgReader) wantType(num protowire.Number, typ, want protowire.Type) error {
	if typ == want {
		return nil
	}
	return r.errorf("field %d has wire type %d, want %s", num, typ, wireTypeNames[want])
}

// advance moves past the value of field num that a protowire Consume
// function measured as n bytes (negative: malformed). It inlines; the
// error is made by malformed.
func (r *msgReader) advance(num protowire.Number, n int) error {
	if n < 0 {
		return r.malformed(num, n)
	}
	r.pos += n
	return nil
}

// malformed is the error of a value of field num that a protowire Consume
// function refused with n.
func (r *msgReader) malformed(num protowire.Number, n int) error {
	return r.errorf("field %d: %v", num, protowire.ParseError(n))
}

// sub returns a reader for an embedded message starting at offset base.
func sub(buf []byte, base, series int, what string) msgReader {
	return msgReader{buf: buf, base: base, series: series, what: what}
}

// counts are what the first pass finds: of the series with samples that
// are kept, how many, their labels and samples.
type counts struct {
	series, batches, labels int
	samples, allSamples     int64
}

// decodeWriteRequest decodes a WriteRequest (already snappy-decoded).
// More samples or series than lim allows is a 413 error found before
// anything is allocated; a series beyond lim.labels is refused (counted in
// Refused, not built).
func decodeWriteRequest(buf []byte, lim rwLimits) (*writeRequest, error) {
	var c counts
	if err := scanWriteRequest(buf, &c, lim); err != nil {
		return nil, err
	}
	req := &writeRequest{
		Series:  c.series,
		Batches: make([]model.Batch, 0, c.batches),
		Index:   make([]int, 0, c.batches),
	}
	ts := make([]int64, c.samples)
	vs := make([]float64, c.samples)
	lbls := make([]labels.Label, c.labels)
	in := interner{}
	r := sub(buf, 0, -1, "WriteRequest")
	seriesIdx := 0
	for !r.done() {
		num, typ, err := r.next()
		if err != nil {
			return nil, err
		}
		switch num {
		case fieldWriteTimeseries:
			msg, base, err := r.bytes(num, typ)
			if err != nil {
				return nil, err
			}
			b, err := fillSeries(req, msg, base, seriesIdx, lim.labels, &ts, &vs, &lbls, in)
			if err != nil {
				return nil, err
			}
			if len(b.Ts) > 0 {
				req.Batches = append(req.Batches, b)
				req.Index = append(req.Index, seriesIdx)
			}
			seriesIdx++
		case fieldWriteMetadata:
			msg, base, err := r.bytes(num, typ)
			if err != nil {
				return nil, err
			}
			md, err := decodeMetadata(msg, base)
			if err != nil {
				return nil, err
			}
			if lim.maxMetadata > 0 && len(req.Metadata) >= lim.maxMetadata {
				req.MetadataDropped++
				continue
			}
			req.Metadata = append(req.Metadata, md)
		default:
			if err := r.skip(num, typ); err != nil {
				return nil, err
			}
		}
	}
	if len(ts) != 0 || len(lbls) != 0 {
		return nil, errors.New("BUG: remote_write decoder passes disagree")
	}
	return req, nil
}

// scanWriteRequest is the first pass: it validates the structure down to
// samples and labels and counts them.
func scanWriteRequest(buf []byte, c *counts, lim rwLimits) error {
	r := sub(buf, 0, -1, "WriteRequest")
	for !r.done() {
		num, typ, err := r.next()
		if err != nil {
			return err
		}
		switch num {
		case fieldWriteTimeseries:
			msg, base, err := r.bytes(num, typ)
			if err != nil {
				return err
			}
			s, err := scanSeries(msg, base, c.series, lim.labels)
			if err != nil {
				return err
			}
			c.allSamples += int64(s.samples)
			if s.samples > 0 && s.refused == 0 {
				c.batches++
				c.labels += s.labels
				c.samples += int64(s.samples)
			}
			if lim.maxSamples > 0 && c.allSamples > lim.maxSamples {
				return rwErrorf(http.StatusRequestEntityTooLarge, "request has more than %d samples (the per-request limit); lower max_samples_per_send", lim.maxSamples).
					counted(httpapi.ViolationTooManyPoints)
			}
			if lim.maxSeries > 0 && c.batches > lim.maxSeries {
				return rwErrorf(http.StatusRequestEntityTooLarge, "timeseries %d: the request holds more than %d series (the per-request limit); lower max_samples_per_send", c.series, lim.maxSeries).
					counted(httpapi.ViolationTooManySeries)
			}
			c.series++
		case fieldWriteMetadata:
			if _, _, err := r.bytes(num, typ); err != nil {
				return err
			}
		default:
			if err := r.skip(num, typ); err != nil {
				return err
			}
		}
	}
	return nil
}

// seriesInfo is what scanSeries finds in one TimeSeries.
type seriesInfo struct {
	labels                 int // labels with a value (the node drops the others)
	samples, hists, exemps int
	// refused is why the series breaks the label limits (0: it does not):
	// refusedCount (labels) labels, or label name over the limit,
	// refusedValue of label name; n is the count or length.
	refused byte
	n       int
	name    []byte
}

const (
	refusedCount = 1 + iota
	refusedName
	refusedValue
)

// why says why s was refused, in the words of the node's validation.
func (s *seriesInfo) why(lim labels.Limits) string {
	switch s.refused {
	case refusedCount:
		return fmt.Sprintf("invalid series: %d labels, limit is %d", s.n, lim.MaxLabels)
	case refusedName:
		return fmt.Sprintf("invalid series: label name %.32q... is %d bytes, limit is %d", s.name, s.n, lim.MaxNameBytes)
	}
	return fmt.Sprintf("invalid series: label %q: value is %d bytes, limit is %d", s.name, s.n, lim.MaxValueBytes)
}

// scanSeries validates the structure of one TimeSeries, counts what it
// holds and checks its labels against lim, without allocating.
func scanSeries(buf []byte, base, idx int, lim labels.Limits) (seriesInfo, error) {
	r := sub(buf, base, idx, "")
	var s seriesInfo
	var lenWhy byte
	var lenN int
	var lenName []byte
	for !r.done() {
		num, typ, err := r.next()
		if err != nil {
			return s, err
		}
		switch num {
		case fieldSeriesLabels:
			msg, b, err := r.bytes(num, typ)
			if err != nil {
				return s, err
			}
			name, value, err := decodeLabel(msg, b, idx)
			if err != nil {
				return s, err
			}
			if len(value) == 0 {
				continue
			}
			s.labels++
			switch {
			case lenWhy != 0:
			case lim.MaxNameBytes > 0 && len(name) > lim.MaxNameBytes:
				lenWhy, lenN, lenName = refusedName, len(name), name
			case lim.MaxValueBytes > 0 && len(value) > lim.MaxValueBytes:
				lenWhy, lenN, lenName = refusedValue, len(value), name
			}
		case fieldSeriesSamples:
			msg, b, err := r.bytes(num, typ)
			if err != nil {
				return s, err
			}
			if _, _, err := decodeSample(msg, b, idx); err != nil {
				return s, err
			}
			s.samples++
		case fieldSeriesExemplars, fieldSeriesHistograms:
			// Only their framing is checked; their content is not read.
			if _, _, err := r.bytes(num, typ); err != nil {
				return s, err
			}
			if num == fieldSeriesExemplars {
				s.exemps++
			} else {
				s.hists++
			}
		default:
			if err := r.skip(num, typ); err != nil {
				return s, err
			}
		}
	}
	switch {
	case lim.MaxLabels > 0 && s.labels > lim.MaxLabels:
		s.refused, s.n = refusedCount, s.labels
	case lenWhy != 0:
		s.refused, s.n, s.name = lenWhy, lenN, lenName
	}
	return s, nil
}

// fillSeries is the second pass over one TimeSeries: it takes its labels
// (those with a value) and samples from the front of the preallocated
// arrays, or records why the series is refused.
func fillSeries(req *writeRequest, buf []byte, base, idx int, lim labels.Limits, ts *[]int64, vs *[]float64, lbls *[]labels.Label, in interner) (model.Batch, error) {
	s, err := scanSeries(buf, base, idx, lim)
	if err != nil {
		return model.Batch{}, err
	}
	if s.hists > 0 {
		req.Histograms += int64(s.hists)
		req.HistogramSeries++
	}
	if s.exemps > 0 {
		req.Exemplars += int64(s.exemps)
		req.ExemplarSeries++
	}
	if s.samples == 0 {
		return model.Batch{}, nil
	}
	req.Samples += int64(s.samples)
	if s.refused != 0 {
		req.Refused++
		req.RefusedSamples += int64(s.samples)
		if len(req.RefusedWhy) < maxReportDetails {
			req.RefusedWhy = append(req.RefusedWhy, fmt.Sprintf("timeseries %d: %s", idx, s.why(lim)))
		}
		return model.Batch{}, nil
	}
	if s.samples > len(*ts) || s.labels > len(*lbls) {
		return model.Batch{}, errors.New("BUG: remote_write decoder passes disagree")
	}
	b := model.Batch{
		Labels: (*lbls)[:0:s.labels],
		Ts:     (*ts)[:0:s.samples],
		Vs:     (*vs)[:0:s.samples],
	}
	*lbls, *ts, *vs = (*lbls)[s.labels:], (*ts)[s.samples:], (*vs)[s.samples:]
	r := sub(buf, base, idx, "")
	for !r.done() {
		num, typ, err := r.next()
		if err != nil {
			return model.Batch{}, err
		}
		switch num {
		case fieldSeriesLabels:
			msg, mb, err := r.bytes(num, typ)
			if err != nil {
				return model.Batch{}, err
			}
			name, value, err := decodeLabel(msg, mb, idx)
			if err != nil {
				return model.Batch{}, err
			}
			if len(value) > 0 {
				b.Labels = append(b.Labels, labels.Label{Name: in.get(name), Value: in.get(value)})
			}
		case fieldSeriesSamples:
			msg, mb, err := r.bytes(num, typ)
			if err != nil {
				return model.Batch{}, err
			}
			t, v, err := decodeSample(msg, mb, idx)
			if err != nil {
				return model.Batch{}, err
			}
			b.Ts = append(b.Ts, t)
			b.Vs = append(b.Vs, v)
		default:
			if err := r.skip(num, typ); err != nil {
				return model.Batch{}, err
			}
		}
	}
	return b, nil
}

func decodeLabel(buf []byte, base, series int) (name, value []byte, err error) {
	r := sub(buf, base, series, "label")
	for !r.done() {
		num, typ, err := r.next()
		if err != nil {
			return nil, nil, err
		}
		switch num {
		case fieldLabelName:
			if name, _, err = r.bytes(num, typ); err != nil {
				return nil, nil, err
			}
		case fieldLabelValue:
			if value, _, err = r.bytes(num, typ); err != nil {
				return nil, nil, err
			}
		default:
			if err := r.skip(num, typ); err != nil {
				return nil, nil, err
			}
		}
	}
	return name, value, nil
}

func decodeSample(buf []byte, base, series int) (int64, float64, error) {
	r := sub(buf, base, series, "sample")
	var t int64
	var bits uint64
	for !r.done() {
		num, typ, err := r.next()
		if err != nil {
			return 0, 0, err
		}
		switch num {
		case fieldSampleValue:
			if bits, err = r.fixed64(num, typ); err != nil {
				return 0, 0, err
			}
		case fieldSampleTimestamp:
			u, err := r.varint(num, typ)
			if err != nil {
				return 0, 0, err
			}
			t = int64(u)
		default:
			if err := r.skip(num, typ); err != nil {
				return 0, 0, err
			}
		}
	}
	return t, math.Float64frombits(bits), nil
}

// Metadata strings are kept in memory; longer ones are cut.
const maxMetadataStringBytes = 1024

func decodeMetadata(buf []byte, base int) (metricMetadata, error) {
	r := sub(buf, base, -1, "metadata")
	var md metricMetadata
	mtype := uint64(0)
	for !r.done() {
		num, typ, err := r.next()
		if err != nil {
			return md, err
		}
		switch num {
		case fieldMetaType:
			if mtype, err = r.varint(num, typ); err != nil {
				return md, err
			}
		case fieldMetaFamily, fieldMetaHelp, fieldMetaUnit:
			v, _, err := r.bytes(num, typ)
			if err != nil {
				return md, err
			}
			s := string(v[:min(len(v), maxMetadataStringBytes)])
			switch num {
			case fieldMetaFamily:
				md.Family = s
			case fieldMetaHelp:
				md.Help = s
			default:
				md.Unit = s
			}
		default:
			if err := r.skip(num, typ); err != nil {
				return md, err
			}
		}
	}
	md.Type = metricTypes[0]
	if mtype < uint64(len(metricTypes)) {
		md.Type = metricTypes[mtype]
	}
	return md, nil
}

// interner turns label bytes into strings, allocating each distinct string
// of a request once (label names and many values repeat across series).
// The strings never alias the request buffer, so a stored series does not
// pin it.
type interner map[string]string

func (in interner) get(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	in[s] = s
	return s
}
