package prom

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
)

// Options configure the Prometheus API. The zero value of every field means
// its default.
type Options struct {
	// MaxSamples bounds the samples one query may hold in memory at once
	// while it is evaluated (the PromQL engine's limit; more is an
	// "execution" error, 422). Default 5,000,000 (about 80 MiB).
	MaxSamples int
	// MaxLoadedSamples bounds the samples one query may read from storage
	// in total, across its selectors (more is an "execution" error, 422).
	// Default 4 × MaxSamples.
	MaxLoadedSamples int64
	// LookbackDelta is how far back an instant vector selector looks for
	// a sample; a query may override it with lookback_delta. Default 5m.
	LookbackDelta time.Duration
	// QueryTimeout bounds one query's evaluation (a query may ask for less
	// with timeout; the server's request timeout also applies). Default 2m.
	QueryTimeout time.Duration
	// MaxConcurrentQueries bounds the queries evaluated at once; more wait
	// for a slot until their deadline. Default 4.
	MaxConcurrentQueries int
	// MaxConcurrentWrites bounds the remote_write requests decoded and
	// written at once; more wait for a slot before their body is read.
	// Default 4.
	MaxConcurrentWrites int
	// WriteOverloadStatus is the status remote_write answers when the
	// backend sheds load: 503 (default; Prometheus always retries it) or
	// 429 (Prometheus retries it only with queue_config.retry_on_http_429).
	// Both carry Retry-After.
	WriteOverloadStatus int
	// MaxReadRequestBytes bounds a remote_read request body, compressed
	// and decoded (larger is refused, 413, before it is decoded). Default
	// 1 MiB; Prometheus's requests are a few hundred bytes.
	MaxReadRequestBytes int64
	// MaxReadSamples bounds the samples one remote_read request may
	// return, all its queries together (more fails the request, 400).
	// Default 1,000,000, sized for a 512 MiB Pi (Prometheus's own server
	// allows 50,000,000): a sampled answer is built in memory, 11 to 20
	// bytes a sample and as much again for its snappy copy, so about
	// 40 MB at the limit.
	MaxReadSamples int64
	// DisableDownsampling turns off answering range functions from
	// per-window samples computed by the node (see downsample.go); the
	// answers are the same, only slower.
	DisableDownsampling bool
	// ApproximateRollups lets range functions over whole, aligned hours
	// read the node's hourly and daily rollups. Answers may then differ
	// from raw evaluation for samples exactly on window edges; see
	// docs/prometheus.md. Off by default.
	ApproximateRollups bool
	// DisableDelayedNameRemoval evaluates PromQL as Prometheus 2 did: a
	// function or operator drops __name__ at once, so series of two
	// metrics that differ only by name collide ("vector cannot contain
	// metrics with the same labelset", 422) even when a later "by
	// (__name__)" would have kept them apart. By default the name is
	// removed only at the end of evaluation (Prometheus 3's delayed name
	// removal); see docs/prometheus.md.
	DisableDelayedNameRemoval bool
	// MaxMetadata bounds the metric families whose metadata (type, help,
	// unit) received over remote_write are kept in memory for
	// /api/v1/metadata. Default 10,000.
	MaxMetadata int
	// Version is the Prometheus version /api/v1/status/buildinfo reports,
	// which tools such as Grafana use to pick API features. Default
	// "3.10.0", the release whose PromQL engine this package runs.
	Version string
	// Flags are the process's command-line flags and their values in
	// effect, answered by /api/v1/status/flags. Default: none.
	Flags map[string]string
	// Logger receives internal errors. Default: discard.
	Logger *slog.Logger
	// Now is the clock for instant queries without a time. Default time.Now.
	Now func() time.Time
}

// Defaults for Options.
const (
	DefaultMaxSamples           = 5_000_000
	DefaultLookbackDelta        = 5 * time.Minute
	DefaultQueryTimeout         = 2 * time.Minute
	DefaultMaxConcurrentQueries = 4
	DefaultMaxConcurrentWrites  = 4
	DefaultMaxMetadata          = 10_000
	DefaultMaxReadRequestBytes  = 1 << 20
	DefaultMaxReadSamples       = 1_000_000
	DefaultVersion              = "3.10.0"
)

// Validate fills defaults and rejects impossible values.
func (o *Options) Validate() error {
	switch {
	case o.MaxSamples < 0, o.MaxLoadedSamples < 0, o.LookbackDelta < 0, o.QueryTimeout < 0,
		o.MaxConcurrentQueries < 0, o.MaxConcurrentWrites < 0, o.MaxMetadata < 0,
		o.MaxReadRequestBytes < 0, o.MaxReadSamples < 0:
		return errors.New("prom options: limits, durations and concurrency must not be negative")
	case o.WriteOverloadStatus != 0 && o.WriteOverloadStatus != http.StatusTooManyRequests && o.WriteOverloadStatus != http.StatusServiceUnavailable:
		return fmt.Errorf("prom options: WriteOverloadStatus %d must be 429 or 503", o.WriteOverloadStatus)
	}
	o.MaxSamples = cmp.Or(o.MaxSamples, DefaultMaxSamples)
	o.MaxLoadedSamples = cmp.Or(o.MaxLoadedSamples, 4*int64(o.MaxSamples))
	o.LookbackDelta = cmp.Or(o.LookbackDelta, DefaultLookbackDelta)
	o.QueryTimeout = cmp.Or(o.QueryTimeout, DefaultQueryTimeout)
	o.MaxConcurrentQueries = cmp.Or(o.MaxConcurrentQueries, DefaultMaxConcurrentQueries)
	o.MaxConcurrentWrites = cmp.Or(o.MaxConcurrentWrites, DefaultMaxConcurrentWrites)
	o.WriteOverloadStatus = cmp.Or(o.WriteOverloadStatus, http.StatusServiceUnavailable)
	o.MaxMetadata = cmp.Or(o.MaxMetadata, DefaultMaxMetadata)
	o.MaxReadRequestBytes = cmp.Or(o.MaxReadRequestBytes, DefaultMaxReadRequestBytes)
	o.MaxReadSamples = cmp.Or(o.MaxReadSamples, DefaultMaxReadSamples)
	o.Version = cmp.Or(o.Version, DefaultVersion)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Counter names this package adds to httpapi.Stats (besides the shared
// Violation* names).
const (
	StatWriteRequests      = "prom_write_requests"
	StatSamplesAccepted    = "prom_samples_accepted"
	StatSamplesRejected    = "prom_samples_rejected"
	StatHistogramsDropped  = "prom_histograms_dropped"
	StatExemplarsDropped   = "prom_exemplars_dropped"
	StatMetadataReceived   = "prom_metadata_received"
	StatQueries            = "prom_queries"
	StatQueryErrors        = "prom_query_errors"
	StatSelectsRaw         = "prom_selects_raw"
	StatSelectsDownsampled = "prom_selects_downsampled"
	StatWindowsFromRaw     = "prom_downsampled_series_with_raw_windows"
	StatSelectsFolded      = "prom_selects_folded_by_group"
	StatQueriesDirect      = "prom_queries_answered_without_engine"
	StatSamplesRead        = "prom_samples_read"
	StatReadRequests       = "prom_read_requests"
	StatReadErrors         = "prom_read_errors"
)

// API serves remote_write and the query API from a backend. It is safe for
// concurrent use; one API (and one PromQL engine) serves every request.
type API struct {
	b       backend.Backend
	cfg     *httpapi.Config
	stats   *httpapi.Stats
	opts    Options
	engine  *promql.Engine
	queries chan struct{} // query slots
	writes  chan struct{} // remote_write slots
	meta    *metadataCache
	regexps regexpCache
	// literals: see literal.go.
	literals literalCache
	// keptNames caches keepGroupedNames (keepname.go).
	keptNames keptNameCache
	// direct caches the shapes of queries evalDirect answers
	// (direct.go); noDirect turns it off (tests compare with the engine).
	direct   directCache
	noDirect bool
	started  time.Time                 // for /api/v1/status/runtimeinfo
	rules    atomic.Pointer[ruleState] // nil: no rules (rules.go)
}

// New builds an API; cfg is normalized (defaults filled) in place.
func New(b backend.Backend, cfg *httpapi.Config, opts Options) (*API, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cfg.Normalize()
	a := &API{
		b:       b,
		cfg:     cfg,
		stats:   cfg.Stats,
		opts:    opts,
		queries: make(chan struct{}, opts.MaxConcurrentQueries),
		writes:  make(chan struct{}, opts.MaxConcurrentWrites),
		meta:    newMetadataCache(opts.MaxMetadata),
		started: time.Now(),
	}
	a.engine = promql.NewEngine(promql.EngineOpts{
		Logger:        opts.Logger,
		MaxSamples:    opts.MaxSamples,
		Timeout:       opts.QueryTimeout,
		LookbackDelta: opts.LookbackDelta,
		// A subquery without a step evaluates every minute, Prometheus's
		// default global evaluation interval.
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		EnableDelayedNameRemoval: !opts.DisableDelayedNameRemoval,
	})
	return a, nil
}

// Register serves the Prometheus API from b on mux: remote_write at
// POST /api/v1/write, remote_read at POST /api/v1/read and the query API under /api/v1/. It panics when opts
// are invalid (check user input with Options.Validate first).
func Register(mux *http.ServeMux, b backend.Backend, cfg *httpapi.Config, opts Options) {
	a, err := New(b, cfg, opts)
	if err != nil {
		panic("BUG: prom.Register: " + err.Error())
	}
	a.Register(mux)
}

// Register adds the API's routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/write", a.serveWrite)
	mux.HandleFunc("POST /api/v1/read", a.serveRead)
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		mux.HandleFunc(m+" /api/v1/query", a.withQueryEnv(a.serveQuery))
		mux.HandleFunc(m+" /api/v1/query_range", a.withQueryEnv(a.serveQueryRange))
		mux.HandleFunc(m+" /api/v1/series", a.serveSeries)
		mux.HandleFunc(m+" /api/v1/labels", a.serveLabels)
		mux.HandleFunc(m+" /api/v1/label/{name}/values", a.serveLabelValues)
		mux.HandleFunc(m+" /api/v1/query_exemplars", a.serveExemplars)
		mux.HandleFunc(m+" /api/v1/format_query", a.serveFormatQuery)
	}
	mux.HandleFunc("GET /api/v1/status/buildinfo", a.serveBuildInfo)
	mux.HandleFunc("GET /api/v1/status/tsdb", a.serveTSDBStatus)
	mux.HandleFunc("GET /api/v1/status/flags", a.serveFlags)
	mux.HandleFunc("GET /api/v1/status/runtimeinfo", a.serveRuntimeInfo)
	mux.HandleFunc("GET /api/v1/status/config", a.serveConfig)
	mux.HandleFunc("GET /api/v1/targets", a.serveTargets)
	mux.HandleFunc("GET /api/v1/metadata", a.serveMetadata)
	mux.HandleFunc("GET /api/v1/rules", a.serveRules)
	mux.HandleFunc("GET /api/v1/alerts", a.serveAlerts)
	mux.HandleFunc("POST /-/reload", a.serveReload)
	mux.HandleFunc("/api/v1/", a.serveNotFound)
}

// acquire takes a slot of sem, waiting until ctx is done.
func acquire(ctx context.Context, sem chan struct{}) (release func(), err error) {
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	default:
	}
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
