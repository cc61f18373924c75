// Package coordinator is the cloud process of Tributary: a raft member
// keeping the fleet catalog, a replica store holding the replicated data of
// the edges placed on it, the segment intake edges ship to, and a query
// front end that answers for the whole fleet.
//
// A Coordinator wires the parts together:
//
//	cluster listener ── raft messages (transport) ──► raftnode.Node ──► catalog.FSM
//	                 └─ replica calls (replica.Server) ──► replica.Store
//	intake listener ─── edges' segment streams (intake.Server) ──► replicas + catalog
//	Backend() ───────── query front end (query.Frontend): catalog → replicas + edges → merge
//
// Besides starting them, it registers itself in the catalog as a
// coordinator (which places edges on it), keeps the raft transport's
// address book in step with the catalog's members, heartbeats, and routes
// replica and edge calls: to its own store, to other coordinators over the
// cluster links, to edges in this process or at their advertised address.
//
// RegisterAdmin serves tributary.v1.ClusterService (admin.go) on the
// client gRPC listener: membership changes and leadership transfers, made
// on the leader (a follower names the leader instead).
//
// A Coordinator is safe for concurrent use.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/heal"
	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/coordinator/internal/transport"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/coordinator/replica"
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/internal/grpcreflect"
	"github.com/tributarydb/tributary/internal/netlimit"
	"github.com/tributarydb/tributary/internal/tunnel"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// Coordinator is one running coordinator.
type Coordinator struct {
	opts Options
	log  *slog.Logger

	fsm        *catalog.FSM
	raft       *raftnode.Node
	tr         *transport.Transport
	clusterSrv *transport.Server
	store      *replica.Store
	intake     *intake.Server
	tunnels    *tunnel.Registry
	intakeGRPC *grpc.Server
	healths    []*grpcapi.Health // of the cluster and intake listeners
	front      *query.Frontend
	healer     *heal.Healer
	// repairPace paces every repair copy of this coordinator together
	// (Options.RepairBytesPerSec).
	repairPace *replica.CopyPacer
	links      *links
	// book is the set of raft ids in the transport's address book.
	// REQUIRES: only used by the maintain goroutine after Open.
	book map[uint64]bool

	clusterLis net.Listener
	intakeLis  *netlimit.Listener
	admission  admission
	// lock holds the data directory's LOCK file until Stop.
	lock *os.File

	cancel context.CancelFunc
	wg     sync.WaitGroup
	errc   chan error
	start  time.Time

	stopOnce sync.Once
	stopErr  error

	// Readiness and metrics (readiness.go, metrics.go).
	intakeServing, stopping atomic.Bool
	metricsReg              metric.Registration
}

// Open starts a coordinator: it opens the replica store and the raft log,
// binds the listeners and starts serving. It returns once everything is
// listening; joining the cluster and electing a leader happen in the
// background (Ready reports when the catalog is usable).
func Open(o Options) (_ *Coordinator, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{opts: o, log: o.Logger.With("component", "coordinator", "coordinator", o.NodeID),
		fsm: catalog.New(), errc: make(chan error, 4), start: time.Now(), repairPace: replica.NewCopyPacer(o.RepairBytesPerSec)}
	// closers undo what is open so far, in reverse, when Open fails.
	var closers []func()
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
	}()
	for _, open := range []func(*[]func()) error{c.openStore, c.openRaft, c.openServers, c.openFrontEnd, c.listen} {
		if err := open(&closers); err != nil {
			return nil, err
		}
	}
	if c.metricsReg, err = c.registerMetrics(o.MeterProvider); err != nil {
		return nil, err
	}
	c.run()
	c.log.Info("coordinator started", "raft_id", o.RaftID, "cluster", c.clusterLis.Addr().String(),
		"intake", c.intakeLis.Addr().String(), "bootstrap_peers", len(o.Peers), "join_peers", len(o.JoinPeers))
	return c, nil
}

// openStore locks the data directory and opens the replica store.
func (c *Coordinator) openStore(closers *[]func()) (err error) {
	o := c.opts
	// One process per data directory: a second one would write the same
	// raft log and replica store.
	if c.lock, err = lockDataDir(o.DataDir); err != nil {
		return err
	}
	*closers = append(*closers, func() { c.lock.Close() })
	if m, ok, err := ReadMember(o.DataDir); err != nil {
		return err
	} else if ok && (m.RaftID != o.RaftID || m.NodeID != o.NodeID) {
		return fmt.Errorf("data directory %s belongs to coordinator %q with raft id %d, not %q with raft id %d",
			o.DataDir, m.NodeID, m.RaftID, o.NodeID, o.RaftID)
	}
	c.store, err = replica.Open(replica.Options{
		Dir: o.replicaDir(), CoordinatorID: o.NodeID, Logger: o.Logger,
		RetentionRaw: o.RetentionRaw, Retention1h: o.Retention1h, Retention1d: o.Retention1d,
		HeadMaxBytes: o.HeadMaxBytes, BlockCacheBytes: o.BlockCacheBytes,
	})
	if err != nil {
		return fmt.Errorf("open replica store: %w", err)
	}
	*closers = append(*closers, func() { c.store.Close() })
	return nil
}

// openRaft opens the raft transport and member, records the data
// directory's member, and fills the transport's address book with the
// initial peers.
func (c *Coordinator) openRaft(closers *[]func()) (err error) {
	o := c.opts
	c.tr, err = transport.New(transport.Options{ID: o.RaftID, ClusterID: o.ClusterID,
		TLS: o.ClusterClientTLS, Insecure: o.Insecure, Reporter: raftReporter{c}, Logger: o.Logger,
		MaxSnapshotBytes: o.MaxSnapshotBytes, GRPCDialOptions: []grpc.DialOption{c.grpcDialOption()}})
	if err != nil {
		return fmt.Errorf("raft transport: %w", err)
	}
	*closers = append(*closers, func() { c.tr.Close() })

	peers := make([]raftnode.Peer, 0, len(o.Peers))
	for _, p := range o.Peers {
		peers = append(peers, raftnode.Peer{ID: p.RaftID, Addr: p.Addr})
	}
	c.raft, err = raftnode.Open(raftnode.Options{ID: o.RaftID, Dir: o.raftDir(), StateMachine: c.fsm,
		Transport: c.tr, Peers: peers, Logger: o.Logger, MeterProvider: o.MeterProvider,
		SnapshotEntries: o.SnapshotEntries, KeepEntries: o.KeepEntries})
	if err != nil {
		return fmt.Errorf("open raft member: %w", err)
	}
	*closers = append(*closers, func() { c.raft.Close() })
	if err := writeMember(o.DataDir, Member{NodeID: o.NodeID, RaftID: o.RaftID}); err != nil {
		return fmt.Errorf("record the data directory's member: %w", err)
	}
	c.book = map[uint64]bool{}
	for _, p := range append(slices.Clone(o.Peers), o.JoinPeers...) {
		if p.RaftID != o.RaftID {
			c.book[p.RaftID] = true
			if err := c.tr.AddPeer(p.RaftID, transport.Peer{Addr: p.Addr, Name: p.NodeID}); err != nil {
				return fmt.Errorf("peer %d: %w", p.RaftID, err)
			}
		}
	}
	return nil
}

// raftReporter gives the raft transport's delivery outcomes to the raft
// member, which is opened after the transport (raftnode.Open needs it).
// Outcomes before then are discarded: c.raft is set by Open before any
// goroutine that reports starts, and only read after.
type raftReporter struct{ c *Coordinator }

func (r raftReporter) ReportUnreachable(id uint64) {
	if n := r.c.raft; n != nil {
		n.ReportUnreachable(id)
	}
}

func (r raftReporter) ReportSnapshot(id uint64, ok bool) {
	if n := r.c.raft; n != nil {
		n.ReportSnapshot(id, ok)
	}
}

// openServers makes the cluster server (raft, replica and member calls
// from other coordinators), the query tunnels' registry and the intake
// with its gRPC server.
func (c *Coordinator) openServers(closers *[]func()) (err error) {
	o := c.opts
	c.links = newLinks(c)
	*closers = append(*closers, c.links.close, func() {
		for _, h := range c.healths {
			h.Close()
		}
	})
	replicaSrv, err := replica.NewServer(replica.ServerOptions{Store: c.store, Authorize: c.authorizeMember, Serving: c.storeBound})
	if err != nil {
		return err
	}
	// Every service on the cluster listener (raft, replica, and whatever
	// is registered there later) admits a caller by its certificate's
	// member name before reading anything of the call.
	c.clusterSrv, err = transport.NewServer(transport.ServerOptions{ID: o.RaftID, ClusterID: o.ClusterID,
		TLS: o.ClusterServerTLS, Insecure: o.Insecure, Peers: c.tr, Members: clusterMembers{c}, Logger: o.Logger,
		MaxStreams: o.ClusterLimits.MaxStreams, MaxConns: o.ClusterLimits.MaxConns, MaxConnsPerIP: o.ClusterLimits.MaxConnsPerIP,
		MaxSnapshotBytes: o.MaxSnapshotBytes, Step: func(_ context.Context, m raftpb.Message) error { return c.raft.Step(m) },
		Register: c.withHealth(o.ClusterListen, func(g *grpc.Server) {
			replicaSrv.Register(g)
			clusterv1.RegisterMemberServiceServer(g, memberService{c: c})
		}),
		GRPCServerOptions: []grpc.ServerOption{c.grpcServerOption()}})
	if err != nil {
		return fmt.Errorf("cluster server: %w", err)
	}

	var identity func(context.Context) (string, error)
	if !o.Insecure {
		identity = edgeIdentity
	}
	if c.tunnels, err = tunnel.NewRegistry(tunnel.RegistryOptions{Identity: identity, Logger: o.Logger, Revoked: c.revoked,
		DialOptions: []grpc.DialOption{c.grpcDialOption()}}); err != nil {
		return err
	}
	*closers = append(*closers, c.tunnels.Close)
	c.intake, err = intake.New(intake.Options{CoordinatorID: o.NodeID, Catalog: c.fsm, Raft: c.raft,
		Replicas: replicaRouter{c}, Restore: restoreSource{c}, Identity: identity, Tunnel: c.tunnels.Serve, Logger: o.Logger,
		TracerProvider: o.TracerProvider, CatalogLinger: o.CatalogLinger})
	if err != nil {
		return fmt.Errorf("intake: %w", err)
	}
	*closers = append(*closers, c.intake.Close)
	gopts := []grpc.ServerOption{
		// The edges ping every 30 s (also without a stream) to keep NAT
		// mappings open; a stricter policy would close them.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxRecvMsgSize(4 << 20),
		grpc.MaxConcurrentStreams(o.IntakeLimits.MaxStreams),
		grpc.ConnectionTimeout(handshakeTimeout),
		// Admission before gRPC reads a stream (admission.go).
		grpc.InTapHandle(c.admitEdge),
	}
	if !o.Insecure {
		gopts = append(gopts, grpc.Creds(transport.WatchHandshakes(credentials.NewTLS(transport.RequireClientCert(o.IntakeTLS)), c.failedIntakeHandshake)))
	}
	c.intakeGRPC = grpc.NewServer(append(gopts, c.grpcServerOption())...)
	c.withHealth(o.IntakeListen, c.intake.Register)(c.intakeGRPC)
	return nil
}

// withHealth wraps a listener's register function: its services, then
// grpc.health.v1 following Readiness, then reflection if the listener at
// addr serves it (Options.GRPCReflection).
func (c *Coordinator) withHealth(addr string, register func(*grpc.Server)) func(*grpc.Server) {
	h := grpcapi.NewHealth(grpcapi.HealthOptions{Overall: []func() error{c.Readiness}})
	c.healths = append(c.healths, h)
	return func(g *grpc.Server) {
		h.Register(register)(g)
		if c.opts.GRPCReflection.For(addr) {
			grpcreflect.Register(g)
		}
	}
}

// openFrontEnd makes the query front end and the healer.
func (c *Coordinator) openFrontEnd(*[]func()) (err error) {
	o := c.opts
	c.front, err = query.New(query.Options{Catalog: c.fsm, Barrier: c.raft.LinearizableRead,
		Replica: c.links.replicaSource, Edge: c.links.edgeSource, MaxStaleness: o.QueryMaxStaleness, Logger: o.Logger, MeterProvider: o.MeterProvider})
	if err != nil {
		return fmt.Errorf("query front end: %w", err)
	}
	if c.healer, err = heal.New(heal.Options{Self: o.NodeID, Catalog: c.fsm, Raft: raftLeader{c}, Repairer: storeRepairer{c},
		Interval: o.HealInterval, DeadAfter: o.DeadAfter, MaxMovesInFlight: o.MaxMovesInFlight, ScrubInterval: o.ScrubInterval,
		Logger: o.Logger}); err != nil {
		return fmt.Errorf("healer: %w", err)
	}
	return nil
}

// listen binds the cluster and intake listeners.
func (c *Coordinator) listen(closers *[]func()) (err error) {
	o := c.opts
	if c.clusterLis, err = net.Listen("tcp", o.ClusterListen); err != nil {
		return fmt.Errorf("cluster listener: %w", err)
	}
	*closers = append(*closers, func() { c.clusterLis.Close() })
	intakeLis, err := net.Listen("tcp", o.IntakeListen)
	if err != nil {
		return fmt.Errorf("intake listener: %w", err)
	}
	if c.intakeLis, err = netlimit.Wrap(intakeLis, netlimit.Options{MaxConns: o.IntakeLimits.MaxConns, MaxConnsPerIP: o.IntakeLimits.MaxConnsPerIP,
		OnRefuse: c.refusedIntakeConn}); err != nil {
		intakeLis.Close()
		return fmt.Errorf("intake listener: %w", err)
	}
	*closers = append(*closers, func() { c.intakeLis.Close() })
	return nil
}

// run starts the raft member, the listeners' servers, the maintenance
// loop and the healer; Stop ends them.
func (c *Coordinator) run() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	ticker := time.NewTicker(c.opts.TickInterval)
	c.wg.Go(func() {
		defer ticker.Stop()
		if err := c.raft.Run(ctx, ticker.C); err != nil && ctx.Err() == nil {
			c.fail(fmt.Errorf("raft member stopped: %w", err))
		}
	})
	c.wg.Go(func() {
		if err := c.clusterSrv.Serve(c.clusterLis); err != nil && ctx.Err() == nil {
			c.fail(fmt.Errorf("cluster listener: %w", err))
		}
	})
	c.intakeServing.Store(true)
	c.wg.Go(func() {
		defer c.intakeServing.Store(false)
		if err := c.intakeGRPC.Serve(c.intakeLis); err != nil && ctx.Err() == nil {
			c.fail(fmt.Errorf("intake listener: %w", err))
		}
	})
	c.wg.Go(func() { c.maintain(ctx) })
	c.wg.Go(func() { c.healer.Run(ctx) })
}

func (c *Coordinator) fail(err error) {
	c.log.Error("coordinator component failed", "err", err)
	select {
	case c.errc <- err:
	default:
	}
}

// ErrRemoved is delivered on Err when this coordinator was removed from
// the raft cluster: it no longer takes part, and its process should stop
// (it is not a failure).
var ErrRemoved = errors.New("coordinator was removed from the raft cluster")

// Err delivers the first error that stopped a component (a listener, the
// raft member), or ErrRemoved; the process should then stop.
func (c *Coordinator) Err() <-chan error { return c.errc }

// NodeID is this coordinator's node id.
func (c *Coordinator) NodeID() string { return c.opts.NodeID }

// Uptime is the time since Open.
func (c *Coordinator) Uptime() time.Duration { return time.Since(c.start) }

// ClusterAddr is the bound cluster listener address.
func (c *Coordinator) ClusterAddr() string { return c.clusterLis.Addr().String() }

// IntakeAddr is the bound intake address (edges ship here).
func (c *Coordinator) IntakeAddr() string { return c.intakeLis.Addr().String() }

// Backend is the query front end: every client protocol served from it
// answers for the whole fleet. Writes are refused (they go to edges).
func (c *Coordinator) Backend() backend.Backend { return c.front }

// revoked reports whether the catalog revokes edge.
func (c *Coordinator) revoked(edge string) bool {
	n, ok := c.fsm.Node(edge)
	return ok && n.Revoked
}

// Healer is the coordinator's healer (its counters, a scrub on demand).
func (c *Coordinator) Healer() *heal.Healer { return c.healer }

// Frontend is the query front end with its coverage reports.
func (c *Coordinator) Frontend() *query.Frontend { return c.front }

// Catalog is the local replica of the fleet catalog (read-only use; for a
// linearizable read call Barrier first).
func (c *Coordinator) Catalog() *catalog.FSM { return c.fsm }

// IsLeader reports whether this coordinator is the raft leader of the
// catalog now (a leader that lost its quorum may not know it yet).
func (c *Coordinator) IsLeader() bool { return c.raft.Status().IsLeader }

// Barrier waits until the local catalog reflects every command committed
// before the call (raft ReadIndex).
func (c *Coordinator) Barrier(ctx context.Context) error { return c.raft.LinearizableRead(ctx) }

// WaitReady blocks until Ready or ctx ends.
func (c *Coordinator) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !c.Ready() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("coordinator %s not ready: %w", c.opts.NodeID, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// stopTransferTimeout bounds the leadership transfer on Stop.
const stopTransferTimeout = 3 * time.Second

// Stop shuts down gracefully: edges' streams end (they resume elsewhere),
// leadership moves to another voter, then everything closes. Safe to call
// more than once.
func (c *Coordinator) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() { c.stopErr = c.stop(ctx) })
	return c.stopErr
}

func (c *Coordinator) stop(ctx context.Context) error {
	c.stopping.Store(true)
	for _, h := range c.healths {
		h.Close() // NOT_SERVING while the listeners drain
	}
	c.metricsReg.Unregister()
	c.intake.Close()
	c.tunnels.Close()
	stopped := make(chan struct{})
	go func() { c.intakeGRPC.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		c.intakeGRPC.Stop()
	}
	var errs []error
	// A leadership transfer takes an election round when the target is up;
	// one to a member that is stopping too (a whole cluster shut down at
	// once) would otherwise hold the shutdown for the caller's whole grace.
	tctx, cancel := context.WithTimeout(ctx, stopTransferTimeout)
	defer cancel()
	if err := c.raft.Stop(tctx); err != nil && !errors.Is(err, raftnode.ErrStopped) {
		errs = append(errs, fmt.Errorf("stop raft member: %w", err))
	}
	c.cancel()
	c.clusterSrv.Stop()
	c.wg.Wait()
	c.links.close()
	if err := c.tr.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close raft transport: %w", err))
	}
	if err := c.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close replica store: %w", err))
	}
	c.lock.Close() // releases the data directory's lock
	c.log.Info("coordinator stopped")
	return errors.Join(errs...)
}
