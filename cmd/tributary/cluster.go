package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

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
  remove RAFTID                 remove a member (not the leader: transfer first)
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
                                --replication-factor, --max-series

Membership changes must be sent to the leader; another coordinator answers
with the leader's raft id, node id and cluster address. config may be sent to
any coordinator.`

// runCluster is `tributary cluster`: membership of the coordinators' raft
// cluster through tributary.v1.ClusterService.
func runCluster(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, clusterUsage)
		if len(args) == 0 {
			return fmt.Errorf("%w: missing subcommand", errUsage)
		}
		return flag.ErrHelp
	}
	sub := args[0]
	fs := flag.NewFlagSet("cluster "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, "time limit of the request")
	format := fs.String("format", "table", "output: table or json")
	voter := false
	if sub == "add" {
		fs.BoolVar(&voter, "voter", false, "add the member as a voter at once instead of as a learner")
	}
	var cfgFlags fleetConfigFlags
	if sub == "config" {
		cfgFlags.register(fs)
	}
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return fmt.Errorf("%w: --format %q: want table or json", errUsage, *format)
	}
	wantArgs := func(min, max int) error {
		if len(pos) < min || len(pos) > max {
			return fmt.Errorf("%w: cluster %s takes %d to %d arguments, got %d (tributary cluster -h)", errUsage, sub, min, max, len(pos))
		}
		return nil
	}
	raftArg := func(i int) (uint64, error) {
		id, err := strconv.ParseUint(pos[i], 10, 64)
		if err != nil || id == 0 {
			return 0, fmt.Errorf("%w: cluster %s: raft id %q: want a non-zero integer", errUsage, sub, pos[i])
		}
		return id, nil
	}

	var call func(context.Context, pb.ClusterServiceClient) (any, error)
	switch sub {
	case "members":
		if err := wantArgs(0, 0); err != nil {
			return err
		}
		call = func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			return cl.Members(ctx, &pb.MembersRequest{})
		}
	case "add":
		if err := wantArgs(1, 1); err != nil {
			return err
		}
		peers, err := parsePeers("cluster add", pos[0])
		if err != nil {
			return err
		}
		if len(peers) != 1 {
			return fmt.Errorf("%w: cluster add: want one RAFTID=NODEID@HOST:PORT", errUsage)
		}
		p := peers[0]
		call = func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			return cl.AddMember(ctx, &pb.AddMemberRequest{RaftId: p.RaftID, NodeId: p.NodeID, Addr: p.Addr, Learner: !voter})
		}
	case "promote", "remove":
		if err := wantArgs(1, 1); err != nil {
			return err
		}
		id, err := raftArg(0)
		if err != nil {
			return err
		}
		call = func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			if sub == "promote" {
				return cl.PromoteMember(ctx, &pb.PromoteMemberRequest{RaftId: id})
			}
			return cl.RemoveMember(ctx, &pb.RemoveMemberRequest{RaftId: id})
		}
	case "transfer":
		if err := wantArgs(0, 1); err != nil {
			return err
		}
		var id uint64
		if len(pos) == 1 {
			if id, err = raftArg(0); err != nil {
				return err
			}
		}
		call = func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			return cl.TransferLeadership(ctx, &pb.TransferLeadershipRequest{ToRaftId: id})
		}
	case "config":
		if err := wantArgs(0, 0); err != nil {
			return err
		}
		set, err := cfgFlags.changes(fs)
		if err != nil {
			return err
		}
		call = func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
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
		}
	default:
		fmt.Fprintln(stderr, clusterUsage)
		return fmt.Errorf("%w: unknown subcommand %q", errUsage, sub)
	}

	conn, err := cf.dialConn()
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx := context.Background()
	if cf.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cf.timeout)
		defer cancel()
	}
	resp, err := call(ctx, pb.NewClusterServiceClient(conn))
	if err != nil {
		return fmt.Errorf("%s at %s: %w", sub, cf.addr, err)
	}
	return printCluster(stdout, *format, resp)
}

// printCluster prints an answer of ClusterService.
func printCluster(w io.Writer, format string, resp any) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(clusterJSON(resp))
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
	}
	return fmt.Errorf("BUG: unexpected answer %T", resp)
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

func clusterJSON(resp any) any {
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
	if token != "" && tlsCfg == nil && !f.tokenOverPlain && !loopbackAddr(f.addr) {
		return nil, fmt.Errorf("%w: refusing to send the token without TLS to %s (use --tls-ca, or --allow-plaintext-token)", errUsage, f.addr)
	}
	opts := []grpc.DialOption{grpc.WithUserAgent("tributary-cli/" + version)}
	if tlsCfg != nil {
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken{token: token, secure: tlsCfg != nil}))
	}
	conn, err := grpc.NewClient(f.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %v", errUsage, f.addr, err)
	}
	return conn, nil
}

func loopbackAddr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// bearerToken sends the token with every call.
type bearerToken struct {
	token  string
	secure bool
}

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearerToken) RequireTransportSecurity() bool { return b.secure }

// fleetConfigFlags are the flags of `cluster config`; only the flags given
// change the configuration.
type fleetConfigFlags struct {
	retRaw, ret1h, ret1d      string
	rollupHourly, rollupDaily bool
	rate, burst, maxSeries    uint64
	replicationFactor         uint
}

func (f *fleetConfigFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.retRaw, "retention-raw", "", "keep raw samples this long on the edges (e.g. 15d)")
	fs.StringVar(&f.ret1h, "retention-1h", "", "keep hourly rollups this long on the edges")
	fs.StringVar(&f.ret1d, "retention-1d", "", "keep daily rollups this long on the edges")
	fs.BoolVar(&f.rollupHourly, "rollup-hourly", true, "edges compute hourly rollups (informational: edges compute both tiers)")
	fs.BoolVar(&f.rollupDaily, "rollup-daily", true, "edges compute daily rollups (informational: edges compute both tiers)")
	fs.Uint64Var(&f.rate, "rate-limit", 0, "ingest limit of each edge, points per second (0: unlimited)")
	fs.Uint64Var(&f.burst, "rate-burst", 0, "burst of the ingest limit, points (0: one second of the rate)")
	fs.UintVar(&f.replicationFactor, "replication-factor", 0, "coordinators holding each edge's data (1..3)")
	fs.Uint64Var(&f.maxSeries, "max-series", 0, "fleet-wide series limit")
}

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
		case "max-series":
			out = append(out, func(c *pb.FleetConfig) { c.MaxSeries = f.maxSeries })
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
	MaxSeries             uint64 `json:"max_series"`
}

func fleetConfigJSONOf(c *pb.FleetConfig) fleetConfigJSON {
	return fleetConfigJSON{c.GetVersion(), c.GetRetentionRawMs(), c.GetRetention_1HMs(), c.GetRetention_1DMs(),
		c.GetRollupHourly(), c.GetRollupDaily(), c.GetRateLimitPointsPerSec(), c.GetRateLimitBurstPoints(),
		c.GetReplicationFactor(), c.GetMaxSeries()}
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
	fmt.Fprintf(tw, "max series\t%d\n", c.GetMaxSeries())
	return tw.Flush()
}
