package backend

import (
	"context"
	"slices"
	"sync"
)

// Warnings collects the warnings of a listing (Series, LabelNames,
// LabelValues and their range variants), whose signatures have no place
// for them: a protocol adapter puts a collector in the request's context
// (WithWarnings) and sends what the backend added (Warn) beside the
// answer. A coordinator's front end says so when an edge's series may be
// missing from a listing; a node has nothing to add. Safe for concurrent
// use.
type Warnings struct {
	mu   sync.Mutex
	list []string
}

type warningsKey struct{}

// WithWarnings returns a context carrying a new collector, and the
// collector.
func WithWarnings(ctx context.Context) (context.Context, *Warnings) {
	w := &Warnings{}
	return context.WithValue(ctx, warningsKey{}, w), w
}

// Warn adds msg to the collector of ctx, once; without a collector it
// does nothing (the caller has no channel for warnings).
func Warn(ctx context.Context, msg string) {
	w, _ := ctx.Value(warningsKey{}).(*Warnings)
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.Contains(w.list, msg) {
		w.list = append(w.list, msg)
	}
}

// List returns the warnings added, in order.
func (w *Warnings) List() []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.list)
}
