package main

import (
	"errors"
	"net/http"

	"github.com/tributarydb/tributary/node"
)

// Health endpoints, mounted on every process's HTTP listener without a
// token (see openPaths):
//
//	GET|HEAD /healthz  200 "ok" while the process serves HTTP (liveness).
//	GET|HEAD /readyz   200 "ready" when every readiness check passes, else
//	                   503 with one line per failing check (readiness).
//
// A readiness check is a func() error: nil means ready, an error says in
// plain words why not (e.g. "node: closed"). Checks are called on every
// /readyz request, so they must be cheap and must not block.
//
// Use registerHealth(mux, checks...) once per mux. An edge node passes
// nodeReady(n); a coordinator passes its own checks (and nodeReady of its
// in-process edge, if it has one). The gRPC listener serves the same
// checks as grpc.health.v1 (grpchealth.go).

// readiness is the set of checks /readyz runs.
type readiness []func() error

// registerHealth mounts /healthz and /readyz on mux. /readyz is ready when
// every check returns nil; with no checks it is ready whenever the
// process serves.
func registerHealth(mux *http.ServeMux, checks ...func() error) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		plain(w, http.StatusOK, "ok\n")
	})
	mux.Handle("GET /readyz", readiness(checks))
}

// check runs every check and joins the failures.
func (rd readiness) check() error {
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
func (rd readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := rd.check(); err != nil {
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

// nodeReady is the readiness check of an edge node: ready once Open
// returned (WAL replayed, RocksDB open) and until Close starts, while its
// store takes flushes and no damage is on record (node.Node.Ready says
// why not, and what to do).
func nodeReady(n *node.Node) func() error {
	return func() error {
		if n == nil {
			return errors.New("node: not open")
		}
		return n.Ready()
	}
}

// nodeWriteReady is the check of an edge node's WriteService in the gRPC
// health service: writes are accepted (into the WAL, within its bounds),
// even while the store cannot flush.
func nodeWriteReady(n *node.Node) func() error {
	return func() error {
		if n == nil {
			return errors.New("node: not open")
		}
		return n.WriteReady()
	}
}
