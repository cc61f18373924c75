package node

// Ready reports whether the node serves reads and writes: nil from the
// moment Open returns (WAL replayed, store open) until Close starts, then
// ErrClosed.
func (n *Node) Ready() error {
	if n.closed.Load() {
		return ErrClosed
	}
	return nil
}
