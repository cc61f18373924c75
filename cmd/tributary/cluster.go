package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/internal/auth"
	"github.com/tributarydb/tributary/internal/loopback"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

const clusterUsage = `usage: tributary cluster <subcommand> [flags]

Subcommands (flags: --addr of a coordinator's client gRPC listener, --token,
--tls-ca, --timeout, --format table|json):
  members                       list the raft members as that coordinator sees them
  add RAFTID=NODEID@HOST:PORT   add a coordinator started with --join, as a learner
                                (--voter: directly as a voter); HOST:PORT is its
                                cluster address
  promote RAFTID                make a learner a voter (once it caught up)
  remove RAFTID [--force]       remove a member (not the leader: transfer first).
                                Refused when the member is the last live holder
                                of some edge's segments (drain it first); --force
                                removes it anyway
  transfer [RAFTID]             hand leadership to RAFTID (default: the most
                                up-to-date other voter)
  config [--retention-raw 15d ...]
                                without flags: print the fleet configuration;
                                with flags: change the given fields (the rest
                                stay) and print the result. Flags:
                                --retention-raw, --retention-1h, --retention-1d
                                (durations, d and w allowed), --rollup-hourly,
                                --rollup-daily (informational), --rate-limit
                                (points/s per edge, 0: unlimited), --rate-burst
                                (points, 0: one second of the rate),
                                --replication-factor, --write-quorum (replicas
                                that must hold a segment before it is
                                acknowledged, 0: automatic), --dead-after (a
                                coordinator silent this long loses its
                                replicas, 0: 5m), --max-series,
                                --lag-budget (how long a point may wait on an
                                edge before its segment ships, 1s..1h, 0: the
                                default), --min-segment-points (an old segment
                                with fewer waits, up to 4 x the lag budget)

Rule groups of the fleet (evaluated by the edges whose labels, from their
--edge-label flags, match the group's selector; docs/rules.md):
  rules set [--selector SEL] FILE
                                set every group of a Prometheus rule file
                                (checked as tributary rules check does),
                                each replacing the fleet's group of its
                                name; SEL: label matchers such as
                                'site="berlin", model=~"pi4.*"' (default:
                                every edge)
  rules get [--edge EDGE] [NAME]
                                list the fleet's groups (those selecting
                                EDGE), or print group NAME's YAML
  rules delete NAME...          delete groups; the edges stop evaluating them

Placement and healing:
  edges                         every edge: replicas (* leaving), segments each
                                lacks, under-replicated and unsourced segments,
                                lag, last heartbeat, revoked and pinned flags
  place EDGE --on C1,C2         pin an edge's replicas to these coordinators
  place EDGE --unpin            return it to the automatic placement
  rebalance [--max-moves N]     move replicas from the most to the least loaded
                                coordinators (0: until balanced)
  drain COORD                   move a coordinator's replicas away, each kept
                                until its history is copied
  undrain COORD                 let a drained coordinator take replicas again
  revoke-edge EDGE              refuse an edge's streams and tunnels everywhere
  unrevoke-edge EDGE            lift that
  decommission-edge EDGE        forget an edge (stop or revoke it first)

Membership changes must be sent to the leader; another coordinator answers
with the leader's raft id, node id and cluster address. The other
subcommands may be sent to any coordinator.`

// maxEdgesAnswerBytes bounds the Edges answer the CLI accepts (gRPC's
// default of 4 MiB is a few thousand edges with lacking replicas).
const maxEdgesAnswerBytes = 256 << 20

// runCluster is `tributary cluster`: membership of the coordinators' raft
// cluster, the fleet configuration and edges' placement through
// tributary.v1.ClusterService.
func runCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, clusterUsage)
		if len(args) == 0 {
			return fmt.Errorf("%w: missing subcommand", errUsage)
		}
		return flag.ErrHelp
	}
	a, err := parseClusterArgs(args[0], args[1:], stderr)
	if err != nil {
		return err
	}
	call, err := a.call()
	if err != nil {
		return err
	}
	conn, err := a.client.dialConn()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx := context.Background()
	if a.client.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.client.timeout)
		defer cancel()
	}
	resp, err := call(ctx, pb.NewClusterServiceClient(conn))
	if err != nil {
		return fmt.Errorf("%s at %s: %w", a.sub, a.client.addr, err)
	}
	return printCluster(stdout, a.format, resp, time.Now())
}

// clusterCall makes a subcommand's calls and returns what to print.
type clusterCall func(context.Context, pb.ClusterServiceClient) (any, error)

// clusterArgs are a cluster subcommand's flags and arguments.
type clusterArgs struct {
	sub    string
	pos    []string // positional arguments
	client clientFlags
	format string
	fs     *flag.FlagSet
	stderr io.Writer
	// The subcommands' own flags.
	voter, force, unpin bool
	on                  string
	maxMoves            uint
	cfg                 fleetConfigFlags
	selector, edge      string
}

// parseClusterArgs parses the flags of subcommand sub.
func parseClusterArgs(sub string, args []string, stderr io.Writer) (*clusterArgs, error) {
	a := &clusterArgs{sub: sub, fs: flag.NewFlagSet("cluster "+sub, flag.ContinueOnError), stderr: stderr}
	fs := a.fs
	fs.SetOutput(stderr)
	a.client.register(fs, "time limit of the request")
	fs.StringVar(&a.format, "format", "table", "output: table or json")
	switch sub {
	case "add":
		fs.BoolVar(&a.voter, "voter", false, "add the member as a voter at once instead of as a learner")
	case "remove":
		fs.BoolVar(&a.force, "force", false, "remove the member even if it is the last live holder of some edge's segments (they are then on no live coordinator)")
	case "place":
		fs.StringVar(&a.on, "on", "", "comma-separated coordinator node ids to pin the edge's replicas to")
		fs.BoolVar(&a.unpin, "unpin", false, "return the edge to the automatic placement")
	case "rebalance":
		fs.UintVar(&a.maxMoves, "max-moves", 0, "move at most this many replicas (0: until balanced)")
	case "config":
		a.cfg.register(fs)
	case "rules":
		fs.StringVar(&a.selector, "selector", "", `rules set: the edges the groups apply to, label matchers such as 'site="berlin", model=~"pi4.*"' (default: every edge)`)
		fs.StringVar(&a.edge, "edge", "", "rules get: only the groups that select this edge")
	}
	var err error
	if a.pos, err = parseArgs(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if a.format != "table" && a.format != "json" {
		return nil, fmt.Errorf("%w: --format %q: want table or json", errUsage, a.format)
	}
	return a, nil
}

// wantArgs checks the number of positional arguments.
func (a *clusterArgs) wantArgs(min, max int) error {
	if len(a.pos) < min || len(a.pos) > max {
		return fmt.Errorf("%w: cluster %s takes %d to %d arguments, got %d (tributary cluster -h)", errUsage, a.sub, min, max, len(a.pos))
	}
	return nil
}

// raftArg is positional argument i as a raft id.
func (a *clusterArgs) raftArg(i int) (uint64, error) {
	id, err := strconv.ParseUint(a.pos[i], 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: cluster %s: raft id %q: want a non-zero integer", errUsage, a.sub, a.pos[i])
	}
	return id, nil
}

// nodeArg is the one positional argument: a node id.
func (a *clusterArgs) nodeArg(what string) (string, error) {
	if len(a.pos) != 1 {
		return "", fmt.Errorf("%w: cluster %s takes one argument, the %s's node id, got %d (tributary cluster -h)", errUsage, a.sub, what, len(a.pos))
	}
	if a.pos[0] == "" || strings.HasPrefix(a.pos[0], "-") {
		return "", fmt.Errorf("%w: cluster %s: %q is not a node id", errUsage, a.sub, a.pos[0])
	}
	return a.pos[0], nil
}

// call checks the subcommand's arguments and returns its call.
func (a *clusterArgs) call() (clusterCall, error) {
	switch a.sub {
	case "members", "add", "promote", "remove", "transfer":
		return a.memberCall()
	case "config":
		return a.configCall()
	case "edges", "decommission-edge", "revoke-edge", "unrevoke-edge":
		return a.edgeCall()
	case "place", "rebalance", "drain", "undrain":
		return a.placementCall()
	case "rules":
		return a.rulesCall()
	}
	fmt.Fprintln(a.stderr, clusterUsage)
	return nil, fmt.Errorf("%w: unknown subcommand %q", errUsage, a.sub)
}

// memberCall is the call of a raft membership subcommand.
func (a *clusterArgs) memberCall() (clusterCall, error) {
	switch a.sub {
	case "members":
		if err := a.wantArgs(0, 0); err != nil {
			return nil, err
		}
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			return cl.Members(ctx, &pb.MembersRequest{})
		}, nil
	case "add":
		if err := a.wantArgs(1, 1); err != nil {
			return nil, err
		}
		peers, err := parsePeers("cluster add", a.pos[0])
		if err != nil {
			return nil, err
		}
		if len(peers) != 1 {
			return nil, fmt.Errorf("%w: cluster add: want one RAFTID=NODEID@HOST:PORT", errUsage)
		}
		p, learner := peers[0], !a.voter
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			return cl.AddMember(ctx, &pb.AddMemberRequest{RaftId: p.RaftID, NodeId: p.NodeID, Addr: p.Addr, Learner: learner})
		}, nil
	case "transfer":
		if err := a.wantArgs(0, 1); err != nil {
			return nil, err
		}
		var id uint64
		if len(a.pos) == 1 {
			var err error
			if id, err = a.raftArg(0); err != nil {
				return nil, err
			}
		}
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			return cl.TransferLeadership(ctx, &pb.TransferLeadershipRequest{ToRaftId: id})
		}, nil
	}
	// promote, remove
	if err := a.wantArgs(1, 1); err != nil {
		return nil, err
	}
	id, err := a.raftArg(0)
	if err != nil {
		return nil, err
	}
	if a.sub == "promote" {
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			return cl.PromoteMember(ctx, &pb.PromoteMemberRequest{RaftId: id})
		}, nil
	}
	force, stderr := a.force, a.stderr
	return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
		if err := checkLastHolder(ctx, cl, id, force, stderr); err != nil {
			return nil, err
		}
		return cl.RemoveMember(ctx, &pb.RemoveMemberRequest{RaftId: id, Force: force})
	}, nil
}

// configCall prints the fleet configuration, or changes the fields its
// flags set and prints the result.
func (a *clusterArgs) configCall() (clusterCall, error) {
	if err := a.wantArgs(0, 0); err != nil {
		return nil, err
	}
	set, err := a.cfg.changes(a.fs)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
		cur, err := cl.GetFleetConfig(ctx, &pb.GetFleetConfigRequest{})
		if err != nil || len(set) == 0 {
			return cur, err
		}
		cfg := cur.GetConfig()
		if cfg == nil {
			return nil, errors.New("the coordinator answered without a config")
		}
		for _, f := range set {
			f(cfg)
		}
		return cl.SetFleetConfig(ctx, &pb.SetFleetConfigRequest{Config: cfg})
	}, nil
}

// edgeCall is the call of a subcommand about the edges: list them,
// decommission, revoke or unrevoke one.
func (a *clusterArgs) edgeCall() (clusterCall, error) {
	if a.sub == "edges" {
		if err := a.wantArgs(0, 0); err != nil {
			return nil, err
		}
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			return cl.Edges(ctx, &pb.EdgesRequest{}, grpc.MaxCallRecvMsgSize(maxEdgesAnswerBytes))
		}, nil
	}
	edge, err := a.nodeArg("edge")
	if err != nil {
		return nil, err
	}
	if a.sub == "decommission-edge" {
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			if _, err := cl.DecommissionEdge(ctx, &pb.DecommissionEdgeRequest{NodeId: edge}); err != nil {
				return nil, err
			}
			return edgeChange{Edge: edge, Change: "decommissioned"}, nil
		}, nil
	}
	revoke := a.sub == "revoke-edge"
	return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
		if _, err := cl.RevokeEdge(ctx, &pb.RevokeEdgeRequest{NodeId: edge, Revoked: revoke}); err != nil {
			return nil, err
		}
		if revoke {
			return edgeChange{Edge: edge, Change: "revoked"}, nil
		}
		return edgeChange{Edge: edge, Change: "unrevoked"}, nil
	}, nil
}

// placementCall is the call of a placement subcommand: place an edge,
// rebalance, drain or undrain a coordinator.
func (a *clusterArgs) placementCall() (clusterCall, error) {
	switch a.sub {
	case "place":
		edge, err := a.nodeArg("edge")
		if err != nil {
			return nil, err
		}
		var coords []string
		for _, c := range strings.Split(a.on, ",") {
			if c = strings.TrimSpace(c); c != "" {
				coords = append(coords, c)
			}
		}
		switch {
		case a.unpin && a.on != "":
			return nil, fmt.Errorf("%w: cluster place: --on and --unpin exclude each other", errUsage)
		case !a.unpin && len(coords) == 0:
			return nil, fmt.Errorf("%w: cluster place %s: give --on C1,C2 (coordinator node ids) or --unpin", errUsage, edge)
		}
		unpin := a.unpin
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			r, err := cl.PlaceEdge(ctx, &pb.PlaceEdgeRequest{NodeId: edge, Coordinators: coords, Unpin: unpin})
			if err != nil {
				return nil, err
			}
			return placed{Edge: edge, Resp: r}, nil
		}, nil
	case "rebalance":
		if err := a.wantArgs(0, 0); err != nil {
			return nil, err
		}
		if a.maxMoves > 1<<31 {
			return nil, fmt.Errorf("%w: cluster rebalance: --max-moves %d is too large", errUsage, a.maxMoves)
		}
		maxMoves := uint32(a.maxMoves)
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			return cl.Rebalance(ctx, &pb.RebalanceRequest{MaxMoves: maxMoves})
		}, nil
	}
	// drain, undrain
	coord, err := a.nodeArg("coordinator")
	if err != nil {
		return nil, err
	}
	st, name := pb.CoordinatorState_COORDINATOR_STATE_DRAINING, "draining"
	if a.sub == "undrain" {
		st, name = pb.CoordinatorState_COORDINATOR_STATE_ACTIVE, "active"
	}
	return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
		r, err := cl.SetCoordinatorState(ctx, &pb.SetCoordinatorStateRequest{NodeId: coord, State: st})
		if err != nil {
			return nil, err
		}
		return stateChange{Coordinator: coord, State: name, Moved: r.GetMoved()}, nil
	}, nil
}

// edgeChange is the answer of decommission-edge, revoke-edge and
// unrevoke-edge (the RPCs answer nothing but success).
type edgeChange struct {
	Edge   string
	Change string // decommissioned, revoked, unrevoked
}

// placed is the answer of place.
type placed struct {
	Edge string
	Resp *pb.PlaceEdgeResponse
}

// stateChange is the answer of drain and undrain.
type stateChange struct {
	Coordinator, State string
	Moved              uint32
}

// maxEdgesNamed bounds the edges a refusal names.
const maxEdgesNamed = 10

// checkLastHolder refuses to remove raft member id while it is the last
// live holder of some edge's segments: removing a member drops its
// replicas at once, so those segments would be on no live coordinator.
// With force it warns on stderr instead. The check reads the members (for
// the member's node id) and the edges from the same coordinator; it is
// made here, not by the server, because RemoveMemberRequest has no field
// to override it.
func checkLastHolder(ctx context.Context, cl pb.ClusterServiceClient, id uint64, force bool, stderr io.Writer) error {
	refuse := func(err error) error {
		if force {
			fmt.Fprintf(stderr, "warning: %v; removing member %d anyway (--force)\n", err, id)
			return nil
		}
		return err
	}
	ms, err := cl.Members(ctx, &pb.MembersRequest{})
	if err != nil {
		return refuse(fmt.Errorf("cannot check whether member %d is the last holder of some edge's segments: list members: %w (retry, or add --force)", id, err))
	}
	node := ""
	for _, m := range ms.GetMembers() {
		if m.GetRaftId() == id {
			node = m.GetNodeId()
		}
	}
	if node == "" {
		return nil // not a member, or not registered: it holds no replica
	}
	edges, err := cl.Edges(ctx, &pb.EdgesRequest{}, grpc.MaxCallRecvMsgSize(maxEdgesAnswerBytes))
	if err != nil {
		return refuse(fmt.Errorf("cannot check whether member %d (%s) is the last holder of some edge's segments: list edges: %w (retry, or add --force)", id, node, err))
	}
	sole := coordinator.SoleHoldings(edges.GetEdges(), node)
	if len(sole) == 0 {
		return nil
	}
	var named []string
	for i, h := range sole {
		if i == maxEdgesNamed {
			named = append(named, fmt.Sprintf("and %d more", len(sole)-i))
			break
		}
		if h.Only {
			named = append(named, h.Edge+" (its only live replica)")
			continue
		}
		named = append(named, fmt.Sprintf("%s (%s)", h.Edge, fmtRuns(h.Runs, h.Segments)))
	}
	return refuse(fmt.Errorf("member %d (%s) is the last live holder of segments of %s: %s; removing it now loses them from the cloud. "+
		"Drain it first (tributary cluster drain %s), wait until tributary cluster edges shows no replica on %s, then remove it (--force removes it now)",
		id, node, plural(len(sole), "edge"), strings.Join(named, ", "), node, node))
}

// fmtRuns prints segment runs briefly: "39 segments: 3-40, 52", at most
// four runs.
func fmtRuns(runs []coordinator.SeqRun, segments uint64) string {
	var parts []string
	for i, r := range runs {
		if i == 4 {
			parts = append(parts, "...")
			break
		}
		if r.FirstSeq == r.LastSeq {
			parts = append(parts, strconv.FormatUint(r.FirstSeq, 10))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.FirstSeq, r.LastSeq))
		}
	}
	noun := "segments"
	if segments == 1 {
		noun = "segment"
	}
	return fmt.Sprintf("%d %s: %s", segments, noun, strings.Join(parts, ", "))
}

// printCluster prints an answer of ClusterService; now dates the lags.
func printCluster(w io.Writer, format string, resp any, now time.Time) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(clusterJSON(resp, now))
	}
	switch r := resp.(type) {
	case *pb.MembersResponse:
		fmt.Fprintf(w, "answered by %s, leader %d, term %d\n", r.AnsweredBy, r.LeaderRaftId, r.Term)
		return printMembers(w, r.Members)
	case *pb.AddMemberResponse:
		return printMembers(w, r.Members)
	case *pb.PromoteMemberResponse:
		return printMembers(w, r.Members)
	case *pb.RemoveMemberResponse:
		return printMembers(w, r.Members)
	case *pb.TransferLeadershipResponse:
		_, err := fmt.Fprintf(w, "leader is now %d\n", r.LeaderRaftId)
		return err
	case *pb.GetFleetConfigResponse:
		return printFleetConfig(w, r.GetConfig())
	case *pb.SetFleetConfigResponse:
		return printFleetConfig(w, r.GetConfig())
	case *pb.EdgesResponse:
		return printEdges(w, r, now)
	case *pb.GetRuleGroupsResponse:
		return printRuleGroups(w, r.GetVersion(), r.GetGroups())
	case ruleGroupShown:
		fmt.Fprintf(w, "# rule group %s, version %d, selector %q\n", r.Group.GetName(), r.Group.GetVersion(), r.Group.GetSelector())
		_, err := io.WriteString(w, r.Group.GetYaml())
		return err
	case ruleGroupsSet:
		for _, g := range r.Groups {
			fmt.Fprintf(w, "rule group %s set, version %d\n", g.GetName(), g.GetVersion())
		}
		return nil
	case ruleGroupsDeleted:
		for _, n := range r.Names {
			fmt.Fprintf(w, "rule group %s deleted\n", n)
		}
		return nil
	case edgeChange:
		var err error
		switch r.Change {
		case "decommissioned":
			_, err = fmt.Fprintf(w, "edge %s decommissioned: its placement, progress and series membership are gone (its replicated data stays until retention)\n", r.Edge)
		case "revoked":
			_, err = fmt.Fprintf(w, "edge %s revoked: every coordinator refuses its replication streams and query tunnels (its data stays)\n", r.Edge)
		default:
			_, err = fmt.Fprintf(w, "edge %s may connect again\n", r.Edge)
		}
		return err
	case placed:
		how := "pinned"
		if !r.Resp.GetPinned() {
			how = "placed automatically"
		}
		fmt.Fprintf(w, "edge %s %s: %s\n", r.Edge, how, replicaList(r.Resp.GetReplicas()))
		if hasLeaving(r.Resp.GetReplicas()) {
			fmt.Fprintln(w, leavingNote)
		}
		return nil
	case *pb.RebalanceResponse:
		_, err := fmt.Fprintf(w, "%s changed\n", plural(int(r.GetChanged()), "placement"))
		return err
	case stateChange:
		if r.State == "draining" {
			_, err := fmt.Fprintf(w, "coordinator %s is draining; %s changed: its replicas move away, each kept until the new replicas hold its history (watch tributary cluster edges)\n",
				r.Coordinator, plural(int(r.Moved), "placement"))
			return err
		}
		_, err := fmt.Fprintf(w, "coordinator %s is active; %s changed\n", r.Coordinator, plural(int(r.Moved), "placement"))
		return err
	}
	return fmt.Errorf("BUG: unexpected answer %T", resp)
}

// leavingNote explains the mark of leaving replicas.
const leavingNote = "* leaving: being replaced; still read, and kept until the active replicas hold what it holds"

func hasLeaving(rs []*pb.ReplicaInfo) bool {
	for _, r := range rs {
		if r.GetLeaving() {
			return true
		}
	}
	return false
}

// replicaList prints replicas as "c1 c2*(draining)": leaving ones marked
// with *, coordinators that are not active with their state.
func replicaList(rs []*pb.ReplicaInfo) string {
	if len(rs) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		p := r.GetCoordinator()
		if r.GetLeaving() {
			p += "*"
		}
		if st := r.GetState(); st != "active" {
			p += "(" + st + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

// lackingSegments counts the segments in a replica's lack runs.
func lackingSegments(r *pb.ReplicaInfo) uint64 {
	var n uint64
	for _, l := range r.GetLacks() {
		if l.GetLastSeq() >= l.GetFirstSeq() {
			n += l.GetLastSeq() - l.GetFirstSeq() + 1
		}
	}
	return n
}

// edgeLag is now minus the newest data time the cloud holds of the edge
// contiguously (ok false before anything is held).
func edgeLag(e *pb.EdgeInfo, now time.Time) (float64, bool) {
	if e.GetWatermarkTimeMs() <= 0 {
		return 0, false
	}
	return max(0, float64(now.UnixMilli()-e.GetWatermarkTimeMs())/1000), true
}

func printEdges(w io.Writer, r *pb.EdgesResponse, now time.Time) error {
	fmt.Fprintf(w, "answered by %s: %s\n", r.GetAnsweredBy(), plural(len(r.GetEdges()), "edge"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EDGE\tREPLICAS\tLACKING\tUNDER-REPL\tUNSOURCED\tLAG\tHEARTBEAT\tFLAGS\tLABELS")
	leaving := false
	for _, e := range r.GetEdges() {
		var lacking []string
		for _, rep := range e.GetReplicas() {
			if n := lackingSegments(rep); n > 0 {
				lacking = append(lacking, fmt.Sprintf("%s:%d", rep.GetCoordinator(), n))
			}
		}
		leaving = leaving || hasLeaving(e.GetReplicas())
		lack, lag, beat := "-", "-", "never"
		if len(lacking) > 0 {
			lack = strings.Join(lacking, " ")
		}
		if l, ok := edgeLag(e, now); ok {
			lag = fmtSeconds(l)
		}
		if s := e.GetSecondsSinceHeartbeat(); s >= 0 {
			beat = fmtSeconds(s) + " ago"
		}
		var flags []string
		if e.GetRevoked() {
			flags = append(flags, "revoked")
		}
		if e.GetPinned() {
			flags = append(flags, "pinned")
		}
		fl := "-"
		if len(flags) > 0 {
			fl = strings.Join(flags, ",")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", e.GetNodeId(), replicaList(e.GetReplicas()), lack,
			e.GetUnderReplicatedSegments(), e.GetUnsourcedSegments(), lag, beat, fl, edgeLabels(e.GetLabels()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if leaving {
		fmt.Fprintln(w, leavingNote)
	}
	return nil
}

// edgeLabels prints an edge's labels as name=value,... ("-": none).
func edgeLabels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func printMembers(w io.Writer, ms []*pb.Member) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RAFT ID\tNODE ID\tADDRESS\tROLE\tLEADER\tMATCH")
	for _, m := range ms {
		role, lead, match := "voter", "", "-"
		if m.Learner {
			role = "learner"
		}
		if m.Leader {
			lead = "*"
		}
		if m.MatchIndex > 0 {
			match = strconv.FormatUint(m.MatchIndex, 10)
		}
		node := m.NodeId
		if node == "" {
			node = "(not registered)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", m.RaftId, node, m.Addr, role, lead, match)
	}
	return tw.Flush()
}

// memberJSON is a member in `--format json` (stable snake_case names,
// every field present).
type memberJSON struct {
	RaftID     uint64 `json:"raft_id"`
	NodeID     string `json:"node_id"`
	Addr       string `json:"addr"`
	Learner    bool   `json:"learner"`
	Leader     bool   `json:"leader"`
	MatchIndex uint64 `json:"match_index"`
}

// edgesJSON is the Edges answer in `--format json`: every field of the
// answer, plus what the table derives (lag, lacking segments).
type edgesJSON struct {
	AnsweredBy string     `json:"answered_by"`
	TimeMs     int64      `json:"time_ms"` // the client's clock, which dates lag_seconds
	Edges      []edgeJSON `json:"edges"`
}

type edgeJSON struct {
	NodeID                  string            `json:"node_id"`
	Replicas                []replicaJSON     `json:"replicas"`
	SecondsSinceHeartbeat   float64           `json:"seconds_since_heartbeat"` // -1: never
	Revoked                 bool              `json:"revoked"`
	Pinned                  bool              `json:"pinned"`
	AckedThrough            uint64            `json:"acked_through"`
	WatermarkTimeMs         int64             `json:"watermark_time_ms"`
	LagSeconds              *float64          `json:"lag_seconds"` // null: nothing held yet
	HeldPoints              uint64            `json:"held_points"`
	UnderReplicatedSegments uint64            `json:"under_replicated_segments"`
	UnsourcedSegments       uint64            `json:"unsourced_segments"`
	Labels                  map[string]string `json:"labels,omitempty"`
}

type replicaJSON struct {
	Coordinator     string        `json:"coordinator"`
	Leaving         bool          `json:"leaving"`
	State           string        `json:"state"`
	LackingSegments uint64        `json:"lacking_segments"`
	Lacks           []lackRunJSON `json:"lacks"`
}

type lackRunJSON struct {
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	MinTimeMs int64  `json:"min_time_ms"`
	MaxTimeMs int64  `json:"max_time_ms"`
}

func replicasJSON(rs []*pb.ReplicaInfo) []replicaJSON {
	out := make([]replicaJSON, 0, len(rs))
	for _, r := range rs {
		rj := replicaJSON{Coordinator: r.GetCoordinator(), Leaving: r.GetLeaving(), State: r.GetState(),
			LackingSegments: lackingSegments(r), Lacks: []lackRunJSON{}}
		for _, l := range r.GetLacks() {
			rj.Lacks = append(rj.Lacks, lackRunJSON{l.GetFirstSeq(), l.GetLastSeq(), l.GetMinTimeMs(), l.GetMaxTimeMs()})
		}
		out = append(out, rj)
	}
	return out
}

func clusterJSON(resp any, now time.Time) any {
	conv := func(ms []*pb.Member) []memberJSON {
		out := make([]memberJSON, 0, len(ms))
		for _, m := range ms {
			out = append(out, memberJSON{m.RaftId, m.NodeId, m.Addr, m.Learner, m.Leader, m.MatchIndex})
		}
		return out
	}
	type membersOnly struct {
		Members []memberJSON `json:"members"`
	}
	switch r := resp.(type) {
	case *pb.MembersResponse:
		return struct {
			AnsweredBy   string       `json:"answered_by"`
			LeaderRaftID uint64       `json:"leader_raft_id"`
			Term         uint64       `json:"term"`
			Members      []memberJSON `json:"members"`
		}{r.AnsweredBy, r.LeaderRaftId, r.Term, conv(r.Members)}
	case *pb.AddMemberResponse:
		return membersOnly{conv(r.Members)}
	case *pb.PromoteMemberResponse:
		return membersOnly{conv(r.Members)}
	case *pb.RemoveMemberResponse:
		return membersOnly{conv(r.Members)}
	case *pb.TransferLeadershipResponse:
		return struct {
			LeaderRaftID uint64 `json:"leader_raft_id"`
		}{r.LeaderRaftId}
	case *pb.GetFleetConfigResponse:
		return fleetConfigJSONOf(r.GetConfig())
	case *pb.SetFleetConfigResponse:
		return fleetConfigJSONOf(r.GetConfig())
	case *pb.EdgesResponse:
		out := edgesJSON{AnsweredBy: r.GetAnsweredBy(), TimeMs: now.UnixMilli(), Edges: []edgeJSON{}}
		for _, e := range r.GetEdges() {
			ej := edgeJSON{NodeID: e.GetNodeId(), Replicas: replicasJSON(e.GetReplicas()),
				SecondsSinceHeartbeat: e.GetSecondsSinceHeartbeat(), Revoked: e.GetRevoked(), Pinned: e.GetPinned(),
				AckedThrough: e.GetAckedThrough(), WatermarkTimeMs: e.GetWatermarkTimeMs(), HeldPoints: e.GetHeldPoints(),
				UnderReplicatedSegments: e.GetUnderReplicatedSegments(), UnsourcedSegments: e.GetUnsourcedSegments(),
				Labels: e.GetLabels()}
			if l, ok := edgeLag(e, now); ok {
				ej.LagSeconds = &l
			}
			out.Edges = append(out.Edges, ej)
		}
		return out
	case *pb.GetRuleGroupsResponse:
		return struct {
			Version uint64          `json:"version"`
			Groups  []ruleGroupJSON `json:"groups"`
		}{r.GetVersion(), ruleGroupsJSON(r.GetGroups())}
	case ruleGroupShown:
		return ruleGroupsJSON([]*pb.FleetRuleGroup{r.Group})[0]
	case ruleGroupsSet:
		return struct {
			Groups []ruleGroupJSON `json:"groups"`
		}{ruleGroupsJSON(r.Groups)}
	case ruleGroupsDeleted:
		return struct {
			Deleted []string `json:"deleted"`
		}{r.Names}
	case edgeChange:
		return map[string]any{"node_id": r.Edge, r.Change: true}
	case placed:
		return struct {
			NodeID   string        `json:"node_id"`
			Pinned   bool          `json:"pinned"`
			Replicas []replicaJSON `json:"replicas"`
		}{r.Edge, r.Resp.GetPinned(), replicasJSON(r.Resp.GetReplicas())}
	case *pb.RebalanceResponse:
		return struct {
			Changed uint32 `json:"changed"`
		}{r.GetChanged()}
	case stateChange:
		return struct {
			NodeID string `json:"node_id"`
			State  string `json:"state"`
			Moved  uint32 `json:"moved"`
		}{r.Coordinator, r.State, r.Moved}
	}
	return resp
}

// dialConn opens a plain gRPC connection with the client flags (TLS,
// client certificate, token) for services the SDK does not wrap. The
// connection is made by the first call.
func (f *clientFlags) dialConn() (*grpc.ClientConn, error) {
	if f.timeout < 0 {
		return nil, fmt.Errorf("%w: --timeout %s is negative", errUsage, f.timeout)
	}
	if f.addr == "" {
		return nil, fmt.Errorf("%w: --addr is empty", errUsage)
	}
	token := f.token
	if token == "" {
		token = strings.TrimSpace(f.getenv(tokenEnv))
	}
	tlsCfg, err := f.tlsConfig(f.addr)
	if err != nil {
		return nil, err
	}
	if token != "" && tlsCfg == nil && !f.tokenOverPlain && !loopback.IsAddr(f.addr) {
		return nil, fmt.Errorf("%w: refusing to send the token without TLS to %s (use --tls-ca, or --allow-plaintext-token)", errUsage, f.addr)
	}
	opts := []grpc.DialOption{grpc.WithUserAgent("tributary-cli/" + version)}
	if tlsCfg != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.BearerCredentials(token, tlsCfg != nil)))
	}
	conn, err := grpc.NewClient(f.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %v", errUsage, f.addr, err)
	}
	return conn, nil
}

// fleetConfigFlags are the flags of `cluster config`; only the flags given
// change the configuration.
type fleetConfigFlags struct {
	retRaw, ret1h, ret1d, deadAfter string
	rollupHourly, rollupDaily       bool
	rate, burst, maxSeries          uint64
	replicationFactor, writeQuorum  uint
	lagBudget                       string
	minSegmentPoints                uint64
}

func (f *fleetConfigFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.retRaw, "retention-raw", "", "keep raw samples this long on the edges (e.g. 15d)")
	fs.StringVar(&f.ret1h, "retention-1h", "", "keep hourly rollups this long on the edges")
	fs.StringVar(&f.ret1d, "retention-1d", "", "keep daily rollups this long on the edges")
	fs.BoolVar(&f.rollupHourly, "rollup-hourly", true, "edges compute hourly rollups (informational: edges compute both tiers)")
	fs.BoolVar(&f.rollupDaily, "rollup-daily", true, "edges compute daily rollups (informational: edges compute both tiers)")
	fs.Uint64Var(&f.rate, "rate-limit", 0, "ingest limit of each edge, points per second (0: unlimited)")
	fs.Uint64Var(&f.burst, "rate-burst", 0, "burst of the ingest limit, points (0: one second of the rate)")
	fs.UintVar(&f.replicationFactor, "replication-factor", 0, "coordinators holding each edge's data (1..7)")
	fs.UintVar(&f.writeQuorum, "write-quorum", 0, "replicas that must hold a segment before it is acknowledged to the edge (0: automatic, max(1, replicas-1); at most the replication factor)")
	fs.StringVar(&f.deadAfter, "dead-after", "", "a coordinator without a heartbeat this long is marked down and its replicas move (at least 1s; 0: the default, 5m)")
	fs.Uint64Var(&f.maxSeries, "max-series", 0, "fleet-wide series limit")
	fs.StringVar(&f.lagBudget, "lag-budget", "", "how long a point may wait on an edge before its WAL segment is sealed and shipped: the edges' segment age (1s..1h; 0: the default, "+defaultLagBudget+"; longer ships fewer bytes a point at low rates, see docs/operations.md); edges started with --wal-segment-age, --wal-segment-min-points or --ignore-fleet-config keep their own")
	fs.Uint64Var(&f.minSegmentPoints, "min-segment-points", 0, "a segment as old as the lag budget with fewer points waits for more, up to 4 x the lag budget (0: none)")
}

// defaultLagBudget is the catalog's default lag budget, for help texts.
var defaultLagBudget = (time.Duration(catalog.DefaultLagBudgetMs) * time.Millisecond).String()

// changes returns one edit per config flag given on the command line.
func (f *fleetConfigFlags) changes(fs *flag.FlagSet) ([]func(*pb.FleetConfig), error) {
	var out []func(*pb.FleetConfig)
	var bad error
	dur := func(name, s string, set func(*pb.FleetConfig, int64)) {
		d, err := parseDuration(s)
		if err != nil || d <= 0 {
			bad = fmt.Errorf("%w: cluster config: --%s %q: want a positive duration such as 36h or 15d", errUsage, name, s)
			return
		}
		ms := d.Milliseconds()
		out = append(out, func(c *pb.FleetConfig) { set(c, ms) })
	}
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "retention-raw":
			dur(fl.Name, f.retRaw, func(c *pb.FleetConfig, ms int64) { c.RetentionRawMs = ms })
		case "retention-1h":
			dur(fl.Name, f.ret1h, func(c *pb.FleetConfig, ms int64) { c.Retention_1HMs = ms })
		case "retention-1d":
			dur(fl.Name, f.ret1d, func(c *pb.FleetConfig, ms int64) { c.Retention_1DMs = ms })
		case "rollup-hourly":
			out = append(out, func(c *pb.FleetConfig) { c.RollupHourly = f.rollupHourly })
		case "rollup-daily":
			out = append(out, func(c *pb.FleetConfig) { c.RollupDaily = f.rollupDaily })
		case "rate-limit":
			out = append(out, func(c *pb.FleetConfig) { c.RateLimitPointsPerSec = f.rate })
		case "rate-burst":
			out = append(out, func(c *pb.FleetConfig) { c.RateLimitBurstPoints = f.burst })
		case "replication-factor":
			out = append(out, func(c *pb.FleetConfig) { c.ReplicationFactor = uint32(min(f.replicationFactor, 1<<16)) })
		case "write-quorum":
			out = append(out, func(c *pb.FleetConfig) { c.WriteQuorum = uint32(min(f.writeQuorum, 1<<16)) })
		case "dead-after":
			if f.deadAfter == "0" {
				out = append(out, func(c *pb.FleetConfig) { c.DeadAfterMs = 0 })
				return
			}
			d, err := parseDuration(f.deadAfter)
			if err != nil || d < time.Second {
				bad = fmt.Errorf("%w: cluster config: --dead-after %q: want a duration of at least 1s such as 5m (0: the default)", errUsage, f.deadAfter)
				return
			}
			ms := d.Milliseconds()
			out = append(out, func(c *pb.FleetConfig) { c.DeadAfterMs = ms })
		case "max-series":
			out = append(out, func(c *pb.FleetConfig) { c.MaxSeries = f.maxSeries })
		case "lag-budget":
			if f.lagBudget == "0" {
				out = append(out, func(c *pb.FleetConfig) { c.LagBudgetMs = 0 })
				return
			}
			d, err := parseDuration(f.lagBudget)
			if err != nil || d < time.Second || d > time.Hour || d%time.Millisecond != 0 {
				bad = fmt.Errorf("%w: cluster config: --lag-budget %q: want a duration from 1s to 1h such as 30s (0: the default, %s)", errUsage, f.lagBudget, defaultLagBudget)
				return
			}
			ms := d.Milliseconds()
			out = append(out, func(c *pb.FleetConfig) { c.LagBudgetMs = ms })
		case "min-segment-points":
			if f.minSegmentPoints > catalog.MaxMinSegmentPoints {
				bad = fmt.Errorf("%w: cluster config: --min-segment-points %d: want 0..%d", errUsage, f.minSegmentPoints, catalog.MaxMinSegmentPoints)
				return
			}
			out = append(out, func(c *pb.FleetConfig) { c.MinSegmentPoints = f.minSegmentPoints })
		}
	})
	return out, bad
}

// fleetConfigJSON is the configuration in `--format json` (stable
// snake_case names, every field present).
type fleetConfigJSON struct {
	Version               uint64 `json:"version"`
	RetentionRawMs        int64  `json:"retention_raw_ms"`
	Retention1hMs         int64  `json:"retention_1h_ms"`
	Retention1dMs         int64  `json:"retention_1d_ms"`
	RollupHourly          bool   `json:"rollup_hourly"`
	RollupDaily           bool   `json:"rollup_daily"`
	RateLimitPointsPerSec uint64 `json:"rate_limit_points_per_sec"`
	RateLimitBurstPoints  uint64 `json:"rate_limit_burst_points"`
	ReplicationFactor     uint32 `json:"replication_factor"`
	WriteQuorum           uint32 `json:"write_quorum"`  // 0: automatic
	DeadAfterMs           int64  `json:"dead_after_ms"` // 0: the default
	MaxSeries             uint64 `json:"max_series"`
	LagBudgetMs           int64  `json:"lag_budget_ms"` // 0: the default
	MinSegmentPoints      uint64 `json:"min_segment_points"`
}

func fleetConfigJSONOf(c *pb.FleetConfig) fleetConfigJSON {
	return fleetConfigJSON{c.GetVersion(), c.GetRetentionRawMs(), c.GetRetention_1HMs(), c.GetRetention_1DMs(),
		c.GetRollupHourly(), c.GetRollupDaily(), c.GetRateLimitPointsPerSec(), c.GetRateLimitBurstPoints(),
		c.GetReplicationFactor(), c.GetWriteQuorum(), c.GetDeadAfterMs(), c.GetMaxSeries(),
		c.GetLagBudgetMs(), c.GetMinSegmentPoints()}
}

func printFleetConfig(w io.Writer, c *pb.FleetConfig) error {
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).String() }
	rate := "unlimited"
	if c.GetRateLimitPointsPerSec() > 0 {
		rate = fmt.Sprintf("%d points/s, burst %d", c.GetRateLimitPointsPerSec(), c.GetRateLimitBurstPoints())
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "version\t%d\n", c.GetVersion())
	fmt.Fprintf(tw, "retention raw\t%s\n", ms(c.GetRetentionRawMs()))
	fmt.Fprintf(tw, "retention 1h\t%s\n", ms(c.GetRetention_1HMs()))
	fmt.Fprintf(tw, "retention 1d\t%s\n", ms(c.GetRetention_1DMs()))
	fmt.Fprintf(tw, "rollups\thourly=%t daily=%t\n", c.GetRollupHourly(), c.GetRollupDaily())
	fmt.Fprintf(tw, "edge rate limit\t%s\n", rate)
	fmt.Fprintf(tw, "replication factor\t%d\n", c.GetReplicationFactor())
	quorum := "automatic (max(1, replicas-1))"
	if q := c.GetWriteQuorum(); q > 0 {
		quorum = strconv.FormatUint(uint64(q), 10)
	}
	fmt.Fprintf(tw, "write quorum\t%s\n", quorum)
	dead := "5m0s (default)"
	if d := c.GetDeadAfterMs(); d > 0 {
		dead = ms(d)
	}
	fmt.Fprintf(tw, "dead after\t%s\n", dead)
	fmt.Fprintf(tw, "max series\t%d\n", c.GetMaxSeries())
	lag := defaultLagBudget + " (default)"
	if d := c.GetLagBudgetMs(); d > 0 {
		lag = ms(d)
	}
	fmt.Fprintf(tw, "lag budget\t%s\n", lag)
	minPoints := "none"
	if p := c.GetMinSegmentPoints(); p > 0 {
		minPoints = fmt.Sprintf("%d (waiting at most 4 x the lag budget)", p)
	}
	fmt.Fprintf(tw, "min segment points\t%s\n", minPoints)
	return tw.Flush()
}
