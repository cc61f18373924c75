package influx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// CompatVersion is the InfluxDB version reported in the X-Influxdb-Version
// header and by /health: the API level Tributary speaks (the 1.8 line
// added /api/v2/write, so both write APIs are covered).
const CompatVersion = "1.8.10"

// BuildHeader is the X-Influxdb-Build value.
const BuildHeader = "OSS"

// MaxReportedErrors bounds the errors listed in a partial-write answer.
const MaxReportedErrors = 100

// Names of the counters this package adds to httpapi.Stats.
const (
	StatWriteRequests  = "influx_write_requests"
	StatPointsAccepted = "influx_points_accepted"
	StatPointsRejected = "influx_points_rejected"
	StatLinesRejected  = "influx_lines_rejected"
	// StatStringFieldsSkipped counts string fields not stored (of lines
	// whose other fields were).
	StatStringFieldsSkipped = "influx_string_fields_skipped"
)

// SkippedStringFieldsHeader, on a write answer, is the number of string
// fields the request held that were not stored. A Warning header (code
// 199) says the same in words; InfluxDB clients ignore both.
const SkippedStringFieldsHeader = "X-Tributary-Skipped-String-Fields"

// Register mounts the InfluxDB write API on mux, served from b:
//
//	POST /write          v1: db (required), rp (ignored), precision, u/p (ignored here)
//	POST /api/v2/write   v2: bucket (required), org/orgID (ignored), precision
//	GET|HEAD /ping       204 with X-Influxdb-Version and X-Influxdb-Build
//	GET /health          200 {"name":"tributary","status":"pass",...}
//
// See docs/influx.md for the accepted syntax, the naming convention and
// the answers. Authentication is not done here: wrap mux in the auth
// middleware. The handlers are safe for concurrent use.
func Register(mux *http.ServeMux, b backend.Backend, cfg *httpapi.Config) {
	cfg.Normalize()
	lim := cfg.Limits
	h := &handler{
		b:    b,
		cfg:  cfg,
		pool: make(chan *Parser, runtime.GOMAXPROCS(0)),
		opts: Options{
			Limits:             lim.Labels,
			MaxPoints:          lim.MaxPointsPerRequest,
			MaxSeries:          lim.MaxSeriesPerRequest,
			MaxLineBytes:       lim.MaxLineBytes,
			MaxFieldsPerLine:   lim.MaxFieldsPerLine,
			RefuseStringFields: lim.RefuseStringFields,
		},
		now: time.Now,
	}
	mux.HandleFunc("POST /write", h.writeAPI("db", "database", false))
	mux.HandleFunc("POST /api/v2/write", h.writeAPI("bucket", "bucket", true))
	mux.HandleFunc("GET /ping", h.ping)
	mux.HandleFunc("GET /health", h.health)
}

type handler struct {
	b   backend.Backend
	cfg *httpapi.Config
	// pool keeps at most GOMAXPROCS idle parsers with their series caches;
	// unlike a sync.Pool it is not emptied by every garbage collection,
	// so the caches stay warm.
	pool chan *Parser
	opts Options
	now  func() time.Time
}

func (h *handler) getParser() *Parser {
	select {
	case p := <-h.pool:
		return p
	default:
		return NewParser(h.opts)
	}
}

func (h *handler) putParser(p *Parser) {
	p.Release()
	select {
	case h.pool <- p:
	default:
	}
}

// writeAPI serves a write endpoint: the v1 API names the database with
// the query parameter db, the v2 API with bucket (what the error calls
// it), and the two accept different precision names.
func (h *handler) writeAPI(param, what string, v2 bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		db := q.Get(param)
		if db == "" {
			h.badRequest(w, what+" is required: set the "+param+" query parameter")
			return
		}
		prec, err := ParsePrecision(q.Get("precision"), v2)
		if err != nil {
			h.badRequest(w, err.Error())
			return
		}
		h.write(w, r, db, prec)
	}
}

func (h *handler) write(w http.ResponseWriter, r *http.Request, db string, prec Precision) {
	st := h.cfg.Stats
	st.Inc(StatWriteRequests)
	setVersionHeaders(w)
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Limits.RequestTimeout)
	defer cancel()
	// Lines without a timestamp get the time the request arrived.
	nowMs := h.now().UnixMilli()

	// The body is parsed as it arrives: a request holds the parser's line
	// buffer and what it parsed, never the whole body.
	body, err := httpapi.OpenBody(r, h.cfg.Limits.MaxBodyBytes, st) // counts its own violations
	if err != nil {
		h.fail(w, err)
		return
	}
	defer body.Close()
	p := h.getParser()
	defer h.putParser(p)
	_, span := telemetry.StartChild(ctx, "influx.parse")
	res, err := p.ParseReader(body, db, prec, nowMs)
	span.SetAttributes(attribute.Int64("http.request.body.size", body.Len()))
	span.End()
	var he *httpapi.Error
	switch {
	case errors.As(err, &he):
		h.fail(w, he) // reading the body failed
		return
	case errors.Is(err, ErrTooManyPoints):
		st.Inc(httpapi.ViolationTooManyPoints)
		h.fail(w, httpapi.Errorf(http.StatusRequestEntityTooLarge, "%v; nothing was stored: split the batch", err))
		return
	case errors.Is(err, ErrTooManySeries):
		st.Inc(httpapi.ViolationTooManySeries)
		h.fail(w, httpapi.Errorf(http.StatusRequestEntityTooLarge, "%v; nothing was stored: split the batch", err))
		return
	case err != nil:
		h.badRequest(w, err.Error())
		return
	}
	var wr model.WriteResult
	if len(res.Batches) > 0 {
		if wr, err = h.b.Write(ctx, res.Batches); err != nil {
			httpapi.CountError(st, err)
			h.fail(w, fmt.Errorf("nothing was stored: %w", err))
			return
		}
	}
	rejected := int64(res.RejectedPoints) + wr.Rejected
	st.Add(StatPointsAccepted, wr.Accepted)
	st.Add(StatPointsRejected, rejected)
	st.Add(StatLinesRejected, int64(res.RejectedLines))
	noteSkippedStrings(w, st, res)
	if rejected == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	st.Inc(httpapi.ViolationRejectedPoints)
	h.partial(w, res, wr)
}

// lineMessage is one entry of the errors list of a partial write.
type lineMessage struct {
	Line    int    `json:"line"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

// partialWrite is the body of a 400 answer to a write that stored only
// some points (or none). Code and Message follow InfluxDB v2 errors;
// Error repeats Message for v1 clients, which read that key.
type partialWrite struct {
	Code          string        `json:"code"`
	Message       string        `json:"message"`
	Error         string        `json:"error"`
	Accepted      int64         `json:"accepted"`
	Rejected      int64         `json:"rejected"`
	RejectedLines int           `json:"rejected_lines"`
	Errors        []lineMessage `json:"errors"`
}

func (h *handler) partial(w http.ResponseWriter, res *Result, wr model.WriteResult) {
	errs := make([]lineMessage, 0, min(len(res.Errors)+len(wr.Rejections), 2*MaxReportedErrors))
	for _, e := range res.Errors {
		errs = append(errs, lineMessage{e.Line, e.Column, e.Msg})
	}
	for _, rj := range wr.Rejections {
		if rj.BatchIndex < 0 || rj.BatchIndex >= len(res.Batches) {
			continue // not ours; cannot happen with a well-behaved backend
		}
		b := res.Batches[rj.BatchIndex]
		pt, what := rj.PointIndex, "point"
		if pt < 0 || pt >= len(b.Ts) {
			pt, what = 0, fmt.Sprintf("all %d points of the series", len(b.Ts))
		}
		errs = append(errs, lineMessage{
			Line:    res.Line(rj.BatchIndex, pt),
			Message: fmt.Sprintf("%s %s refused: %s", seriesName(b.Labels), what, stripBatchPrefix(rj.Message)),
		})
	}
	slices.SortStableFunc(errs, func(a, b lineMessage) int { return a.Line - b.Line })
	if len(errs) > MaxReportedErrors {
		errs = errs[:MaxReportedErrors]
	}
	rejected := int64(res.RejectedPoints) + wr.Rejected
	msg := fmt.Sprintf("partial write: %d points accepted, %d rejected", wr.Accepted, rejected)
	if len(errs) > 0 {
		msg += fmt.Sprintf("; first error: line %d: %s", errs[0].Line, errs[0].Message)
	}
	writeJSON(w, http.StatusBadRequest, partialWrite{
		Code:          "invalid",
		Message:       msg,
		Error:         msg,
		Accepted:      wr.Accepted,
		Rejected:      rejected,
		RejectedLines: res.RejectedLines,
		Errors:        errs,
	})
}

// seriesName renders the metric name of a label set for messages.
func seriesName(ls []labels.Label) string {
	for _, l := range ls {
		if l.Name == labels.MetricName {
			return strconv.Quote(l.Value)
		}
	}
	return "series"
}

// stripBatchPrefix drops the "batch N: " / "batch N point M: " prefix of
// node rejection messages; batch indexes mean nothing to the client.
func stripBatchPrefix(msg string) string {
	if !strings.HasPrefix(msg, "batch ") {
		return msg
	}
	if i := strings.Index(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// errorBody is the body of every other error answer.
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Error   string `json:"error"`
}

func (h *handler) badRequest(w http.ResponseWriter, msg string) {
	h.cfg.Stats.Inc(httpapi.ViolationBadRequest)
	setVersionHeaders(w)
	writeJSON(w, http.StatusBadRequest, errorBody{"invalid", msg, msg})
}

// fail answers err with the status httpapi.StatusFor gives it.
func (h *handler) fail(w http.ResponseWriter, err error) {
	status, retryAfter := httpapi.StatusFor(err)
	if status < 400 {
		status = http.StatusInternalServerError
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, status, errorBody{codeFor(status), err.Error(), err.Error()})
}

// codeFor returns the InfluxDB v2 error code of an HTTP status.
func codeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid"
	case http.StatusRequestEntityTooLarge:
		return "request too large"
	case http.StatusUnsupportedMediaType:
		return "unsupported media type"
	case http.StatusTooManyRequests:
		return "too many requests"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "internal error"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic("BUG: influx: encode answer: " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func setVersionHeaders(w http.ResponseWriter) {
	w.Header().Set("X-Influxdb-Version", CompatVersion)
	w.Header().Set("X-Influxdb-Build", BuildHeader)
}

// ping answers 204, or with ?verbose=true 200 and the version in JSON,
// as InfluxDB does.
func (h *handler) ping(w http.ResponseWriter, r *http.Request) {
	setVersionHeaders(w)
	if v, _ := strconv.ParseBool(r.URL.Query().Get("verbose")); v {
		writeJSON(w, http.StatusOK, map[string]string{"version": CompatVersion})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// health answers in the shape of InfluxDB v2's /health. It reports that
// the HTTP API is up; whether a write can be stored shows in the write's
// own answer (503 when the backend is unavailable).
func (h *handler) health(w http.ResponseWriter, _ *http.Request) {
	setVersionHeaders(w)
	writeJSON(w, http.StatusOK, struct {
		Name    string   `json:"name"`
		Message string   `json:"message"`
		Status  string   `json:"status"`
		Checks  []string `json:"checks"`
		Version string   `json:"version"`
		Commit  string   `json:"commit"`
	}{"tributary", "ready for writes", "pass", []string{}, CompatVersion, ""})
}

// noteSkippedStrings counts the string fields a write skipped and tells
// the client in headers: the answer stays 204 (or the partial write's
// 400), which every InfluxDB client reads as before.
func noteSkippedStrings(w http.ResponseWriter, st *httpapi.Stats, res *Result) {
	n := res.SkippedStringFields
	if n == 0 {
		return
	}
	st.Add(StatStringFieldsSkipped, int64(n))
	w.Header().Set(SkippedStringFieldsHeader, strconv.Itoa(n))
	w.Header().Set("Warning", fmt.Sprintf(`199 tributary "%d string fields on %d lines were skipped (Tributary stores numbers; their numeric and boolean fields were stored)"`,
		n, res.SkippedStringLines))
}
