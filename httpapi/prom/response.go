package prom

import (
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// Responses are encoded by hand into pooled buffers: the envelope is
// small and fixed, and a matrix is mostly numbers, which strconv appends
// without the reflection and intermediate values of encoding/json.
//
// The format is the Prometheus HTTP API's:
//
//	{"status":"success","data":<data>[,"warnings":[...]][,"infos":[...]]}
//	{"status":"error","errorType":"<type>","error":"<message>"}
//
// Timestamps are Unix seconds with three decimals (none for whole
// seconds); sample values are strings ("1.5", "NaN", "+Inf", "-Inf",
// exponent form below 1e-6 and from 1e21).

// API error types and the status codes Prometheus answers them with.
const (
	errBadData     = "bad_data"    // 400
	errExec        = "execution"   // 422
	errCanceled    = "canceled"    // 499
	errTimeout     = "timeout"     // 503
	errUnavailable = "unavailable" // 503
	errInternal    = "internal"    // 500
	errNotFound    = "not_found"   // 404
)

// statusClientClosed is the status for a query whose client went away
// (never seen by that client; it shows in logs and counters).
const statusClientClosed = 499

// apiError is an error in the API's format.
type apiError struct {
	typ        string
	status     int
	msg        string
	retryAfter bool
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

func badData(msg string) *apiError {
	return &apiError{typ: errBadData, status: http.StatusBadRequest, msg: msg}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledBuf: larger buffers are left to the garbage collector, so one
// huge answer does not pin its memory.
const maxPooledBuf = 1 << 20

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// gzipMinBytes: answers at least this large are gzip-compressed for
// clients that accept it (a dashboard reading an edge node over a slow
// link); smaller ones are not worth the CPU.
const gzipMinBytes = 16 << 10

var gzipPool = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed) // the level is valid
	return zw
}}

// writeJSON sends body with status, compressed when r accepts gzip and
// the body is large.
func writeJSON(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if r != nil && len(body) >= gzipMinBytes && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		h.Add("Vary", "Accept-Encoding")
		w.WriteHeader(status)
		zw := gzipPool.Get().(*gzip.Writer)
		zw.Reset(w)
		_, _ = zw.Write(body) // a client that went away is not an error here
		_ = zw.Close()
		zw.Reset(io.Discard) // drop the reference to w
		gzipPool.Put(zw)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

// respond sends a success envelope; data appends the data value.
func respond(w http.ResponseWriter, r *http.Request, data func([]byte) []byte, warnings, infos []string) {
	bp := getBuf()
	defer putBuf(bp)
	b := append((*bp)[:0], `{"status":"success","data":`...)
	b = data(b)
	b = appendStringList(b, "warnings", warnings)
	b = appendStringList(b, "infos", infos)
	b = append(b, '}')
	*bp = b
	writeJSON(w, r, http.StatusOK, b)
}

func appendStringList(b []byte, key string, list []string) []byte {
	if len(list) == 0 {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	return appendStrings(b, list)
}

// appendArray appends the JSON array of items, each appended by
// appendItem.
func appendArray[T any](b []byte, items []T, appendItem func([]byte, T) []byte) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendItem(b, it)
	}
	return append(b, ']')
}

// appendStrings appends the JSON array of list.
func appendStrings(b []byte, list []string) []byte {
	return appendArray(b, list, appendString)
}

// respondError sends an error envelope.
func respondError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter {
		w.Header().Set("Retry-After", "1")
	}
	bp := getBuf()
	defer putBuf(bp)
	b := append((*bp)[:0], `{"status":"error","errorType":`...)
	b = appendString(b, e.typ)
	b = append(b, `,"error":`...)
	b = appendString(b, e.msg)
	b = append(b, '}')
	*bp = b
	writeJSON(w, nil, e.status, b)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does; control characters, U+2028 and U+2029 are
// escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendTimestamp appends t (ms) as Unix seconds, with three decimals
// unless they are all zero.
func appendTimestamp(b []byte, t int64) []byte {
	u := uint64(t)
	if t < 0 {
		b = append(b, '-')
		u = -u // also right for math.MinInt64
	}
	b = strconv.AppendUint(b, u/1000, 10)
	if frac := u % 1000; frac != 0 {
		// Always three digits, as Prometheus writes them ("1.500").
		b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	}
	return b
}

// appendValue appends f as a quoted sample value.
func appendValue(b []byte, f float64) []byte {
	b = append(b, '"')
	switch {
	case math.IsNaN(f):
		b = append(b, "NaN"...)
	case math.IsInf(f, 1):
		b = append(b, "+Inf"...)
	case math.IsInf(f, -1):
		b = append(b, "-Inf"...)
	case f == math.Trunc(f) && math.Abs(f) < 1<<53 && (f != 0 || !math.Signbit(f)):
		// An integer (TSBS's and most counters' values): the digits
		// AppendFloat would write, without its shortest-digits search.
		// Not -0, which AppendFloat writes as "-0".
		b = strconv.AppendInt(b, int64(f), 10)
	default:
		format := byte('f')
		if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
			format = 'e'
		}
		b = strconv.AppendFloat(b, f, format, -1, 64)
	}
	return append(b, '"')
}

// appendLabels appends a label set as a JSON object, in label order.
func appendLabels(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, l.Name)
		b = append(b, ':')
		b = appendString(b, l.Value)
	})
	return append(b, '}')
}

// appendPoint appends [t,"v"].
func appendPoint(b []byte, t int64, f float64) []byte {
	b = append(b, '[')
	b = appendTimestamp(b, t)
	b = append(b, ',')
	b = appendValue(b, f)
	return append(b, ']')
}

// appendHistogramPoint appends [t,{"count":..,"sum":..,"buckets":[..]}].
func appendHistogramPoint(b []byte, t int64, h *histogram.FloatHistogram) []byte {
	b = append(b, '[')
	b = appendTimestamp(b, t)
	b = append(b, `,{"count":`...)
	b = appendValue(b, h.Count)
	b = append(b, `,"sum":`...)
	b = appendValue(b, h.Sum)
	first := true
	it := h.AllBucketIterator()
	for it.Next() {
		bk := it.At()
		if bk.Count == 0 {
			continue
		}
		if first {
			b = append(b, `,"buckets":[`...)
		} else {
			b = append(b, ',')
		}
		first = false
		// Boundary rule, as the API defines it: 0 = (lower, upper],
		// 1 = [lower, upper), 2 = (lower, upper), 3 = [lower, upper].
		rule := 2
		switch {
		case bk.LowerInclusive && bk.UpperInclusive:
			rule = 3
		case bk.LowerInclusive:
			rule = 1
		case bk.UpperInclusive:
			rule = 0
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(rule), 10)
		b = append(b, ',')
		b = appendValue(b, bk.Lower)
		b = append(b, ',')
		b = appendValue(b, bk.Upper)
		b = append(b, ',')
		b = appendValue(b, bk.Count)
		b = append(b, ']')
	}
	if !first {
		b = append(b, ']')
	}
	return append(b, '}', ']')
}

// appendResult appends the data of a query answer:
// {"resultType":"matrix","result":[...]}.
func appendResult(b []byte, v parser.Value) []byte {
	b = append(b, `{"resultType":"`...)
	b = append(b, v.Type()...)
	b = append(b, `","result":`...)
	switch v := v.(type) {
	case promql.Matrix:
		b = appendArray(b, v, appendSeries)
	case promql.Vector:
		b = appendArray(b, v, appendSample)
	case promql.Scalar:
		b = appendPoint(b, v.T, v.V)
	case promql.String:
		b = append(b, '[')
		b = appendTimestamp(b, v.T)
		b = append(b, ',')
		b = appendString(b, v.V)
		b = append(b, ']')
	default:
		b = append(b, "null"...)
	}
	return append(b, '}')
}

// appendSeries appends a series of a range query's answer:
// {"metric":{...},"values":[...],"histograms":[...]}.
func appendSeries(b []byte, s promql.Series) []byte {
	b = append(b, `{"metric":`...)
	b = appendLabels(b, s.Metric)
	if len(s.Floats) > 0 {
		b = append(b, `,"values":`...)
		b = appendArray(b, s.Floats, func(b []byte, p promql.FPoint) []byte { return appendPoint(b, p.T, p.F) })
	}
	if len(s.Histograms) > 0 {
		b = append(b, `,"histograms":`...)
		b = appendArray(b, s.Histograms, func(b []byte, p promql.HPoint) []byte { return appendHistogramPoint(b, p.T, p.H) })
	}
	return append(b, '}')
}

// appendSample appends a sample of an instant query's answer:
// {"metric":{...},"value":[t,"v"]} or with "histogram".
func appendSample(b []byte, s promql.Sample) []byte {
	b = append(b, `{"metric":`...)
	b = appendLabels(b, s.Metric)
	if s.H != nil {
		b = append(b, `,"histogram":`...)
		b = appendHistogramPoint(b, s.T, s.H)
	} else {
		b = append(b, `,"value":`...)
		b = appendPoint(b, s.T, s.F)
	}
	return append(b, '}')
}
