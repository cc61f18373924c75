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
	// Raw points older than the raw retention are gone everywhere: only
	// their rollups remain, and those are copied as rollups. A lack run of
	// unknown start (an older catalog's) starts at the longest retention.
	now := time.Now()
	rawFrom := minT
	if r.c.opts.RetentionRaw > 0 {
		rawFrom = max(minT, min(now.Add(-r.c.opts.RetentionRaw).UnixMilli(), maxT))
	}
	// One pace for all the copies running (Options.RepairBytesPerSec).
	st, err := r.c.store.Copy(ctx, src, t.Edge, t.Run.FirstSeq, t.Run.LastSeq, rawFrom, maxT, replica.CopyOptions{Pacer: r.c.repairPace})
	if err != nil {
		return st.Bytes, err
	}
	if st.Rejected > 0 {
		r.c.log.Warn("repair copy: the replica store refused points", "edge", t.Edge, "first_seq", t.Run.FirstSeq,
			"last_seq", t.Run.LastSeq, "points", st.Points, "rejected", st.Rejected)
	}
	if rawFrom > minT {
		if oldest := now.Add(-max(r.c.opts.Retention1h, r.c.opts.Retention1d)).UnixMilli(); r.c.opts.Retention1d > 0 || r.c.opts.Retention1h > 0 {
			minT = max(minT, oldest)
		}
		n, err := r.copyRollups(ctx, src, t.Edge, minT, rawFrom)
		if err != nil {
			return st.Bytes + n, fmt.Errorf("copy the rollups of %q older than the raw retention: %w", t.Edge, err)
		}
		st.Bytes += n
	}
	return st.Bytes, nil
}

// copyRollups copies edge's rollup cells of [minT, maxT] from src into
// this coordinator's store, durably, and returns the bytes of their packs.
func (r storeRepairer) copyRollups(ctx context.Context, src replica.RollupSource, edge string, minT, maxT int64) (int64, error) {
	if minT > maxT {
		return 0, nil
	}
	var n int64
	err := src.ExportRollups(ctx, edge, minT, maxT, func(e replica.RollupSeries) error {
		for _, p := range e.Hourly {
			n += int64(len(p.Data))
		}
		for _, p := range e.Daily {
			n += int64(len(p.Data))
		}
		return r.c.store.ImportRollups(edge, e)
	})
	if err != nil {
		return n, err
	}
	return n, r.c.store.SyncImports()
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
