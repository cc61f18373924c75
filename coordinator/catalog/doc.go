// Package catalog is the fleet's series catalog: the deterministic state
// machine that the coordinators replicate with raft.
//
// It holds the registered nodes (edges and coordinators: id, role, labels,
// advertised address, certificate identity, last heartbeat; for
// coordinators the identity of their data directory and their placement
// state; for edges whether they are revoked), the raft members, every
// series of the fleet with its fleet-wide id and label postings, which
// edges registered which series, the placement of each edge's data on
// coordinators with, per replica, the segments it lacks, what the cloud
// holds of each edge (held segment ranges with point counts, the gaps the
// edge declared, and the watermark), and the fleet configuration edges
// pull (retention, rollups, rate limits, replication factor, write quorum,
// dead-after, series limit), and the fleet's rule groups, which edges
// evaluate when their labels match a group's selector.
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
// # Memory
//
// Series dominate the catalog's memory, so a series is kept once, in one
// form: its labels, packed with those of other series into 2 MiB chunks
// (an 8-byte reference per series, no allocation of its own), their
// names and values shared with every other series that has them (the
// strings of the postings). A series is found by the hash of its
// canonical key (labels.AppendKey), which is not stored: the few series
// whose hash an earlier one took are kept by key beside it. The postings
// list, per label name and value, the ids of the series with it. The
// snapshot writes each series' canonical key, computed as it writes. With
// 100 series per edge and 3 labels a series (docs/benchmarks.md, "Catalog
// at scale") the catalog holds about 180–190 bytes a series, built by
// commands or restored.
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
//	                     [, string storeID (non-empty; left out when empty)]
//	remove-node    (2) = string id
//	heartbeat      (3) = uvarint n, n × (string id, varint timeMs)
//	register-series(4) = string edge, uvarint n, n × labels
//	record-held    (5) = string edge, uvarint watermarkSeq, varint watermarkTimeMs,
//	                     uvarint n, n × range [, uvarint epoch (> 0; left out when 0)]
//	set-placement  (6) = string edge, uvarint n, n × string coordinator id
//	rebalance      (7) = [uvarint maxMoves (> 0; left out when 0)]
//	set-config     (8) = config [, config-ext [, config-ext2]]
//	record-gap     (9) = string edge, uvarint n, n × gap
//	record-stored (10) = string edge, uvarint watermarkSeq, varint watermarkTimeMs,
//	                     uvarint n, n × range, uvarint epoch, uvarint h, h × string holder
//	record-replicated (11) = string edge, string replica, uvarint placedIndex,
//	                     uvarint n, n × (uvarint firstSeq, uvarint lastSeq)
//	set-node-state (12) = string id, u8 state (0 active, 1 draining, 2 down),
//	                     varint heartbeatBeforeMs
//	set-revoked   (13) = string id, bool revoked
//	record-missing(14) = as record-replicated
//	announce-series (15) = uvarint n, n × (string edge, varint throughMs, uvarint k, k × labels)
//	set-rule-group (16) = string name, string selector, string yaml
//	delete-rule-group (17) = string name
//	record-batch  (18) = uvarint n (1..MaxBatchRecords), n × record
//	record         = u8 kind (4, 5, 9, 10 or 11), uvarint len, len bytes: the body of
//	                 a command of that kind, which must decode to its last byte
//	range          = uvarint firstSeq, uvarint lastSeq, uvarint points,
//	                 varint minTimeMs, varint maxTimeMs
//	gap            = uvarint afterSeq, uvarint throughSeq, u8 reason
//	                 (1 backlog-overflow, 2 dropped, 3 missing), uvarint segments,
//	                 varint points, varint minTimeMs, varint maxTimeMs
//	config         = varint retentionRawMs, varint retention1hMs, varint retention1dMs,
//	                 bool rollupHourly, bool rollupDaily, uvarint rateLimitPointsPerSec,
//	                 uvarint rateLimitBurstPoints, uvarint replicationFactor, uvarint maxSeries
//	config-ext     = uvarint writeQuorum, varint deadAfterMs
//	config-ext2    = varint lagBudgetMs, uvarint minSegmentPoints
//	                 (written only when either is non-zero, so that a
//	                 configuration without a seal policy encodes as before;
//	                 proposed only once every member lists FeatureSealPolicy)
//
// A RecordHeld with Holders is encoded as record-stored (10); without, as
// record-held (5), whose layout is unchanged.
//
// A record-batch (RecordBatch) carries the records of many segments in one
// raft entry: register-series, record-held, record-gap, record-stored and
// record-replicated bodies, each applied in order as if it were a command
// of its own (a rejected record has its own error; the others apply).
// DecodeCommand rejects a whole batch whose count the bytes left cannot
// hold (each record takes at least two bytes), that is empty or longer
// than MaxBatchRecords, or one of whose records is of another kind or
// does not decode.
//
// # Version skew
//
// Every member must apply a committed entry alike, so a command kind that
// members of an earlier version cannot decode (they reject it, the others
// apply it) may only be proposed once every member applies it. A
// coordinator lists the catalog features it applies in the node label
// FeaturesLabel of its own RegisterNode (a label, so that members of any
// version apply that registration alike); AnnounceReady is true when
// every raft member is a registered coordinator listing
// FeatureAnnounceSeries. Until then the intake registers announced series
// with RegisterSeries and records no registration watermark; a query
// front end then asks such edges as before. A member added later of an
// earlier version (a downgrade once the feature is in use) cannot read
// snapshot version 5 and refuses it rather than diverge; downgrading
// below the version that wrote AnnounceSeries entries is not supported.
// Rule groups are gated the same way: SetRuleGroup and DeleteRuleGroup
// (kinds 16 and 17) are proposed only when FeatureReady(FeatureRuleGroups)
// (every member lists "rule-groups"), and snapshot version 6 is written
// only once a rule group was set.
//
// # Rule groups
//
// SetRuleGroup holds a rule group by name: the Prometheus rule file of
// one group (at most MaxRuleGroupBytes), an edge selector (at most
// MaxRuleSelectorBytes; PromQL label matchers over the edges' labels, ""
// for every edge) and the index that set it; at most MaxRuleGroups, of
// at most MaxRuleGroupsBytes together (names, selectors and YAML). The
// state machine checks bounds and UTF-8 only, so that its decisions do
// not depend on a YAML or PromQL parser's version; the proposing
// coordinator checks the rule file and parses the selector first. An
// edge's labels are those of its RegisterNode (the intake registers the
// labels of the edge's hello). The rule groups' version (the index of
// the last SetRuleGroup or DeleteRuleGroup that changed something) tells
// the intake when to send edges their groups again.
//
// RecordBatch (kind 18) follows the same rule with FeatureRecordBatch:
// RecordBatchReady is true when every raft member is a registered
// coordinator listing it, and until then the intake proposes one command
// per record, as before. A batch changes nothing in the state's layout, so
// snapshots are unchanged; a member of an earlier version replaying a log
// that holds batches cannot apply them, so downgrading below the version
// that wrote them is not supported either.
//
// # Registration watermark
//
// AnnounceSeries (kind 15) carries the series an edge created since its
// last announcement and ThroughMs, the edge's clock when it took them:
// every series the edge created before then is registered. The catalog
// keeps the highest ThroughMs of an edge (Registration; NoWatermark, the
// lowest int64, registers series only), unless a series
// of the command was rejected (the catalog then cannot list all of the
// edge's series and the watermark stays).
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
// # Placement, holdings and make before break
//
// Each edge's placement lists its active replicas (the intake stores new
// segments on them) and its leaving replicas (being replaced: read and
// copied from, given nothing new). Per replica, a Holding lists the runs
// of held sequence numbers it may lack (Lacks), with the time span of
// their data, and the raft index that placed it (Index). A replica holds
// every held segment outside its lack runs; the catalog never says a
// replica holds a segment it was not given:
//
//   - A replica placed on an edge with history lacks all of it (one lack
//     run per held run, with the run's time span), until copies are
//     recorded (RecordReplicated, bound to the replica's Index).
//   - RecordHeld with Holders (the intake's write quorum) records the
//     other replicas, and those placed after the command's Epoch, as
//     lacking the new ranges; without Holders, the replicas placed at or
//     before Epoch (0: the edge's registration) are taken to hold them.
//   - Lack runs merge when they overlap (time spans joined); runs that
//     only touch keep their own spans; past MaxLackRuns the two closest
//     merge. Both only widen what a replica is taken to lack.
//   - Replicas moved away (balancing, trimming, pinning, or a coordinator
//     down or draining) become leaving with their holding; one is dropped
//     only once no active replica lacks a held segment it holds, or when
//     its coordinator leaves the cluster. So no held segment loses its
//     last replica while a replica that holds it is in the cluster.
//   - Repairs (read API) lists, per active replica, the held runs it
//     lacks and the live replicas that can give each (they hold every
//     segment of the run and lack no data in its time span, so that a
//     copy by time span never brings older values of a sample); a run no
//     live replica can give must be shipped again by the edge
//     (Unsourced).
//
// Check verifies: one Holding per active replica, lack runs valid,
// sorted, disjoint, at most MaxLackRuns, and below one past the
// highest sequence recorded; Index <= the placement's Epoch; active
// replicas eligible, leaving replicas present and not active.
//
// Coordinators have a state: active (eligible), draining (an operator
// empties it) or down (the leader found no heartbeat for the fleet's
// dead-after; SetNodeState with HeartbeatBeforeMs, so a heartbeat that
// committed meanwhile wins). Only active coordinators take replicas.
// A coordinator binds the identity of its replica store (StoreID) when it
// registers. Registering again with another store id (the replica
// directory was replaced) makes every replica of it lack everything, as if
// placed anew, so that it is never read for data it does not hold. A
// coordinator whose raft member was removed may register again under a
// new raft id (a new member with a new disk).

// # Snapshot encoding (version 6)
//
//	+-------+---------+------------------+-----------+-----+-----------+--------+
//	| magic | version | uvarint applied  | section 1 | ... | section 9 | crc32c |
//	| TCAT  |  u8 (6) |                  |           |     |           | u32 LE |
//	+-------+---------+------------------+-----------+-----+-----------+--------+
//
// The CRC-32C (Castagnoli) covers every byte before it. Each section is
// tag:u8, uvarint(length), body; the sections appear in tag order (the
// first seven always, 8 and 9 by version, below):
//
//	1 config      config, config-ext (as above), uvarint version
//	              [, config-ext2 (only when lag budget or min points is set)]
//	2 members     uvarint n, n × (uvarint raftID, bool learner, string addr)     sorted by raftID
//	3 nodes       uvarint n, n × (string id, u8 role, uvarint raftID, string addr,
//	              string identity, labels, uvarint registeredIndex,
//	              varint lastHeartbeatMs, string storeID, u8 state,
//	              uvarint stateIndex, bool revoked)                              sorted by id
//	4 series      uvarint n, n × string key      series id i+1 is the i-th key; key is the
//	                                             canonical labels encoding of node/labels
//	5 edge series uvarint n, n × (string edge, uvarint k, k × uvarint delta)     sorted by edge;
//	                                             ids are running sums of the deltas (> 0)
//	6 placements  uvarint n, n × (string edge, uvarint epoch, bool pinned,
//	              uvarint k, k × (string coordinator, holding),
//	              uvarint l, l × (string coordinator, holding))                  sorted by edge;
//	              active replicas sorted, then leaving replicas sorted
//	  holding     = uvarint placedIndex, uvarint m, m × (uvarint firstSeq,
//	              uvarint lastSeq, varint minTimeMs, varint maxTimeMs)
//	7 progress    uvarint n, n × (string edge, uvarint watermarkSeq,
//	              varint watermarkTimeMs, uvarint k, k × range,
//	              uvarint g, g × gap)                                            sorted by edge
//	8 registration uvarint n, n × (string edge, varint throughMs)                sorted by edge;
//	              versions 5 (n > 0) and 6
//	9 rule groups uvarint rulesVersion (> 0), uvarint n (<= MaxRuleGroups),
//	              n × (string name, string selector, string yaml,
//	              uvarint version (1..rulesVersion))                             sorted by name;
//	              version 6 only
//
// Snapshot writes version 6 only once a rule group was ever set
// (rulesVersion > 0); otherwise version 5 when some edge has a
// registration watermark, and otherwise version 4 (the same sections
// without the eighth), byte for byte what the versions before wrote: a
// cluster that never used a feature stays readable by members of the
// version before it. Restore reads versions 6 and 5 alike but for section
// 9, which a snapshot of version 5 has not (no rule groups).
// Restore also reads version 4, and version 3: the configuration and nodes without the
// fields added in version 4 (dead-after taken as the default), and
// placements with, per replica, (uvarint fromSeq, varint lacksThroughMs,
// uvarint placedIndex) instead of a holding and no leaving replicas: a
// replica from sequence F > 1 becomes one lack run 1..F-1 with times
// [math.MinInt64, lacksThroughMs]. Version 2 is version 3 with
// placements listing only coordinator ids (every replica holds the whole
// history, Index 0), and version 1 is version 2 without the gap lists.
// Snapshot writes version 4, 5 or 6.
//
// Postings and coordinator loads are derived and rebuilt by Restore.
// Restore checks the checksum, the encoding, canonical forms and every
// invariant Check verifies before it replaces anything, and wraps
// ErrCorruptSnapshot on failure.
package catalog
