// Package membership makes a coordinator's raft membership follow its
// deployment without an operator, with the rules that keep that safe:
//
//   - join: a coordinator started to join an existing cluster asks the
//     leader to add it as a learner, waits until it has caught up and asks
//     for its promotion to voter (what `tributary cluster add` then
//     `promote` do by hand). A coordinator that lost its disk and rejoins
//     under a new raft id first has the member it replaces removed: that
//     member's log and votes are gone, so it can only stall the quorum.
//   - leave: with an expected member count N (a StatefulSet's replica
//     count, fixed or read live from the Kubernetes API each round), the
//     leader removes the members beyond it (raft id ordinal > N) once
//     they have not answered for a grace period: learners first, then
//     voters from the highest raft id, one per round, and a voter only if
//     the voters left still hold a quorum of members that answer. A
//     leader beyond N hands leadership over instead. Members within N,
//     and members beyond it that still answer, are never touched; when N
//     cannot be read, nobody is. A joining coordinator beyond N waits
//     (with N unreadable, the last N read decides; with none read yet, it
//     waits until one is).
//
// It also holds the raft id scheme of StatefulSet pods: ordinal k is raft
// id k+1, and a pod that rejoins with a new disk takes the next
// generation of the same ordinal (k+1+1000, ...), so that raft ids are
// never reused and the ordinal stays readable in them (Ordinal, NewRaftID,
// IdentityFromHostname).
//
// The loops talk to the members through Cluster, a small interface over
// the ClusterService calls they make; GRPCCluster is its gRPC
// implementation, reaching each member on its client listener.
//
// Run drives both loops, each in one goroutine of its own; it returns
// when ctx ends. Nothing in this package is shared between goroutines
// except through Cluster, whose implementations must be safe for
// concurrent use.
package membership
