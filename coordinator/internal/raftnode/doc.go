// Package raftnode runs one coordinator's raft member: etcd's raft
// (go.etcd.io/raft/v3 RawNode) driving a durable log (raftlog) and the
// catalog state machine, with messages carried by a Transport.
//
// # Driving a Node
//
// raft does no I/O and keeps no time; a Node is driven from outside:
//
//	n, err := raftnode.Open(raftnode.Options{ID: 1, Dir: dir, StateMachine: fsm, Transport: tr, Peers: peers})
//	go n.Run(ctx, time.NewTicker(100*time.Millisecond).C) // production
//	res, err := n.Propose(ctx, catalog.EncodeCommand(cmd))
//	err = n.LinearizableRead(ctx) // then read fsm
//	err = n.Stop(ctx)             // hands leadership over first
//
// Inputs — Tick, Step (a received message), ReportUnreachable,
// ReportSnapshot, ProposeAsync/Propose, ReadAsync/LinearizableRead,
// ChangeMembershipAsync (AddVoter, AddLearner, PromoteLearner,
// RemoveMember), TransferLeadership, Campaign — only queue work, under a
// short lock, and never block on raft or the disk. Process does the queued
// work and handles raft's Readies; it is the only code that touches raft.
// Run calls Tick on every value of its tick channel and Process whenever
// work was queued. Tests call Tick, Step and Process themselves from one
// goroutine instead of Run, which is how the deterministic simulator
// drives this same code.
//
// # Concurrency
//
// Every exported method is safe for concurrent use. Process calls are
// serialized; use either Run or direct Process calls, not both. The
// Transport's Send and the StateMachine's methods are called from
// Process only; Send may call the inputs above (of any node), but must not
// call Process.
//
// # The Ready loop
//
// See Process for the order: persist (snapshot, entries, hard state, one
// fsync) before sending any message, restore a received snapshot, send,
// apply committed entries in order, serve reads, Advance, then snapshot
// the state machine every Options.SnapshotEntries entries and compact the
// log to Options.KeepEntries before it. Raft's synchronous interface is
// used (no AsyncStorageWrites). Entries are applied only after they are
// durable locally, which the synchronous interface guarantees.
//
// A member that applies a configuration change adding a member also takes
// a snapshot at once: a new member whose log starts empty is caught up by
// a snapshot when the log is compacted, and raft refuses a snapshot whose
// configuration lacks the receiver.
//
// # Proposals and batching
//
// Commands queued by ProposeAsync before the next Process are packed, in
// order, into as few raft entries as fit Options.MaxEntryBytes. Every
// member applies the commands of an entry in order, all at the entry's
// index. The proposer completes each future with the StateMachine's result
// (a rejected command is a result, not a failure); futures of this package
// fail with ErrProposalDropped (not applied, safe to retry), ErrCanceled or
// ErrStopped (outcome unknown). Raft loses a proposal silently on its way to
// a leader that dies, or when a new leader overwrites the old leader's
// uncommitted entries; so when this member sees a new leader or term, it
// proposes again every command proposed before it and not applied yet,
// when the StateMachine says the command may be applied twice
// (Reproposer; Status.Reproposed counts them). Such a command may be
// applied at two indexes, by every member alike, and its future completes
// with the first application. A re-proposal raft drops stays pending.
// Callers still bound waits with a context (Propose) or Future.Cancel:
// other commands lost with a leader complete only then.
//
// Entry data (version 1), all integers uvarint:
//
//	entry   = u8 version (1), count, count × command
//	command = proposer raft id, proposer boot, proposal seq, len, len bytes (the command)
//
// The proposer's boot is its raftlog.Log.Boot count, which never repeats
// for a member, so a restarted member never takes an entry proposed by its
// previous incarnation for one of its own. An empty entry is a new
// leader's no-op. An entry that does not decode is skipped, and logged, by
// every member alike.
//
// Configuration changes carry in their Context (version 1):
//
//	u8 version (1), proposer raft id, proposer boot, proposal seq, len, addr
//
// where addr is the raft address of the member added (recorded in the
// catalog's member list, from which a transport resolves addresses), and
// a zero proposer marks a bootstrap change. ReadIndex requests carry
// (raft id, boot, seq) as uvarints.
//
// # Membership
//
// A new cluster is bootstrapped by starting every initial member with the
// same sorted Options.Peers (raft's Bootstrap: one configuration change per
// peer at indexes 1..n). A member started with an empty log and no Peers
// joins: it waits until the leader adds it (AddLearner, then
// PromoteLearner once it caught up; AddVoter directly is possible).
// Changes are single raft configuration changes, one at a time, asked of
// the leader; each is checked against the applied configuration the way
// raft will check it when it applies (raft panics on an invalid change),
// and a committed change that would be invalid is not applied, by every
// member alike. The configuration the catalog sees is computed from the
// applied configuration and the change alone, so that every member
// reports the same configuration at the same index. A member that applies
// its own removal reports Status.Removed and should be stopped.
//
// # Determinism
//
// Same log, same catalog: commands are applied in log order with their
// index, and the catalog is deterministic (see package catalog).
//
// The simulator (sim_test.go) also needs the same schedule to give the
// same run. raft v3.6.0 draws its randomized election timeout from a
// package-level source over crypto/rand with no hook to seed it; the
// simulator seeds crypto/rand itself with testing/cryptotest.
// SetGlobalRandom, and since one goroutine drives every member in an order
// taken from the seeded PRNG, raft's draws happen in the same order every
// run. This package reads no clock and no randomness of its own.
package raftnode
