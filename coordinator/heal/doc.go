// Package heal keeps a coordinator cluster whole without an operator: it
// marks coordinators that stopped answering as down (so that their
// replicas move), brings them back when they answer again, balances
// placements a few moves at a time, copies to this coordinator's replica
// store what the catalog says it lacks, and scrubs the store against the
// catalog.
//
// # Duties
//
// Every coordinator runs one Healer. Only the raft leader decides
// (leader duties); every member repairs and scrubs its own store:
//
//   - Health (leader): a coordinator whose newest heartbeat is older than
//     dead-after (the fleet configuration's, or Options.DeadAfter) — counted
//     from the later of its heartbeat and the moment this member became
//     leader, so that a leader that just took over after an outage does not
//     condemn members that had no chance to heartbeat — is marked down with
//     catalog.SetNodeState{State: NodeDown, HeartbeatBeforeMs} (a heartbeat
//     that commits meanwhile wins). A down coordinator whose heartbeat is
//     fresh again (within half of dead-after) is marked active. Draining
//     coordinators are left alone: an operator set that.
//   - Balance (leader): while the spread of active replicas between the
//     most and the least loaded coordinator is over one, propose
//     catalog.Rebalance with at most Options.MaxMovesInFlight minus the
//     moves not finished yet (leaving replicas on live coordinators): every
//     move is a copy, so copies are rate-limited by their number.
//   - Repair (every member): for each run of held segments this
//     coordinator's active replicas lack (catalog.FSM.RepairsOf), copy it
//     from a source replica — the one serving the fewest of this
//     coordinator's running copies, the first listed among equals
//     (Repairer.Copy: throttled, resumable, idempotent) — and record it
//     (catalog.RecordReplicated). Runs without a source are the edge's to
//     ship again (the intake asks it). A failed copy is retried after a
//     backoff that doubles up to a minute.
//   - Scrub (every member, every Options.ScrubInterval): compare what the
//     store holds of each edge placed here (Repairer.Holdings) with what the
//     catalog says it holds; segments the catalog credits it with but the
//     store lacks are reported (catalog.RecordMissing: they are repaired),
//     segments the store holds that the catalog lists as lacking are
//     recorded (catalog.RecordReplicated). Edges no longer placed here are
//     forgotten (Repairer.Forget), so the store never claims them again.
//
// # Concurrency
//
// A Healer is safe for concurrent use; Run drives it from one goroutine
// and runs at most Options.CopyParallelism copies at a time, one at a time
// per edge and replica; when a copy ends, Run looks for the next repair at
// once rather than at the next Interval.
package heal
