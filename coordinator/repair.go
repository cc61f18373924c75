package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/replica"
)

// storeRepairer is the healer's view of this coordinator's replica store:
// copies come from other coordinators' replica services.
type storeRepairer struct{ c *Coordinator }

// Copy implements heal.Repairer.
func (r storeRepairer) Copy(ctx context.Context, t catalog.RepairTask, source string) (int64, error) {
	if source == r.c.opts.NodeID {
		return 0, errors.New("BUG: a repair copy from this coordinator to itself")
	}
	src, err := r.c.links.peer(source)
	if err != nil {
		return 0, fmt.Errorf("reach %s: %w", source, err)
	}
	minT, maxT := t.Run.MinTimeMs, t.Run.MaxTimeMs
	// Raw data older than the raw retention is gone everywhere; a lack run
	// of unknown start (an older catalog's) starts there.
	if horizon := time.Now().Add(-r.c.opts.RetentionRaw).UnixMilli(); r.c.opts.RetentionRaw > 0 && minT < horizon {
		minT = min(horizon, maxT)
	}
	bps := r.c.opts.RepairBytesPerSec
	if bps < 0 {
		bps = 0
	}
	st, err := r.c.store.Copy(ctx, src, t.Edge, t.Run.FirstSeq, t.Run.LastSeq, minT, maxT, replica.CopyOptions{BytesPerSec: bps})
	if err != nil {
		return st.Bytes, err
	}
	if st.Rejected > 0 {
		r.c.log.Warn("repair copy: the replica store refused points", "edge", t.Edge, "first_seq", t.Run.FirstSeq,
			"last_seq", t.Run.LastSeq, "points", st.Points, "rejected", st.Rejected)
	}
	return st.Bytes, nil
}

// Holdings implements heal.Repairer.
func (r storeRepairer) Holdings(edge string) ([]catalog.SeqRange, error) {
	runs, err := r.c.store.Holdings(edge)
	if err != nil {
		return nil, err
	}
	out := make([]catalog.SeqRange, len(runs))
	for i, run := range runs {
		out[i] = catalog.SeqRange{FirstSeq: run.First, LastSeq: run.Last}
	}
	return out, nil
}

// Forget implements heal.Repairer.
func (r storeRepairer) Forget(edge string) error { return r.c.store.Forget(edge) }

// raftLeader adapts the raft member to heal.Raft.
type raftLeader struct{ c *Coordinator }

func (r raftLeader) Propose(ctx context.Context, cmd []byte) (any, error) {
	return r.c.raft.Propose(ctx, cmd)
}
func (r raftLeader) IsLeader() bool { return r.c.raft.Status().IsLeader }

// storeBound reports whether the catalog binds this coordinator's replica
// store: until it does, the store does not answer reads (it may be a new,
// empty store where the catalog still credits the old one with data).
func (c *Coordinator) storeBound() error {
	n, ok := c.fsm.Node(c.opts.NodeID)
	switch {
	case !ok:
		return errors.New("this coordinator is not registered in the catalog yet")
	case n.StoreID != c.store.ID():
		return fmt.Errorf("the catalog binds store %q to this coordinator, this one is %q (registration pending)", n.StoreID, c.store.ID())
	}
	return nil
}
