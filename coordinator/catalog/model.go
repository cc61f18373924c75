package catalog

import (
	"fmt"
	"math"

	"github.com/tributarydb/tributary/node/labels"
)

// Role is what a node does in the fleet.
type Role uint8

// The roles. Zero is not a role, so that a forgotten field is an error.
const (
	RoleEdge        Role = 1 // a storage node at the edge
	RoleCoordinator Role = 2 // a cloud coordinator (raft member, replica store)
)

func (r Role) String() string {
	switch r {
	case RoleEdge:
		return "edge"
	case RoleCoordinator:
		return "coordinator"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

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
}

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

// Placement says which coordinators hold an edge's replicated data.
type Placement struct {
	Edge string
	// Replicas are coordinator node ids, sorted.
	Replicas []string
	// Epoch is the raft index of the command that last changed Replicas.
	Epoch uint64
	// Pinned placements were set by SetPlacement; rebalancing leaves them
	// alone unless one of their replicas stops being a coordinator.
	Pinned bool
	// From says, for each replica (From[i] is about Replicas[i]), which of
	// the edge's segments it holds: nothing copies an edge's history to a
	// replica placed after the edge's first placement.
	From []ReplicaFrom
}

// ReplicaFrom says which of an edge's segments one replica holds.
type ReplicaFrom struct {
	// FromSeq is the first sequence from which the replica holds every
	// segment the catalog records as held: segments numbered FromSeq and
	// above are on it, those below may not be. 1 means the whole history
	// (a replica of the edge's first placement). A replica placed later
	// starts at one past every sequence recorded (held, in a gap, or the
	// watermark) when it is placed, and moves further when a segment
	// stored on an older placement is recorded after it was placed (see
	// RecordHeld.Epoch).
	FromSeq uint64
	// LacksThroughMs is the newest time of the data the catalog records
	// in segments below FromSeq (math.MinInt64 when there is none, as
	// with FromSeq 1): a reader must not take the replica's answer for
	// times at or before it as complete. It is kept here because held
	// runs merge, which loses the time span of the segments below
	// FromSeq. It counts the watermark time when the replica is placed
	// (data up to it is on the earlier replicas), and the segments
	// numbered below FromSeq recorded later.
	LacksThroughMs int64
	// Index is the raft index of the command that placed the replica; it
	// has been a replica of the edge continuously since. 0 for a replica
	// restored from a snapshot older than version 3, which holds the
	// whole history (FromSeq 1) as those catalogs implied.
	Index uint64
}

// wholeHistory is the ReplicaFrom of a replica that holds every segment.
var wholeHistory = ReplicaFrom{FromSeq: 1, LacksThroughMs: math.MinInt64}

// Covers reports whether the replica holds all the recorded data at time
// t (as far as the catalog knows: t after LacksThroughMs).
func (f ReplicaFrom) Covers(t int64) bool { return t > f.LacksThroughMs }

// FromSeq returns the FromSeq of replica, or 0 if it is not a replica of
// the placement.
func (p Placement) FromSeq(replica string) uint64 {
	for i, r := range p.Replicas {
		if r == replica && i < len(p.From) {
			return p.From[i].FromSeq
		}
	}
	return 0
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

func (r GapReason) String() string {
	switch r {
	case GapBacklogOverflow:
		return "backlog-overflow"
	case GapDropped:
		return "dropped"
	case GapMissing:
		return "missing"
	}
	return fmt.Sprintf("gap-reason(%d)", uint8(r))
}

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
	// MaxSeries bounds the fleet-wide series count; registrations past it
	// are rejected.
	MaxSeries uint64
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
	ReplicationFactor: 2,
	MaxSeries:         10_000_000,
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
