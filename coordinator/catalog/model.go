package catalog

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/tributarydb/tributary/internal/enum"
	"github.com/tributarydb/tributary/node/labels"
)

// Role is what a node does in the fleet.
type Role uint8

// The roles. Zero is not a role, so that a forgotten field is an error.
const (
	RoleEdge        Role = 1 // a storage node at the edge
	RoleCoordinator Role = 2 // a cloud coordinator (raft member, replica store)
)

var roleNames = []string{
	RoleEdge:        "edge",
	RoleCoordinator: "coordinator",
}

func (r Role) String() string { return enum.Name(roleNames, r, "role") }

func (r Role) valid() bool { return r == RoleEdge || r == RoleCoordinator }

// Node is one registered node. Values returned by the read API are copies;
// Labels is shared and must not be modified.
type Node struct {
	ID   string // fleet-unique, [A-Za-z0-9._:-], at most MaxIDBytes
	Role Role
	// RaftID is a coordinator's raft member id (0 for edges). A
	// coordinator holds replicas only while RaftID is a raft member.
	RaftID uint64
	// Addr is the address the node advertises (gRPC host:port).
	Addr string
	// Identity is the identity from the node's client certificate. Once
	// set it cannot change: re-keying a node means removing it first.
	Identity string
	Labels   labels.Labels
	// RegisteredIndex is the raft index of the command that first
	// registered the node.
	RegisteredIndex uint64
	// LastHeartbeatMs is the newest heartbeat time seen, in Unix
	// milliseconds of the proposer's clock; it never goes back. Health
	// is judged by readers against their own clock.
	LastHeartbeatMs int64
	// StoreID is the identity of a coordinator's data directory, bound
	// when it registers: a member whose directory carries another
	// identity (an empty or foreign disk) is not the member the catalog
	// placed data on. Empty for edges and for coordinators registered
	// before store identities existed.
	StoreID string
	// State is a coordinator's standing for placement (edges: always
	// NodeActive); StateIndex the raft index of the command that set it.
	State      NodeState
	StateIndex uint64
	// Revoked edges are refused by every coordinator's intake and query
	// tunnel (their data stays).
	Revoked bool
}

// NodeState is a coordinator's standing for placement.
type NodeState uint8

// The node states.
const (
	// NodeActive coordinators hold replicas.
	NodeActive NodeState = 0
	// NodeDraining coordinators are being emptied by an operator: they
	// take no new replicas, and theirs are moved away, each kept until its
	// history is copied (make before break).
	NodeDraining NodeState = 1
	// NodeDown coordinators have not answered for the fleet's dead-after;
	// their replicas are moved away as for draining.
	NodeDown NodeState = 2
)

var nodeStateNames = []string{
	NodeActive:   "active",
	NodeDraining: "draining",
	NodeDown:     "down",
}

func (s NodeState) String() string { return enum.Name(nodeStateNames, s, "state") }

func (s NodeState) valid() bool { return s <= NodeDown }

// Member is a raft member as the catalog learns it from configuration
// changes.
type Member struct {
	RaftID  uint64
	Learner bool
	// Addr is the raft address carried by the configuration change that
	// added the member ("" if none was given).
	Addr string
}

// Membership is the raft configuration after a configuration change, as
// handed to ApplyMembership.
type Membership struct {
	Voters   []uint64 // voters (incoming and outgoing, in a joint configuration)
	Learners []uint64 // learners, including those to be added on leaving a joint configuration
	// Addrs are addresses carried by the change; members not listed keep
	// the address they had.
	Addrs []MemberAddr
}

// MemberAddr names the raft address of a member.
type MemberAddr struct {
	RaftID uint64
	Addr   string
}

// SeriesRef is a series and its fleet-wide id. Labels is shared with the
// catalog and must not be modified.
type SeriesRef struct {
	ID     uint64
	Labels labels.Labels
}

// Placement says which coordinators hold an edge's replicated data and,
// per replica, exactly which of the edge's held segments it lacks.
type Placement struct {
	Edge string
	// Replicas are the active replicas' coordinator node ids, sorted: the
	// intake stores new segments on them.
	Replicas []string
	// Holdings[i] says what Replicas[i] holds.
	Holdings []Holding
	// Leaving lists replicas being replaced (rebalanced away, trimmed, or
	// on a coordinator that is down or draining), sorted by id. They
	// receive no new segments, are still read for what they hold, and are
	// dropped once no active replica lacks a segment they hold (make
	// before break), or when their coordinator leaves the cluster.
	Leaving []LeavingReplica
	// Epoch is the raft index of the command that last changed Replicas
	// or Leaving.
	Epoch uint64
	// Pinned placements were set by SetPlacement; rebalancing leaves them
	// alone unless one of their replicas stops being eligible.
	Pinned bool
}

// Holding says which of an edge's held segments one replica holds: every
// held segment except those in Lacks.
type Holding struct {
	// Lacks lists the sequence runs the replica may lack, sorted and
	// disjoint (runs may touch), each with the time span of its data; at
	// most MaxLackRuns (more are merged, which only widens what the
	// replica is taken to lack). Numbers in a run that the catalog does
	// not record as held mean nothing.
	Lacks []LackRange
	// Index is the raft index of the command that placed the replica; it
	// has been a replica (active or leaving) of the edge continuously
	// since. 0 for a replica restored from a snapshot older than version
	// 3.
	Index uint64
}

// LeavingReplica is a replica being replaced.
type LeavingReplica struct {
	ID string
	Holding
}

// LackRange is a run of sequence numbers a replica may lack, with the
// time span of the data of the held segments among them (MinTimeMs may be
// math.MinInt64 when the lower bound is unknown).
type LackRange struct {
	FirstSeq, LastSeq    uint64
	MinTimeMs, MaxTimeMs int64
}

// Covers reports whether the replica holds all the recorded data with
// times in [lo, hi]: no run it lacks has data in that span.
func (h Holding) Covers(lo, hi int64) bool {
	for _, l := range h.Lacks {
		if l.MinTimeMs <= hi && l.MaxTimeMs >= lo {
			return false
		}
	}
	return true
}

// LacksTimes returns the time span of everything the replica lacks
// (ok false when it lacks nothing).
func (h Holding) LacksTimes() (lo, hi int64, ok bool) {
	if len(h.Lacks) == 0 {
		return 0, 0, false
	}
	lo, hi = math.MaxInt64, math.MinInt64
	for _, l := range h.Lacks {
		lo, hi = min(lo, l.MinTimeMs), max(hi, l.MaxTimeMs)
	}
	return lo, hi, true
}

// LacksAny reports whether the replica may lack a segment in first..last.
func (h Holding) LacksAny(first, last uint64) bool {
	i, _ := slices.BinarySearchFunc(h.Lacks, first, func(l LackRange, seq uint64) int { return cmp.Compare(l.LastSeq, seq) })
	return i < len(h.Lacks) && h.Lacks[i].FirstSeq <= last
}

// HoldingOf returns the holding of replica, active or leaving; ok is false
// when it is neither.
func (p Placement) HoldingOf(replica string) (h Holding, leaving, ok bool) {
	if i, found := slices.BinarySearch(p.Replicas, replica); found && i < len(p.Holdings) {
		return p.Holdings[i], false, true
	}
	for _, l := range p.Leaving {
		if l.ID == replica {
			return l.Holding, true, true
		}
	}
	return Holding{}, false, false
}

// All returns the active replicas, then the leaving ones.
func (p Placement) All() []string {
	out := slices.Clone(p.Replicas)
	for _, l := range p.Leaving {
		out = append(out, l.ID)
	}
	return out
}

// HeldRange is a run of an edge's segment sequence numbers that the cloud
// holds durably, with the number of points and the time span they carry.
type HeldRange struct {
	FirstSeq, LastSeq    uint64 // inclusive, FirstSeq >= 1
	Points               uint64
	MinTimeMs, MaxTimeMs int64
}

// GapReason says why an edge will not ship a range of segments. The
// numbers are those of the GapReason enum of the replication protocol.
type GapReason uint8

// The gap reasons. Zero is not a reason.
const (
	// GapBacklogOverflow: released under the edge's disk budget; the points
	// stay in the edge's local store, for a backfill.
	GapBacklogOverflow GapReason = 1
	// GapDropped: released and not to be replicated.
	GapDropped GapReason = 2
	// GapMissing: no longer on the edge's disk (deleted or damaged).
	GapMissing GapReason = 3
)

var gapReasonNames = []string{
	GapBacklogOverflow: "backlog-overflow",
	GapDropped:         "dropped",
	GapMissing:         "missing",
}

func (r GapReason) String() string { return enum.Name(gapReasonNames, r, "gap-reason") }

func (r GapReason) valid() bool { return r >= GapBacklogOverflow && r <= GapMissing }

// GapRange is a run of an edge's sequence numbers that the edge declared
// it will not ship: it covers AfterSeq+1..ThroughSeq (ThroughSeq >
// AfterSeq). Segments is 0 and Points -1 when unknown; MinTimeMs and
// MaxTimeMs are both 0 when the time span is unknown.
type GapRange struct {
	AfterSeq, ThroughSeq uint64
	Reason               GapReason
	Segments             uint64
	Points               int64
	MinTimeMs, MaxTimeMs int64
}

// EdgeProgress is what the cloud holds of one edge.
type EdgeProgress struct {
	Edge string
	// WatermarkSeq is the highest sequence the cloud acknowledges for the
	// edge's replicas; it never goes back, and it is a sequence that is
	// held or inside a recorded gap. WatermarkTimeMs never goes back
	// either. Together they mean: the edge's data with a time at or
	// before WatermarkTimeMs is on the replicas, except the data inside
	// recorded gaps.
	//
	// After every RecordHeld and RecordGap the watermark moves forward on
	// its own: WatermarkSeq to AckedThrough() when that is further, and
	// WatermarkTimeMs to the newest MaxTimeMs of the held runs within
	// 1..AckedThrough() when that is newer. RecordHeld may also move it
	// explicitly.
	WatermarkSeq    uint64
	WatermarkTimeMs int64
	// Held lists the held runs, sorted, disjoint and not adjacent (adjacent
	// runs are merged, summing points). Numbers between runs are in
	// recorded gaps, or not accounted for yet.
	Held []HeldRange
	// Gaps lists the recorded gaps, sorted, disjoint, overlapping no held
	// run, with adjacent gaps of the same reason merged. Held segments win:
	// a held run recorded later cuts the gaps it overlaps.
	Gaps []GapRange
}

// AckedThrough returns the highest S such that every sequence number in
// 1..S is held or inside a recorded gap, or 0 if 1 is neither.
func (p EdgeProgress) AckedThrough() uint64 {
	var cur uint64
	i, j := 0, 0
	for cur < math.MaxUint64 {
		for i < len(p.Held) && p.Held[i].LastSeq <= cur {
			i++
		}
		for j < len(p.Gaps) && p.Gaps[j].ThroughSeq <= cur {
			j++
		}
		switch {
		case i < len(p.Held) && p.Held[i].FirstSeq <= cur+1:
			cur = p.Held[i].LastSeq
		case j < len(p.Gaps) && p.Gaps[j].AfterSeq <= cur:
			cur = p.Gaps[j].ThroughSeq
		default:
			return cur
		}
	}
	return cur
}

// FleetConfig is the configuration every edge pulls from the cloud.
type FleetConfig struct {
	// Retention per tier, milliseconds.
	RetentionRawMs int64
	Retention1hMs  int64
	Retention1dMs  int64
	// Which rollup tiers edges compute.
	RollupHourly bool
	RollupDaily  bool
	// RateLimitPointsPerSec bounds each edge's ingest (0: unlimited);
	// RateLimitBurstPoints is the token-bucket burst.
	RateLimitPointsPerSec uint64
	RateLimitBurstPoints  uint64
	// ReplicationFactor is the number of coordinators holding each
	// edge's data (fewer when fewer coordinators exist), 1..MaxReplicationFactor.
	ReplicationFactor uint32
	// WriteQuorum is the number of replicas that must hold a segment
	// durably before it is acknowledged to the edge (0: automatic,
	// max(1, replicas-1)); never more than the replicas an edge has.
	WriteQuorum uint32
	// DeadAfterMs is how long a coordinator may go without a heartbeat
	// before it is marked down and its replicas move (0: the default).
	DeadAfterMs int64
	// MaxSeries bounds the fleet-wide series count; registrations past it
	// are rejected.
	MaxSeries uint64
	// LagBudgetMs is how long a point may wait on an edge before its WAL
	// segment is sealed and shipped: the edges' segment age (0: the
	// default, DefaultLagBudgetMs; else MinLagBudgetMs..MaxLagBudgetMs).
	LagBudgetMs int64
	// MinSegmentPoints holds a segment that is LagBudgetMs old but holds
	// fewer points for more, up to four times the lag budget (0: none;
	// at most MaxMinSegmentPoints).
	MinSegmentPoints uint64
	// Version is the raft index of the SetConfig that set this
	// configuration (0 for the defaults).
	Version uint64
}

const day = 24 * 3600 * 1000

// DefaultConfig is the configuration of a new catalog.
var DefaultConfig = FleetConfig{
	RetentionRawMs:    15 * day,
	Retention1hMs:     2 * 365 * day,
	Retention1dMs:     10 * 365 * day,
	RollupHourly:      true,
	RollupDaily:       true,
	ReplicationFactor: 3,
	MaxSeries:         10_000_000,
	DeadAfterMs:       DefaultDeadAfterMs,
}

// DefaultDeadAfterMs is FleetConfig.DeadAfterMs when not set: 5 minutes.
const DefaultDeadAfterMs = 5 * 60 * 1000

// The lag budget's default and bounds (FleetConfig.LagBudgetMs), and the
// bound of FleetConfig.MinSegmentPoints. DefaultLagBudgetMs equals the
// node's default segment age (node.DefaultWALSegmentAge), so an edge
// seals alike whether or not an operator ever set the fleet's
// configuration.
const (
	DefaultLagBudgetMs  = 30 * 1000
	MinLagBudgetMs      = 1000
	MaxLagBudgetMs      = 3600 * 1000
	MaxMinSegmentPoints = 10_000_000
)

// LagBudget returns LagBudgetMs, or the default when it is not set.
func (c FleetConfig) LagBudget() int64 {
	if c.LagBudgetMs == 0 {
		return DefaultLagBudgetMs
	}
	return c.LagBudgetMs
}

// Quorum returns the write quorum for an edge with replicas active
// replicas: WriteQuorum when set (at most replicas), else
// max(1, replicas-1); at least 1.
func (c FleetConfig) Quorum(replicas int) int {
	if replicas < 1 {
		return 1
	}
	if c.WriteQuorum > 0 {
		return min(int(c.WriteQuorum), replicas)
	}
	return max(1, replicas-1)
}

// DeadAfter returns DeadAfterMs, or the default when it is not set.
func (c FleetConfig) DeadAfter() int64 {
	if c.DeadAfterMs <= 0 {
		return DefaultDeadAfterMs
	}
	return c.DeadAfterMs
}

func (c FleetConfig) validate() error {
	switch {
	case c.RetentionRawMs <= 0 || c.Retention1hMs <= 0 || c.Retention1dMs <= 0:
		return fmt.Errorf("retention must be positive (raw %d ms, 1h %d ms, 1d %d ms)", c.RetentionRawMs, c.Retention1hMs, c.Retention1dMs)
	case c.ReplicationFactor < 1 || c.ReplicationFactor > MaxReplicationFactor:
		return fmt.Errorf("replication factor %d is outside 1..%d", c.ReplicationFactor, MaxReplicationFactor)
	case c.MaxSeries < 1:
		return fmt.Errorf("max series must be at least 1")
	case c.RateLimitPointsPerSec == 0 && c.RateLimitBurstPoints != 0:
		return fmt.Errorf("rate limit burst %d without a rate", c.RateLimitBurstPoints)
	case c.WriteQuorum > c.ReplicationFactor:
		return fmt.Errorf("write quorum %d is more than the replication factor %d", c.WriteQuorum, c.ReplicationFactor)
	case c.DeadAfterMs < 0:
		return fmt.Errorf("dead-after %d ms is negative", c.DeadAfterMs)
	case c.DeadAfterMs > 0 && c.DeadAfterMs < 1000:
		return fmt.Errorf("dead-after %d ms is under a second", c.DeadAfterMs)
	case c.LagBudgetMs != 0 && (c.LagBudgetMs < MinLagBudgetMs || c.LagBudgetMs > MaxLagBudgetMs):
		return fmt.Errorf("lag budget %d ms is outside 1s..1h (0: the default, %ds)", c.LagBudgetMs, DefaultLagBudgetMs/1000)
	case c.MinSegmentPoints > MaxMinSegmentPoints:
		return fmt.Errorf("min segment points %d is more than %d", c.MinSegmentPoints, MaxMinSegmentPoints)
	}
	return nil
}

// validNodeID accepts 1..MaxIDBytes of [A-Za-z0-9._:-].
func validNodeID(id string) error {
	if id == "" {
		return fmt.Errorf("empty node id")
	}
	if len(id) > MaxIDBytes {
		return fmt.Errorf("node id %.32q... is %d bytes, limit is %d", id, len(id), MaxIDBytes)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("node id %q: character %q at %d is not allowed", id, c, i)
		}
	}
	return nil
}
