// Package intake is the coordinators' side of the replication protocol:
// the tributary.v1.ReplicationService server that edge nodes ship their
// sealed WAL segments to (docs/replication.md, sections 1 and 2, and
// proto/tributary/v1/replication.proto are the specification).
//
// # One stream
//
//  1. Hello: the edge's identity comes from Options.Identity (the verified
//     mTLS client certificate in production); a hello naming another node
//     ends the stream with PERMISSION_DENIED. An edge the catalog does not
//     know, or whose query address or labels (ShipHello.labels) changed, is
//     registered (catalog.RegisterNode; the hello's labels replace the
//     catalog's). The welcome is answered from a linearizable
//     read of the catalog: acked_through and the covered runs above it.
//  2. Segments: parts go through a wire.Assembler (protocol checks, limits,
//     decompression, verification; its refusals are sent as they are and
//     the stream stays open). A complete segment is then one of:
//     - new: stored on every active replica of the edge's placement in
//     parallel; once a write quorum W of them (catalog.FleetConfig.Quorum)
//     holds it and the others have answered or Options.QuorumGrace has
//     passed, the series the catalog does not yet list for the edge are
//     registered with one RegisterSeries, the run [prev_seq+1, seq] is
//     recorded with RecordHeld naming its holders (the others are
//     recorded as lacking it, to be repaired), and only then is it
//     acknowledged, with the acked_through the command returned. Replicas
//     still storing are recorded as holding it (RecordReplicated) once
//     they complete. Fewer than W holders: refused, UNAVAILABLE
//     (retryable), or CONFLICT when a replica holds it with another CRC.
//     Only the points the replicas stored count as held.
//     - held: checked against a stored CRC (a backfill, rebuilt by the
//     edge, is not), acknowledged again (same CRC) or refused with
//     CONFLICT; active replicas that lack it are given it first and
//     recorded as holding it (a resend, or a run shipped again because no
//     live replica could copy it).
//  3. Gaps: checked (wire.CheckGap), recorded with RecordGap, acknowledged.
//  4. Fleet configuration: the welcome carries the catalog's configuration
//     (the edge-relevant part, pb.EdgeConfig); every
//     Options.ConfigPollInterval the stream reads the catalog again and
//     sends a ShipResponse.config when the version is higher than the last
//     one sent. The fleet's rule groups likewise: the welcome carries the
//     groups whose selector (package rules/selector) matches the edge's
//     labels, versioned by the catalog's applied index, and the stream
//     sends a ShipResponse.rule_groups at a poll that finds the catalog's
//     rule groups changed (catalog.FSM.RulesVersion).
//  5. Revocation: a revoked edge's hello is refused (PERMISSION_DENIED),
//     and an open stream of an edge revoked since ends within
//     Options.ConfigPollInterval.
//  6. Reship: to an edge whose hello lists the feature "reship", every
//     Options.ConfigPollInterval the stream sends a ShipResponse.reship for
//     each run some active replica lacks and no live replica can give
//     (catalog.FSM.Unsourced), at most every Options.ReshipInterval per
//     run; a ShipReshipUnavailable answer defers the run ten times as long.
//
// Restore (restore.go): an edge whose disk was replaced pulls its history
// back (ReplicationService.Restore). The caller is checked as a hello is;
// the catalog is read linearizably; each part of the edge's time span is
// read from a live replica whose holding covers it (Options.Restore reads
// the replica stores), or the call is refused naming the span no live
// replica holds. One goroutine per call sends a file or a message of
// rollups at a time.
//
// A failure to make something durable (a replica, the raft catalog, a
// timeout) is refused as UNAVAILABLE, retryable; a rejected catalog
// command as MALFORMED or CONFLICT. Nothing is acknowledged on an error.
//
// # Concurrency
//
// A Server is safe for concurrent use and serves any number of streams.
// Each stream has one goroutine that receives (and only it reads from the
// gRPC stream) and one that owns the assembler and is the only one to
// send; up to maxInflight segments and gaps of a stream are made durable
// concurrently by worker goroutines, which hand their answer back to the
// sender. The next message is read only while fewer than maxInflight are
// being processed, which bounds a stream's memory to maxInflight
// segments plus the one being reassembled. Acks therefore may leave in
// another order than the segments arrived, which the protocol allows.
// Cancelling a stream (the edge leaves, or Close) cancels its workers; the
// stream ends only once they have returned.
//
// Heartbeats of the edges with an open stream are batched: one
// catalog.Heartbeat command per Options.HeartbeatInterval for all of them.
//
// The catalog records of segments and gaps (RegisterSeries, RecordHeld,
// RecordGap, RecordReplicated) of every stream are batched too: a
// segment's worker submits its record and waits for its own answer, and
// one goroutine proposes the waiting records together as one
// catalog.RecordBatch (batch.go has the rules: Options.CatalogLinger,
// what waits while a batch is in flight, the bounds, per-record answers,
// the version-skew gate).
package intake
