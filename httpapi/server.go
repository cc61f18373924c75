package httpapi

import (
	"context"
	"crypto/tls"
	stdlog "log"
	"log/slog"
	"net/http"
	"strings"
	"sync"
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
	o.ReadHeaderTimeout = PositiveOr(o.ReadHeaderTimeout, 10*time.Second)
	o.IdleTimeout = PositiveOr(o.IdleTimeout, 2*time.Minute)
	o.MaxHeaderBytes = PositiveOr(o.MaxHeaderBytes, 64<<10)
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
		ErrorLog:       stdlog.New(&errorLog{log: log}, "", 0),
	}
}

// handshakeLogInterval is how often a failed TLS handshake is logged.
const handshakeLogInterval = time.Second

// errorLog writes the http.Server's error log to slog at warning level,
// letting through at most one "TLS handshake error" line each
// handshakeLogInterval, with the number of those left out since. NB:
// anyone who can connect can fail a handshake, before any credential is
// checked, as fast as connections can be opened (tens of thousands a
// second on loopback); one line each would fill a small device's disk
// with logs.
type errorLog struct {
	log *slog.Logger

	mu      sync.Mutex
	next    time.Time // REQUIRES: mu held; the next handshake line allowed
	dropped int       // REQUIRES: mu held; handshake lines left out since the last
}

func (e *errorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	if strings.Contains(msg, "TLS handshake error") {
		e.mu.Lock()
		now := time.Now()
		if now.Before(e.next) {
			e.dropped++
			e.mu.Unlock()
			return len(p), nil
		}
		dropped := e.dropped
		e.next, e.dropped = now.Add(handshakeLogInterval), 0
		e.mu.Unlock()
		if dropped > 0 {
			e.log.Warn(msg, "similar_lines_left_out", dropped)
			return len(p), nil
		}
	}
	e.log.Warn(msg)
	return len(p), nil
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
