package coordinator

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/tributarydb/tributary/internal/grpcreflect"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/coordinator/internal/transport"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/internal/telemetry"
)

// Peer is an initial member of a new cluster.
type Peer struct {
	// RaftID is the member's raft id (non-zero, never reused).
	RaftID uint64
	// NodeID is the member's node id in the catalog; with TLS it is also
	// the name its certificate must carry (a DNS or URI SAN).
	NodeID string
	// Addr is the member's cluster address (raft messages and replica
	// calls), host:port.
	Addr string
}

// Options configure a Coordinator. Zero values take the defaults listed.
type Options struct {
	// NodeID is this coordinator's node id in the fleet catalog; with TLS
	// it is the name its certificate carries. RaftID is its raft member id.
	NodeID string
	RaftID uint64
	// ClusterID names the raft cluster; members of another cluster are
	// refused. Default "tributary".
	ClusterID string
	// DataDir holds the raft log (DataDir/raft) and the replica store
	// (DataDir/replica).
	DataDir string

	// ClusterListen is where raft messages and replica calls from other
	// coordinators arrive; ClusterAddr is the address the others use to
	// reach it (default: ClusterListen).
	ClusterListen string
	ClusterAddr   string
	// IntakeListen is where edges ship their segments.
	IntakeListen string

	// Peers bootstraps a new cluster: every initial member is started
	// with the same list, itself included. Without Peers a coordinator
	// with an empty raft log waits to be added by the cluster (join).
	Peers []Peer
	// JoinPeers, for a coordinator joining an existing cluster (without
	// Peers), lists the cluster's current members: it seeds the raft
	// address book so that the leader's messages are accepted before the
	// catalog names the members. It bootstraps nothing; an entry for this
	// coordinator itself is ignored. Once the catalog arrives it is the
	// source of the address book.
	JoinPeers []Peer

	// ClusterServerTLS and ClusterClientTLS secure the cluster links
	// (mutual TLS): ClusterServerTLS.ClientCAs is the CA of the members'
	// certificates only (--peer-ca). IntakeTLS secures the intake
	// listener; its ClientCAs is the CA of the edges' certificates only
	// (--edge-ca). Both listeners demand a verified client certificate
	// whatever ClientAuth says, and admit a stream by its identity before
	// reading it (admission.go). Insecure turns TLS off on both: only for
	// loopback (tributary local) and tests.
	ClusterServerTLS *tls.Config
	ClusterClientTLS *tls.Config
	IntakeTLS        *tls.Config
	Insecure         bool

	// GRPCReflection says whether the cluster and intake listeners serve
	// gRPC server reflection (default: when bound to loopback). Both
	// always serve grpc.health.v1 (the coordinator's readiness). Either
	// is admitted like every other call of its listener (a member's or an
	// edge's certificate).
	GRPCReflection grpcreflect.Mode

	// AdmitEdge, when set, is asked about every stream an edge opens on
	// the intake listener, before anything of it is read, with the
	// identity its verified certificate names (see Identity in
	// docs/coordinator.md); an error refuses the stream with
	// PERMISSION_DENIED and the error's text (or the error's own gRPC
	// status). nil admits every edge whose certificate IntakeTLS verified
	// and that names no coordinator. It runs on gRPC's connection
	// goroutine: it must be quick and must not block. Not called with
	// Insecure (there is no identity).
	AdmitEdge func(identity string) error
	// ClusterLimits and IntakeLimits cap the connections and streams of
	// the cluster and intake listeners; zero fields take the defaults
	// DefaultClusterLimits and DefaultIntakeLimits.
	ClusterLimits, IntakeLimits ListenerLimits
	// MaxSnapshotBytes bounds the data of a raft snapshot (the catalog)
	// this coordinator sends or receives; 0: 1 GiB
	// (transport.DefaultMaxSnapshotBytes). A snapshot is held in memory
	// whole on both sides.
	MaxSnapshotBytes int

	// QueryMaxStaleness is the staleness allowance of the queries that
	// set none (query.Options.MaxStaleness): an edge whose replicated data
	// reaches within it of a query's end is answered from its replicas
	// alone. 0 (the default): every edge that may hold newer data is
	// asked.
	QueryMaxStaleness time.Duration

	// CatalogLinger is how long the intake's catalog records of segments
	// wait for others to share a raft proposal with when none is in
	// flight (intake.Options.CatalogLinger; 0: its default,
	// intake.DefaultCatalogLinger; negative: not at all).
	CatalogLinger time.Duration

	// Healing (package heal). DeadAfter overrides the fleet
	// configuration's dead-after (0: use the fleet's); HealInterval is how
	// often the healer acts (default 2s); RepairBytesPerSec paces the
	// copies this coordinator makes of what it lacks, all together
	// (default 64 MiB/s; negative: unlimited); ScrubInterval is how often the replica store is
	// compared with the catalog (default 10m; negative: never);
	// MaxMovesInFlight bounds the balancing moves not finished (default 4).
	DeadAfter, HealInterval, ScrubInterval time.Duration
	RepairBytesPerSec                      int64
	MaxMovesInFlight                       int

	// Replica store sizing and retention (see package replica).
	RetentionRaw, Retention1h, Retention1d time.Duration
	HeadMaxBytes, BlockCacheBytes          int64

	// LocalEdge, when set, returns edges running in this process
	// (tributary local), which queries reach without the network; nil
	// for any other edge.
	LocalEdge func(edgeID string) query.Source
	// EdgeDialOptions are used to dial an edge's query address (its
	// credentials: TLS, token).
	EdgeDialOptions []grpc.DialOption

	// TickInterval is raft's tick (default 100ms: elections after 1-2 s).
	TickInterval time.Duration
	// SnapshotEntries and KeepEntries tune the raft log (0: raftnode's
	// defaults, 10,000 and 5,000): a catalog snapshot every SnapshotEntries
	// applied entries, KeepEntries entries kept before it; a member that
	// lags further catches up from a snapshot.
	SnapshotEntries, KeepEntries uint64

	Logger *slog.Logger

	// MeterProvider and TracerProvider give the component its metrics and
	// spans (internal/telemetry); nil: no-op providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

// ListenerLimits cap what one listener holds open.
type ListenerLimits struct {
	// MaxConns caps the connections open at once, MaxConnsPerIP those
	// from one remote address; further ones are closed when accepted.
	MaxConns, MaxConnsPerIP int
	// MaxStreams caps the concurrent streams (calls) on one connection.
	MaxStreams uint32
}

// DefaultMaxSnapshotBytes is Options.MaxSnapshotBytes's default.
const DefaultMaxSnapshotBytes = transport.DefaultMaxSnapshotBytes

// Default limits. The cluster listener serves the other coordinators: two
// raft connections and one replica connection each, several members per
// address when they share a host. The intake serves every edge of the
// fleet: a shipping connection and a tunnel connection each, many edges
// per address behind a site's NAT.
var (
	DefaultClusterLimits = ListenerLimits{MaxConns: 256, MaxConnsPerIP: 32, MaxStreams: 8}
	DefaultIntakeLimits  = ListenerLimits{MaxConns: 8192, MaxConnsPerIP: 256, MaxStreams: 8}
)

// Validate fills defaults and rejects impossible options.
func (o *Options) Validate() error {
	o.ClusterID = cmp.Or(o.ClusterID, "tributary")
	for _, l := range []struct {
		lim *ListenerLimits
		def ListenerLimits
	}{{&o.ClusterLimits, DefaultClusterLimits}, {&o.IntakeLimits, DefaultIntakeLimits}} {
		if l.lim.MaxConns == 0 {
			l.lim.MaxConns = l.def.MaxConns
		}
		if l.lim.MaxConnsPerIP == 0 {
			l.lim.MaxConnsPerIP = l.def.MaxConnsPerIP
		}
		if l.lim.MaxStreams == 0 {
			l.lim.MaxStreams = l.def.MaxStreams
		}
	}
	o.ClusterAddr = cmp.Or(o.ClusterAddr, o.ClusterListen)
	o.RepairBytesPerSec = cmp.Or(o.RepairBytesPerSec, 64<<20)
	o.TickInterval = cmp.Or(o.TickInterval, 100*time.Millisecond)
	telemetry.Defaults(&o.Logger, &o.MeterProvider, &o.TracerProvider)
	var bad []error
	if o.NodeID == "" {
		bad = append(bad, errors.New("NodeID is required"))
	}
	if o.RaftID == 0 {
		bad = append(bad, errors.New("RaftID must be non-zero"))
	}
	if o.DeadAfter < 0 || o.HealInterval < 0 || o.MaxMovesInFlight < 0 {
		bad = append(bad, fmt.Errorf("negative DeadAfter %s, HealInterval %s or MaxMovesInFlight %d", o.DeadAfter, o.HealInterval, o.MaxMovesInFlight))
	}
	if o.QueryMaxStaleness < 0 {
		bad = append(bad, fmt.Errorf("negative QueryMaxStaleness %s", o.QueryMaxStaleness))
	}
	if o.DeadAfter > 0 && o.DeadAfter < time.Second {
		bad = append(bad, fmt.Errorf("DeadAfter %s is under a second", o.DeadAfter))
	}
	if o.DataDir == "" {
		bad = append(bad, errors.New("DataDir is required"))
	}
	if o.ClusterListen == "" || o.IntakeListen == "" {
		bad = append(bad, errors.New("ClusterListen and IntakeListen are required"))
	}
	for _, a := range []string{o.ClusterListen, o.ClusterAddr, o.IntakeListen} {
		if a == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err != nil {
			bad = append(bad, fmt.Errorf("address %q: %w", a, err))
		}
	}
	if o.Insecure != (o.ClusterServerTLS == nil && o.ClusterClientTLS == nil && o.IntakeTLS == nil) {
		bad = append(bad, errors.New("set either Insecure or all of ClusterServerTLS, ClusterClientTLS and IntakeTLS"))
	} else if !o.Insecure && (o.ClusterServerTLS == nil || o.ClusterClientTLS == nil || o.IntakeTLS == nil) {
		bad = append(bad, errors.New("ClusterServerTLS, ClusterClientTLS and IntakeTLS are all required with TLS"))
	}
	for _, l := range []struct {
		name string
		ListenerLimits
	}{{"ClusterLimits", o.ClusterLimits}, {"IntakeLimits", o.IntakeLimits}} {
		if l.MaxConns < 1 || l.MaxConnsPerIP < 1 || l.MaxConnsPerIP > l.MaxConns {
			bad = append(bad, fmt.Errorf("%s: MaxConns %d and MaxConnsPerIP %d must be positive, per address at most the total", l.name, l.MaxConns, l.MaxConnsPerIP))
		}
	}
	if o.TickInterval < time.Millisecond {
		bad = append(bad, fmt.Errorf("TickInterval %s is below 1ms", o.TickInterval))
	}
	bad = append(bad, o.checkPeers()...)
	if len(bad) > 0 {
		return fmt.Errorf("coordinator options: %w", errors.Join(bad...))
	}
	return nil
}

// checkPeers checks Peers (and sorts them by raft id) and JoinPeers.
func (o *Options) checkPeers() []error {
	var bad []error
	if len(o.Peers) > 0 {
		self := false
		ids := map[uint64]bool{}
		names := map[string]bool{}
		for i, p := range o.Peers {
			switch {
			case p.RaftID == 0 || p.NodeID == "" || p.Addr == "":
				bad = append(bad, fmt.Errorf("peer %d: raft id, node id and address are all required", i))
			case ids[p.RaftID] || names[p.NodeID]:
				bad = append(bad, fmt.Errorf("peer %d: raft id %d or node id %q listed twice", i, p.RaftID, p.NodeID))
			}
			ids[p.RaftID], names[p.NodeID] = true, true
			if p.RaftID == o.RaftID {
				self = true
				if p.NodeID != o.NodeID {
					bad = append(bad, fmt.Errorf("peer %d has this coordinator's raft id %d but node id %q, not %q", i, p.RaftID, p.NodeID, o.NodeID))
				}
			}
		}
		if !self {
			bad = append(bad, fmt.Errorf("peers do not include this coordinator (raft id %d)", o.RaftID))
		}
		slices.SortFunc(o.Peers, func(a, b Peer) int { return cmp.Compare(a.RaftID, b.RaftID) })
	}
	if len(o.JoinPeers) > 0 && len(o.Peers) > 0 {
		bad = append(bad, errors.New("bootstrap peers (Peers) and join peers (JoinPeers) exclude each other"))
	}
	joinIDs := map[uint64]bool{}
	for i, p := range o.JoinPeers {
		switch {
		case p.RaftID == 0 || p.NodeID == "" || p.Addr == "":
			bad = append(bad, fmt.Errorf("join peer %d: raft id, node id and address are all required", i))
		case joinIDs[p.RaftID]:
			bad = append(bad, fmt.Errorf("join peer %d: raft id %d listed twice", i, p.RaftID))
		case p.RaftID == o.RaftID && p.NodeID != o.NodeID:
			bad = append(bad, fmt.Errorf("join peer %d has this coordinator's raft id %d but node id %q, not %q", i, p.RaftID, p.NodeID, o.NodeID))
		}
		joinIDs[p.RaftID] = true
	}
	return bad
}

func (o *Options) raftDir() string    { return filepath.Join(o.DataDir, "raft") }
func (o *Options) replicaDir() string { return filepath.Join(o.DataDir, "replica") }
