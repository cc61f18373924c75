package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/coordinator/membership"
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/internal/auth"
	"github.com/tributarydb/tributary/internal/k8sapi"
	"github.com/tributarydb/tributary/internal/telemetry"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// coordinatorFlags bind the coordinator's flags to coordinator.Options.
type coordinatorFlags struct {
	peers, join           string
	peerCert, peerKey, ca string
	edgeCA                string
	allowSharedCA         bool
	insecureCluster       bool
	edgeTokenFile         string
	logLevel, logFormat   string
	retainRaw, retain1h   time.Duration
	retain1d              time.Duration
	headMaxBytes, bcBytes int64
	shutdownGrace         time.Duration
	// identityFromHostname derives --id and --raft-id from the host name
	// (a StatefulSet pod's name); hostname is its seam (nil: os.Hostname).
	identityFromHostname bool
	hostname             func() (string, error)
	autoJoin             bool
	// rejoin: a data directory without a raft log whose member the
	// cluster knows joins as a new member (coordinator.CheckFreshDataDir).
	rejoin bool
	// replaces is the raft id a rejoining member replaces (0: none); the
	// membership loop removes it before adding this one.
	replaces uint64
	// expectedMembers (0: off) and autoLeaveAfter configure the removal of
	// members beyond the expected ones (coordinator/membership).
	expectedMembers uint64
	autoLeaveAfter  time.Duration
	// expectedFromStatefulSet ([NAMESPACE/]NAME, "": off) reads the
	// expected member count live from the StatefulSet's scale subresource;
	// k8sConfig is its seam (nil: k8sapi.InCluster).
	expectedFromStatefulSet string
	k8sConfig               func() (k8sapi.Config, error)
}

func (f *coordinatorFlags) register(fs *flag.FlagSet, o *coordinator.Options, local bool) {
	if !local {
		fs.StringVar(&o.NodeID, "id", "", "this coordinator's node id in the fleet (with TLS: a DNS or URI SAN of its certificate) (required)")
		fs.Uint64Var(&o.RaftID, "raft-id", 0, "this coordinator's raft member id, unique and never reused (required)")
		fs.BoolVar(&f.identityFromHostname, "identity-from-hostname", false, "take --id from the host name and --raft-id from its trailing -N ordinal plus one (a StatefulSet pod: tributary-coordinator-2 is raft id 3); with --peers not naming this raft id, join (as --join) instead of bootstrapping; excludes --id and --raft-id")
		fs.StringVar(&o.DataDir, "data-dir", "./coordinator-data", "directory for the raft log and the replica store")
		fs.StringVar(&o.ClusterID, "cluster-id", "tributary", "name of the raft cluster; members of another cluster are refused")
		fs.StringVar(&f.peers, "peers", "", "bootstrap a new cluster with these members, the same list on each: RAFTID=NODEID@HOST:PORT,... (this one included); empty: wait to be added to an existing cluster")
		fs.StringVar(&f.join, "join", "", "join an existing cluster whose current members are these: RAFTID=NODEID@HOST:PORT,... (their raft messages are accepted before the catalog arrives); then add this coordinator with `tributary cluster add` (excludes --peers)")
		fs.BoolVar(&f.autoJoin, "auto-join", false, "when joining (--join, or beyond --peers with --identity-from-hostname): ask the leader to add this coordinator as a learner and to promote it once caught up, instead of `tributary cluster add`/`promote` by hand; members are asked on their cluster host at this coordinator's --listen port (no effect when bootstrapping)")
		fs.Uint64Var(&f.expectedMembers, "expected-members", 0, "with --identity-from-hostname: the StatefulSet's replica count; the leader removes from raft the members beyond it (raft id > N) once they have not answered for --auto-leave-after, never below a quorum, and a pod beyond it does not auto-join (0: off)")
		fs.StringVar(&f.expectedFromStatefulSet, "expected-members-from-statefulset", "", "with --identity-from-hostname: as --expected-members, but read live from the replica count of this StatefulSet ([NAMESPACE/]NAME; default namespace: the pod's) through the Kubernetes API with the pod's service account (get on statefulsets/scale), so that `kubectl scale` works; when it cannot be read the leader removes nobody, and a joining pod goes by the last count read (none read yet: it waits); excludes --expected-members")
		fs.DurationVar(&f.autoLeaveAfter, "auto-leave-after", time.Minute, "with --expected-members or --expected-members-from-statefulset: how long a member beyond the count must be unreachable before the leader removes it")
		fs.BoolVar(&f.rejoin, "rejoin", false, "when the data directory holds no raft log but the cluster knows this coordinator (its disk was lost or replaced): join as a new member under a new raft id, replacing the old one, and get its share of the data back by re-replication (the leader is asked as --auto-join asks it). Without it such a coordinator refuses to start, saying so")
		fs.DurationVar(&o.DeadAfter, "dead-after", 0, "mark a coordinator down once it has not heartbeated for this long, so that its replicas move (0: the fleet configuration's, default 5m; `tributary cluster config --dead-after` sets that)")
		fs.DurationVar(&o.HealInterval, "heal-interval", 2*time.Second, "how often the healer judges health and balance (as leader) and looks for runs this coordinator's replicas lack")
		fs.Int64Var(&o.RepairBytesPerSec, "repair-bytes-per-sec", 64<<20, "pace of the copies this coordinator makes of what its replicas lack, all of them together, in segment bytes per second (negative: unlimited)")
		fs.DurationVar(&o.ScrubInterval, "scrub-interval", 10*time.Minute, "how often the replica store is compared with the catalog (negative: never)")
		fs.IntVar(&o.MaxMovesInFlight, "max-moves-in-flight", 4, "balancing moves whose copies may be unfinished at once (the leader proposes more only below it)")
		fs.Uint64Var(&o.SnapshotEntries, "raft-snapshot-entries", 10_000, "snapshot the catalog every this many applied raft entries")
		fs.Uint64Var(&o.KeepEntries, "raft-keep-entries", 5_000, "raft entries kept in the log before a snapshot (a member lagging further catches up from a snapshot)")
		fs.StringVar(&o.ClusterAddr, "cluster-advertise", "", "cluster address the other coordinators use to reach this one (default: --cluster-listen)")
		fs.StringVar(&f.peerCert, "peer-cert", "", "PEM certificate of this coordinator (naming --id), used on the cluster links and the intake listener")
		fs.StringVar(&f.peerKey, "peer-key", "", "PEM private key for --peer-cert")
		fs.StringVar(&f.ca, "peer-ca", "", "PEM CA bundle that signs the coordinators' certificates; the cluster listener trusts only it")
		fs.StringVar(&f.edgeCA, "edge-ca", "", "PEM CA bundle that signs the edges' client certificates; the intake listener trusts only it (required with TLS; a different CA from --peer-ca unless --allow-shared-ca)")
		fs.BoolVar(&f.allowSharedCA, "allow-shared-ca", false, "accept --edge-ca and --peer-ca naming the same CA: an edge's certificate then passes the cluster listener's TLS handshake, and only the admission by member name keeps it out")
		fs.IntVar(&o.ClusterLimits.MaxConns, "cluster-max-conns", coordinator.DefaultClusterLimits.MaxConns, "connections the cluster listener keeps open at once; further ones are closed when accepted")
		fs.IntVar(&o.ClusterLimits.MaxConnsPerIP, "cluster-max-conns-per-ip", coordinator.DefaultClusterLimits.MaxConnsPerIP, "connections the cluster listener keeps open from one address (each coordinator opens 3)")
		fs.Func("cluster-max-streams", fmt.Sprintf("calls the cluster listener serves at once on one connection: raft streams, and the replica stores and copies one coordinator sends another, which share one connection (default %d)", coordinator.DefaultClusterLimits.MaxStreams), func(v string) error {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				return fmt.Errorf("want a positive number of streams, got %q", v)
			}
			o.ClusterLimits.MaxStreams = uint32(n)
			return nil
		})
		fs.IntVar(&o.IntakeLimits.MaxConns, "intake-max-conns", coordinator.DefaultIntakeLimits.MaxConns, "connections the intake listener keeps open at once (each edge opens 2); further ones are closed when accepted")
		fs.IntVar(&o.IntakeLimits.MaxConnsPerIP, "intake-max-conns-per-ip", coordinator.DefaultIntakeLimits.MaxConnsPerIP, "connections the intake listener keeps open from one address (edges behind one NAT share it)")
		fs.StringVar(&f.edgeTokenFile, "edge-token-file", "", "file whose first token is sent when this coordinator queries edges for their fresh data (edges started with --token-file); reloaded when it changes")
		fs.BoolVar(&f.insecureCluster, "insecure-cluster", false, "plaintext cluster links and intake, without identity checks (loopback only unless --insecure-listen)")
	}
	fs.StringVar(&o.ClusterListen, "cluster-listen", "127.0.0.1:7444", "listen address for raft messages and replica calls from other coordinators")
	fs.DurationVar(&o.QueryMaxStaleness, "query-max-staleness", 0, "staleness allowance of the queries that give none (gRPC max_staleness_ms, max_staleness on the Prometheus and OpenTSDB APIs): an edge whose data the coordinators hold within it of a query's end is answered from its replicas without being asked, and the answer says how fresh it is (0: ask every edge that may hold newer data)")
	fs.DurationVar(&o.CatalogLinger, "catalog-linger", intake.DefaultCatalogLinger, "how long the catalog records of segments received wait for others to share a raft proposal with when none is in flight (added to each acknowledgement's latency; negative: not at all)")
	fs.StringVar(&o.IntakeListen, "intake-listen", "127.0.0.1:7443", "listen address where edges ship their WAL segments")
	fs.DurationVar(&f.retainRaw, "replica-retention-raw", 15*24*time.Hour, "keep replicated raw samples this long")
	fs.DurationVar(&f.retain1h, "replica-retention-1h", 730*24*time.Hour, "keep replicated hourly rollups this long")
	fs.DurationVar(&f.retain1d, "replica-retention-1d", 3650*24*time.Hour, "keep replicated daily rollups this long")
	fs.Int64Var(&f.headMaxBytes, "replica-head-max-bytes", 256<<20, "memory bound for unflushed replicated samples")
	fs.IntVar(&o.MaxSnapshotBytes, "raft-max-snapshot-bytes", coordinator.DefaultMaxSnapshotBytes, "largest raft snapshot (the catalog) this coordinator sends or takes, held in memory whole on both sides; set it alike on every coordinator (a 10 M-series catalog is about 530 MiB)")
	fs.Int64Var(&f.bcBytes, "replica-block-cache-bytes", 256<<20, "RocksDB block cache of the replica store")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "time given to requests, edge streams and the leadership transfer on SIGTERM")
	if !local {
		fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
		fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	}
}

// apply validates the flags into o.
func (f *coordinatorFlags) apply(o *coordinator.Options, insecureListen bool) error {
	var err error
	if f.identityFromHostname {
		if o.NodeID != "" || o.RaftID != 0 {
			return fmt.Errorf("%w: --identity-from-hostname and --id/--raft-id exclude each other", errUsage)
		}
		hostname := f.hostname
		if hostname == nil {
			hostname = os.Hostname
		}
		h, err := hostname()
		if err != nil {
			return fmt.Errorf("--identity-from-hostname: read the host name: %w", err)
		}
		if o.NodeID, o.RaftID, err = membership.IdentityFromHostname(h); err != nil {
			return fmt.Errorf("%w: --identity-from-hostname: %v", errUsage, err)
		}
	}
	// A data directory written under another raft id (its member rejoined
	// after losing a disk) keeps that raft id.
	if o.DataDir != "" && o.NodeID != "" {
		m, ok, err := coordinator.ReadMember(o.DataDir)
		if err != nil {
			return err
		}
		if ok && m.NodeID == o.NodeID && m.RaftID != o.RaftID {
			if !f.identityFromHostname {
				return fmt.Errorf("%w: --raft-id %d, but data directory %s belongs to raft member %d of %q (it rejoined under that id): give --raft-id %d",
					errUsage, o.RaftID, o.DataDir, m.RaftID, m.NodeID, m.RaftID)
			}
			o.RaftID = m.RaftID
		}
	}
	if f.expectedMembers > 0 && (!f.identityFromHostname || f.autoLeaveAfter <= 0) {
		return fmt.Errorf("%w: --expected-members needs --identity-from-hostname (raft ids from ordinals) and a positive --auto-leave-after", errUsage)
	}
	if err := f.checkStatefulSet(o.NodeID); err != nil {
		return err
	}
	if o.Peers, err = parsePeers("--peers", f.peers); err != nil {
		return err
	}
	if o.JoinPeers, err = parsePeers("--join", f.join); err != nil {
		return err
	}
	if f.identityFromHostname && len(o.Peers) > 0 && !slices.ContainsFunc(o.Peers, func(p coordinator.Peer) bool { return p.RaftID == o.RaftID && p.NodeID == o.NodeID }) {
		// A pod beyond the bootstrap size (the StatefulSet was scaled
		// up): the same --peers list every pod gets names the bootstrap
		// members, which this one joins instead of founding a second
		// cluster with.
		if len(o.JoinPeers) > 0 {
			return fmt.Errorf("%w: --peers (bootstrap a new cluster) and --join (join an existing one) exclude each other", errUsage)
		}
		o.Peers, o.JoinPeers = nil, o.Peers
	}
	if len(o.Peers) > 0 && len(o.JoinPeers) > 0 {
		return fmt.Errorf("%w: --peers (bootstrap a new cluster) and --join (join an existing one) exclude each other", errUsage)
	}
	o.RetentionRaw, o.Retention1h, o.Retention1d = f.retainRaw, f.retain1h, f.retain1d
	o.HeadMaxBytes, o.BlockCacheBytes = f.headMaxBytes, f.bcBytes
	switch {
	case f.insecureCluster && (f.peerCert != "" || f.peerKey != "" || f.ca != "" || f.edgeCA != "" || f.allowSharedCA):
		return fmt.Errorf("%w: --insecure-cluster and --peer-cert/--peer-key/--peer-ca/--edge-ca/--allow-shared-ca exclude each other", errUsage)
	case f.insecureCluster:
		for _, c := range []struct{ what, addr string }{{"--cluster-listen", o.ClusterListen}, {"--intake-listen", o.IntakeListen}} {
			if err := auth.CheckListen(c.what, c.addr, false, insecureListen); err != nil {
				return fmt.Errorf("%w: %v", errUsage, err)
			}
		}
		o.Insecure = true
		// Edges' query addresses are plaintext too; without credentials
		// every dial fails and no edge tail is ever read.
		o.EdgeDialOptions = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	default:
		srv, cli, err := auth.MutualTLS(f.peerCert, f.peerKey, f.ca)
		if err != nil {
			return fmt.Errorf("%w: cluster TLS (--peer-cert, --peer-key, --peer-ca; or --insecure-cluster on loopback): %v", errUsage, err)
		}
		o.ClusterServerTLS, o.ClusterClientTLS = srv, cli
		if err := f.checkEdgeCA(); err != nil {
			return err
		}
		var edgeClient *tls.Config
		if o.IntakeTLS, edgeClient, err = auth.MutualTLS(f.peerCert, f.peerKey, f.edgeCA); err != nil {
			return fmt.Errorf("%w: intake TLS (--edge-ca): %v", errUsage, err)
		}
		// Edges' query listeners: their server certificates are signed by
		// the edge CA; this coordinator presents its own certificate.
		o.EdgeDialOptions = []grpc.DialOption{grpc.WithTransportCredentials(auth.ClientCredentials(edgeClient))}
	}
	if f.edgeTokenFile != "" {
		toks, err := auth.LoadTokens(f.edgeTokenFile)
		if err != nil || !toks.Enabled() {
			return fmt.Errorf("%w: --edge-token-file: %v", errUsage, cmp.Or(err, errors.New("holds no token")))
		}
		o.EdgeDialOptions = append(o.EdgeDialOptions, grpc.WithPerRPCCredentials(toks.BearerCredentials(!o.Insecure)))
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// checkFresh decides what a coordinator whose data directory holds no raft
// log does (coordinator.CheckFreshDataDir): bootstrap or join as its flags
// say, refuse to start (its disk was lost and --rejoin not given), or
// rejoin under a new raft id (o is changed to join, and the membership loop
// replaces the old member). It waits for the peers until SIGINT or
// SIGTERM.
func (f *coordinatorFlags) checkFresh(o *coordinator.Options, log *slog.Logger) error {
	present, err := coordinator.RaftLogPresent(o.DataDir)
	if err != nil || present {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	newRaftID := func(maxRaftID, old uint64) uint64 {
		return membership.NewRaftID(maxRaftID, old, f.identityFromHostname)
	}
	d, err := coordinator.CheckFreshDataDir(ctx, *o, f.rejoin, newRaftID)
	if err != nil {
		return err
	}
	switch d.Action {
	case coordinator.FreshRefuse:
		return fmt.Errorf("coordinator %q does not start: %s", o.NodeID, d.Reason)
	case coordinator.FreshRejoin:
		log.Warn("rejoining as a new member: this data directory lost the raft log the cluster knows", "reason", d.Reason,
			"old_raft_id", d.Replaces, "raft_id", d.RaftID)
		joins := append(slices.Clone(o.Peers), o.JoinPeers...)
		o.Peers, o.JoinPeers = nil, nil
		for _, p := range joins {
			if p.NodeID != o.NodeID && !slices.ContainsFunc(o.JoinPeers, func(q coordinator.Peer) bool { return q.RaftID == p.RaftID }) {
				o.JoinPeers = append(o.JoinPeers, p)
			}
		}
		o.RaftID, f.replaces = d.RaftID, d.Replaces
	default:
		log.Info("no raft log here", "decision", d.Reason)
	}
	return nil
}

// checkEdgeCA requires --edge-ca and refuses one that shares a CA
// certificate with --peer-ca unless --allow-shared-ca: the cluster
// listener trusts --peer-ca, so a certificate issued to an edge by a
// shared CA passes its TLS handshake, and only the admission by member
// name (which reads nothing before it decides) still keeps the edge out.
func (f *coordinatorFlags) checkEdgeCA() error {
	if f.edgeCA == "" {
		return fmt.Errorf("%w: --edge-ca is required with TLS: the CA bundle that signs the edges' client certificates (it no longer defaults to --peer-ca; give the edges a CA of their own)", errUsage)
	}
	shared, err := auth.SharedCAs(f.ca, f.edgeCA)
	if err != nil {
		return fmt.Errorf("%w: compare --peer-ca and --edge-ca: %v", errUsage, err)
	}
	if len(shared) == 0 || f.allowSharedCA {
		return nil
	}
	return fmt.Errorf("%w: --peer-ca %s and --edge-ca %s hold the same CA certificate (%s): a certificate issued to an edge would pass the TLS handshake of the cluster listener, where raft and replica calls arrive. "+
		"Coordinators still admit only certificates naming a current member there, before reading anything, but give the edges a CA of their own, or pass --allow-shared-ca to accept one CA explicitly",
		errUsage, f.ca, f.edgeCA, strings.Join(shared, "; "))
}

// parsePeers parses RAFTID=NODEID@HOST:PORT,... given to flagName.
func parsePeers(flagName, s string) ([]coordinator.Peer, error) {
	var out []coordinator.Peer
	for i, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		idStr, rest, ok1 := strings.Cut(item, "=")
		name, addr, ok2 := strings.Cut(rest, "@")
		id, err := strconv.ParseUint(idStr, 10, 64)
		if !ok1 || !ok2 || err != nil || id == 0 || name == "" || addr == "" {
			return nil, fmt.Errorf("%w: %s item %d %q: want RAFTID=NODEID@HOST:PORT with a non-zero raft id", errUsage, flagName, i+1, item)
		}
		out = append(out, coordinator.Peer{RaftID: id, NodeID: name, Addr: addr})
	}
	return out, nil
}

func runCoordinator(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("coordinator", stderr, "")
	var o coordinator.Options
	var cf coordinatorFlags
	cf.register(fs, &o, false)
	var sf serveFlags
	sf.register(fs)
	sf.alertsFromSeries = true // the fleet's replicated ALERTS (docs/rules.md)
	var rulesf rulesFlags
	rulesf.register(fs)
	var crf coordRulesFlags
	crf.register(fs)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	log, err := newLogger(stderr, cf.logLevel, cf.logFormat)
	if err != nil {
		return err
	}
	o.Logger = log
	if err := cf.apply(&o, sf.insecureListen); err != nil {
		return err
	}
	if err := sf.check(); err != nil {
		return err
	}
	if err := crf.validate(&rulesf, o.Insecure); err != nil {
		return err
	}
	o.GRPCReflection = sf.reflection
	tp, err := sf.telemetry("coordinator", o.NodeID)
	if err != nil {
		return err
	}
	defer stopTelemetry(tp, log)
	o.MeterProvider, o.TracerProvider = tp.MeterProvider(), tp.TracerProvider()
	if err := cf.checkFresh(&o, log); err != nil {
		return err
	}
	withRules := len(rulesf.o.Files) > 0
	var rulesEdge edgeSource
	if withRules {
		// Queries of this coordinator read its rules edge's fresh tail.
		o.LocalEdge = rulesEdge.source
	}
	c, err := coordinator.Open(o)
	if err != nil {
		return err
	}
	var cr *coordinatorRules
	if withRules {
		tlsCfg, err := crf.clientTLS(o, cf.ca)
		if err == nil {
			cr, err = openCoordinatorRules(c, &rulesf, &sf, coordinatorRulesOptions{dataDir: o.DataDir, tls: tlsCfg,
				local: &rulesEdge, sealAge: crf.sealAge, mp: o.MeterProvider, log: log})
		}
		if err != nil {
			c.Stop(context.Background())
			return err
		}
	}
	fe, gh, err := serveCoordinator(c, &sf, nil, tp, log)
	if err != nil {
		cr.stop()
		c.Stop(context.Background())
		return err
	}
	if cr != nil {
		cr.start()
	}
	log.Info("coordinator ready", append(fe.addrs, "id", o.NodeID, "raft_id", o.RaftID, "cluster", c.ClusterAddr(),
		"intake", c.IntakeAddr(), "data_dir", o.DataDir, "version", version)...)
	mo, members, err := cf.membership(o, c.ClusterAddr(), &sf, log)
	if err != nil {
		gh.Close()
		fe.stop(time.Second)
		cr.stop()
		c.Stop(context.Background())
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	if members {
		wg.Go(func() { membership.Run(ctx, mo) })
	}
	var stopRules func() error
	if cr != nil {
		stopRules = cr.stop
	}
	err = waitAndStop(fe, gh, log, cf.shutdownGrace, c, stopRules)
	cancel()
	wg.Wait()
	return err
}

// membership maps --auto-join, --rejoin, --expected-members and
// --expected-members-from-statefulset to the options of the membership
// loops (coordinator/membership); members is false when none applies.
// The members' client listeners are dialled with the coordinator's
// cluster TLS identity (its certificate, verified against --peer-ca) and
// the first accepted client token, on the host of their cluster address
// at this coordinator's --listen port.
//
// The leader is told the advertised cluster address (a pod's DNS name),
// not the bound listener ([::]:7444); boundAddr is the fallback.
func (f *coordinatorFlags) membership(o coordinator.Options, boundAddr string, sf *serveFlags, log *slog.Logger) (_ membership.Options, members bool, _ error) {
	join := (f.autoJoin || f.replaces != 0) && len(o.JoinPeers) > 0
	if !join && f.expectedMembers == 0 && f.expectedFromStatefulSet == "" {
		return membership.Options{}, false, nil
	}
	_, port, err := net.SplitHostPort(sf.grpcListen)
	if err != nil {
		return membership.Options{}, false, fmt.Errorf("%w: --auto-join: --listen %q: %v", errUsage, sf.grpcListen, err)
	}
	creds := insecure.NewCredentials()
	if !o.Insecure {
		creds = credentials.NewTLS(o.ClusterClientTLS.Clone())
	}
	dialOpts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	toks, err := sf.tokens()
	if err != nil {
		return membership.Options{}, false, err
	}
	if toks.Enabled() {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(toks.BearerCredentials(!o.Insecure)))
	}
	mo := membership.Options{
		Self:     membership.Peer{RaftID: o.RaftID, NodeID: o.NodeID, Addr: cmp.Or(o.ClusterAddr, boundAddr)},
		Replaces: f.replaces, LeaveAfter: f.autoLeaveAfter,
		Cluster: &membership.GRPCCluster{ClientAddr: membership.ClientAddrAtPort(port), DialOptions: dialOpts},
		Logger:  log,
	}
	switch {
	case f.expectedMembers > 0:
		mo.Expected = membership.FixedExpected(f.expectedMembers)
	case f.expectedFromStatefulSet != "":
		if mo.Expected, err = f.statefulSetExpected(log); err != nil {
			return membership.Options{}, false, err
		}
		if o.MeterProvider != nil {
			mo.Expected = countExpectedReads(mo.Expected, o.MeterProvider.Meter("github.com/tributarydb/tributary/coordinator/membership"))
		}
	}
	if join {
		for _, p := range o.JoinPeers {
			mo.Join = append(mo.Join, membership.Peer{RaftID: p.RaftID, NodeID: p.NodeID, Addr: p.Addr})
		}
	}
	return mo, true, mo.Validate()
}

// checkStatefulSet checks --expected-members-from-statefulset against the
// other flags and this pod's name (nodeID, from the host name), which
// must be one of the StatefulSet's: NAME-ORDINAL.
func (f *coordinatorFlags) checkStatefulSet(nodeID string) error {
	if f.expectedFromStatefulSet == "" {
		return nil
	}
	flag := "--expected-members-from-statefulset"
	if f.expectedMembers > 0 {
		return fmt.Errorf("%w: --expected-members and %s exclude each other", errUsage, flag)
	}
	if !f.identityFromHostname || f.autoLeaveAfter <= 0 {
		return fmt.Errorf("%w: %s needs --identity-from-hostname (raft ids from ordinals) and a positive --auto-leave-after", errUsage, flag)
	}
	_, name := splitStatefulSet(f.expectedFromStatefulSet)
	if ord, ok := strings.CutPrefix(nodeID, name+"-"); !ok || strings.ContainsRune(ord, '-') {
		return fmt.Errorf("%w: %s %q: this pod, %s, is not one of its pods (NAME-ORDINAL)", errUsage, flag, f.expectedFromStatefulSet, nodeID)
	}
	return nil
}

// splitStatefulSet splits [NAMESPACE/]NAME.
func splitStatefulSet(v string) (ns, name string) {
	if i := strings.IndexByte(v, '/'); i >= 0 {
		return v[:i], v[i+1:]
	}
	return "", v
}

// statefulSetExpected is the membership loops' source of the expected
// member count: the StatefulSet's replica count, read through the
// Kubernetes API with the pod's service account each time.
func (f *coordinatorFlags) statefulSetExpected(log *slog.Logger) (membership.ExpectedFunc, error) {
	inCluster := f.k8sConfig
	if inCluster == nil {
		inCluster = k8sapi.InCluster
	}
	cfg, err := inCluster()
	if err != nil {
		return nil, fmt.Errorf("--expected-members-from-statefulset: %w", err)
	}
	c, err := k8sapi.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--expected-members-from-statefulset: %w", err)
	}
	ns, name := splitStatefulSet(f.expectedFromStatefulSet)
	if ns == "" {
		ns = c.Namespace()
	}
	log.Info("membership: the expected member count is the StatefulSet's replica count", "statefulset", ns+"/"+name, "api_server", cfg.Server)
	return func(ctx context.Context) (uint64, error) { return c.StatefulSetReplicas(ctx, ns, name) }, nil
}

// expectedReads counts the reads of the expected member count by result
// and keeps the last count read (-1: none yet).
type expectedReads struct {
	ok, failed, last atomic.Int64
}

// countExpectedReads wraps read so that its results are exported:
// tributary_membership_expected_reads_total{result} and
// tributary_membership_expected_members (the last count read). A count
// that cannot be read stops the removal of members, so the error rate is
// what to alert on.
func countExpectedReads(read membership.ExpectedFunc, meter metric.Meter) membership.ExpectedFunc {
	var st expectedReads
	st.last.Store(-1)
	reads, _ := meter.Int64ObservableCounter("tributary.membership.expected_reads", metric.WithUnit("{read}"),
		metric.WithDescription("Reads of the expected member count from the Kubernetes API, by result; while they fail, the leader removes no member."))
	last, _ := meter.Int64ObservableGauge("tributary.membership.expected_members", metric.WithUnit("{member}"),
		metric.WithDescription("The expected member count last read (the StatefulSet's replica count)."))
	_, _ = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(reads, st.ok.Load(), metric.WithAttributes(attribute.String("result", "ok")))
		o.ObserveInt64(reads, st.failed.Load(), metric.WithAttributes(attribute.String("result", "error")))
		if n := st.last.Load(); n >= 0 {
			o.ObserveInt64(last, n)
		}
		return nil
	}, reads, last)
	return func(ctx context.Context) (uint64, error) {
		n, err := read(ctx)
		if err != nil {
			st.failed.Add(1)
			return n, err
		}
		st.ok.Add(1)
		st.last.Store(int64(min(n, math.MaxInt64)))
		return n, nil
	}
}

// serveCoordinator serves the client APIs of a coordinator: every query
// protocol over the fleet-wide front end, plus GET /api/v1/fleet. b, when
// not nil, replaces the front end as the backend (tributary local).
func serveCoordinator(c *coordinator.Coordinator, sf *serveFlags, local *localBackend, tp *telemetry.Provider, log *slog.Logger) (*frontend, *grpcapi.Health, error) {
	status := func(ctx context.Context) (*pb.StatusResponse, error) {
		st := &pb.StatusResponse{NodeId: c.NodeID(), Role: "coordinator", Version: version,
			Series: int64(c.Catalog().SeriesCount()), UptimeMs: c.Uptime().Milliseconds()}
		if local != nil {
			st = local.status(st)
		}
		return st, nil
	}
	var b = c.Backend()
	registerQuery := grpcapi.New(b, grpcapi.Options{Status: status}).RegisterQuery
	if local != nil {
		b = local
		registerQuery = local.register(status)
	}
	register := func(g *grpc.Server) {
		registerQuery(g)
		c.RegisterAdmin(g) // ClusterService: membership changes
	}
	var services map[string][]func() error
	if local != nil {
		// tributary local: writes go to the in-process edge.
		services = map[string][]func() error{pb.WriteService_ServiceDesc.ServiceName: {nodeWriteReady(local.edge)}}
	}
	gh := grpcapi.NewHealth(grpcapi.HealthOptions{Overall: coordinatorReadiness(c, local), Services: services})
	extra := func(mux *http.ServeMux, st *httpapi.Stats) {
		mux.Handle("GET /api/v1/fleet", fleetHandler(c))
		if local != nil {
			mux.Handle("GET /metrics", local.metrics(tp, st))
		} else {
			mux.Handle("GET /metrics", metricsHandler(tp, nil, st))
		}
		httpapi.RegisterHealth(mux, coordinatorReadiness(c, local)...)
	}
	fe, err := sf.start(b, gh.Register(register), extra, log)
	if err != nil {
		gh.Close()
		return nil, nil, err
	}
	return fe, gh, nil
}

// coordinatorReadiness are the /readyz checks of a coordinator (raft
// member caught up with a known leader, registered, replica store open,
// intake serving) and of its in-process edge in local mode.
func coordinatorReadiness(c *coordinator.Coordinator, local *localBackend) []func() error {
	checks := []func() error{c.Readiness}
	if local != nil {
		checks = append(checks, local.ready)
	}
	return checks
}

// fleetHandler answers GET /api/v1/fleet with the catalog's view of the
// fleet as JSON (coordinator.Fleet).
func fleetHandler(c *coordinator.Coordinator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		f, err := c.Fleet(ctx)
		if err != nil {
			http.Error(w, fmt.Sprintf("read the fleet catalog: %v", err), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(f)
	})
}

// waitAndStop waits for SIGTERM/SIGINT or a failure, then stops the
// listeners, the edge (local mode) and the coordinator.
func waitAndStop(fe *frontend, gh *grpcapi.Health, log *slog.Logger, grace time.Duration, c *coordinator.Coordinator, edge func() error) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err = <-fe.errc:
		log.Error("listener stopped", "err", err)
	case err = <-c.Err():
		if errors.Is(err, coordinator.ErrRemoved) {
			log.Info("removed from the raft cluster: shutting down")
			err = nil
		}
	}
	gh.Close() // NOT_SERVING while the listeners drain
	fe.stop(grace)
	if edge != nil {
		if eerr := edge(); eerr != nil && err == nil {
			err = eerr
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if cerr := c.Stop(sctx); cerr != nil && err == nil {
		err = fmt.Errorf("stop coordinator: %w", cerr)
	}
	if err == nil {
		log.Info("stopped cleanly")
	}
	return err
}
