package influxql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/influxdata/influxql"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/model"
)

// Options configure the InfluxQL API. The zero value of every field means
// its default.
type Options struct {
	// MaxPoints bounds the points (samples, pre-aggregated buckets and
	// answer cells) one statement may hold; more is the statement's error
	// "max-select-point limit exceeded". Default 5,000,000 (about 80 MiB).
	MaxPoints int64
	// MaxConcurrentQueries bounds the /query requests run at once; more
	// wait for a slot until their deadline. Default 4.
	MaxConcurrentQueries int
	// Now is the clock of now() and of open time ranges. Default time.Now.
	Now func() time.Time
}

// Defaults for Options.
const (
	DefaultMaxPoints            = 5_000_000
	DefaultMaxConcurrentQueries = 4
	// DefaultChunkSize is the series chunk of a chunked answer when the
	// request gives no chunk_size, as in InfluxDB.
	DefaultChunkSize = 10_000
)

// Validate fills defaults and rejects impossible values.
func (o *Options) Validate() error {
	if o.MaxPoints < 0 || o.MaxConcurrentQueries < 0 {
		return errors.New("influxql options: limits must not be negative")
	}
	if o.MaxPoints == 0 {
		o.MaxPoints = DefaultMaxPoints
	}
	if o.MaxConcurrentQueries == 0 {
		o.MaxConcurrentQueries = DefaultMaxConcurrentQueries
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Names of the counters this package adds to httpapi.Stats.
const (
	StatQueryRequests   = "influxql_query_requests"
	StatStatements      = "influxql_statements"
	StatStatementErrors = "influxql_statement_errors"
)

// API serves InfluxQL on /query from a backend. It is safe for
// concurrent use.
type API struct {
	b    backend.Backend
	cfg  *httpapi.Config
	opts Options
	sem  chan struct{}
}

// New returns the API over b. cfg gives the request limits (body size,
// series per query, request timeout) and the counters.
func New(b backend.Backend, cfg *httpapi.Config, opts Options) (*API, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg.Normalize()
	return &API{b: b, cfg: cfg, opts: opts, sem: make(chan struct{}, opts.MaxConcurrentQueries)}, nil
}

// Register mounts the InfluxQL API with default Options on mux:
//
//	GET|POST /query   q (required), db, rp (ignored), epoch, pretty,
//	                  chunked, chunk_size, params; u/p are credentials
//
// Authentication is not done here: wrap mux in the auth middleware (which
// also reads the InfluxDB 1.x "p" parameter on /query).
func Register(mux *http.ServeMux, b backend.Backend, cfg *httpapi.Config) {
	api, err := New(b, cfg, Options{})
	if err != nil {
		panic("BUG: influxql.Register: " + err.Error())
	}
	api.Register(mux)
}

// Register mounts the API on mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /query", a.serveQuery)
	mux.HandleFunc("POST /query", a.serveQuery)
}

// request is a parsed /query request.
type request struct {
	stmts     influxql.Statements
	db, rp    string
	epochDiv  int64
	pretty    bool
	chunked   bool
	chunkSize int
}

func (a *API) serveQuery(w http.ResponseWriter, r *http.Request) {
	st := a.cfg.Stats
	st.Inc(StatQueryRequests)
	w.Header().Set("X-Influxdb-Version", influx.CompatVersion)
	w.Header().Set("X-Influxdb-Build", influx.BuildHeader)
	pretty := r.URL.Query().Get("pretty") == "true"
	req, status, err := a.parseRequest(w, r)
	if err != nil {
		if status == http.StatusBadRequest {
			st.Inc(httpapi.ViolationBadRequest)
		}
		httpError(w, status, err.Error(), pretty)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.cfg.Limits.RequestTimeout)
	defer cancel()
	select {
	case a.sem <- struct{}{}:
		defer func() { <-a.sem }()
	case <-ctx.Done():
		st.Inc(httpapi.ViolationOverloaded)
		w.Header().Set("Retry-After", strconv.Itoa(httpapi.RetryAfterSeconds))
		httpError(w, http.StatusServiceUnavailable, "too many concurrent queries: "+ctx.Err().Error(), pretty)
		return
	}
	ctx = model.WithQueryAPI(ctx, QueryAPI)
	a.run(ctx, w, req)
}

// QueryAPI tags the contexts of the queries this API sends to a backend
// (model.WithQueryAPI).
const QueryAPI = "influxql"

// parseRequest reads the parameters of r (URL and form body) and parses
// the query. Its errors carry the HTTP status InfluxDB answers them with.
func (a *API) parseRequest(w http.ResponseWriter, r *http.Request) (*request, int, error) {
	r.Body = http.MaxBytesReader(w, r.Body, a.cfg.Limits.MaxBodyBytes)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			a.cfg.Stats.Inc(httpapi.ViolationBodyTooLarge)
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body is larger than the limit of %d bytes", a.cfg.Limits.MaxBodyBytes)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("error parsing request: %v", err)
	}
	q := strings.TrimSpace(r.FormValue("q"))
	if q == "" {
		return nil, http.StatusBadRequest, errors.New(`missing required parameter "q"`)
	}
	p := influxql.NewParser(strings.NewReader(q))
	if raw := r.FormValue("params"); raw != "" {
		params, err := parseParams(raw)
		if err != nil {
			return nil, http.StatusBadRequest, err
		}
		p.SetParams(params)
	}
	query, err := p.ParseQuery()
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("error parsing query: %v", err)
	}
	req := &request{
		stmts:     query.Statements,
		db:        r.FormValue("db"),
		rp:        r.FormValue("rp"),
		epochDiv:  epochDivisor(strings.TrimSpace(r.FormValue("epoch"))),
		pretty:    r.FormValue("pretty") == "true",
		chunked:   r.FormValue("chunked") == "true",
		chunkSize: DefaultChunkSize,
	}
	if n, err := strconv.Atoi(r.FormValue("chunk_size")); err == nil && n > 0 {
		req.chunkSize = n
	}
	return req, 0, nil
}

// parseParams decodes the params parameter (a JSON object of bound
// parameters) as InfluxDB does: numbers with a '.' are floats, others
// integers.
func parseParams(raw string) (map[string]any, error) {
	var params map[string]any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&params); err != nil {
		return nil, fmt.Errorf("error parsing query parameters: %v", err)
	}
	for k, v := range params {
		n, ok := v.(json.Number)
		if !ok {
			continue
		}
		var err error
		if strings.Contains(string(n), ".") {
			params[k], err = n.Float64()
		} else {
			params[k], err = n.Int64()
		}
		if err != nil {
			return nil, fmt.Errorf("error parsing json value: %v", err)
		}
	}
	return params, nil
}

// errNotExecuted is the error of the statements after a failed one, as
// InfluxDB reports them.
const errNotExecuted = "not executed"

// run executes the statements in order and writes their results, each
// chunk as soon as it is ready when the request is chunked.
func (a *API) run(ctx context.Context, w http.ResponseWriter, req *request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	results := make([]*result, 0, len(req.stmts))
	failed := false
	for i, stmt := range req.stmts {
		res := &result{StatementID: i}
		if failed {
			res.Err = errNotExecuted
		} else {
			a.cfg.Stats.Inc(StatStatements)
			ex := &executor{api: a, ctx: ctx, db: req.db, now: a.opts.Now().UTC()}
			series, err := ex.statement(stmt)
			if err != nil {
				a.cfg.Stats.Inc(StatStatementErrors)
				res.Err = err.Error()
				failed = true
			}
			res.Series = series
			for _, w := range ex.warnings {
				res.Messages = append(res.Messages, msg{Level: "warning", Text: w})
			}
			for _, s := range series {
				s.render(req.epochDiv)
			}
		}
		if !req.chunked {
			results = append(results, res)
			continue
		}
		for _, c := range chunks(res, req.chunkSize) {
			if encodeTo(w, response{Results: []*result{c}}, req.pretty) != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
	if !req.chunked {
		_ = encodeTo(w, response{Results: results}, req.pretty)
	}
}
