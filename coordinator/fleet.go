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
	// SecondsSinceHeartbeat is judged against the answering coordinator's clock.
	SecondsSinceHeartbeat float64 `json:"seconds_since_heartbeat"`

	Replicas        []string   `json:"replicas,omitempty"`
	Series          int        `json:"series,omitempty"`
	AckedThrough    uint64     `json:"acked_through,omitempty"`
	WatermarkSeq    uint64     `json:"watermark_seq,omitempty"`
	WatermarkTimeMs int64      `json:"watermark_time_ms,omitempty"`
	HeldPoints      uint64     `json:"held_points,omitempty"`
	HeldRuns        []HeldRun  `json:"held,omitempty"`
	Gaps            []FleetGap `json:"gaps,omitempty"`

	// ReplicaFromSeq says, per replica, the first sequence from which it
	// holds every held segment (1: the whole history; a replica placed
	// after the edge's first placement was not given the older ones).
	ReplicaFromSeq map[string]uint64 `json:"replica_from_seq,omitempty"`
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
			LastHeartbeatMs: n.LastHeartbeatMs, SecondsSinceHeartbeat: float64(now-n.LastHeartbeatMs) / 1000}
		if n.Role == catalog.RoleEdge {
			if p, ok := c.fsm.Placement(n.ID); ok {
				fn.Replicas = p.Replicas
				for _, r := range p.Replicas {
					if fn.ReplicaFromSeq == nil {
						fn.ReplicaFromSeq = map[string]uint64{}
					}
					fn.ReplicaFromSeq[r] = p.FromSeq(r)
				}
			}
			fn.Series = len(c.fsm.EdgeSeries(n.ID))
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
