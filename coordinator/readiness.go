package coordinator

import (
	"errors"
	"fmt"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
)

// Readiness reports whether the coordinator can serve, and if not, why:
// nil when its raft member knows a leader and has applied every entry it
// knows to be committed (caught up), it is registered in the catalog as
// a coordinator, its replica store is open and its intake is serving. It
// is cheap and never blocks (it backs /readyz).
func (c *Coordinator) Readiness() error {
	if c.stopping.Load() {
		return errors.New("coordinator: stopping")
	}
	n, ok := c.fsm.Node(c.opts.NodeID)
	registered := ok && n.Role == catalog.RoleCoordinator
	return readiness(c.raft.Status(), registered, c.store.Ready(), c.intakeServing.Load())
}

// Ready reports whether Readiness is nil.
func (c *Coordinator) Ready() bool { return c.Readiness() == nil }

// readiness says what keeps a coordinator in the given state from being
// ready, every reason at once (nil: ready).
func readiness(st raftnode.Status, registered bool, storeErr error, intakeServing bool) error {
	var why []error
	switch {
	case st.Failed != nil:
		why = append(why, fmt.Errorf("coordinator: raft member failed: %w", st.Failed))
	case st.Removed:
		why = append(why, errors.New("coordinator: removed from the raft cluster"))
	case st.Lead == 0:
		why = append(why, fmt.Errorf("coordinator: no raft leader known (term %d)", st.Term))
	}
	if st.Failed == nil && st.Applied < st.Commit {
		why = append(why, fmt.Errorf("coordinator: catching up: applied raft index %d of %d committed", st.Applied, st.Commit))
	}
	if st.Failed == nil && !st.Removed && st.Lead != 0 && !registered {
		why = append(why, errors.New("coordinator: not registered in the catalog yet"))
	}
	if storeErr != nil {
		why = append(why, fmt.Errorf("coordinator: %w", storeErr))
	}
	if !intakeServing {
		why = append(why, errors.New("coordinator: intake not serving"))
	}
	return errors.Join(why...)
}
