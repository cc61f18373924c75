package catalog

import (
	"fmt"
	"math"

	"github.com/tributarydb/tributary/internal/enum"
	"github.com/tributarydb/tributary/node/labels"
)

// CommandVersion is the version byte that starts every encoded command.
const CommandVersion = 1

// maxDecodedString bounds any string inside a command; the semantic limits
// (node ids, label lengths) are checked when the command is applied, so
// that a bad series is rejected on its own and not with its whole batch.
const maxDecodedString = 64 << 10

// Kind identifies a command.
type Kind uint8

// The command kinds, as encoded.
const (
	KindRegisterNode   Kind = 1
	KindRemoveNode     Kind = 2
	KindHeartbeat      Kind = 3
	KindRegisterSeries Kind = 4
	KindRecordHeld     Kind = 5
	KindSetPlacement   Kind = 6
	KindRebalance      Kind = 7
	KindSetConfig      Kind = 8
	KindRecordGap      Kind = 9
	// KindRecordStored is RecordHeld with its Holders (encoded as its own
	// kind so that kind 5 keeps its layout).
	KindRecordStored     Kind = 10
	KindRecordReplicated Kind = 11
	KindSetNodeState     Kind = 12
	KindSetRevoked       Kind = 13
	KindRecordMissing    Kind = 14
	KindAnnounceSeries   Kind = 15
	KindSetRuleGroup     Kind = 16
	KindDeleteRuleGroup  Kind = 17
	KindRecordBatch      Kind = 18
)

var kindNames = []string{
	KindRegisterNode:     "register-node",
	KindRemoveNode:       "remove-node",
	KindHeartbeat:        "heartbeat",
	KindRegisterSeries:   "register-series",
	KindRecordHeld:       "record-held",
	KindSetPlacement:     "set-placement",
	KindRebalance:        "rebalance",
	KindSetConfig:        "set-config",
	KindRecordGap:        "record-gap",
	KindRecordStored:     "record-stored",
	KindRecordReplicated: "record-replicated",
	KindSetNodeState:     "set-node-state",
	KindSetRevoked:       "set-revoked",
	KindRecordMissing:    "record-missing",
	KindAnnounceSeries:   "announce-series",
	KindSetRuleGroup:     "set-rule-group",
	KindDeleteRuleGroup:  "delete-rule-group",
	KindRecordBatch:      "record-batch",
}

func (k Kind) String() string { return enum.Name(kindNames, k, "kind") }

// Command is one catalog command. Encode it with EncodeCommand and propose
// the bytes; every member applies them with FSM.Apply.
type Command interface {
	Kind() Kind
	appendBody(dst []byte) []byte
}

// RegisterNode registers a node or updates its address, labels and
// heartbeat. The role, the raft id of a coordinator and a non-empty
// identity cannot change. Result: RegisterNodeResult.
type RegisterNode struct {
	ID       string
	Role     Role
	RaftID   uint64 // coordinators only
	Addr     string
	Identity string
	Labels   labels.Labels
	TimeMs   int64 // proposer's clock; becomes the node's heartbeat
	// StoreID is the identity of a coordinator's replica store (see
	// Node.StoreID); "" leaves the bound one as it is. A different one
	// means the member's replica store was replaced: every replica of it
	// then lacks everything (placed again at this index), so that no query
	// reads it for data it does not hold and the healer copies it back.
	// Encoded only when not empty.
	StoreID string
}

// RemoveNode forgets a node. For an edge this drops its placement, held
// ranges and series membership (the series themselves and their ids stay);
// for a coordinator it rebalances placements away from it. Result: nil.
type RemoveNode struct{ ID string }

// Heartbeat records heartbeats of many nodes. Result: HeartbeatResult.
type Heartbeat struct{ Beats []Beat }

// Beat is one node's heartbeat.
type Beat struct {
	ID     string
	TimeMs int64
}

// RegisterSeries registers series seen on an edge and returns their
// fleet-wide ids (existing ids for known series). Invalid series are
// rejected one by one. Result: RegisterSeriesResult.
type RegisterSeries struct {
	Edge   string
	Series []labels.Labels
}

// RecordHeld records segment ranges of an edge that the cloud now holds
// and advances the edge's watermark. Recording a range already held is a
// no-op (replays are idempotent); a range overlapping a held run without
// lying inside it rejects the whole command. Held segments win over gaps:
// the ranges cut the recorded gaps they overlap (a cut gap's counts
// become unknown), and a command that would leave more than MaxGapRuns
// gaps is rejected (ErrLimit). The watermark then moves forward as
// described at EdgeProgress. Result: RecordHeldResult.
type RecordHeld struct {
	Edge   string
	Ranges []HeldRange
	// WatermarkSeq (0: unchanged) must be held or in a recorded gap once
	// Ranges are recorded.
	WatermarkSeq    uint64
	WatermarkTimeMs int64
	// Epoch is the Epoch of the edge's placement whose replicas the
	// segments of Ranges were stored on (0: unknown). A replica placed
	// after that epoch lacks them: its ReplicaFrom.FromSeq moves past
	// them. Unknown is taken as the edge's first placement, so that every
	// replica placed since moves (conservative: the query front end then
	// reads the older data elsewhere). Encoded only when not 0 (kind 5).
	Epoch uint64
	// Holders names the replicas that stored the segments durably. When
	// set, the command is encoded as KindRecordStored: replicas of the
	// placement not named (or placed after Epoch) are recorded as lacking
	// the ranges, and a command none of whose holders is a replica of the
	// edge (active or leaving, placed at or before Epoch) is rejected with
	// ErrStale: nothing in the cloud would hold the segments. Without
	// Holders (kind 5), the replicas placed at or before Epoch are taken
	// to hold them.
	Holders []string
}

// RecordReplicated records that a replica of an edge now holds the given
// sequence runs (copied from another replica, or shipped again by the
// edge): they are cut from its Holding.Lacks. PlacedIndex must equal the
// replica's Holding.Index, so that a command about an earlier placement
// of the same coordinator changes nothing (it is then a no-op, which also
// makes it safe to apply twice). Leaving replicas that no longer hold
// anything an active replica lacks are then dropped. Result:
// RecordReplicatedResult.
type RecordReplicated struct {
	Edge        string
	Replica     string
	PlacedIndex uint64
	Ranges      []SeqRange
}

// RecordMissing records that a replica of an edge lacks the given runs of
// held segments (a scrub found them missing from its store): they are
// added to its Holding.Lacks with the time spans of the held runs they
// meet. Numbers not held are ignored. PlacedIndex binds it to the
// replica's placement as for RecordReplicated. Result:
// RecordReplicatedResult.
type RecordMissing struct {
	Edge        string
	Replica     string
	PlacedIndex uint64
	Ranges      []SeqRange
}

// SeqRange is a run of sequence numbers, first..last inclusive.
type SeqRange struct{ FirstSeq, LastSeq uint64 }

// SetNodeState sets a coordinator's placement state; replicas move as the
// placement rules say. With HeartbeatBeforeMs set, the change applies only
// if the node's newest heartbeat is older than it (a healer marking a
// silent member down loses to a heartbeat that committed meanwhile).
// Result: SetNodeStateResult.
type SetNodeState struct {
	ID                string
	State             NodeState
	HeartbeatBeforeMs int64
}

// SetRevoked revokes an edge (or lifts the revocation): coordinators
// refuse its replication streams and query tunnels; its data, placement
// and progress stay. Result: nil.
type SetRevoked struct {
	ID      string
	Revoked bool
}

// RecordGap records gaps an edge declared: sequence ranges it will not
// ship. The gaps are applied in order, each by these rules:
//
//   - the parts of a gap that are held, or already inside a recorded gap
//     (of any reason), are left as they are: held segments win, and the
//     first declaration of a number wins;
//   - the rest is recorded; if that is not the whole gap (the gap was cut),
//     its pieces keep the reason and the time span but their segment and
//     point counts become unknown (0 and -1);
//   - a gap with nothing left to record is a duplicate (a replay changes
//     nothing);
//   - recorded pieces merge with adjacent gaps of the same reason (counts
//     add up while both are known; the time span widens while both are
//     known, else it becomes unknown).
//
// A gap with ThroughSeq <= AfterSeq, an unknown reason, Points below -1 or
// MinTimeMs after MaxTimeMs rejects the whole command, as does an edge
// that would end up with more than MaxGapRuns gaps (ErrLimit). The
// watermark then moves forward as described at EdgeProgress.
// Result: RecordGapResult.
type RecordGap struct {
	Edge string
	Gaps []GapRange
}

// SetPlacement pins an edge's replicas to the given coordinators.
// Result: Placement.
type SetPlacement struct {
	Edge     string
	Replicas []string
}

// Rebalance recomputes every unpinned placement, with at most MaxMoves
// balancing moves (0: no limit). Result: RebalanceResult.
type Rebalance struct{ MaxMoves uint32 }

// SetConfig replaces the fleet configuration (Version is ignored and set
// to the command's index). Result: FleetConfig.
type SetConfig struct{ Config FleetConfig }

// Kind implements Command.
func (RegisterNode) Kind() Kind { return KindRegisterNode }

// Kind implements Command.
func (RemoveNode) Kind() Kind { return KindRemoveNode }

// Kind implements Command.
func (Heartbeat) Kind() Kind { return KindHeartbeat }

// Kind implements Command.
func (RegisterSeries) Kind() Kind { return KindRegisterSeries }

// Kind implements Command.
func (c RecordHeld) Kind() Kind {
	if c.Holders != nil {
		return KindRecordStored
	}
	return KindRecordHeld
}

// Kind implements Command.
func (RecordReplicated) Kind() Kind { return KindRecordReplicated }

// Kind implements Command.
func (SetNodeState) Kind() Kind { return KindSetNodeState }

// Kind implements Command.
func (RecordMissing) Kind() Kind { return KindRecordMissing }

// Kind implements Command.
func (SetRevoked) Kind() Kind { return KindSetRevoked }

// Kind implements Command.
func (SetPlacement) Kind() Kind { return KindSetPlacement }

// Kind implements Command.
func (Rebalance) Kind() Kind { return KindRebalance }

// Kind implements Command.
func (SetConfig) Kind() Kind { return KindSetConfig }

// Kind implements Command.
func (RecordGap) Kind() Kind { return KindRecordGap }

// EncodeCommand encodes c (see the package documentation for the layout).
func EncodeCommand(c Command) []byte { return AppendCommand(nil, c) }

// AppendCommand appends the encoding of c to dst.
func AppendCommand(dst []byte, c Command) []byte {
	dst = append(dst, CommandVersion, byte(c.Kind()))
	return c.appendBody(dst)
}

func appendLabels(b []byte, ls labels.Labels) []byte {
	return appendList(b, ls, func(b []byte, l labels.Label) []byte {
		return appendString(appendString(b, l.Name), l.Value)
	})
}

func (c RegisterNode) appendBody(b []byte) []byte {
	b = appendString(b, c.ID)
	b = append(b, byte(c.Role))
	b = appendUvarint(b, c.RaftID)
	b = appendString(b, c.Addr)
	b = appendString(b, c.Identity)
	b = appendLabels(b, c.Labels)
	b = appendVarint(b, c.TimeMs)
	if c.StoreID != "" {
		b = appendString(b, c.StoreID)
	}
	return b
}

func (c RemoveNode) appendBody(b []byte) []byte { return appendString(b, c.ID) }

func (c Heartbeat) appendBody(b []byte) []byte {
	return appendList(b, c.Beats, func(b []byte, h Beat) []byte {
		return appendVarint(appendString(b, h.ID), h.TimeMs)
	})
}

func (c RegisterSeries) appendBody(b []byte) []byte {
	b = appendString(b, c.Edge)
	return appendList(b, c.Series, appendLabels)
}

func appendHeldRange(b []byte, r HeldRange) []byte {
	b = appendUvarint(b, r.FirstSeq)
	b = appendUvarint(b, r.LastSeq)
	b = appendUvarint(b, r.Points)
	b = appendVarint(b, r.MinTimeMs)
	return appendVarint(b, r.MaxTimeMs)
}

func (c RecordHeld) appendBody(b []byte) []byte {
	b = appendString(b, c.Edge)
	b = appendUvarint(b, c.WatermarkSeq)
	b = appendVarint(b, c.WatermarkTimeMs)
	b = appendList(b, c.Ranges, appendHeldRange)
	if c.Holders != nil {
		b = appendUvarint(b, c.Epoch)
		return appendList(b, c.Holders, appendString)
	}
	if c.Epoch != 0 {
		b = appendUvarint(b, c.Epoch)
	}
	return b
}

func (c RecordReplicated) appendBody(b []byte) []byte {
	b = appendString(b, c.Edge)
	b = appendString(b, c.Replica)
	b = appendUvarint(b, c.PlacedIndex)
	return appendList(b, c.Ranges, func(b []byte, r SeqRange) []byte {
		return appendUvarint(appendUvarint(b, r.FirstSeq), r.LastSeq)
	})
}

func (c RecordMissing) appendBody(b []byte) []byte {
	return RecordReplicated(c).appendBody(b)
}

func (c SetNodeState) appendBody(b []byte) []byte {
	b = appendString(b, c.ID)
	b = append(b, byte(c.State))
	return appendVarint(b, c.HeartbeatBeforeMs)
}

func (c SetRevoked) appendBody(b []byte) []byte {
	b = appendString(b, c.ID)
	return appendBool(b, c.Revoked)
}

func appendGapRange(b []byte, g GapRange) []byte {
	b = appendUvarint(b, g.AfterSeq)
	b = appendUvarint(b, g.ThroughSeq)
	b = append(b, byte(g.Reason))
	b = appendUvarint(b, g.Segments)
	b = appendVarint(b, g.Points)
	b = appendVarint(b, g.MinTimeMs)
	return appendVarint(b, g.MaxTimeMs)
}

func (c RecordGap) appendBody(b []byte) []byte {
	b = appendString(b, c.Edge)
	return appendList(b, c.Gaps, appendGapRange)
}

func (c SetPlacement) appendBody(b []byte) []byte {
	b = appendString(b, c.Edge)
	return appendList(b, c.Replicas, appendString)
}

func (c Rebalance) appendBody(b []byte) []byte {
	if c.MaxMoves != 0 {
		b = appendUvarint(b, uint64(c.MaxMoves))
	}
	return b
}

func appendConfig(b []byte, c FleetConfig) []byte {
	b = appendVarint(b, c.RetentionRawMs)
	b = appendVarint(b, c.Retention1hMs)
	b = appendVarint(b, c.Retention1dMs)
	b = appendBool(b, c.RollupHourly)
	b = appendBool(b, c.RollupDaily)
	b = appendUvarint(b, c.RateLimitPointsPerSec)
	b = appendUvarint(b, c.RateLimitBurstPoints)
	b = appendUvarint(b, uint64(c.ReplicationFactor))
	return appendUvarint(b, c.MaxSeries)
}

// appendConfigExt appends the configuration fields added after the first
// layout: write quorum and dead-after.
func appendConfigExt(b []byte, c FleetConfig) []byte {
	b = appendUvarint(b, uint64(c.WriteQuorum))
	return appendVarint(b, c.DeadAfterMs)
}

// hasSealPolicy reports whether c sets the seal policy (lag budget or
// minimum points), which config-ext2 carries; without, a configuration
// encodes byte for byte as before it existed.
func (c FleetConfig) hasSealPolicy() bool { return c.LagBudgetMs != 0 || c.MinSegmentPoints != 0 }

// appendConfigExt2 appends the seal policy: lag budget and minimum points
// per segment.
func appendConfigExt2(b []byte, c FleetConfig) []byte {
	b = appendVarint(b, c.LagBudgetMs)
	return appendUvarint(b, c.MinSegmentPoints)
}

func (c SetConfig) appendBody(b []byte) []byte {
	b = appendConfigExt(appendConfig(b, c.Config), c.Config)
	if c.Config.hasSealPolicy() {
		b = appendConfigExt2(b, c.Config)
	}
	return b
}

// DecodeCommand decodes one command. It checks the encoding only (lengths,
// counts, enum values); what the command asks for is checked when it is
// applied. It never panics, and allocates at most a small multiple of
// len(b).
func DecodeCommand(b []byte) (Command, error) {
	d := &decoder{b: b, what: "command"}
	if v := d.byte(); d.err == nil && v != CommandVersion {
		return nil, fmt.Errorf("decode command: version %d, want %d", v, CommandVersion)
	}
	k := Kind(d.byte())
	if d.err != nil {
		return nil, d.err
	}
	if k == 0 || int(k) >= len(kindNames) || kindNames[k] == "" {
		return nil, fmt.Errorf("decode command: unknown kind %d", uint8(k))
	}
	d.what = k.String()
	c := d.body(k)
	if err := d.finish(); err != nil {
		return nil, err
	}
	return c, nil
}

// body reads the body of a command of kind k.
func (d *decoder) body(k Kind) Command {
	var c Command
	switch k {
	case KindRegisterNode:
		c = d.registerNode()
	case KindRemoveNode:
		c = RemoveNode{ID: d.string("node id", maxDecodedString)}
	case KindHeartbeat:
		c = d.heartbeat()
	case KindRegisterSeries:
		c = d.registerSeries()
	case KindRecordHeld, KindRecordStored:
		c = d.recordHeld(k == KindRecordStored)
	case KindRecordReplicated:
		c = d.recordReplicated()
	case KindRecordMissing:
		c = RecordMissing(d.recordReplicated())
	case KindSetNodeState:
		c = SetNodeState{ID: d.string("node id", maxDecodedString), State: NodeState(d.byte()), HeartbeatBeforeMs: d.varint()}
	case KindSetRevoked:
		c = SetRevoked{ID: d.string("node id", maxDecodedString), Revoked: d.bool()}
	case KindSetPlacement:
		c = d.setPlacement()
	case KindRebalance:
		c = d.rebalance()
	case KindSetConfig:
		cfg := d.config()
		if d.err == nil && d.remaining() > 0 {
			d.configExt(&cfg)
		}
		if d.err == nil && d.remaining() > 0 {
			d.configExt2(&cfg)
		}
		c = SetConfig{Config: cfg}
	case KindRecordGap:
		c = d.recordGap()
	case KindAnnounceSeries:
		c = d.announceSeries()
	case KindSetRuleGroup:
		c = d.setRuleGroup()
	case KindDeleteRuleGroup:
		c = DeleteRuleGroup{Name: d.string("rule group name", MaxRuleGroupNameBytes)}
	case KindRecordBatch:
		c = d.recordBatch()
	default:
		d.failf("unknown kind %d", uint8(k))
	}
	return c
}

// The decoders of the commands' bodies: each reads what its command's
// encoder wrote, leaving the first problem in d.err.

func (d *decoder) registerNode() RegisterNode {
	var r RegisterNode
	r.ID = d.string("node id", maxDecodedString)
	r.Role = Role(d.byte())
	r.RaftID = d.uvarint()
	r.Addr = d.string("address", maxDecodedString)
	r.Identity = d.string("identity", maxDecodedString)
	r.Labels = d.labels()
	r.TimeMs = d.varint()
	if d.err == nil && d.remaining() > 0 {
		if r.StoreID = d.string("store id", maxDecodedString); d.err == nil && r.StoreID == "" {
			d.failf("an empty store id is written; it is left out")
		}
	}
	return r
}

func (d *decoder) heartbeat() Heartbeat {
	return Heartbeat{Beats: decodeList(d, "beat", 2, func(d *decoder) Beat {
		return Beat{ID: d.string("node id", maxDecodedString), TimeMs: d.varint()}
	})}
}

func (d *decoder) registerSeries() RegisterSeries {
	var r RegisterSeries
	r.Edge = d.string("edge id", maxDecodedString)
	r.Series = decodeList(d, "series", 1, (*decoder).labels)
	return r
}

// recordHeld reads a RecordHeld, or with stored a RecordStored (which
// carries its epoch and holders where RecordHeld may carry an epoch).
func (d *decoder) recordHeld(stored bool) RecordHeld {
	var r RecordHeld
	r.Edge = d.string("edge id", maxDecodedString)
	r.WatermarkSeq = d.uvarint()
	r.WatermarkTimeMs = d.varint()
	r.Ranges = decodeList(d, "range", 5, (*decoder).heldRange)
	if stored {
		r.Epoch = d.uvarint()
		h := d.count("holder", 1)
		if d.err == nil && h > MaxReplicationFactor*2 {
			d.failf("%d holders, limit is %d", h, MaxReplicationFactor*2)
		}
		r.Holders = make([]string, 0, h)
		for i := 0; i < h && d.err == nil; i++ {
			r.Holders = append(r.Holders, d.string("holder id", maxDecodedString))
		}
	} else if d.err == nil && d.remaining() > 0 {
		if r.Epoch = d.uvarint(); d.err == nil && r.Epoch == 0 {
			d.failf("placement epoch 0 is written; it is left out")
		}
	}
	return r
}

// recordReplicated reads a RecordReplicated or a RecordMissing (the same
// body).
func (d *decoder) recordReplicated() RecordReplicated {
	var r RecordReplicated
	r.Edge = d.string("edge id", maxDecodedString)
	r.Replica = d.string("replica id", maxDecodedString)
	r.PlacedIndex = d.uvarint()
	r.Ranges = decodeList(d, "range", 2, func(d *decoder) SeqRange {
		return SeqRange{FirstSeq: d.uvarint(), LastSeq: d.uvarint()}
	})
	return r
}

func (d *decoder) setPlacement() SetPlacement {
	var r SetPlacement
	r.Edge = d.string("edge id", maxDecodedString)
	r.Replicas = decodeList(d, "replica", 1, func(d *decoder) string { return d.string("replica id", maxDecodedString) })
	return r
}

func (d *decoder) rebalance() Rebalance {
	var r Rebalance
	if d.remaining() > 0 {
		m := d.uvarint()
		switch {
		case d.err == nil && m == 0:
			d.failf("max moves 0 is written; it is left out")
		case m > math.MaxUint32:
			d.failf("max moves %d is more than %d", m, uint64(math.MaxUint32))
		}
		r.MaxMoves = uint32(m)
	}
	return r
}

func (d *decoder) recordGap() RecordGap {
	var r RecordGap
	r.Edge = d.string("edge id", maxDecodedString)
	r.Gaps = decodeList(d, "gap", 7, (*decoder).gapRange)
	return r
}

// labels reads a label list as encoded (not validated, not sorted).
func (d *decoder) labels() labels.Labels {
	n := d.count("label", 2)
	if n == 0 {
		return nil
	}
	ls := make(labels.Labels, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		name := d.string("label name", maxDecodedString)
		value := d.string("label value", maxDecodedString)
		ls = append(ls, labels.Label{Name: name, Value: value})
	}
	return ls
}

func (d *decoder) heldRange() HeldRange {
	return HeldRange{
		FirstSeq:  d.uvarint(),
		LastSeq:   d.uvarint(),
		Points:    d.uvarint(),
		MinTimeMs: d.varint(),
		MaxTimeMs: d.varint(),
	}
}

func (d *decoder) gapRange() GapRange {
	return GapRange{
		AfterSeq:   d.uvarint(),
		ThroughSeq: d.uvarint(),
		Reason:     GapReason(d.byte()),
		Segments:   d.uvarint(),
		Points:     d.varint(),
		MinTimeMs:  d.varint(),
		MaxTimeMs:  d.varint(),
	}
}

func (d *decoder) config() FleetConfig {
	var c FleetConfig
	c.RetentionRawMs = d.varint()
	c.Retention1hMs = d.varint()
	c.Retention1dMs = d.varint()
	c.RollupHourly = d.bool()
	c.RollupDaily = d.bool()
	c.RateLimitPointsPerSec = d.uvarint()
	c.RateLimitBurstPoints = d.uvarint()
	rf := d.uvarint()
	if rf > MaxReplicationFactor && d.err == nil {
		d.failf("replication factor %d is more than %d", rf, MaxReplicationFactor)
	}
	c.ReplicationFactor = uint32(rf)
	c.MaxSeries = d.uvarint()
	return c
}

// configExt2 reads the fields appendConfigExt2 writes.
func (d *decoder) configExt2(c *FleetConfig) {
	c.LagBudgetMs = d.varint()
	c.MinSegmentPoints = d.uvarint()
}

// configExt reads the fields appendConfigExt writes.
func (d *decoder) configExt(c *FleetConfig) {
	w := d.uvarint()
	if w > MaxReplicationFactor && d.err == nil {
		d.failf("write quorum %d is more than %d", w, MaxReplicationFactor)
	}
	c.WriteQuorum = uint32(w)
	c.DeadAfterMs = d.varint()
}
