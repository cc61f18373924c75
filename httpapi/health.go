package httpapi

import (
	"errors"
	"net/http"
)

// Health endpoints, mounted on every process's HTTP listener without a
// token:
//
//	GET|HEAD /healthz  200 "ok" while the process serves HTTP (liveness).
//	GET|HEAD /readyz   200 "ready" when every readiness check passes, else
//	                   503 with one line per failing check (readiness).
//	GET|HEAD /-/healthy, /-/ready  the same two answers at the paths a
//	                   Prometheus server serves them (load balancers and
//	                   tools that expect a Prometheus-compatible backend).
//
// A readiness check is a func() error: nil means ready, an error says in
// plain words why not (e.g. "node: closed"). Checks are called on every
// /readyz request, so they must be cheap and must not block. The gRPC
// listener serves the same checks as grpc.health.v1 (grpcapi.Health).

// Readiness is the set of checks /readyz runs; nil checks are skipped.
type Readiness []func() error

// RegisterHealth mounts /healthz, /readyz, /-/healthy and /-/ready on mux,
// once per mux.
// /readyz is ready when every check returns nil; with no checks it is
// ready whenever the process serves.
func RegisterHealth(mux *http.ServeMux, checks ...func() error) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
	mux.Handle("GET /readyz", Readiness(checks))
	mux.HandleFunc("GET /-/healthy", func(w http.ResponseWriter, r *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
	mux.Handle("GET /-/ready", Readiness(checks))
}

// Check runs every check and joins the failures.
func (rd Readiness) Check() error {
	var errs []error
	for _, c := range rd {
		if c == nil {
			continue
		}
		if err := c(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ServeHTTP answers 200 "ready" or 503 with the reasons, one per line.
func (rd Readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := rd.Check(); err != nil {
		plain(w, http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
		return
	}
	plain(w, http.StatusOK, "ready\n")
}

func plain(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
