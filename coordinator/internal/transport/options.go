package transport

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
)

// DefaultMaxSnapshotBytes is the default bound of one snapshot's data,
// sent (Options) and received (ServerOptions): 1 GiB. A receiver holds the
// whole snapshot in memory before raft takes it, as the sender does.
const DefaultMaxSnapshotBytes = 1 << 30

// LegacySnapshotBytes is the largest MsgSnap a member of an earlier
// version, without SendSnapshot, takes: one envelope within its receive
// limit.
const LegacySnapshotBytes = 256 << 20

// Reporter receives delivery outcomes; *raftnode.Node implements it.
type Reporter interface {
	// ReportUnreachable tells raft that messages to id were lost.
	ReportUnreachable(id uint64)
	// ReportSnapshot tells raft whether the MsgSnap sent to id arrived.
	ReportSnapshot(id uint64, ok bool)
}

// Peer is one entry of the address book.
type Peer struct {
	// Addr is the member's raft address, host:port.
	Addr string
	// Name is the identity its TLS certificate must carry, as a DNS or URI
	// subject alternative name (see the package doc). Required with TLS.
	Name string
}

// PeerLookup resolves a member id to its Peer; *Transport implements it,
// so a Server and a Transport can share one address book.
type PeerLookup interface {
	Peer(id uint64) (Peer, bool)
}

// Options configure a Transport. Zero values take the defaults listed.
type Options struct {
	// ID is this member's raft id; ClusterID names the cluster (non-empty).
	ID        uint64
	ClusterID string
	// TLS is the client configuration: a certificate to present and the
	// RootCAs that verify servers. Required unless Insecure.
	TLS      *tls.Config
	Insecure bool
	// Reporter receives delivery outcomes; nil discards them. raftnode.Open
	// needs the Transport first, so the raft member is usually reached
	// through a Reporter that forwards to it once it is open
	// (coordinator's raftReporter).
	Reporter Reporter
	// GRPCDialOptions are added to every peer connection (the
	// coordinator's telemetry: otelgrpc).
	GRPCDialOptions []grpc.DialOption

	// QueueMessages (4,096) bounds the messages waiting for one peer;
	// QueueSnapshots (2) the snapshots.
	QueueMessages  int
	QueueSnapshots int
	// MaxBatchBytes (1 MiB): the message worker packs waiting messages
	// into one envelope up to about this many bytes.
	MaxBatchBytes int
	// MaxSnapshotBytes (1 GiB) bounds the data of one snapshot sent;
	// larger ones fail (and are reported failed). The receiver's
	// ServerOptions.MaxSnapshotBytes must be at least as large.
	MaxSnapshotBytes int
	// SnapshotChunkBytes (1 MiB) is the size of the chunks a snapshot's
	// data travels in (SendSnapshot).
	SnapshotChunkBytes int
	// MinBackoff (50 ms) and MaxBackoff (2 s) bound the wait before
	// reconnecting after a failure; it doubles per failure, with jitter.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// SnapshotTimeout (5 min) bounds sending one snapshot.
	SnapshotTimeout time.Duration

	Logger *slog.Logger
}

// Validate fills in defaults and rejects impossible values.
func (o *Options) Validate() error {
	o.QueueMessages = cmp.Or(o.QueueMessages, 4096)
	o.QueueSnapshots = cmp.Or(o.QueueSnapshots, 2)
	o.MaxBatchBytes = cmp.Or(o.MaxBatchBytes, 1<<20)
	o.MaxSnapshotBytes = cmp.Or(o.MaxSnapshotBytes, DefaultMaxSnapshotBytes)
	o.SnapshotChunkBytes = cmp.Or(o.SnapshotChunkBytes, 1<<20)
	o.MinBackoff = cmp.Or(o.MinBackoff, 50*time.Millisecond)
	o.MaxBackoff = cmp.Or(o.MaxBackoff, 2*time.Second)
	o.SnapshotTimeout = cmp.Or(o.SnapshotTimeout, 5*time.Minute)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o.check()
}

// check checks the options (after defaults).
func (o *Options) check() error {
	if err := checkMember("Options", o.ID, o.ClusterID, o.TLS, o.Insecure); err != nil {
		return err
	}
	switch {
	case o.QueueMessages < 1 || o.QueueSnapshots < 1 || o.MaxBatchBytes < 1 || o.MaxSnapshotBytes < 1 || o.SnapshotChunkBytes < 1:
		return errors.New("transport: queue and size limits must be positive")
	case o.MinBackoff < 0 || o.MaxBackoff < o.MinBackoff:
		return fmt.Errorf("transport: MaxBackoff %v is below MinBackoff %v", o.MaxBackoff, o.MinBackoff)
	case o.SnapshotTimeout < 0:
		return errors.New("transport: SnapshotTimeout is negative")
	}
	return nil
}

// checkMember checks what Options and ServerOptions (kind names which)
// share: this member's raft id, the cluster's id, and TLS unless Insecure
// (not both).
func checkMember(kind string, id uint64, clusterID string, tlsConf *tls.Config, insecure bool) error {
	switch {
	case id == 0:
		return fmt.Errorf("transport: %s.ID is 0", kind)
	case clusterID == "":
		return fmt.Errorf("transport: %s.ClusterID is empty", kind)
	case tlsConf == nil && !insecure:
		return fmt.Errorf("transport: %s.TLS is nil (set Insecure only for tests and loopback)", kind)
	case tlsConf != nil && insecure:
		return fmt.Errorf("transport: both %s.TLS and Insecure are set", kind)
	}
	return nil
}

// ServerOptions configure a Server. Zero values take the defaults listed.
type ServerOptions struct {
	// ID is this member's raft id; ClusterID names the cluster.
	ID        uint64
	ClusterID string
	// TLS is the server configuration: a certificate to present and the
	// ClientCAs that verify members. The server always requires and
	// verifies a client certificate. Required unless Insecure.
	TLS      *tls.Config
	Insecure bool
	// Peers maps sender ids to identities (usually the Transport).
	Peers PeerLookup
	// Members says whose certificates may open streams at all, on every
	// service of the server (see Server's tap). Default: Peers, when it
	// implements Members (a *Transport does: its address book). Required
	// with TLS otherwise.
	Members Members
	// Step receives each accepted message (raftnode's Node.Step, wrapped).
	Step func(ctx context.Context, m raftpb.Message) error
	// MaxEnvelopeBytes (256 MiB) bounds one received message on any
	// service of the server (a sender of an earlier version sends a raft
	// snapshot in one envelope; gRPC has one receive limit per server);
	// MaxEnvelopeMessages (4,096) an envelope's
	// message count; MaxStreams (8) the concurrent streams per connection
	// (a Transport uses at most one per connection at a time). Nothing of
	// a stream is read before the tap admitted its caller, so only members
	// can make the server buffer up to MaxStreams × MaxEnvelopeBytes per
	// connection.
	MaxEnvelopeBytes    int
	MaxEnvelopeMessages int
	MaxStreams          uint32
	// MaxSnapshotBytes (DefaultMaxSnapshotBytes) bounds the data of one
	// snapshot received in chunks (SendSnapshot); MaxSnapshotsInflight (1)
	// how many such snapshots are received at once. Beyond either the
	// stream is refused with RESOURCE_EXHAUSTED before its data is read,
	// and the sender retries later. The buffer grows with the data that
	// arrived, never ahead of it on the sender's word.
	MaxSnapshotBytes     int
	MaxSnapshotsInflight int
	// SnapshotIdleTimeout (1 min) ends a snapshot stream on which no
	// chunk arrived for that long, so that a sender gone silent (a
	// partition) does not keep a snapshot slot.
	SnapshotIdleTimeout time.Duration
	// MaxConns (256) and MaxConnsPerIP (32) cap the connections Serve
	// keeps open, in total and per remote address (a Transport opens two
	// per peer, a coordinator's replica client one more); further ones
	// are closed at once. HandshakeTimeout (10 s) bounds a connection's
	// TLS handshake. Negative caps mean none (tests only).
	MaxConns         int
	MaxConnsPerIP    int
	HandshakeTimeout time.Duration

	// Register, when set, registers further cluster-internal services on
	// the server's gRPC server (the coordinator's replica service), so
	// they share the listener, its mutual TLS and its admission: the tap
	// refuses a caller whose certificate names no member before anything
	// of the call is read, whatever the service. They may check their
	// callers again (see AuthorizeCaller).
	Register func(*grpc.Server)
	// GRPCServerOptions are added to the server's (the coordinator's
	// telemetry: otelgrpc).
	GRPCServerOptions []grpc.ServerOption

	Logger *slog.Logger
}

// Validate fills in defaults and rejects impossible values.
func (o *ServerOptions) Validate() error {
	o.MaxEnvelopeBytes = cmp.Or(o.MaxEnvelopeBytes, 256<<20)
	o.MaxEnvelopeMessages = cmp.Or(o.MaxEnvelopeMessages, 4096)
	o.MaxStreams = cmp.Or(o.MaxStreams, 8)
	o.MaxSnapshotBytes = cmp.Or(o.MaxSnapshotBytes, DefaultMaxSnapshotBytes)
	o.MaxSnapshotsInflight = cmp.Or(o.MaxSnapshotsInflight, 1)
	o.SnapshotIdleTimeout = cmp.Or(o.SnapshotIdleTimeout, time.Minute)
	o.MaxConns = cmp.Or(o.MaxConns, 256)
	o.MaxConnsPerIP = cmp.Or(o.MaxConnsPerIP, 32)
	o.HandshakeTimeout = cmp.Or(o.HandshakeTimeout, 10*time.Second)
	if o.Members == nil {
		if m, ok := o.Peers.(Members); ok {
			o.Members = m
		}
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o.check()
}

// check checks the options (after defaults).
func (o *ServerOptions) check() error {
	if err := checkMember("ServerOptions", o.ID, o.ClusterID, o.TLS, o.Insecure); err != nil {
		return err
	}
	switch {
	case o.TLS != nil && o.TLS.ClientCAs == nil && o.TLS.GetConfigForClient == nil:
		return errors.New("transport: ServerOptions.TLS has no ClientCAs to verify members")
	case o.Peers == nil:
		return errors.New("transport: ServerOptions.Peers is nil")
	case o.Members == nil && !o.Insecure:
		return errors.New("transport: ServerOptions.Members is nil (and Peers does not say who is a member)")
	case o.Step == nil:
		return errors.New("transport: ServerOptions.Step is nil")
	case o.MaxEnvelopeBytes < 1 || o.MaxEnvelopeMessages < 1:
		return errors.New("transport: envelope limits must be positive")
	case o.MaxSnapshotBytes < 1 || o.MaxSnapshotsInflight < 1 || o.SnapshotIdleTimeout < 0:
		return errors.New("transport: snapshot limits must be positive")
	case o.HandshakeTimeout < 0:
		return errors.New("transport: HandshakeTimeout is negative")
	}
	return nil
}
