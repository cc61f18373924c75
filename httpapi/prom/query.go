package prom

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/tributarydb/tributary/httpapi"
)

// maxPointsPerSeries bounds the steps of a range query, as Prometheus does.
const maxPointsPerSeries = 11_000

// parseForm reads URL and (for POST) form-encoded body parameters, with
// the body capped at the configured limit.
func (a *API) parseForm(w http.ResponseWriter, r *http.Request) *apiError {
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, a.cfg.Limits.MaxBodyBytes)
	}
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			a.stats.Inc(httpapi.ViolationBodyTooLarge)
			return &apiError{typ: errBadData, status: http.StatusRequestEntityTooLarge,
				msg: fmt.Sprintf("request body is larger than the limit of %d bytes", a.cfg.Limits.MaxBodyBytes)}
		}
		return badData(fmt.Sprintf("error parsing form values: %v", err))
	}
	return nil
}

func invalidParam(name string, err error) *apiError {
	return badData(fmt.Sprintf("invalid parameter %q: %v", name, err))
}

// fail sends e and counts it.
func (a *API) fail(w http.ResponseWriter, e *apiError) {
	switch e.typ {
	case errBadData:
		if e.status == http.StatusBadRequest {
			a.stats.Inc(httpapi.ViolationBadRequest)
		}
	case errTimeout:
		a.stats.Inc(httpapi.ViolationTimeout)
	case errUnavailable:
		if e.retryAfter {
			a.stats.Inc(httpapi.ViolationOverloaded)
		}
	}
	respondError(w, e)
}

// queryEnv is what query and query_range share.
type queryEnv struct {
	r      *http.Request
	ctx    context.Context
	cancel context.CancelFunc
	limit  int
	opts   promql.QueryOpts
	// memo shares Select answers between the evaluations of the request.
	memo *selectMemo
	// staleness is the request's max_staleness as model.Query.MaxStaleness
	// (0: not given, the backend's default); fresh collects the answers'
	// freshness.
	staleness int64
	fresh     freshness
}

// withQueryEnv serves a query endpoint with serve, given the request's
// query environment; a bad limit, timeout or lookback_delta is answered
// before serve runs.
func (a *API) withQueryEnv(serve func(http.ResponseWriter, *http.Request, *queryEnv)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		env, e := a.queryEnv(w, r)
		if e != nil {
			a.fail(w, e)
			return
		}
		defer env.cancel()
		serve(w, r, env)
	}
}

func (a *API) queryEnv(w http.ResponseWriter, r *http.Request) (*queryEnv, *apiError) {
	a.stats.Inc(StatQueries)
	if e := a.parseForm(w, r); e != nil {
		return nil, e
	}
	env := &queryEnv{r: r, ctx: r.Context(), cancel: func() {}}
	var err error
	if env.limit, err = parseLimit(r.FormValue("limit")); err != nil {
		return nil, invalidParam("limit", err)
	}
	if s := r.FormValue("timeout"); s != "" {
		d, err := parseDuration(s)
		if err != nil {
			return nil, invalidParam("timeout", err)
		}
		if d <= 0 {
			return nil, invalidParam("timeout", errors.New("must be positive"))
		}
		env.ctx, env.cancel = context.WithTimeout(env.ctx, d)
	}
	var lookback time.Duration
	if s := r.FormValue("lookback_delta"); s != "" {
		if lookback, err = parseDuration(s); err != nil {
			env.cancel()
			return nil, invalidParam("lookback_delta", err)
		}
	}
	if s := r.FormValue("max_staleness"); s != "" {
		if env.staleness, err = parseStaleness(s); err != nil {
			env.cancel()
			return nil, invalidParam("max_staleness", err)
		}
	}
	env.opts = promql.NewPrometheusQueryOpts(false, lookback)
	return env, nil
}

func (a *API) serveQuery(w http.ResponseWriter, r *http.Request, env *queryEnv) {
	ts := a.opts.Now()
	if s := r.FormValue("time"); s != "" {
		t, err := parseTime(s)
		if err != nil {
			a.fail(w, invalidParam("time", err))
			return
		}
		ts = t
	}
	qs := r.FormValue("query")
	rp := &rangeParams{start: ts.UnixMilli(), end: ts.UnixMilli()}
	a.run(w, env, qs, rp, func(q *queryable, qs string) (promql.Query, error) {
		return a.engine.NewInstantQuery(env.ctx, q, env.opts, qs, ts)
	})
}

func (a *API) serveQueryRange(w http.ResponseWriter, r *http.Request, env *queryEnv) {
	start, err := parseTime(r.FormValue("start"))
	if err != nil {
		a.fail(w, invalidParam("start", err))
		return
	}
	end, err := parseTime(r.FormValue("end"))
	if err != nil {
		a.fail(w, invalidParam("end", err))
		return
	}
	if end.Before(start) {
		a.fail(w, invalidParam("end", errors.New("end timestamp must not be before start time")))
		return
	}
	step, err := parseDuration(r.FormValue("step"))
	if err != nil {
		a.fail(w, invalidParam("step", err))
		return
	}
	if step <= 0 {
		a.fail(w, invalidParam("step", errors.New("zero or negative query resolution step widths are not accepted. Try a positive integer")))
		return
	}
	if step < time.Millisecond {
		// The engine steps in whole milliseconds.
		a.fail(w, invalidParam("step", errors.New("the query resolution step must be at least 1ms")))
		return
	}
	// In float: the span between the extreme times overflows a Duration.
	if (float64(end.UnixMilli())-float64(start.UnixMilli()))/float64(step.Milliseconds()) > maxPointsPerSeries {
		a.fail(w, badData("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)"))
		return
	}
	qs := r.FormValue("query")
	// In milliseconds, as the engine evaluates.
	rp := &rangeParams{start: start.UnixMilli(), end: end.UnixMilli(), step: step.Milliseconds()}
	a.run(w, env, qs, rp, func(q *queryable, qs string) (promql.Query, error) {
		return a.engine.NewRangeQuery(env.ctx, q, env.opts, qs, start, end, step)
	})
}

// run creates the query with newQuery, evaluates it and sends the answer.
// A query of a shape evalDirect answers is answered without the engine
// (rp: its times).
func (a *API) run(w http.ResponseWriter, env *queryEnv, qs string, rp *rangeParams, newQuery func(*queryable, string) (promql.Query, error)) {
	release, err := acquire(env.ctx, a.queries)
	if err != nil {
		a.stats.Inc(StatQueryErrors)
		a.fail(w, &apiError{typ: errUnavailable, status: http.StatusServiceUnavailable, retryAfter: true,
			msg: fmt.Sprintf("too many concurrent queries (limit %d); retry later", a.opts.MaxConcurrentQueries)})
		return
	}
	defer release()
	env.memo = newSelectMemo(qs)
	var (
		res    *promql.Result
		e      *apiError
		direct bool
	)
	// When the engine must answer after all, it reuses what evalDirect
	// read (through env.memo).
	res, direct = a.evalDirect(env, qs, *rp)
	if !direct {
		var qry promql.Query
		qry, res, e = a.exec(env, qs, newQuery)
		if qry != nil {
			// Close after the answer is sent: it recycles the result's slices.
			defer qry.Close()
		}
	}
	if !direct && e == nil && isSameLabelset(res.Err) && !a.opts.DisableDelayedNameRemoval {
		// See keepname.go: answer per metric what Prometheus refuses.
		if kept, ok := a.keptNames.keepGroupedNames(qs); ok {
			qry2, res2, e2 := a.exec(env, kept, newQuery)
			if qry2 != nil {
				defer qry2.Close()
			}
			if e2 == nil && res2.Err == nil {
				res = res2
				res.Warnings = res.Warnings.Add(errKeptName)
			}
		}
	}
	if e == nil && res.Err != nil {
		e = classifyQueryError(res.Err)
	}
	if e != nil {
		a.stats.Inc(StatQueryErrors)
		a.fail(w, e)
		return
	}
	warnings := res.Warnings
	v := res.Value
	if env.limit > 0 {
		truncated := false
		switch m := v.(type) {
		case promql.Matrix:
			if len(m) > env.limit {
				v, truncated = m[:env.limit], true
			}
		case promql.Vector:
			if len(m) > env.limit {
				v, truncated = m[:env.limit], true
			}
		}
		if truncated {
			warnings = warnings.Add(errors.New("results truncated due to limit"))
		}
	}
	warn, info := warnings.AsStrings(qs, 10, 10)
	if t, ok := env.fresh.through(); ok {
		// Before the body: the header says it too, for clients that show
		// no infos.
		httpapi.SetFreshThrough(w, t)
		info = append(info, freshInfo(t))
	}
	respond(w, env.r, func(b []byte) []byte { return appendResult(b, v) }, warn, info)
}

// exec creates and evaluates one query; the caller closes it once the
// result has been used.
func (a *API) exec(env *queryEnv, qs string, newQuery func(*queryable, string) (promql.Query, error)) (promql.Query, *promql.Result, *apiError) {
	q := &queryable{api: a, memo: env.memo, staleness: env.staleness, fresh: &env.fresh}
	// The engine parses the query; see literal.go for the rewrite.
	rqs := a.literals.rewriteLiteralRegexps(qs)
	qry, err := newQuery(q, rqs)
	if err != nil && rqs != qs {
		qry, err = newQuery(q, qs) // the original query's error
	}
	if err != nil {
		return nil, nil, invalidParam("query", err)
	}
	q.downsample = !a.opts.DisableDownsampling && downsamplable(qry.Statement())
	if q.downsample && !a.opts.DisableDelayedNameRemoval {
		q.folds = groupFolds(qry.Statement())
	}
	return qry, qry.Exec(env.ctx), nil
}

// classifyQueryError maps an evaluation error to the API's error types.
func classifyQueryError(err error) *apiError {
	var (
		canceled promql.ErrQueryCanceled
		timeout  promql.ErrQueryTimeout
		tooMany  errTooManySamples
		se       storageError
		rt       runtime.Error
	)
	switch {
	case errors.As(err, &canceled):
		return &apiError{typ: errCanceled, status: statusClientClosed, msg: err.Error()}
	case errors.As(err, &timeout), errors.Is(err, context.DeadlineExceeded):
		return &apiError{typ: errTimeout, status: http.StatusServiceUnavailable, msg: err.Error()}
	case errors.Is(err, context.Canceled):
		return &apiError{typ: errCanceled, status: statusClientClosed, msg: err.Error()}
	case errors.As(err, &tooMany):
		return &apiError{typ: errExec, status: http.StatusUnprocessableEntity, msg: err.Error()}
	case errors.As(err, &se):
		return classifyStorage(se.err)
	case errors.As(err, &rt):
		// The engine recovered from a panic while evaluating.
		return &apiError{typ: errInternal, status: http.StatusInternalServerError, msg: err.Error()}
	}
	return &apiError{typ: errExec, status: http.StatusUnprocessableEntity, msg: err.Error()}
}
