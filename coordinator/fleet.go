package coordinator

import (
	"context"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
)

// Fleet is the fleet as one coordinator sees it: the raft cluster, the
// coordinators and every edge with what the cloud holds of it. It is what
// `GET /api/v1/fleet` answers and `tributary status --fleet` shows.
type Fleet struct {
	Coordinator string      `json:"coordinator"` // who answered
	Raft        RaftStatus  `json:"raft"`
	Series      int         `json:"series"` // fleet-wide series in the catalog
	Nodes       []FleetNode `json:"nodes"`
}

// RaftStatus is the answering member's view of the raft cluster.
type RaftStatus struct {
	ID       uint64   `json:"id"`
	Leader   uint64   `json:"leader"`
	Term     uint64   `json:"term"`
	Commit   uint64   `json:"commit"`
	Applied  uint64   `json:"applied"`
	Voters   []uint64 `json:"voters"`
	Learners []uint64 `json:"learners,omitempty"`
}

// FleetNode is one node of the catalog. The replication fields are set for
// edges only.
type FleetNode struct {
	ID              string `json:"id"`
	Role            string `json:"role"`
	RaftID          uint64 `json:"raft_id,omitempty"`
	Addr            string `json:"addr,omitempty"`
	LastHeartbeatMs int64  `json:"last_heartbeat_ms"`
	// State is a coordinator's placement state: active, draining or down.
	State   string `json:"state,omitempty"`
	StoreID string `json:"store_id,omitempty"`
	// Labels are the node's labels: an edge's from its hello
	// (--edge-label), a coordinator's the catalog features it applies.
	Labels map[string]string `json:"labels,omitempty"`
	// Revoked edges are refused by the intake and the query tunnels.
	Revoked bool `json:"revoked,omitempty"`
	// SecondsSinceHeartbeat is judged against the answering coordinator's clock.
	SecondsSinceHeartbeat float64 `json:"seconds_since_heartbeat"`

	Replicas        []string `json:"replicas,omitempty"`
	Series          int      `json:"series,omitempty"`
	AckedThrough    uint64   `json:"acked_through,omitempty"`
	WatermarkSeq    uint64   `json:"watermark_seq,omitempty"`
	WatermarkTimeMs int64    `json:"watermark_time_ms,omitempty"`
	// RegisteredThroughMs is the edge's registration watermark: every
	// series it created before then is in the catalog (absent: the edge
	// does not announce its series).
	RegisteredThroughMs int64      `json:"registered_through_ms,omitempty"`
	HeldPoints          uint64     `json:"held_points,omitempty"`
	HeldRuns            []HeldRun  `json:"held,omitempty"`
	Gaps                []FleetGap `json:"gaps,omitempty"`

	// Leaving lists replicas being replaced: still read, kept until the
	// active replicas hold what they hold.
	Leaving []string `json:"leaving,omitempty"`
	// ReplicaLacks lists, per replica (active or leaving) that lacks held
	// segments, the runs of held segments it lacks (not copied to it yet).
	ReplicaLacks map[string][]SeqRun `json:"replica_lacks,omitempty"`
	// UnderReplicatedSegments counts held segments an active replica lacks,
	// once per active replica that lacks it; UnsourcedSegments those of
	// them no live replica can give (the edge must ship them again).
	UnderReplicatedSegments uint64 `json:"under_replicated_segments,omitempty"`
	UnsourcedSegments       uint64 `json:"unsourced_segments,omitempty"`
}

// SeqRun is a run of segment sequence numbers, inclusive.
type SeqRun struct {
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// HeldRun is a run of segment sequences the cloud holds.
type HeldRun struct {
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Points    uint64 `json:"points"`
	MinTimeMs int64  `json:"min_time_ms"`
	MaxTimeMs int64  `json:"max_time_ms"`
}

// FleetGap is a run of segments an edge declared it will not ship.
type FleetGap struct {
	AfterSeq   uint64 `json:"after_seq"`
	ThroughSeq uint64 `json:"through_seq"`
	Reason     string `json:"reason"`
	Segments   uint64 `json:"segments"`
	Points     int64  `json:"points"` // -1: unknown
	MinTimeMs  int64  `json:"min_time_ms"`
	MaxTimeMs  int64  `json:"max_time_ms"`
}

// Fleet reads the catalog after a linearizable barrier (so the answer is
// at least as new as anything acknowledged before the call).
func (c *Coordinator) Fleet(ctx context.Context) (Fleet, error) {
	if err := c.raft.LinearizableRead(ctx); err != nil {
		return Fleet{}, err
	}
	st := c.raft.Status()
	f := Fleet{
		Coordinator: c.opts.NodeID,
		Raft: RaftStatus{ID: st.ID, Leader: st.Lead, Term: st.Term, Commit: st.Commit, Applied: st.Applied,
			Voters: st.Voters, Learners: st.Learners},
		Series: c.fsm.SeriesCount(),
	}
	now := time.Now().UnixMilli()
	for _, n := range c.fsm.Nodes() {
		fn := FleetNode{ID: n.ID, Role: n.Role.String(), RaftID: n.RaftID, Addr: n.Addr,
			LastHeartbeatMs: n.LastHeartbeatMs, SecondsSinceHeartbeat: float64(now-n.LastHeartbeatMs) / 1000,
			StoreID: n.StoreID, Revoked: n.Revoked, Labels: labelMap(n.Labels)}
		if n.Role == catalog.RoleCoordinator {
			fn.State = n.State.String()
		}
		if n.Role == catalog.RoleEdge {
			pr, _ := c.fsm.Progress(n.ID)
			if p, ok := c.fsm.Placement(n.ID); ok {
				fn.Replicas = p.Replicas
				for _, l := range p.Leaving {
					fn.Leaving = append(fn.Leaving, l.ID)
				}
				for _, r := range p.All() {
					h, _, _ := p.HoldingOf(r)
					for _, l := range heldLacks(h.Lacks, pr.Held) {
						if fn.ReplicaLacks == nil {
							fn.ReplicaLacks = map[string][]SeqRun{}
						}
						fn.ReplicaLacks[r] = append(fn.ReplicaLacks[r], SeqRun{l.FirstSeq, l.LastSeq})
					}
				}
			}
			for _, t := range c.fsm.Repairs(n.ID) {
				segs := t.Run.LastSeq - t.Run.FirstSeq + 1
				fn.UnderReplicatedSegments += segs
				if len(t.Sources) == 0 {
					fn.UnsourcedSegments += segs
				}
			}
			fn.Series = len(c.fsm.EdgeSeries(n.ID))
			if ms, ok := c.fsm.Registration(n.ID); ok {
				fn.RegisteredThroughMs = ms
			}
			if p, ok := c.fsm.Progress(n.ID); ok {
				fn.AckedThrough, fn.WatermarkSeq, fn.WatermarkTimeMs = p.AckedThrough(), p.WatermarkSeq, p.WatermarkTimeMs
				for _, h := range p.Held {
					fn.HeldPoints += h.Points
					fn.HeldRuns = append(fn.HeldRuns, HeldRun{h.FirstSeq, h.LastSeq, h.Points, h.MinTimeMs, h.MaxTimeMs})
				}
				for _, g := range p.Gaps {
					fn.Gaps = append(fn.Gaps, FleetGap{g.AfterSeq, g.ThroughSeq, g.Reason.String(), g.Segments, g.Points, g.MinTimeMs, g.MaxTimeMs})
				}
			}
		}
		f.Nodes = append(f.Nodes, fn)
	}
	return f, nil
}
