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
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/internal/auth"
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
	prom                               prom.Options
	tel                                telemetry.Flags
	// otel is the process's telemetry once telemetry() set it up; the
	// gRPC listener is instrumented with it (otelgrpc).
	otel *telemetry.Provider
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.grpcListen, "listen", "127.0.0.1:7070", "gRPC listen address")
	fs.StringVar(&f.httpListen, "http-listen", "127.0.0.1:7071", "HTTP listen address for the InfluxDB, OpenTSDB and Prometheus APIs (empty: off)")
	fs.StringVar(&f.tsdbListen, "opentsdb-listen", "", "TCP listen address for OpenTSDB telnet-style put lines, e.g. 127.0.0.1:4242 (empty: off)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file of accepted bearer tokens, one per line; when set (or TRIBUTARY_TOKEN is), every client request needs one")
	fs.StringVar(&f.tls.Cert, "tls-cert", "", "PEM certificate for the gRPC and HTTP listeners (enables TLS)")
	fs.StringVar(&f.tls.Key, "tls-key", "", "PEM private key for --tls-cert")
	fs.StringVar(&f.tls.ClientCA, "tls-client-ca", "", "PEM CA bundle; when set, clients must present a certificate it signed (mTLS)")
	fs.BoolVar(&f.insecureListen, "insecure-listen", false, "allow plaintext listeners on non-loopback addresses (data and tokens cross the network in clear text)")
	fs.Int64Var(&f.limits.MaxBodyBytes, "max-body-bytes", httpapi.DefaultMaxBodyBytes, "largest HTTP request body, after decompression")
	fs.IntVar(&f.limits.MaxPointsPerRequest, "max-points-per-request", httpapi.DefaultMaxPointsPerRequest, "most points one write request may carry")
	registerParseLimits(fs, &f.limits)
	fs.IntVar(&f.limits.MaxSeriesPerQuery, "max-series-per-query", httpapi.DefaultMaxSeriesPerQuery, "most series one query may touch")
	fs.DurationVar(&f.limits.RequestTimeout, "request-timeout", httpapi.DefaultRequestTimeout, "longest time one request may take")
	fs.IntVar(&f.prom.MaxSamples, "prom-max-samples", 5_000_000, "PromQL: most samples one query may hold in memory")
	fs.DurationVar(&f.prom.QueryTimeout, "prom-query-timeout", 2*time.Minute, "PromQL: longest evaluation of one query")
	fs.DurationVar(&f.prom.LookbackDelta, "prom-lookback-delta", 5*time.Minute, "PromQL: how far back an instant selector looks for a sample")
	fs.IntVar(&f.prom.MaxConcurrentQueries, "prom-max-concurrent-queries", 4, "PromQL: queries evaluated at once")
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
	addrs  []any // for the ready log line
}

func (f *serveFlags) tokens() (auth.Tokens, error) {
	var t auth.Tokens
	if f.tokenFile != "" {
		var err error
		if t, err = auth.LoadTokens(f.tokenFile); err != nil {
			return auth.Tokens{}, fmt.Errorf("%w: --token-file: %v", errUsage, err)
		}
	}
	return t.With(os.Getenv("TRIBUTARY_TOKEN")), nil
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
	po := f.prom
	if err := po.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := f.tel.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return tlsCfg, nil
}

// start opens the listeners and serves b on them. Every listener is open
// when it returns; a failure closes what was opened.
//
// extraHTTP, when not nil, adds handlers to the HTTP listener's mux (GET
// /metrics needs no token, like the health endpoints; everything else
// does); it receives the listeners' counters.
func (f *serveFlags) start(b backend.Backend, registerGRPC func(*grpc.Server), extraHTTP func(*http.ServeMux, *httpapi.Stats), log *slog.Logger) (_ *frontend, err error) {
	tlsCfg, err := f.validate()
	if err != nil {
		return nil, err
	}
	toks, err := f.tokens()
	if err != nil {
		return nil, err
	}
	fe := &frontend{stats: httpapi.NewStats(), errc: make(chan error, 3)}
	defer func() {
		if err != nil {
			fe.stop(time.Second)
		}
	}()

	gopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(64 << 20),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if tlsCfg != nil {
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	gopts = append(gopts, toks.ServerOptions(func(string) { fe.stats.Inc(httpapi.ViolationUnauthorized) })...)
	if f.otel != nil {
		gopts = append(gopts, telemetry.GRPCServerOption(f.otel.MeterProvider(), f.otel.TracerProvider()))
	}
	fe.grpc = grpc.NewServer(gopts...)
	registerGRPC(fe.grpc)
	glis, err := net.Listen("tcp", f.grpcListen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s (--listen): %w", f.grpcListen, err)
	}
	fe.addrs = append(fe.addrs, "grpc", glis.Addr().String())
	go func() { fe.errc <- wrapServeErr("grpc", fe.grpc.Serve(glis)) }()

	cfg := &httpapi.Config{Limits: f.limits, Stats: fe.stats}
	cfg.Normalize()
	if f.httpListen != "" {
		mux := http.NewServeMux()
		if err := registerHTTP(mux, b, cfg, f.prom); err != nil {
			return nil, err
		}
		if extraHTTP != nil {
			extraHTTP(mux, fe.stats)
		}
		h := toks.HTTP(mux, func(*http.Request) { fe.stats.Inc(httpapi.ViolationUnauthorized) }, openPaths...)
		if f.otel != nil && f.otel.TracesOn() {
			h = telemetry.HTTPServerSpans(f.otel.TracerProvider(), h)
		}
		fe.http = httpapi.NewServer(httpapi.ServerOptions{Handler: h, TLS: tlsCfg, Limits: cfg.Limits, Logger: log})
		hlis, err := net.Listen("tcp", f.httpListen)
		if err != nil {
			return nil, fmt.Errorf("listen on %s (--http-listen): %w", f.httpListen, err)
		}
		if tlsCfg != nil {
			hlis = tls.NewListener(hlis, tlsCfg)
		}
		fe.addrs = append(fe.addrs, "http", hlis.Addr().String())
		go func() { fe.errc <- wrapServeErr("http", fe.http.Serve(hlis)) }()
	}
	if f.tsdbListen != "" {
		tlis, err := net.Listen("tcp", f.tsdbListen)
		if err != nil {
			return nil, fmt.Errorf("listen on %s (--opentsdb-listen): %w", f.tsdbListen, err)
		}
		srv := newTelnet(b, cfg, log)
		fe.telnet = srv
		fe.addrs = append(fe.addrs, "opentsdb_telnet", tlis.Addr().String())
		go func() { fe.errc <- wrapServeErr("opentsdb telnet", srv.Serve(tlis)) }()
	}
	return fe, nil
}

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
