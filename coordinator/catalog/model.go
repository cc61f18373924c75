package catalog

import (
	"fmt"

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
}

// HeldRange is a run of an edge's segment sequence numbers that the cloud
// holds durably, with the number of points and the time span they carry.
type HeldRange struct {
	FirstSeq, LastSeq    uint64 // inclusive, FirstSeq >= 1
	Points               uint64
	MinTimeMs, MaxTimeMs int64
}

// EdgeProgress is what the cloud holds of one edge.
type EdgeProgress struct {
	Edge string
	// WatermarkSeq is the highest sequence the cloud acknowledges as held
	// for the edge's replicas; it never goes back. WatermarkTimeMs is the
	// newest time that sequence covers.
	WatermarkSeq    uint64
	WatermarkTimeMs int64
	// Held lists the held runs, sorted, disjoint and not adjacent (adjacent
	// runs are merged, summing points). Gaps between runs are segments the
	// cloud does not hold.
	Held []HeldRange
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
