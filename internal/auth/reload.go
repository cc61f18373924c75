package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/tributarydb/tributary/internal/pace"
)

// Reload kinds, as ReloadStats reports them.
const (
	KindTLS    = "tls"    // certificates, keys and CA bundles
	KindTokens = "tokens" // token files
)

// watched is material read from files (a key pair and a CA bundle, a
// token list) that can be read again while the process runs. cur always
// holds the last material that was read successfully: a failed reload
// keeps it.
//
// Concurrency: cur is read from any goroutine (handshakes, requests);
// reload is serialised by mu.
type watched[T any] struct {
	kind, what string
	paths      []string
	parse      func() (*T, error)
	cur        atomic.Pointer[T]

	mu     sync.Mutex
	stamps []os.FileInfo // REQUIRES: mu held; nil entry: the file was missing
}

// newWatched reads the material once (an error here is the caller's to
// report: the process has nothing to fall back on) and registers it for
// Watch and Reload.
func newWatched[T any](kind, what string, parse func() (*T, error), paths ...string) (*watched[T], error) {
	w := &watched[T]{kind: kind, what: what, paths: paths, parse: parse}
	w.stamps = stampFiles(paths)
	m, err := parse()
	if err != nil {
		return nil, err
	}
	w.cur.Store(m)
	statsFor(kind).loaded()
	register(w)
	return w, nil
}

// load returns the current material.
func (w *watched[T]) load() *T { return w.cur.Load() }

// reload reads the files again if any changed since the last attempt
// (by identity, size or modification time), or always when force is set.
// It reports whether it read them; a parse error keeps the old material.
func (w *watched[T]) reload(force bool) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	stamps := stampFiles(w.paths)
	if !force && sameStamps(w.stamps, stamps) {
		return false, nil
	}
	// Recorded before parsing: a file caught half-written is read again
	// when its writer finishes (its size or time changes), and a file
	// that stays broken is reported once, not on every poll.
	w.stamps = stamps
	st := statsFor(w.kind)
	m, err := w.parse()
	if err != nil {
		st.failures.Add(1)
		return true, fmt.Errorf("reload %s (keeping the previous one): %w", w.what, err)
	}
	w.cur.Store(m)
	st.successes.Add(1)
	st.loaded()
	return true, nil
}

func (w *watched[T]) name() string { return w.what }

func stampFiles(paths []string) []os.FileInfo {
	out := make([]os.FileInfo, len(paths))
	for i, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			out[i] = fi
		}
	}
	return out
}

func sameStamps(a, b []os.FileInfo) bool {
	return slices.EqualFunc(a, b, func(x, y os.FileInfo) bool {
		if x == nil || y == nil {
			return x == nil && y == nil
		}
		return os.SameFile(x, y) && x.Size() == y.Size() && x.ModTime().Equal(y.ModTime())
	})
}

// reloader is a registered watched value of any type.
type reloader interface {
	reload(force bool) (bool, error)
	name() string
}

// registry holds every watched value this package built, weakly: a
// configuration nobody uses any more is not polled, and its files may go.
var registry struct {
	mu      sync.Mutex
	entries []func() reloader // nil result: collected
}

func register[T any](w *watched[T]) {
	wp := weak.Make(w)
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.entries = append(registry.entries, func() reloader {
		if p := wp.Value(); p != nil {
			return p
		}
		return nil
	})
}

// live returns the registered values still in use, dropping the others.
func live() []reloader {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	var out []reloader
	kept := registry.entries[:0]
	for _, e := range registry.entries {
		if r := e(); r != nil {
			out = append(out, r)
			kept = append(kept, e)
		}
	}
	clear(registry.entries[len(kept):])
	registry.entries = kept
	return out
}

// Reload reads again every certificate, key, CA bundle and token file
// that a configuration built by this package (TLSFiles.ServerConfig,
// MutualTLS, LoadTokens) came from, changed or not: what SIGHUP does.
// New connections and requests use the new material; established
// connections keep theirs. A file that fails to load keeps its previous
// material; the errors are logged and returned together.
func Reload(log *slog.Logger) error {
	return reloadAll(true, log)
}

// Watch polls the files of every configuration built by this package
// every interval and reloads those that changed, until ctx ends. Failures
// are logged and counted (ReloadStats); they never stop the watch.
func Watch(ctx context.Context, interval time.Duration, log *slog.Logger) {
	pace.Every(ctx.Done(), interval, nil, func() { reloadAll(false, log) })
}

func reloadAll(force bool, log *slog.Logger) error { return reloadWhere(force, log, nil) }

// reloadWhere reloads the registered values whose name match accepts
// (all with a nil match).
func reloadWhere(force bool, log *slog.Logger, match func(name string) bool) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for _, r := range live() {
		if match != nil && !match(r.name()) {
			continue
		}
		read, err := r.reload(force)
		switch {
		case err != nil:
			log.Error("credential reload failed", "what", r.name(), "err", err)
			errs = append(errs, err)
		case read:
			log.Info("credentials reloaded", "what", r.name())
		}
	}
	return errors.Join(errs...)
}

// kindStats counts the reloads of one kind of material.
type kindStats struct {
	successes, failures atomic.Int64
	lastLoadUnixNano    atomic.Int64
}

func (s *kindStats) loaded() { s.lastLoadUnixNano.Store(time.Now().UnixNano()) }

var kinds = map[string]*kindStats{KindTLS: {}, KindTokens: {}}

func statsFor(kind string) *kindStats {
	s, ok := kinds[kind]
	if !ok {
		panic("BUG: unknown reload kind " + kind)
	}
	return s
}

// ReloadStat counts the reloads of one kind of material (KindTLS,
// KindTokens) since the process started.
type ReloadStat struct {
	Kind                string
	Successes, Failures int64
	// LastSuccess is when material of this kind was last read
	// successfully, the first load included; zero if never.
	LastSuccess time.Time
}

// ReloadStats returns the reload counters, one entry per kind.
func ReloadStats() []ReloadStat {
	out := make([]ReloadStat, 0, len(kinds))
	for _, k := range []string{KindTLS, KindTokens} {
		s := kinds[k]
		st := ReloadStat{Kind: k, Successes: s.successes.Load(), Failures: s.failures.Load()}
		if ns := s.lastLoadUnixNano.Load(); ns != 0 {
			st.LastSuccess = time.Unix(0, ns)
		}
		out = append(out, st)
	}
	return out
}
