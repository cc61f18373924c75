// Package httpapi holds what every HTTP protocol served by Tributary shares:
// request limits, body reading (gzip, size caps that also stop decompression
// bombs), the mapping from backend errors to HTTP status codes, violation
// counters, bearer-token authentication, and the hardened http.Server the
// protocols are mounted on.
//
// The protocols themselves live in sub-packages (influx, opentsdb, prom);
// each registers its routes on a *http.ServeMux given a backend.Backend and
// a *Config.
package httpapi

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/node/labels"
)

// Limits bound what one request may cost. The zero value of a field means
// its default.
type Limits struct {
	// MaxBodyBytes caps a request body after decompression (and before it,
	// for uncompressed bodies). Default 32 MiB.
	MaxBodyBytes int64
	// MaxPointsPerRequest caps the points of one write. Default 1,000,000.
	MaxPointsPerRequest int
	// MaxSeriesPerQuery caps the series one query may touch. Default 100,000.
	MaxSeriesPerQuery int
	// RequestTimeout bounds the time a request may take. Default 30s.
	RequestTimeout time.Duration

	// Parse limits: write bodies are checked against them while they are
	// parsed, before memory is allocated for what they count, so that one
	// request holds a bounded multiple of its body (docs/influx.md,
	// "Request parsing limits").

	// MaxLineBytes caps one line of InfluxDB line protocol. A longer line
	// is refused on its own (400, the other lines are stored) and skipped
	// without being held in memory. Default 256 KiB.
	MaxLineBytes int
	// RefuseStringFields refuses a line protocol line with a string field
	// whole (400). Default false: string fields are skipped and counted,
	// the line's numeric and boolean fields stored.
	RefuseStringFields bool
	// MaxFieldsPerLine caps the fields of one line protocol line; a line
	// with more is refused on its own (400) before any field is parsed.
	// Default 1,000.
	MaxFieldsPerLine int
	// MaxSeriesPerRequest caps the distinct series of one write request
	// (line protocol, OpenTSDB /api/put, remote_write). More refuses the
	// whole request with 413, nothing stored, so that clients split the
	// batch. Default 10,000.
	MaxSeriesPerRequest int
	// Labels are the series limits of the backend (labels per series,
	// label name and value lengths); a series beyond them is refused
	// while parsing, before its labels are built. Set them to the node's
	// --max-labels, --max-label-name-bytes and --max-label-value-bytes.
	// Default labels.DefaultLimits.
	Labels labels.Limits
}

// Defaults for Limits.
const (
	DefaultMaxBodyBytes        = 32 << 20
	DefaultMaxPointsPerRequest = 1_000_000
	DefaultMaxSeriesPerQuery   = 100_000
	DefaultRequestTimeout      = 30 * time.Second

	DefaultMaxLineBytes        = 256 << 10
	DefaultMaxFieldsPerLine    = 1_000
	DefaultMaxSeriesPerRequest = 10_000
)

// PositiveOr returns v when it is positive and def otherwise: the rule by
// which a limit left at zero (or set below it) takes its default, here and
// in the protocol packages.
func PositiveOr[T int | int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// WithDefaults returns l with zero fields set to their defaults.
func (l Limits) WithDefaults() Limits {
	l.MaxBodyBytes = PositiveOr(l.MaxBodyBytes, DefaultMaxBodyBytes)
	l.MaxPointsPerRequest = PositiveOr(l.MaxPointsPerRequest, DefaultMaxPointsPerRequest)
	l.MaxSeriesPerQuery = PositiveOr(l.MaxSeriesPerQuery, DefaultMaxSeriesPerQuery)
	l.RequestTimeout = PositiveOr(l.RequestTimeout, DefaultRequestTimeout)
	l.MaxLineBytes = PositiveOr(l.MaxLineBytes, DefaultMaxLineBytes)
	l.MaxFieldsPerLine = PositiveOr(l.MaxFieldsPerLine, DefaultMaxFieldsPerLine)
	l.MaxSeriesPerRequest = PositiveOr(l.MaxSeriesPerRequest, DefaultMaxSeriesPerRequest)
	if l.Labels == (labels.Limits{}) {
		l.Labels = labels.DefaultLimits
	}
	return l
}

// Config is what protocol handlers are built with.
type Config struct {
	Limits Limits
	// Stats counts requests, points and violations; nil means a private one.
	Stats *Stats
}

// Normalize fills defaults; protocol packages call it once when registering.
func (c *Config) Normalize() {
	c.Limits = c.Limits.WithDefaults()
	if c.Stats == nil {
		c.Stats = NewStats()
	}
}

// Error is an error with an HTTP status, produced by the helpers here and
// by protocol handlers for bad requests.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Errorf returns an *Error with status code and a formatted message.
func Errorf(status int, format string, a ...any) *Error {
	return &Error{Status: status, Msg: fmt.Sprintf(format, a...)}
}

// Violation names used with Stats.Inc; each is also the reason reported
// in metrics.
const (
	ViolationBodyTooLarge   = "body_too_large"
	ViolationBadEncoding    = "bad_encoding"
	ViolationTooManyPoints  = "too_many_points"
	ViolationTooManySeries  = "too_many_series"
	ViolationBadRequest     = "bad_request"
	ViolationUnauthorized   = "unauthorized"
	ViolationOverloaded     = "overloaded"
	ViolationTimeout        = "timeout"
	ViolationRejectedPoints = "rejected_points"
)

// ReadBody reads r's body, decompressing Content-Encoding gzip, and fails
// with a 413 *Error when it is larger than max bytes, compressed or not: a
// decompression bomb is cut off after max bytes of output. Unknown
// encodings are a 415.
func ReadBody(r *http.Request, max int64, st *Stats) ([]byte, error) {
	if r.ContentLength > max {
		st.Inc(ViolationBodyTooLarge)
		return nil, Errorf(http.StatusRequestEntityTooLarge, "request body is %d bytes, limit is %d", r.ContentLength, max)
	}
	var src io.Reader = http.MaxBytesReader(nil, r.Body, max+1)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			st.Inc(ViolationBadEncoding)
			return nil, Errorf(http.StatusBadRequest, "body is not valid gzip: %v", err)
		}
		defer zr.Close()
		src = zr
	default:
		st.Inc(ViolationBadEncoding)
		return nil, Errorf(http.StatusUnsupportedMediaType, "Content-Encoding %q is not supported (use gzip or none)", enc)
	}
	body, err := readAtMost(src, r, max+1)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || int64(len(body)) > max:
		st.Inc(ViolationBodyTooLarge)
		return nil, Errorf(http.StatusRequestEntityTooLarge, "request body is larger than the limit of %d bytes (after decompression)", max)
	case err != nil && r.Header.Get("Content-Encoding") != "":
		st.Inc(ViolationBadEncoding)
		return nil, Errorf(http.StatusBadRequest, "body could not be decompressed: %v", err)
	case err != nil:
		return nil, Errorf(http.StatusBadRequest, "reading request body: %v", err)
	}
	return body, nil
}

// Body is a request body read as a stream, decompressed and bounded as
// ReadBody reads it, for parsers that need one line at a time rather than
// the whole body: what a request holds is then bounded by the parser's
// buffers, not by the body size. Read returns an *Error when the body
// breaks a limit (413) or cannot be read or decompressed (400), counted
// in the Stats it was opened with. A Body is not safe for concurrent use.
type Body struct {
	src    io.Reader
	zr     *gzip.Reader
	max, n int64
	st     *Stats
	err    error
}

// OpenBody returns r's body as a Body of at most max bytes after
// decompression (and before it). Like ReadBody it refuses a declared
// Content-Length over max (413) and unknown encodings (415) at once.
func OpenBody(r *http.Request, max int64, st *Stats) (*Body, error) {
	if r.ContentLength > max {
		st.Inc(ViolationBodyTooLarge)
		return nil, Errorf(http.StatusRequestEntityTooLarge, "request body is %d bytes, limit is %d", r.ContentLength, max)
	}
	b := &Body{src: http.MaxBytesReader(nil, r.Body, max+1), max: max, st: st}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(b.src)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			st.Inc(ViolationBodyTooLarge)
			return nil, Errorf(http.StatusRequestEntityTooLarge, "request body is larger than the limit of %d bytes", max)
		}
		if err != nil {
			st.Inc(ViolationBadEncoding)
			return nil, Errorf(http.StatusBadRequest, "body is not valid gzip: %v", err)
		}
		b.zr, b.src = zr, zr
	default:
		st.Inc(ViolationBadEncoding)
		return nil, Errorf(http.StatusUnsupportedMediaType, "Content-Encoding %q is not supported (use gzip or none)", enc)
	}
	return b, nil
}

// Read reads decompressed bytes; past max bytes it fails with a 413
// *Error (a decompression bomb is cut off there).
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.src.Read(p)
	b.n += int64(n)
	var mbe *http.MaxBytesError
	switch {
	case b.n > b.max || errors.As(err, &mbe):
		b.st.Inc(ViolationBodyTooLarge)
		b.err = Errorf(http.StatusRequestEntityTooLarge, "request body is larger than the limit of %d bytes (after decompression)", b.max)
		return max(n-int(b.n-b.max), 0), b.err
	case err == nil || err == io.EOF:
		return n, err
	case b.zr != nil:
		b.st.Inc(ViolationBadEncoding)
		b.err = Errorf(http.StatusBadRequest, "body could not be decompressed: %v", err)
	default:
		b.err = Errorf(http.StatusBadRequest, "reading request body: %v", err)
	}
	return n, b.err
}

// Len returns the (decompressed) bytes read so far.
func (b *Body) Len() int64 { return min(b.n, b.max) }

// Close releases the decompressor; it does not close the request body
// (the HTTP server does).
func (b *Body) Close() error {
	if b.zr != nil {
		return b.zr.Close()
	}
	return nil
}

// readAtMost reads src until EOF or limit bytes. The buffer starts at the
// request's Content-Length when it is known and uncompressed (growing it
// by doubling costs a measurable share of a write's CPU), and never grows
// past limit, so a hostile body costs at most about twice the limit in
// allocations.
func readAtMost(src io.Reader, r *http.Request, limit int64) ([]byte, error) {
	size := int64(64 << 10)
	if r.ContentLength > 0 && r.Header.Get("Content-Encoding") == "" {
		size = r.ContentLength + 1 // +1: reach EOF without growing
	}
	buf := make([]byte, 0, min(size, limit))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) >= limit {
				return buf, nil
			}
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// FreshThroughHeader is the response header of a query answered with a
// staleness allowance (max_staleness) by a backend that used it (a
// coordinator): the RFC 3339 time through which the answer holds every
// edge's data (model.QueryInfo.FreshThroughMs; the oldest of the
// request's answers).
const FreshThroughHeader = "Tributary-Fresh-Through"

// SetFreshThrough sets FreshThroughHeader to ms (before the body is
// written).
func SetFreshThrough(w http.ResponseWriter, ms int64) {
	w.Header().Set(FreshThroughHeader, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
}

// RetryAfterSeconds is the pause suggested to clients of an overloaded or
// unavailable backend.
const RetryAfterSeconds = 1

// StatusFor maps an error to an HTTP status and a Retry-After value ("" for
// none): *Error keeps its status; backend errors map by backend.Classify
// (bad request 400, overloaded 429, unavailable 503, timeout 503).
func StatusFor(err error) (status int, retryAfter string) {
	var he *Error
	if errors.As(err, &he) {
		return he.Status, ""
	}
	switch backend.Classify(err) {
	case backend.KindNone:
		return http.StatusOK, ""
	case backend.KindBadRequest:
		return http.StatusBadRequest, ""
	case backend.KindOverloaded:
		return http.StatusTooManyRequests, strconv.Itoa(RetryAfterSeconds)
	case backend.KindTimeout:
		return http.StatusServiceUnavailable, strconv.Itoa(RetryAfterSeconds)
	}
	return http.StatusServiceUnavailable, strconv.Itoa(RetryAfterSeconds)
}

// CountError records err in st under the violation it corresponds to, if
// any (helpers that already counted return *Error, which is not counted
// again unless it is a plain 400).
func CountError(st *Stats, err error) {
	var he *Error
	if errors.As(err, &he) {
		if he.Status == http.StatusBadRequest {
			st.Inc(ViolationBadRequest)
		}
		return
	}
	switch backend.Classify(err) {
	case backend.KindBadRequest:
		st.Inc(ViolationBadRequest)
	case backend.KindOverloaded:
		st.Inc(ViolationOverloaded)
	case backend.KindTimeout:
		st.Inc(ViolationTimeout)
	}
}

// Stats counts events by name; it is safe for concurrent use. Names are
// the Violation* constants plus whatever protocols add (e.g.
// "influx_points_accepted").
type Stats struct {
	mu sync.Mutex
	m  map[string]int64
}

// NewStats returns empty Stats.
func NewStats() *Stats { return &Stats{m: map[string]int64{}} }

// Inc adds one to name.
func (s *Stats) Inc(name string) { s.Add(name, 1) }

// Add adds d to name. A nil *Stats ignores it.
func (s *Stats) Add(name string, d int64) {
	if s == nil || d == 0 {
		return
	}
	s.mu.Lock()
	s.m[name] += d
	s.mu.Unlock()
}

// Get returns the count of name.
func (s *Stats) Get(name string) int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[name]
}

// Snapshot returns a copy of all counts, names sorted.
func (s *Stats) Snapshot() []NameCount {
	s.mu.Lock()
	out := make([]NameCount, 0, len(s.m))
	for k, v := range s.m {
		out = append(out, NameCount{k, v})
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// NameCount is one entry of a Stats snapshot.
type NameCount struct {
	Name  string
	Count int64
}
