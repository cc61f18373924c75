package membership

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Peer is a member of the raft group as the loops know it.
type Peer struct {
	RaftID uint64
	NodeID string
	// Addr is the member's cluster address (raft messages); Cluster maps
	// it to where the member's ClusterService answers.
	Addr string
}

// Cluster is the members' ClusterService as the loops call it, each call
// addressed to one member by its cluster address. Implementations must be
// safe for concurrent use; ctx bounds each call.
type Cluster interface {
	Members(ctx context.Context, clusterAddr string) (*pb.MembersResponse, error)
	AddMember(ctx context.Context, clusterAddr string, req *pb.AddMemberRequest) error
	PromoteMember(ctx context.Context, clusterAddr string, raftID uint64) error
	RemoveMember(ctx context.Context, clusterAddr string, req *pb.RemoveMemberRequest) error
	// TransferLeadership asks for the transfer and returns the leader the
	// member reports after it.
	TransferLeadership(ctx context.Context, clusterAddr string, toRaftID uint64) (leaderRaftID uint64, err error)
}

// Options configure Run. The zero value of a field means its default.
type Options struct {
	// Self is this coordinator: its raft id, node id and advertised
	// cluster address (the address the leader records for it). Required.
	Self Peer
	// Join lists the members to ask when this coordinator joins by itself
	// (it was started to join, or to rejoin after losing its disk); empty:
	// it does not join by itself.
	Join []Peer
	// Replaces is the raft id of the member this one replaces after
	// losing its disk, removed before this one is added. 0: none.
	Replaces uint64
	// Expected (nil: off) reads the number of members wanted, raft id
	// ordinals 1..N (Ordinal): a StatefulSet's replica count, fixed
	// (FixedExpected) or read live from the Kubernetes API. The leader
	// reads it each round and removes the members beyond it once they
	// have not answered for LeaveAfter; when it cannot be read, nothing is
	// removed. A joining coordinator beyond it waits instead of joining
	// (see joiner). Default LeaveAfter 1m.
	Expected   ExpectedFunc
	LeaveAfter time.Duration
	// Cluster reaches the members. Required.
	Cluster Cluster
	// JoinInterval and LeaveInterval are the pauses between rounds of the
	// two loops. Defaults 2s and 5s.
	JoinInterval, LeaveInterval time.Duration
	// MaxLag: a learner is promoted once its log is within this many
	// entries of the leader's. Default 1000.
	MaxLag uint64
	Logger *slog.Logger
	// Now is the leave loop's clock. Default time.Now.
	Now func() time.Time
}

// ExpectedFunc reads the number of members wanted. It is called from the
// loops' goroutines (one at a time per loop, both loops at once), with
// ctx bounding the read; it must be safe for concurrent use.
type ExpectedFunc func(ctx context.Context) (uint64, error)

// FixedExpected is the ExpectedFunc of a count that never changes
// (--expected-members).
func FixedExpected(n uint64) ExpectedFunc {
	return func(context.Context) (uint64, error) { return n, nil }
}

// Limits of one ClusterService call of each loop, and of one read of the
// expected member count.
const (
	joinCallTimeout  = 10 * time.Second
	leaveCallTimeout = 5 * time.Second
	expectedTimeout  = 5 * time.Second
)

// Validate fills in defaults and rejects impossible values.
func (o *Options) Validate() error {
	var bad []string
	if o.Self.RaftID == 0 || o.Self.NodeID == "" || o.Self.Addr == "" {
		bad = append(bad, fmt.Sprintf("Self %+v: want a raft id, a node id and a cluster address", o.Self))
	}
	if o.Cluster == nil {
		bad = append(bad, "Cluster is required")
	}
	o.LeaveAfter = cmp.Or(o.LeaveAfter, time.Minute)
	o.JoinInterval = cmp.Or(o.JoinInterval, 2*time.Second)
	o.LeaveInterval = cmp.Or(o.LeaveInterval, 5*time.Second)
	o.MaxLag = cmp.Or(o.MaxLag, 1000)
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LeaveAfter < 0 || o.JoinInterval < 0 || o.LeaveInterval < 0 {
		bad = append(bad, "negative LeaveAfter, JoinInterval or LeaveInterval")
	}
	if len(bad) > 0 {
		return errors.New("membership options: " + strings.Join(bad, "; "))
	}
	return nil
}

// Run joins this coordinator (when o.Join names members) and removes the
// members beyond the expected count (when o.Expected is set) until ctx
// ends, then returns ctx's error; it returns nil at once when it has
// nothing to do, and when joining is done and nothing else is. Only
// Validate's error is returned before that: a round that fails is logged
// and retried.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	var loops []func(context.Context) error
	if len(o.Join) > 0 {
		loops = append(loops, newJoiner(o).run)
	}
	if o.Expected != nil {
		loops = append(loops, newLeaver(o).run)
	}
	var wg sync.WaitGroup
	for _, run := range loops {
		wg.Go(func() { run(ctx) })
	}
	wg.Wait()
	if len(loops) == 0 {
		return nil
	}
	return ctx.Err()
}

// RaftIDGeneration separates the raft ids one StatefulSet ordinal takes
// over its lives: ordinal k is raft id k+1, then k+1+1000 after it rejoined
// with a new disk, and so on, so that the ordinal stays readable in it.
const RaftIDGeneration = 1000

// Ordinal is the StatefulSet ordinal + 1 of a raft id given by
// IdentityFromHostname, whatever its generation.
func Ordinal(raftID uint64) uint64 { return (raftID-1)%RaftIDGeneration + 1 }

// NewRaftID picks the raft id of a member that rejoins in place of old,
// above every raft id the cluster knows (maxRaftID): the next one, or with
// byOrdinal (raft ids from StatefulSet ordinals) the next generation of the
// same ordinal.
func NewRaftID(maxRaftID, old uint64, byOrdinal bool) uint64 {
	if !byOrdinal {
		return maxRaftID + 1
	}
	id := old
	for id <= maxRaftID {
		id += RaftIDGeneration
	}
	return id
}

// IdentityFromHostname derives a coordinator's node id and raft id from a
// StatefulSet pod's host name NAME-N: the node id is the host name, the
// raft id N+1 (raft ids start at 1).
func IdentityFromHostname(hostname string) (nodeID string, raftID uint64, err error) {
	i := strings.LastIndexByte(hostname, '-')
	if i <= 0 || i == len(hostname)-1 {
		return "", 0, fmt.Errorf("host name %q does not end in -N (a StatefulSet ordinal)", hostname)
	}
	digits := hostname[i+1:]
	ord, err := strconv.ParseUint(digits, 10, 63)
	if err != nil || (len(digits) > 1 && digits[0] == '0') {
		return "", 0, fmt.Errorf("host name %q does not end in -N (a StatefulSet ordinal): %q is not a number", hostname, digits)
	}
	if ord+1 >= RaftIDGeneration {
		return "", 0, fmt.Errorf("host name %q: ordinal %d is %d or more", hostname, ord, RaftIDGeneration-1)
	}
	return hostname, ord + 1, nil
}

// repeatRounds calls round, waiting interval after each call, until round
// reports that it is done (nil) or ctx ends (ctx.Err()).
func repeatRounds(ctx context.Context, interval time.Duration, round func(context.Context) (done bool)) error {
	for !round(ctx) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return nil
}

// callWithin runs f with ctx limited to limit.
func callWithin(ctx context.Context, limit time.Duration, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return f(cctx)
}
