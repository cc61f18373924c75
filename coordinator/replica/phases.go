package replica

import (
	"sync/atomic"
	"time"
)

// The phases of an Apply, as applyPhases sums them.
const (
	phaseDecode = iota // verify and decode the file
	phaseLookup        // wait for the (edge, seq) lock, read the index
	phaseWrite         // engine writes: write lock, WAL append, WAL sync
	phaseIndex         // record (edge, seq) durably in the index
	numPhases
)

// applyPhases, when a Store has one (benchmarks set it), sums the wall
// time Applies spend in each phase, over all concurrent Applies.
type applyPhases struct{ ns [numPhases]atomic.Int64 }

// start returns the time a phase starts (zero when p is nil: not timed).
func (p *applyPhases) start() time.Time {
	if p == nil {
		return time.Time{}
	}
	return time.Now()
}

// end adds the time since *t to phase i and sets *t to now, the start of
// the next phase.
func (p *applyPhases) end(i int, t *time.Time) {
	if p == nil {
		return
	}
	now := time.Now()
	p.ns[i].Add(int64(now.Sub(*t)))
	*t = now
}
