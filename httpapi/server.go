package httpapi

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"
)

// ServerOptions configure NewServer.
type ServerOptions struct {
	// Handler serves every request (a mux with the protocols registered).
	Handler http.Handler
	// TLS, when not nil, makes the server speak HTTPS only.
	TLS *tls.Config
	// Limits supply the request timeout; zero fields take defaults.
	Limits Limits
	// ReadHeaderTimeout bounds the time a client may take to send its
	// request headers (slow-loris protection). Default 10s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default 2m.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds request headers. Default 64 KiB.
	MaxHeaderBytes int
	Logger         *slog.Logger
}

// NewServer returns an http.Server hardened against slow and hostile
// clients: header, body and idle timeouts, bounded headers, a deadline on
// every request's context, and panics in a handler answered with 500 and
// logged rather than silently dropping the connection.
func NewServer(o ServerOptions) *http.Server {
	lim := o.Limits.WithDefaults()
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 64 << 10
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &http.Server{
		Handler:           withDeadline(recoverPanics(o.Handler, log), lim.RequestTimeout),
		TLSConfig:         o.TLS,
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		// A body must arrive within the request timeout; the answer may
		// take as long again to be written (large query results).
		ReadTimeout:    o.ReadHeaderTimeout + lim.RequestTimeout,
		WriteTimeout:   o.ReadHeaderTimeout + 2*lim.RequestTimeout,
		IdleTimeout:    o.IdleTimeout,
		MaxHeaderBytes: o.MaxHeaderBytes,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

func withDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func recoverPanics(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("BUG: panic in HTTP handler", "method", r.Method, "path", r.URL.Path, "panic", v)
				http.Error(w, "internal error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, r)
	})
}
