package opentsdb

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
)

// Version is the OpenTSDB API version this package implements.
const Version = "2.4.0"

// DefaultMaxQueryPoints bounds the data points of one /api/query answer
// (after downsampling and aggregation); a larger answer is refused with
// 400 and a hint to downsample, so that memory stays bounded.
const DefaultMaxQueryPoints = 2_000_000

// api serves the HTTP endpoints. It is safe for concurrent use.
type api struct {
	b   backend.Backend
	cfg *httpapi.Config
	now func() time.Time
	// maxQueryPoints bounds a query answer (DefaultMaxQueryPoints).
	maxQueryPoints int
	// forceEngine, in tests, makes every aggregation run in this package
	// instead of the backend (to check both against each other).
	forceEngine bool
	// annVersion is the version (ms) of the newest annotation written by
	// this process: versions only grow, also within one millisecond.
	annVersion atomic.Int64
}

func newAPI(b backend.Backend, cfg *httpapi.Config) *api {
	cfg.Normalize()
	return &api{b: b, cfg: cfg, now: time.Now, maxQueryPoints: DefaultMaxQueryPoints}
}

// Register mounts the OpenTSDB HTTP API on mux, served from b with the
// limits and counters of cfg. It normalizes cfg (fills defaults in place),
// so call it before the server starts.
func Register(mux *http.ServeMux, b backend.Backend, cfg *httpapi.Config) {
	newAPI(b, cfg).register(mux)
}

func (a *api) register(mux *http.ServeMux) {
	mux.HandleFunc("/api/put", a.put)
	mux.HandleFunc("/api/query", a.read(a.query))
	mux.HandleFunc("/api/query/last", a.read(a.queryLast))
	mux.HandleFunc("/api/suggest", a.read(a.suggest))
	mux.HandleFunc("/api/search/lookup", a.read(a.lookup))
	mux.HandleFunc("/api/aggregators", a.aggregators)
	mux.HandleFunc("/api/config/filters", a.filterTypes)
	mux.HandleFunc("/api/version", a.version)
	mux.HandleFunc("/api/stats", a.stats)
	mux.HandleFunc("/api/annotation", a.annotation)
	for _, p := range []string{"/api/query/exp", "/api/query/gexp", "/api/annotation/",
		"/api/uid/", "/api/tree", "/api/tree/", "/api/search/", "/api/histogram", "/api/rollup"} {
		mux.HandleFunc(p, a.notImplemented)
	}
}

func (a *api) withTimeout(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), a.cfg.Limits.RequestTimeout)
}

// errorBody is OpenTSDB's error shape.
type errorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Details string `json:"details,omitempty"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg, details string) {
	var e errorBody
	e.Error.Code, e.Error.Message, e.Error.Details = status, msg, details
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is plain data; a failure is a bug.
		panic("BUG: opentsdb: encode answer: " + err.Error())
	}
	writeRaw(w, status, append(b, '\n'))
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// fail answers err in OpenTSDB's error shape with the status
// httpapi.StatusFor gives it (and Retry-After when the backend is
// overloaded or unavailable), counting it in the stats.
func (a *api) fail(w http.ResponseWriter, err error) {
	httpapi.CountError(a.cfg.Stats, err)
	status, retry := httpapi.StatusFor(err)
	if retry != "" {
		w.Header().Set("Retry-After", retry)
	}
	details := ""
	switch status {
	case http.StatusTooManyRequests:
		details = "the node is shedding load; retry after the Retry-After pause"
	case http.StatusServiceUnavailable:
		details = "the request was not completed; retry later"
	}
	writeError(w, status, err.Error(), details)
}

// badRequest answers 400 for a request the handler itself found wrong.
func (a *api) badRequest(w http.ResponseWriter, format string, args ...any) {
	a.fail(w, httpapi.Errorf(http.StatusBadRequest, format, args...))
}

func (a *api) methodNotAllowed(w http.ResponseWriter, r *http.Request, allow ...string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed on "+r.URL.Path, "use "+strings.Join(allow, " or "))
}

func (a *api) notImplemented(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotImplemented, r.URL.Path+" is not implemented by this OpenTSDB-compatible API",
		"supported: /api/put, /api/query, /api/query/last, /api/suggest, /api/search/lookup, /api/aggregators, /api/config/filters, /api/version, /api/stats")
}

// read serves a read endpoint with handle, given a context bounded by the
// request timeout; it answers 405 to a method readOrGet refuses.
func (a *api) read(handle func(context.Context, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.readOrGet(w, r) {
			return
		}
		ctx, cancel := a.withTimeout(r)
		defer cancel()
		handle(ctx, w, r)
	}
}

// readOrGet accepts GET and POST; it answers 405 otherwise.
func (a *api) readOrGet(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodPost || r.Method == http.MethodHead {
		return true
	}
	a.methodNotAllowed(w, r, "GET", "POST")
	return false
}
