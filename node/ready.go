package node

import "github.com/tributarydb/tributary/model"

// Ready reports whether the node serves reads and writes: nil from the
// moment Open returns (WAL replayed, store open) until Close starts, then
// model.ErrClosed; and while the store is unhealthy (health.go), a *StoreError
// that says why and what to do.
func (n *Node) Ready() error {
	if n.closed.Load() {
		return model.ErrClosed
	}
	if !n.health.unhealthy.Load() {
		return nil
	}
	st := n.health.state()
	what := "writes go to the WAL while unflushed data stays within its bounds"
	switch {
	case st.Damaged:
		what = "not ready until repaired: stop the node and run tributary node repair --data-dir " + n.opts.DataDir +
			" (docs/operations.md, Recovering from a damaged store); " + what
	case st.WritesRefused:
		what = "writes are refused until the store takes flushes again"
	}
	if e := n.health.storeError(what); e != nil {
		return e
	}
	return nil
}

// WriteReady reports whether writes are accepted now: nil, model.ErrClosed, or
// a *StoreError once the store is unhealthy and unflushed data reached its
// bound. Writes that need a new series are refused whenever Ready fails
// for the store.
func (n *Node) WriteReady() error {
	if n.closed.Load() {
		return model.ErrClosed
	}
	if !n.health.unhealthy.Load() {
		return nil
	}
	if why := n.writeBound(); why != "" {
		if e := n.health.storeError(why); e != nil {
			return e
		}
	}
	return nil
}
