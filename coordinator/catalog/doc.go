// Package catalog is the fleet's series catalog: the deterministic state
// machine that the coordinators replicate with raft.
//
// It holds the registered nodes (edges and coordinators: id, role, labels,
// advertised address, certificate identity, last heartbeat), the raft
// members, every series of the fleet with its fleet-wide id and label
// postings, which edges registered which series, the placement of each
// edge's data on coordinators, what the cloud holds of each edge (held
// segment ranges with point counts, the gaps the edge declared, and the
// watermark), and the fleet
// configuration edges pull (retention, rollups, rate limits, replication
// factor, series limit).
//
// # Determinism
//
// Every member applies the same commands at the same raft indexes, so
// every member must reach the same state, byte for byte: Snapshot of two
// catalogs at the same applied index is identical. To keep it so:
//
//   - The state changes only in Apply, ApplyMembership and Restore, and
//     only from their arguments: no clock, no randomness, no
//     configuration outside the replicated state (limits that could differ
//     between members are constants of this package or fields of
//     FleetConfig). Times (heartbeats) come inside commands.
//   - Every choice iterates in sorted order and breaks ties by id
//     (placement), and ids are assigned by counting (series ids are dense,
//     from 1, never reused).
//   - Snapshot writes maps in sorted key order and writes nothing derived.
//   - A bad command is a result, not a panic: Apply returns a
//     *CommandError and changes nothing but the applied index, on every
//     member alike.
//
// # Concurrency
//
// One goroutine (the raft apply loop) calls Apply, ApplyCommand,
// ApplyMembership and Restore. Any number of goroutines may call the read
// methods (Select, Lookup, Nodes, Placement, Progress, ...) and Snapshot
// concurrently; they see the state between two commands.
//
// # Command encoding (version 1)
//
// A raft entry carries commands encoded by EncodeCommand. All integers are
// unsigned LEB128 varints (uvarint) or zig-zag varints (varint, for
// times, which may be negative); a string is uvarint(len) then the bytes;
// a bool is one byte, 0 or 1; labels are uvarint(count) then count
// (string name, string value) pairs.
//
//	command        = version:u8(1) kind:u8 body
//	register-node  (1) = string id, u8 role (1 edge, 2 coordinator), uvarint raftID,
//	                     string addr, string identity, labels, varint timeMs
//	remove-node    (2) = string id
//	heartbeat      (3) = uvarint n, n × (string id, varint timeMs)
//	register-series(4) = string edge, uvarint n, n × labels
//	record-held    (5) = string edge, uvarint watermarkSeq, varint watermarkTimeMs,
//	                     uvarint n, n × range [, uvarint epoch (> 0; left out when 0)]
//	set-placement  (6) = string edge, uvarint n, n × string coordinator id
//	rebalance      (7) = (empty)
//	set-config     (8) = config
//	record-gap     (9) = string edge, uvarint n, n × gap
//	range          = uvarint firstSeq, uvarint lastSeq, uvarint points,
//	                 varint minTimeMs, varint maxTimeMs
//	gap            = uvarint afterSeq, uvarint throughSeq, u8 reason
//	                 (1 backlog-overflow, 2 dropped, 3 missing), uvarint segments,
//	                 varint points, varint minTimeMs, varint maxTimeMs
//	config         = varint retentionRawMs, varint retention1hMs, varint retention1dMs,
//	                 bool rollupHourly, bool rollupDaily, uvarint rateLimitPointsPerSec,
//	                 uvarint rateLimitBurstPoints, uvarint replicationFactor, uvarint maxSeries
//
// DecodeCommand checks the encoding only: version, kind, lengths that fit,
// counts that the remaining bytes can hold (so a hostile count cannot make
// it allocate), no trailing bytes. Apply then checks meaning: node ids are
// 1..128 bytes of [A-Za-z0-9._:-]; series labels follow node/labels rules
// and DefaultLimits (an invalid series is rejected on its own, the rest of
// its batch is registered); ranges have 1 <= first <= last and
// minTime <= maxTime; gaps have after < through, a known reason,
// points >= -1 and minTime <= maxTime.
//
// # Progress: held runs, gaps, watermark
//
// An edge's segment covers sequence numbers prevSeq+1..seq; a gap the edge
// declares covers afterSeq+1..throughSeq. Held segments win over gaps: a
// RecordGap records only the numbers neither held nor already in a gap
// (the first declaration wins), and a RecordHeld cuts the gaps it
// overlaps; a gap that loses numbers keeps its reason and time span, and
// its counts become unknown (segments 0, points -1). Adjacent gaps of one
// reason merge. AckedThrough is the highest S with every number of 1..S
// held or in a gap. After every RecordHeld and RecordGap the watermark
// moves forward on its own to AckedThrough (sequence) and to the newest
// MaxTimeMs of the held runs within 1..AckedThrough (time); RecordHeld may
// also move it further, to a sequence held or in a gap.
//
// # Replicas placed late: ReplicaFrom
//
// Nothing copies an edge's history to a coordinator that joins its
// placement later (rebalancing, SetPlacement, the replacement of a
// departed coordinator): it receives only segments stored after the
// change. Placement.From[i] says which segments Replicas[i] holds: every
// held segment numbered FromSeq or above; below, nothing is promised.
//
//   - A replica of the edge's first placement (or one placed while
//     nothing was recorded) has FromSeq 1: the whole history.
//   - A replica added later has FromSeq one past every sequence recorded
//     at that command's index: the highest held sequence, gap end or
//     watermark, whichever is highest. Not AckedThrough+1: held runs above
//     AckedThrough (segments acknowledged out of order) were stored on the
//     earlier replicas only. Index is that command's raft index.
//   - The intake stores a segment on every replica of the placement it
//     read (from a local, possibly stale, catalog) and records it later,
//     so a segment stored on the old replicas may be recorded after the
//     change, numbered above FromSeq. RecordHeld therefore carries Epoch,
//     the epoch of the placement the segments were stored on, and every
//     replica placed after that epoch (Index > Epoch) has its FromSeq moved
//     past the command's highest sequence. A replica placed at or before
//     the epoch, and still placed, has been placed continuously since and
//     received the segment. Epoch 0 (unknown) is taken as the edge's
//     first placement (its registration index): every replica placed
//     since moves (conservative). An epoch newer than the placement's is
//     treated as unknown.
//   - FromSeq never goes back, and a replica removed and placed again
//     starts over.
//   - LacksThroughMs is the newest time of the data below FromSeq: when
//     the replica is placed, the newest MaxTimeMs of the held runs and the
//     watermark time (math.MinInt64 with nothing held); then raised by
//     every recorded range numbered below FromSeq. Readers take the
//     replica as complete only for times after it (held runs merge, so
//     the runs themselves no longer tell the time span below FromSeq).
//
// Check verifies: one ReplicaFrom per replica, 1 <= FromSeq <= one past
// the highest sequence recorded, LacksThroughMs math.MinInt64 when
// FromSeq is 1, Index <= the placement's Epoch.
//
// # Snapshot encoding (version 3)
//
//	+-------+---------+------------------+-----------+-----+-----------+--------+
//	| magic | version | uvarint applied  | section 1 | ... | section 7 | crc32c |
//	| TCAT  |  u8 (3) |                  |           |     |           | u32 LE |
//	+-------+---------+------------------+-----------+-----+-----------+--------+
//
// The CRC-32C (Castagnoli) covers every byte before it. Each section is
// tag:u8, uvarint(length), body; the seven sections always appear, in tag
// order:
//
//	1 config      config (as above), uvarint version
//	2 members     uvarint n, n × (uvarint raftID, bool learner, string addr)     sorted by raftID
//	3 nodes       uvarint n, n × (string id, u8 role, uvarint raftID, string addr,
//	              string identity, labels, uvarint registeredIndex,
//	              varint lastHeartbeatMs)                                        sorted by id
//	4 series      uvarint n, n × string key      series id i+1 is the i-th key; key is the
//	                                             canonical labels encoding of node/labels
//	5 edge series uvarint n, n × (string edge, uvarint k, k × uvarint delta)     sorted by edge;
//	                                             ids are running sums of the deltas (> 0)
//	6 placements  uvarint n, n × (string edge, uvarint epoch, bool pinned,
//	              uvarint k, k × (string coordinator, uvarint fromSeq,
//	              varint lacksThroughMs, uvarint placedIndex))                   sorted by edge
//	7 progress    uvarint n, n × (string edge, uvarint watermarkSeq,
//	              varint watermarkTimeMs, uvarint k, k × range,
//	              uvarint g, g × gap)                                            sorted by edge
//
// Restore also reads version 2, which is version 3 with placements listing
// only coordinator ids: every replica is read as holding the whole
// history (FromSeq 1, LacksThroughMs math.MinInt64, Index 0), which is
// what those catalogs implied; and
// version 1, which is version 2 without the gap lists (every edge has no
// gaps). Snapshot always writes version 3.
//
// Postings and coordinator loads are derived and rebuilt by Restore.
// Restore checks the checksum, the encoding, canonical forms and every
// invariant Check verifies before it replaces anything, and wraps
// ErrCorruptSnapshot on failure.
package catalog
