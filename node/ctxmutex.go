package node

import "context"

// ctxMutex is a mutex whose Lock can give up when a context ends: a
// writer whose deadline passes while another holds the write lock (a
// stalled disk, a long flush step) returns instead of waiting on. The
// zero value is not usable: make it with newCtxMutex.
type ctxMutex struct{ ch chan struct{} }

func newCtxMutex() ctxMutex { return ctxMutex{ch: make(chan struct{}, 1)} }

// Lock locks, waiting as long as it takes.
func (m ctxMutex) Lock() { m.ch <- struct{}{} }

// LockContext locks, or returns ctx's error once ctx ends first (the
// mutex is then not held).
func (m ctxMutex) LockContext(ctx context.Context) error {
	select {
	case m.ch <- struct{}{}:
		return nil
	default:
	}
	select {
	case m.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unlock unlocks. REQUIRES: locked.
func (m ctxMutex) Unlock() {
	select {
	case <-m.ch:
	default:
		panic("BUG: node: unlock of an unlocked write lock")
	}
}
