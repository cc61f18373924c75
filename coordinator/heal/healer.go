package heal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
)

// Raft is what the healer needs of the raft member.
type Raft interface {
	Propose(ctx context.Context, cmd []byte) (any, error)
	// IsLeader reports whether this member is the raft leader now.
	IsLeader() bool
}

// Repairer is this coordinator's replica store, as the healer uses it.
type Repairer interface {
	// Copy copies the data of task.Run (its time span) of task.Edge from
	// coordinator source into this coordinator's store, durably, and
	// returns the bytes copied. Safe to run again (idempotent); resumes
	// where an interrupted copy of the same run stopped.
	Copy(ctx context.Context, task catalog.RepairTask, source string) (bytes int64, err error)
	// Holdings returns the sequence runs the store holds of edge, sorted
	// and disjoint.
	Holdings(edge string) ([]catalog.SeqRange, error)
	// Forget drops what the store claims to hold of edge.
	Forget(edge string) error
}

// Options configure a Healer.
type Options struct {
	Self     string       // this coordinator's node id (required)
	Catalog  *catalog.FSM // required
	Raft     Raft         // required
	Repairer Repairer     // required
	// Interval (2s): how often the leader judges health and balance, and
	// every member looks for repairs.
	Interval time.Duration
	// DeadAfter overrides the fleet configuration's dead-after (0: use it).
	DeadAfter time.Duration
	// MaxMovesInFlight (4) bounds the balancing moves not finished yet.
	MaxMovesInFlight int
	// CopyParallelism (2) bounds the copies running at once.
	CopyParallelism int
	// ScrubInterval (10m) is how often the store is compared with the
	// catalog (0: the default; negative: never).
	ScrubInterval time.Duration
	// ProposalTimeout (10s) bounds each proposal.
	ProposalTimeout time.Duration
	Logger          *slog.Logger
	Now             func() time.Time // default time.Now
}

// Validate fills defaults and rejects impossible values.
func (o *Options) Validate() error {
	var bad []string
	if o.Self == "" {
		bad = append(bad, "Self is required")
	}
	if o.Catalog == nil {
		bad = append(bad, "Catalog is required")
	}
	if o.Raft == nil {
		bad = append(bad, "Raft is required")
	}
	if o.Repairer == nil {
		bad = append(bad, "Repairer is required")
	}
	o.Interval = cmp.Or(o.Interval, 2*time.Second)
	o.MaxMovesInFlight = cmp.Or(o.MaxMovesInFlight, 4)
	o.CopyParallelism = cmp.Or(o.CopyParallelism, 2)
	o.ScrubInterval = cmp.Or(o.ScrubInterval, 10*time.Minute)
	o.ProposalTimeout = cmp.Or(o.ProposalTimeout, 10*time.Second)
	if o.Interval < 0 || o.DeadAfter < 0 || o.MaxMovesInFlight < 0 || o.CopyParallelism < 0 || o.ProposalTimeout < 0 {
		bad = append(bad, fmt.Sprintf("negative Interval %s, DeadAfter %s, MaxMovesInFlight %d, CopyParallelism %d or ProposalTimeout %s",
			o.Interval, o.DeadAfter, o.MaxMovesInFlight, o.CopyParallelism, o.ProposalTimeout))
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Now == nil {
		o.Now = time.Now
	}
	if len(bad) > 0 {
		return errors.New("heal options: " + strings.Join(bad, "; "))
	}
	return nil
}

// Healer runs the duties of the package documentation.
type Healer struct {
	o   Options
	log *slog.Logger

	mu          sync.Mutex
	leaderSince time.Time            // zero while not leader
	running     map[string]bool      // repair task keys being copied
	copying     map[string]bool      // edge/replica pairs with a copy running
	sourcing    map[string]int       // copies running by source coordinator
	copied      chan struct{}        // a copy ended: look for the next at once
	retryAt     map[string]time.Time // task key → earliest retry
	backoff     map[string]time.Duration
	lastScrub   time.Time

	stats struct {
		markedDown, markedUp, rebalances, moves        atomic.Int64
		copies, copyFailures, copiedBytes, copyRunning atomic.Int64
		scrubs, scrubMissing, scrubFound, forgotten    atomic.Int64
	}
}

// Stats counts what a Healer did since New.
type Stats struct {
	MarkedDown, MarkedUp int64 // coordinators this member (as leader) marked down / active
	Rebalances, Moves    int64 // Rebalance commands proposed and the placements they changed
	// Copies counts repair copies completed and recorded, CopyFailures
	// those that failed (retried), CopiedBytes their bytes, CopiesRunning
	// those running now.
	Copies, CopyFailures, CopiedBytes, CopiesRunning int64
	// Scrubs counts scrub rounds; ScrubMissing runs reported missing,
	// ScrubFound runs found stored while listed as lacking; Forgotten
	// edges forgotten by the store.
	Scrubs, ScrubMissing, ScrubFound, Forgotten int64
}

// New checks the options and returns a Healer; Run drives it.
func New(o Options) (*Healer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Healer{o: o, log: o.Logger.With("component", "heal"), running: map[string]bool{}, copying: map[string]bool{}, sourcing: map[string]int{},
		copied: make(chan struct{}, 1), retryAt: map[string]time.Time{}, backoff: map[string]time.Duration{}, lastScrub: o.Now()}, nil
}

// Stats returns the counters.
func (h *Healer) Stats() Stats {
	return Stats{
		MarkedDown: h.stats.markedDown.Load(), MarkedUp: h.stats.markedUp.Load(),
		Rebalances: h.stats.rebalances.Load(), Moves: h.stats.moves.Load(),
		Copies: h.stats.copies.Load(), CopyFailures: h.stats.copyFailures.Load(),
		CopiedBytes: h.stats.copiedBytes.Load(), CopiesRunning: h.stats.copyRunning.Load(),
		Scrubs: h.stats.scrubs.Load(), ScrubMissing: h.stats.scrubMissing.Load(),
		ScrubFound: h.stats.scrubFound.Load(), Forgotten: h.stats.forgotten.Load(),
	}
}

// Run performs the duties every Interval until ctx ends, and looks for
// the next repair as soon as a copy ends (a copy slot never waits for the
// next round); it returns once the copies it started have returned.
func (h *Healer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(h.o.Interval)
	defer t.Stop()
	h.Round(ctx, &wg)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Round(ctx, &wg)
		case <-h.copied:
			h.repair(ctx, h.o.Now(), &wg)
		}
	}
}

// Round performs one round of duties; copies it starts run on wg.
func (h *Healer) Round(ctx context.Context, wg *sync.WaitGroup) {
	now := h.o.Now()
	if h.o.Raft.IsLeader() {
		h.mu.Lock()
		if h.leaderSince.IsZero() {
			h.leaderSince = now
		}
		since := h.leaderSince
		h.mu.Unlock()
		h.health(ctx, now, since)
		h.balance(ctx)
	} else {
		h.mu.Lock()
		h.leaderSince = time.Time{}
		h.mu.Unlock()
	}
	h.repair(ctx, now, wg)
	if h.o.ScrubInterval > 0 {
		h.mu.Lock()
		due := now.Sub(h.lastScrub) >= h.o.ScrubInterval
		if due {
			h.lastScrub = now
		}
		h.mu.Unlock()
		if due {
			h.Scrub(ctx)
		}
	}
}

func (h *Healer) deadAfterMs() int64 {
	if h.o.DeadAfter > 0 {
		return h.o.DeadAfter.Milliseconds()
	}
	return h.o.Catalog.Config().DeadAfter()
}

func (h *Healer) propose(ctx context.Context, c catalog.Command) (any, error) {
	pctx, cancel := context.WithTimeout(ctx, h.o.ProposalTimeout)
	defer cancel()
	return h.o.Raft.Propose(pctx, catalog.EncodeCommand(c))
}

func (h *Healer) health(ctx context.Context, now, leaderSince time.Time) {
	for _, c := range HealthChanges(h.o.Catalog.Nodes(), h.o.Self, now.UnixMilli(), leaderSince.UnixMilli(), h.deadAfterMs()) {
		res, err := h.propose(ctx, c)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("propose a coordinator state", "coordinator", c.ID, "state", c.State, "err", err)
			}
			continue
		}
		r, _ := res.(catalog.SetNodeStateResult)
		if !r.Changed {
			continue
		}
		if c.State == catalog.NodeDown {
			h.stats.markedDown.Add(1)
			h.log.Warn("coordinator marked down: no heartbeat within dead-after; its replicas move", "coordinator", c.ID,
				"dead_after", time.Duration(h.deadAfterMs())*time.Millisecond, "placements_changed", r.Moved)
		} else {
			h.stats.markedUp.Add(1)
			h.log.Info("coordinator answers again: marked active", "coordinator", c.ID)
		}
	}
}

func (h *Healer) balance(ctx context.Context) {
	spread, inFlight := h.o.Catalog.Balance()
	moves := BalanceMoves(spread, inFlight, h.o.MaxMovesInFlight)
	if moves == 0 {
		return
	}
	res, err := h.propose(ctx, catalog.Rebalance{MaxMoves: moves})
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("propose a rebalance", "err", err)
		}
		return
	}
	r, _ := res.(catalog.RebalanceResult)
	h.stats.rebalances.Add(1)
	h.stats.moves.Add(int64(r.Changed))
	if r.Changed > 0 {
		h.log.Info("rebalanced", "spread", spread, "moves_in_flight", inFlight, "placements_changed", r.Changed)
	}
}

func taskKey(t catalog.RepairTask) string {
	return fmt.Sprintf("%s/%d/%d-%d", t.Edge, t.PlacedIndex, t.Run.FirstSeq, t.Run.LastSeq)
}

// repair starts copies of the runs this coordinator lacks, up to
// CopyParallelism at once and one at a time per edge and replica: a run
// that grows while its copy runs (a segment recorded as lacking next to
// it) waits for that copy instead of being copied beside it. Each copy
// reads from the source that serves the fewest of this coordinator's
// running copies (the first listed among equals), so that copies running
// together read from different coordinators when they can.
func (h *Healer) repair(ctx context.Context, now time.Time, wg *sync.WaitGroup) {
	for _, t := range h.o.Catalog.RepairsOf(h.o.Self) {
		if len(t.Sources) == 0 {
			continue // the edge's to ship again
		}
		key, pair := taskKey(t), t.Edge+"/"+t.Replica
		h.mu.Lock()
		busy := len(h.running) >= h.o.CopyParallelism
		skip := h.running[key] || h.copying[pair] || now.Before(h.retryAt[key])
		var src string
		if !busy && !skip {
			h.running[key] = true
			h.copying[pair] = true
			src = t.Sources[0]
			for _, s := range t.Sources[1:] {
				if h.sourcing[s] < h.sourcing[src] {
					src = s
				}
			}
			h.sourcing[src]++
		}
		h.mu.Unlock()
		if busy {
			return
		}
		if skip {
			continue
		}
		h.stats.copyRunning.Add(1)
		wg.Go(func() {
			defer h.stats.copyRunning.Add(-1)
			defer func() {
				h.mu.Lock()
				delete(h.running, key)
				delete(h.copying, pair)
				if h.sourcing[src]--; h.sourcing[src] == 0 {
					delete(h.sourcing, src)
				}
				h.mu.Unlock()
				select {
				case h.copied <- struct{}{}:
				default: // a look is already due
				}
			}()
			h.copyOne(ctx, t, key, src)
		})
	}
}

func (h *Healer) copyOne(ctx context.Context, t catalog.RepairTask, key, src string) {
	start := h.o.Now()
	n, err := h.o.Repairer.Copy(ctx, t, src)
	if err == nil {
		_, err = h.propose(ctx, catalog.RecordReplicated{Edge: t.Edge, Replica: t.Replica, PlacedIndex: t.PlacedIndex,
			Ranges: []catalog.SeqRange{{FirstSeq: t.Run.FirstSeq, LastSeq: t.Run.LastSeq}}})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		b := min(max(2*h.backoff[key], time.Second), time.Minute)
		h.backoff[key] = b
		h.retryAt[key] = h.o.Now().Add(b)
		h.stats.copyFailures.Add(1)
		h.log.Warn("repair copy failed; retrying", "edge", t.Edge, "first_seq", t.Run.FirstSeq, "last_seq", t.Run.LastSeq,
			"source", src, "retry_in", b, "err", err)
		return
	}
	delete(h.backoff, key)
	delete(h.retryAt, key)
	h.stats.copies.Add(1)
	h.stats.copiedBytes.Add(n)
	h.log.Info("repaired: copied a run this replica lacked", "edge", t.Edge, "first_seq", t.Run.FirstSeq,
		"last_seq", t.Run.LastSeq, "source", src, "bytes", n, "took", h.o.Now().Sub(start))
}

// Scrub compares the store with the catalog once (see the package
// documentation) and reports what it found to the catalog.
func (h *Healer) Scrub(ctx context.Context) {
	h.stats.scrubs.Add(1)
	for _, p := range h.o.Catalog.Placements() {
		if ctx.Err() != nil {
			return
		}
		hold, _, placed := p.HoldingOf(h.o.Self)
		if !placed {
			h.forgetIfHeld(p.Edge)
			continue
		}
		prog, ok := h.o.Catalog.Progress(p.Edge)
		if !ok {
			continue
		}
		// The catalog first, then the store: a segment stored and
		// recorded in between is only reported missing (and copied again),
		// never credited without being stored.
		stored, err := h.o.Repairer.Holdings(p.Edge)
		if err != nil {
			h.log.Warn("scrub: read the store's holdings", "edge", p.Edge, "err", err)
			continue
		}
		missing, found := ScrubFindings(prog.Held, hold.Lacks, stored)
		if len(missing) > 0 {
			if _, err := h.propose(ctx, catalog.RecordMissing{Edge: p.Edge, Replica: h.o.Self, PlacedIndex: hold.Index, Ranges: missing}); err != nil {
				h.log.Warn("scrub: report missing segments", "edge", p.Edge, "err", err)
			} else {
				h.stats.scrubMissing.Add(int64(len(missing)))
				h.log.Warn("scrub: the store lacks segments the catalog credited it with; they will be repaired",
					"edge", p.Edge, "runs", len(missing), "first", missing[0].FirstSeq)
			}
		}
		if len(found) > 0 {
			if _, err := h.propose(ctx, catalog.RecordReplicated{Edge: p.Edge, Replica: h.o.Self, PlacedIndex: hold.Index, Ranges: found}); err != nil {
				h.log.Warn("scrub: record segments found in the store", "edge", p.Edge, "err", err)
			} else {
				h.stats.scrubFound.Add(int64(len(found)))
			}
		}
	}
}

// forgetIfHeld makes the store forget an edge placed elsewhere.
func (h *Healer) forgetIfHeld(edge string) {
	stored, err := h.o.Repairer.Holdings(edge)
	if err != nil || len(stored) == 0 {
		return
	}
	// Read the placement again: the edge may have been placed here since.
	if p, ok := h.o.Catalog.Placement(edge); ok {
		if _, _, placed := p.HoldingOf(h.o.Self); placed {
			return
		}
	}
	if err := h.o.Repairer.Forget(edge); err != nil {
		h.log.Warn("scrub: forget an edge placed elsewhere", "edge", edge, "err", err)
		return
	}
	h.stats.forgotten.Add(1)
	h.log.Info("scrub: forgot an edge no longer placed here", "edge", edge, "runs", len(stored))
}
