package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/opentsdb"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/internal/auth"
	"github.com/tributarydb/tributary/internal/grpclimit"
	"github.com/tributarydb/tributary/internal/grpcreflect"
	"github.com/tributarydb/tributary/internal/netlimit"
	"github.com/tributarydb/tributary/internal/telemetry"
)

// serveFlags are the client-facing listener flags shared by every command
// that serves the public APIs.
type serveFlags struct {
	grpcListen, httpListen, tsdbListen string
	tokenFile                          string
	tls                                auth.TLSFiles
	insecureListen                     bool
	limits                             httpapi.Limits
	conn                               connLimits
	// metricsAuth puts GET /metrics behind the token (unset: when tokens
	// are set).
	metricsAuth optionalBool
	// telnetUnauthenticated serves --opentsdb-listen although tokens are
	// set: the telnet protocol cannot carry one.
	telnetUnauthenticated bool
	// reloadInterval is how often certificate and token files are polled
	// for changes (0: only on SIGHUP).
	reloadInterval time.Duration
	prom           prom.Options
	// fs is the parsed flag set, whose flags /api/v1/status/flags lists.
	fs *flag.FlagSet
	// rules, when set, answers the rules and alerts API and POST /-/reload.
	rules prom.RuleSource
	// alertsFromSeries, without rules, lists in /api/v1/alerts the alerts
	// of the ALERTS series the backend holds (a coordinator).
	alertsFromSeries bool
	// rulesWithSeriesAlerts, with rules, lists in /api/v1/alerts the
	// rules' alerts and then the other alerts of the ALERTS series (a
	// coordinator evaluating rules over the fleet).
	rulesWithSeriesAlerts bool
	tel                   telemetry.Flags
	// reflection says which gRPC listeners serve server reflection
	// (default: those on loopback).
	reflection grpcreflect.Mode
	// otel is the process's telemetry once telemetry() set it up; the
	// gRPC listener is instrumented with it (otelgrpc).
	otel *telemetry.Provider
}

// connLimits bound what clients may hold open on the listeners. Zero
// fields take the defaults below (sized for a 512 MiB Pi).
type connLimits struct {
	grpcMaxConns, httpMaxConns, tsdbMaxConns int
	maxConnsPerIP                            int
	grpcMaxStreams                           int
	grpcMaxWriteBytes, grpcMaxRequestBytes   int
	grpcMaxHeaderBytes                       int
	handshakeTimeout                         time.Duration
}

// Defaults of connLimits.
const (
	defaultMaxConns            = 256
	defaultMaxConnsPerIP       = 64
	defaultGRPCMaxStreams      = 32
	defaultGRPCMaxWriteBytes   = 64 << 20
	defaultGRPCMaxRequestBytes = 4 << 20
	defaultGRPCMaxHeaderBytes  = 64 << 10
	defaultHandshakeTimeout    = 10 * time.Second
	defaultReloadInterval      = 5 * time.Second
)

// optionalBool is a boolean flag that remembers whether it was given.
type optionalBool struct{ set, v bool }

func (b *optionalBool) String() string {
	if b == nil || !b.set {
		return "auto"
	}
	return strconv.FormatBool(b.v)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.v = true, v
	return nil
}

func (b *optionalBool) IsBoolFlag() bool { return true }

// flagValues lists every flag of fs with its value in effect (nil fs:
// none).
func flagValues(fs *flag.FlagSet) map[string]string {
	out := map[string]string{}
	if fs != nil {
		fs.VisitAll(func(f *flag.Flag) { out[f.Name] = f.Value.String() })
	}
	return out
}

// notBool is a boolean flag, default true, that sets the negation of a
// Disable* option (whose zero value is "on").
type notBool struct{ disable *bool }

func (n notBool) String() string {
	if n.disable == nil {
		return "false" // the flag package's zero value, so help shows "(default true)"
	}
	return strconv.FormatBool(!*n.disable)
}

func (n notBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*n.disable = !v
	return nil
}

func (notBool) IsBoolFlag() bool { return true }

// or returns the flag's value, or def when it was not given.
func (b optionalBool) or(def bool) bool {
	if b.set {
		return b.v
	}
	return def
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.grpcListen, "listen", "127.0.0.1:7070", "gRPC listen address")
	fs.StringVar(&f.httpListen, "http-listen", "127.0.0.1:7071", "HTTP listen address for the InfluxDB, OpenTSDB and Prometheus APIs (empty: off)")
	fs.StringVar(&f.tsdbListen, "opentsdb-listen", "", "TCP listen address for OpenTSDB telnet-style put lines, e.g. 127.0.0.1:4242 (empty: off; no authentication: with tokens set it needs --opentsdb-telnet-unauthenticated)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file of accepted bearer tokens, one per line; when set (or TRIBUTARY_TOKEN is), every client request needs one. Reloaded when it changes and on SIGHUP")
	fs.StringVar(&f.tls.Cert, "tls-cert", "", "PEM certificate for the gRPC and HTTP listeners (enables TLS); reloaded when it changes and on SIGHUP")
	fs.StringVar(&f.tls.Key, "tls-key", "", "PEM private key for --tls-cert")
	fs.StringVar(&f.tls.ClientCA, "tls-client-ca", "", "PEM CA bundle; when set, clients must present a certificate it signed (mTLS)")
	fs.Var(&f.reflection, "grpc-reflection", "serve gRPC server reflection (grpcurl, grpcui) on every gRPC listener: true, false or auto (default auto: on listeners bound to a loopback address only). Reflection needs the listener's usual credentials")
	fs.BoolVar(&f.insecureListen, "insecure-listen", false, "allow plaintext listeners on non-loopback addresses (data and tokens cross the network in clear text)")
	fs.Var(&f.metricsAuth, "metrics-auth", "require a token for GET /metrics (default: on when tokens are set; --metrics-auth=false leaves it open)")
	fs.BoolVar(&f.telnetUnauthenticated, "opentsdb-telnet-unauthenticated", false, "serve --opentsdb-listen although tokens are set: telnet put lines carry no token, so anyone reaching the port can write")
	fs.DurationVar(&f.reloadInterval, "credentials-reload-interval", defaultReloadInterval, "how often certificate, key, CA and token files are checked for changes (0: only on SIGHUP)")
	fs.Int64Var(&f.limits.MaxBodyBytes, "max-body-bytes", httpapi.DefaultMaxBodyBytes, "largest HTTP request body, after decompression")
	fs.IntVar(&f.limits.MaxPointsPerRequest, "max-points-per-request", httpapi.DefaultMaxPointsPerRequest, "most points one write request may carry")
	registerParseLimits(fs, &f.limits)
	fs.IntVar(&f.limits.MaxSeriesPerQuery, "max-series-per-query", httpapi.DefaultMaxSeriesPerQuery, "most series one query may touch")
	fs.DurationVar(&f.limits.RequestTimeout, "request-timeout", httpapi.DefaultRequestTimeout, "longest time one request may take")
	fs.IntVar(&f.conn.grpcMaxConns, "grpc-max-conns", defaultMaxConns, "most connections the gRPC listener holds at once; more are closed on arrival")
	fs.IntVar(&f.conn.httpMaxConns, "http-max-conns", defaultMaxConns, "most connections the HTTP listener holds at once; more are closed on arrival")
	fs.IntVar(&f.conn.tsdbMaxConns, "opentsdb-max-conns", opentsdb.DefaultTelnetMaxConns, "most connections the OpenTSDB telnet listener holds at once")
	fs.IntVar(&f.conn.maxConnsPerIP, "max-conns-per-ip", defaultMaxConnsPerIP, "most connections one client address (IPv6: one /64) may hold on each client listener")
	fs.IntVar(&f.conn.grpcMaxStreams, "grpc-max-streams", defaultGRPCMaxStreams, "most calls in flight on one gRPC connection")
	fs.IntVar(&f.conn.grpcMaxWriteBytes, "grpc-max-write-bytes", defaultGRPCMaxWriteBytes, "largest gRPC write request message (Write, WriteStream)")
	fs.IntVar(&f.conn.grpcMaxRequestBytes, "grpc-max-request-bytes", defaultGRPCMaxRequestBytes, "largest request message of every other gRPC method (queries, metadata, status, cluster administration), refused before it is read")
	fs.IntVar(&f.conn.grpcMaxHeaderBytes, "grpc-max-header-bytes", defaultGRPCMaxHeaderBytes, "largest header list (metadata) of a gRPC call")
	fs.DurationVar(&f.conn.handshakeTimeout, "handshake-timeout", defaultHandshakeTimeout, "time a client has to finish the TLS handshake (gRPC) or send its request headers (HTTP)")
	fs.IntVar(&f.prom.MaxSamples, "prom-max-samples", 5_000_000, "PromQL: most samples one query may hold in memory")
	fs.DurationVar(&f.prom.QueryTimeout, "prom-query-timeout", 2*time.Minute, "PromQL: longest evaluation of one query")
	fs.DurationVar(&f.prom.LookbackDelta, "prom-lookback-delta", 5*time.Minute, "PromQL: how far back an instant selector looks for a sample")
	fs.IntVar(&f.prom.MaxConcurrentQueries, "prom-max-concurrent-queries", 4, "PromQL: queries evaluated at once")
	fs.Int64Var(&f.prom.MaxReadSamples, "prom-read-max-samples", prom.DefaultMaxReadSamples, "remote_read: most samples one request may return, all its queries together (more fails it, 400)")
	fs.Var(notBool{&f.prom.DisableDelayedNameRemoval}, "prom-delayed-name-removal", "PromQL: remove __name__ only at the end of evaluation, as Prometheus 3 can (=false: at each function, as Prometheus 2 does; queries such as max(rate({__name__=~\"a|b\"}[5m])) by (__name__) then fail)")
	f.tel.Register(fs)
	fs.BoolVar(&f.prom.ApproximateRollups, "prom-approximate-rollups", false, "PromQL: answer range functions over whole hours from rollups (faster; samples exactly on hour edges may fall in the neighbouring window)")
}

// frontend is the set of running client listeners.
type frontend struct {
	grpc   *grpc.Server
	http   *http.Server
	telnet interface{ Shutdown(context.Context) error }
	stats  *httpapi.Stats
	errc   chan error
	addrs  []any         // for the ready log line
	reload []*background // credential reloading (file changes, SIGHUP)
}

// tokens loads the accepted tokens (--token-file and TRIBUTARY_TOKEN), and
// refuses the listener that cannot check them: with tokens set, the
// OpenTSDB telnet listener would let anyone write.
func (f *serveFlags) tokens() (auth.Tokens, error) {
	var t auth.Tokens
	if f.tokenFile != "" {
		var err error
		if t, err = auth.LoadTokens(f.tokenFile); err != nil {
			return auth.Tokens{}, fmt.Errorf("%w: --token-file: %v", errUsage, err)
		}
	}
	t = t.With(os.Getenv("TRIBUTARY_TOKEN"))
	if t.Enabled() && f.tsdbListen != "" && !f.telnetUnauthenticated {
		return auth.Tokens{}, fmt.Errorf("%w: --opentsdb-listen: the OpenTSDB telnet protocol cannot carry a token, but tokens are set (--token-file or TRIBUTARY_TOKEN); pass --opentsdb-telnet-unauthenticated to serve it anyway, on a trusted network only", errUsage)
	}
	return t, nil
}

// check validates the listener flags and loads the tokens, so that a
// command reports a bad flag or token file before it opens anything.
func (f *serveFlags) check() error {
	if _, err := f.validate(); err != nil {
		return err
	}
	_, err := f.tokens()
	return err
}

// validate checks the listener flags before anything is opened.
func (f *serveFlags) validate() (*tls.Config, error) {
	tlsCfg, err := f.tls.ServerConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	checks := []struct{ what, addr string }{{"--listen", f.grpcListen}, {"--http-listen", f.httpListen}, {"--opentsdb-listen", f.tsdbListen}}
	for _, c := range checks {
		if c.addr == "" {
			continue
		}
		// Telnet put lines have no TLS: the listener is plaintext always.
		tlsOn := tlsCfg != nil && c.what != "--opentsdb-listen"
		if err := auth.CheckListen(c.what, c.addr, tlsOn, f.insecureListen); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if f.grpcListen == "" {
		return nil, fmt.Errorf("%w: --listen must not be empty", errUsage)
	}
	if err := f.conn.validate(); err != nil {
		return nil, err
	}
	if f.reloadInterval < 0 {
		return nil, fmt.Errorf("%w: --credentials-reload-interval must not be negative", errUsage)
	}
	po := f.prom
	if err := po.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := f.tel.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return tlsCfg, nil
}

// validate checks the connection limits as given and fills in the
// defaults of the zero ones.
func (l *connLimits) validate() error {
	for _, v := range []struct {
		flag string
		n    int
	}{{"--grpc-max-conns", l.grpcMaxConns}, {"--http-max-conns", l.httpMaxConns}, {"--opentsdb-max-conns", l.tsdbMaxConns},
		{"--max-conns-per-ip", l.maxConnsPerIP}, {"--grpc-max-streams", l.grpcMaxStreams}, {"--grpc-max-write-bytes", l.grpcMaxWriteBytes},
		{"--grpc-max-request-bytes", l.grpcMaxRequestBytes}, {"--grpc-max-header-bytes", l.grpcMaxHeaderBytes}} {
		if v.n < 0 {
			return fmt.Errorf("%w: %s must not be negative", errUsage, v.flag)
		}
	}
	if l.handshakeTimeout < 0 {
		return fmt.Errorf("%w: --handshake-timeout must not be negative", errUsage)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.grpcMaxConns, defaultMaxConns)
	def(&l.httpMaxConns, defaultMaxConns)
	def(&l.tsdbMaxConns, opentsdb.DefaultTelnetMaxConns)
	def(&l.maxConnsPerIP, defaultMaxConnsPerIP)
	def(&l.grpcMaxStreams, defaultGRPCMaxStreams)
	def(&l.grpcMaxWriteBytes, defaultGRPCMaxWriteBytes)
	def(&l.grpcMaxRequestBytes, defaultGRPCMaxRequestBytes)
	def(&l.grpcMaxHeaderBytes, defaultGRPCMaxHeaderBytes)
	if l.handshakeTimeout <= 0 {
		l.handshakeTimeout = defaultHandshakeTimeout
	}
	return nil
}

// start opens the listeners and serves b on them. Every listener is open
// when it returns; a failure closes what was opened.
//
// extraHTTP, when not nil, adds handlers to the HTTP listener's mux (GET
// /metrics needs a token when metrics authentication is on; the health
// endpoints never do); it receives the listeners' counters.
func (f *serveFlags) start(b backend.Backend, registerGRPC func(*grpc.Server), extraHTTP func(*http.ServeMux, *httpapi.Stats), log *slog.Logger) (_ *frontend, err error) {
	tlsCfg, err := f.validate()
	if err != nil {
		return nil, err
	}
	toks, err := f.tokens()
	if err != nil {
		return nil, err
	}
	lim := f.conn // defaults filled in by f.validate
	fe := &frontend{stats: httpapi.NewStats(), errc: make(chan error, 3)}
	defer func() {
		if err != nil {
			fe.stop(time.Second)
		}
	}()
	fe.reload = startCredentialReload(f.reloadInterval, log)

	fe.grpc = newGRPCServer(f, lim, tlsCfg, toks, fe.stats, registerGRPC, log)
	glis, err := f.listen("--listen", "grpc", f.grpcListen, lim.grpcMaxConns, lim.maxConnsPerIP, fe.stats)
	if err != nil {
		return nil, err
	}
	fe.addrs = append(fe.addrs, "grpc", glis.Addr().String())
	go func() { fe.errc <- wrapServeErr("grpc", fe.grpc.Serve(glis)) }()

	cfg := &httpapi.Config{Limits: f.limits, Stats: fe.stats}
	cfg.Normalize()
	if f.httpListen != "" {
		h, err := f.httpHandler(b, cfg, toks, extraHTTP)
		if err != nil {
			return nil, err
		}
		fe.http = httpapi.NewServer(httpapi.ServerOptions{Handler: h, TLS: tlsCfg, Limits: cfg.Limits,
			ReadHeaderTimeout: lim.handshakeTimeout, Logger: log})
		hlis, err := f.listen("--http-listen", "http", f.httpListen, lim.httpMaxConns, lim.maxConnsPerIP, fe.stats)
		if err != nil {
			return nil, err
		}
		if tlsCfg != nil {
			hlis = tls.NewListener(hlis, tlsCfg)
		}
		fe.addrs = append(fe.addrs, "http", hlis.Addr().String())
		go func() { fe.errc <- wrapServeErr("http", fe.http.Serve(hlis)) }()
	}
	if f.tsdbListen != "" {
		tlis, err := f.listen("--opentsdb-listen", "opentsdb_telnet", f.tsdbListen, lim.tsdbMaxConns, lim.maxConnsPerIP, fe.stats)
		if err != nil {
			return nil, err
		}
		srv := newTelnet(b, cfg, lim.tsdbMaxConns, log)
		fe.telnet = srv
		fe.addrs = append(fe.addrs, "opentsdb_telnet", tlis.Addr().String())
		go func() { fe.errc <- wrapServeErr("opentsdb telnet", srv.Serve(tlis)) }()
	}
	return fe, nil
}

// httpHandler is what the HTTP listener serves: every protocol, behind
// the token check (which answers before a body is read).
func (f *serveFlags) httpHandler(b backend.Backend, cfg *httpapi.Config, toks auth.Tokens, extraHTTP func(*http.ServeMux, *httpapi.Stats)) (http.Handler, error) {
	mux := http.NewServeMux()
	po := f.prom
	po.Flags = flagValues(f.fs)
	if err := registerHTTP(mux, b, cfg, po, f.rules, f.alertsFromSeries, f.rulesWithSeriesAlerts); err != nil {
		return nil, err
	}
	if extraHTTP != nil {
		extraHTTP(mux, cfg.Stats)
	}
	h := toks.HTTP(mux, auth.HTTPOptions{
		Open:            openPaths(f.metricsAuth.or(toks.Enabled())),
		QueryTokenPaths: auth.InfluxV1Paths,
		OnDeny:          func(*http.Request) { cfg.Stats.Inc(httpapi.ViolationUnauthorized) },
	})
	if f.otel != nil && f.otel.TracesOn() {
		h = telemetry.HTTPServerSpans(f.otel.TracerProvider(), h)
	}
	return h, nil
}

// listen opens a client listener bounded to maxConns connections, perIP
// of them from one address; refused connections are counted in st as
// "<name>_conn_refused_<reason>".
func (f *serveFlags) listen(flagName, name, addr string, maxConns, perIP int, st *httpapi.Stats) (net.Listener, error) {
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (%s): %w", addr, flagName, err)
	}
	l, err := netlimit.Wrap(raw, netlimit.Options{MaxConns: maxConns, MaxConnsPerIP: perIP,
		OnRefuse: func(_ net.Addr, reason string) { st.Inc(name + "_conn_refused_" + reason) }})
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("%w: %s: %v", errUsage, flagName, err)
	}
	return l, nil
}

// writeService is the gRPC service whose requests may be large.
const writeService = "/tributary.v1.WriteService/"

// newGRPCServer builds the client gRPC server: authentication on the
// headers before a message is read (auth.GRPCServerOptions), the write
// size limit server-wide and the smaller request limit on every method
// that is not a write or client-streaming (grpclimit), bounded streams
// per connection, header size and handshake time.
func newGRPCServer(f *serveFlags, lim connLimits, tlsCfg *tls.Config, toks auth.Tokens, st *httpapi.Stats,
	register func(*grpc.Server), log *slog.Logger) *grpc.Server {
	inner := insecure.NewCredentials()
	if tlsCfg != nil {
		inner = credentials.NewTLS(tlsCfg)
	}
	// Filled once the services are registered, before Serve: whether a
	// method takes the small request limit (false: the write limit).
	var small atomic.Pointer[map[string]bool]
	limit := func(method string) int {
		if lim.grpcMaxRequestBytes >= lim.grpcMaxWriteBytes {
			return 0
		}
		if m := small.Load(); m != nil {
			if isSmall, known := (*m)[method]; known && !isSmall {
				return 0
			}
		}
		// A method of this server with small requests, or none of its
		// methods (answered Unimplemented).
		return lim.grpcMaxRequestBytes
	}
	gopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(max(lim.grpcMaxWriteBytes, lim.grpcMaxRequestBytes)),
		grpc.MaxConcurrentStreams(uint32(lim.grpcMaxStreams)),
		grpc.MaxHeaderListSize(uint32(lim.grpcMaxHeaderBytes)),
		grpc.ConnectionTimeout(lim.handshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.Creds(grpclimit.Credentials(inner, grpclimit.Options{Limit: limit, MaxHeaderListBytes: lim.grpcMaxHeaderBytes,
			OnRefuse: func(string) { st.Inc(eventGRPCRequestTooLarge) }, Logger: log})),
	}
	// The health service needs no token, as /readyz needs none: the
	// kubelet's gRPC probe cannot send one.
	gopts = append(gopts, auth.GRPCServerOptions(auth.GRPCOptions{Tokens: toks, RequireClientCert: f.tls.ClientCA != "",
		NoTokenServices: []string{healthpb.Health_ServiceDesc.ServiceName},
		OnDeny:          func(string) { st.Inc(httpapi.ViolationUnauthorized) }})...)
	if f.otel != nil {
		gopts = append(gopts, telemetry.GRPCServerOption(f.otel.MeterProvider(), f.otel.TracerProvider()))
	}
	g := grpc.NewServer(gopts...)
	register(g)
	if f.reflection.For(f.grpcListen) {
		grpcreflect.Register(g)
	}
	m := map[string]bool{}
	for svc, info := range g.GetServiceInfo() {
		for _, mi := range info.Methods {
			name := "/" + svc + "/" + mi.Name
			m[name] = !mi.IsClientStream && !strings.HasPrefix(name, writeService)
		}
	}
	small.Store(&m)
	return g
}

// eventGRPCRequestTooLarge counts gRPC requests refused for announcing
// more than their method's limit (--grpc-max-request-bytes).
const eventGRPCRequestTooLarge = "grpc_request_over_method_limit"

// telemetry starts the process's metrics and traces (role: node,
// coordinator or local; instance: the node id).
func (f *serveFlags) telemetry(role, instance string) (*telemetry.Provider, error) {
	p, err := telemetry.Setup(context.Background(), telemetry.Config{Flags: f.tel, Role: role, Instance: instance, Version: version})
	f.otel = p
	return p, err
}

// stopTelemetry flushes the exporters, bounded by a few seconds.
func stopTelemetry(tp *telemetry.Provider, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		log.Warn("telemetry shutdown", "err", err)
	}
}

func wrapServeErr(what string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("%s server: %w", what, err)
}

// stop drains the listeners: in-flight requests get up to grace to finish.
func (fe *frontend) stop(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, b := range fe.reload {
		b.stop()
	}
	if fe.http != nil {
		if err := fe.http.Shutdown(ctx); err != nil {
			fe.http.Close()
		}
	}
	if fe.telnet != nil {
		fe.telnet.Shutdown(ctx)
	}
	if fe.grpc != nil {
		stopped := make(chan struct{})
		go func() { fe.grpc.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-ctx.Done():
			fe.grpc.Stop()
		}
	}
}
