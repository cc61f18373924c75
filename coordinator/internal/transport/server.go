package transport

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/internal/netlimit"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Server receives raft messages; see the package doc.
type Server struct {
	clusterv1.UnimplementedRaftServiceServer

	opts ServerOptions
	log  *slog.Logger
	grpc *grpc.Server

	received, stepFailed, refused                   atomic.Uint64
	refusedAtAdmission, legacyStreams, connsRefused atomic.Uint64
	handshakesFailed                                atomic.Uint64
	snapshotsReceived                               atomic.Uint64
	snapshotSlots                                   chan struct{} // one per snapshot received at once
	connLog, handshakeLog                           logLimiter
	logLimit                                        logLimiter
	lis                                             atomic.Pointer[netlimit.Listener]
}

// ServerStats are a Server's counters since NewServer.
type ServerStats struct {
	Received   uint64 // messages handed to Step
	StepFailed uint64 // messages Step refused (dropped)
	Refused    uint64 // raft streams ended by a check of their envelopes: identity, cluster id or malformed
	// RefusedAtAdmission counts streams (of any service) the tap refused
	// before reading them: no verified certificate, no member's name,
	// or raft headers naming another cluster or sender.
	RefusedAtAdmission uint64
	// LegacyStreams counts raft streams admitted without sender headers
	// (from a member of an earlier version): their first envelope is
	// checked instead.
	LegacyStreams uint64
	// ConnsRefused counts connections closed at accept: a cap was reached.
	ConnsRefused uint64
	// HandshakesFailed counts connections whose TLS handshake failed
	// (closed, timed out or rejected; see WatchHandshakes).
	HandshakesFailed uint64
	// ConnsOpen is the connections open now on the listener Serve was
	// last given.
	ConnsOpen int
	// SnapshotsReceived counts snapshots received in chunks and handed
	// to Step (also counted in Received).
	SnapshotsReceived uint64
}

// NewServer returns a Server with its own gRPC server (mutual TLS unless
// Insecure). Serve it with Serve.
func NewServer(opts ServerOptions) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger.With("component", "raft-transport", "member", opts.ID),
		snapshotSlots: make(chan struct{}, opts.MaxSnapshotsInflight)}
	gopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(opts.MaxEnvelopeBytes),
		grpc.MaxConcurrentStreams(opts.MaxStreams),
		grpc.ConnectionTimeout(opts.HandshakeTimeout),
		// Admission runs before gRPC reads a stream's first message; an
		// interceptor would run after.
		grpc.InTapHandle(s.tap),
	}
	if !opts.Insecure {
		gopts = append(gopts, grpc.Creds(WatchHandshakes(credentials.NewTLS(RequireClientCert(opts.TLS)), s.handshakeFailed)))
	}
	s.grpc = grpc.NewServer(append(gopts, opts.GRPCServerOptions...)...)
	clusterv1.RegisterRaftServiceServer(s.grpc, s)
	if opts.Register != nil {
		opts.Register(s.grpc)
	}
	return s, nil
}

// Serve accepts connections on lis until Stop, within the connection caps
// (MaxConns, MaxConnsPerIP); see grpc.Server.Serve.
func (s *Server) Serve(lis net.Listener) error {
	l, err := netlimit.Wrap(lis, netlimit.Options{MaxConns: max(s.opts.MaxConns, 0), MaxConnsPerIP: max(s.opts.MaxConnsPerIP, 0),
		OnRefuse: func(remote net.Addr, reason string) {
			s.connsRefused.Add(1)
			if s.connLog.allow(time.Now()) {
				s.log.Warn("refuse cluster connection", "peer", remote.String(), "reason", reason, "refused_since_start", s.connsRefused.Load())
			}
		}})
	if err != nil {
		return err
	}
	s.lis.Store(l)
	return s.grpc.Serve(l)
}

// handshakeFailed counts a failed TLS handshake and logs it, at most
// once a second; a client that merely closed is logged at debug level
// (port probes and TCP health checks do that).
func (s *Server) handshakeFailed(remote net.Addr, reason string, err error) {
	n := s.handshakesFailed.Add(1)
	level := slog.LevelWarn
	if reason == HandshakeClosed {
		level = slog.LevelDebug
	}
	if !s.log.Enabled(context.Background(), level) || !s.handshakeLog.allow(time.Now()) {
		return
	}
	s.log.Log(context.Background(), level, "cluster TLS handshake failed", "peer", remote.String(), "reason", reason, "err", err,
		"failed_since_start", n)
}

// Stop closes the listeners and every stream at once.
func (s *Server) Stop() { s.grpc.Stop() }

// GracefulStop stops accepting streams and waits for the open ones; raft
// streams are long-lived, so bound it with Stop.
func (s *Server) GracefulStop() { s.grpc.GracefulStop() }

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	st := ServerStats{Received: s.received.Load(), StepFailed: s.stepFailed.Load(), Refused: s.refused.Load(),
		RefusedAtAdmission: s.refusedAtAdmission.Load(), LegacyStreams: s.legacyStreams.Load(), ConnsRefused: s.connsRefused.Load(),
		HandshakesFailed: s.handshakesFailed.Load(), SnapshotsReceived: s.snapshotsReceived.Load()}
	if l := s.lis.Load(); l != nil {
		st.ConnsOpen = l.Stats().Open
	}
	return st
}

// Send implements clusterv1.RaftServiceServer.
func (s *Server) Send(stream clusterv1.RaftService_SendServer) error {
	ctx := stream.Context()
	// With sender headers the tap checked the sender already; every
	// envelope must then name it. Without (an earlier sender), the first
	// envelope is checked as it arrives.
	from, _ := ctx.Value(senderKey{}).(uint64)
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil // the sender closed its side; everything was stepped
		}
		if err != nil {
			return err
		}
		if from == 0 {
			if err := s.admit(ctx, req); err != nil {
				s.refused.Add(1)
				s.log.Warn("refuse raft stream", "err", err)
				return err
			}
			from = req.FromMemberId
		} else if req.FromMemberId != from || req.ClusterId != s.opts.ClusterID {
			s.refused.Add(1)
			return status.Errorf(codes.InvalidArgument, "envelope from member %d in cluster %q on a stream of member %d", req.FromMemberId, req.ClusterId, from)
		}
		if err := s.deliver(ctx, from, req); err != nil {
			return err
		}
	}
}

// SendSnapshot implements clusterv1.RaftServiceServer: one snapshot in
// chunks. The tap checked the sender named in the headers, which this
// method requires.
func (s *Server) SendSnapshot(stream clusterv1.RaftService_SendSnapshotServer) error {
	ctx := stream.Context()
	from, _ := ctx.Value(senderKey{}).(uint64)
	if from == 0 {
		s.refused.Add(1)
		return status.Errorf(codes.InvalidArgument, "snapshot stream without the %s and %s headers", HeaderClusterID, HeaderMemberID)
	}
	select {
	case s.snapshotSlots <- struct{}{}:
		defer func() { <-s.snapshotSlots }()
	default:
		return status.Errorf(codes.ResourceExhausted, "member %d is receiving %d snapshot(s) already", s.opts.ID, s.opts.MaxSnapshotsInflight)
	}
	next, stop := s.snapshotChunks(stream)
	defer stop()
	first, err := next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			s.refused.Add(1)
			return status.Error(codes.InvalidArgument, "snapshot stream ended before its first chunk")
		}
		return err
	}
	m, err := s.snapshotHead(from, first)
	if err != nil {
		s.refused.Add(1)
		return err
	}
	want := first.DataBytes
	data, err := s.snapshotData(next, m.Snapshot.Metadata.Index, want, first.Data)
	if err != nil {
		return err
	}
	m.Snapshot.Data = data
	if err := s.opts.Step(ctx, m); err != nil {
		s.stepFailed.Add(1)
		return status.Errorf(codes.ResourceExhausted, "step snapshot at index %d: %v", m.Snapshot.Metadata.Index, err)
	}
	s.received.Add(1)
	s.snapshotsReceived.Add(1)
	return nil
}

// snapshotChunks returns next, which returns the stream's next chunk (or
// its error: io.EOF once the sender closed its side), or DEADLINE_EXCEEDED
// when none arrived within SnapshotIdleTimeout. Call stop when done; the
// handler's return then ends the goroutine that reads the stream.
func (s *Server) snapshotChunks(stream clusterv1.RaftService_SendSnapshotServer) (next func() (*clusterv1.SendSnapshotRequest, error), stop func()) {
	type result struct {
		c   *clusterv1.SendSnapshotRequest
		err error
	}
	results, done := make(chan result), make(chan struct{})
	go func() {
		for {
			c, err := stream.Recv()
			select {
			case results <- result{c, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	idle := time.NewTimer(s.opts.SnapshotIdleTimeout)
	next = func() (*clusterv1.SendSnapshotRequest, error) {
		idle.Reset(s.opts.SnapshotIdleTimeout)
		select {
		case r := <-results:
			return r.c, r.err
		case <-idle.C:
			return nil, status.Errorf(codes.DeadlineExceeded, "no snapshot chunk for %v", s.opts.SnapshotIdleTimeout)
		}
	}
	return next, func() { idle.Stop(); close(done) }
}

// snapshotHead decodes and checks the first chunk of a snapshot stream
// from member from.
func (s *Server) snapshotHead(from uint64, c *clusterv1.SendSnapshotRequest) (raftpb.Message, error) {
	var m raftpb.Message
	if err := m.Unmarshal(c.Message); err != nil {
		return m, status.Errorf(codes.InvalidArgument, "snapshot message from member %d: %v", from, err)
	}
	switch {
	case m.Type != raftpb.MsgSnap || m.Snapshot == nil:
		return m, status.Errorf(codes.InvalidArgument, "snapshot stream from member %d carries a %v, not a snapshot", from, m.Type)
	case m.From != from || m.To != s.opts.ID:
		return m, status.Errorf(codes.InvalidArgument, "snapshot from %d to %d on a stream from member %d to member %d", m.From, m.To, from, s.opts.ID)
	case len(m.Snapshot.Data) != 0:
		return m, status.Errorf(codes.InvalidArgument, "snapshot message from member %d carries its data; the chunks must", from)
	case c.DataBytes > uint64(s.opts.MaxSnapshotBytes):
		return m, status.Errorf(codes.ResourceExhausted, "snapshot at index %d holds %d bytes, above this member's limit of %d", m.Snapshot.Metadata.Index, c.DataBytes, s.opts.MaxSnapshotBytes)
	}
	return m, nil
}

// snapshotData reads a snapshot's data, want bytes, of which the first
// chunk brought part, until the sender closes its side. The buffer grows
// with what arrived (want is checked against the limit already).
func (s *Server) snapshotData(next func() (*clusterv1.SendSnapshotRequest, error), index, want uint64, part []byte) ([]byte, error) {
	var data []byte
	for {
		if uint64(len(part)) > want-uint64(len(data)) {
			s.refused.Add(1)
			return nil, status.Errorf(codes.InvalidArgument, "snapshot at index %d: more data than the %d bytes announced", index, want)
		}
		if len(data) == 0 && uint64(len(part)) == want {
			data = part // all of it in one chunk: no copy
		} else if len(part) > 0 {
			if cap(data)-len(data) < len(part) {
				grown := make([]byte, len(data), min(want, uint64(2*cap(data)+len(part))))
				copy(grown, data)
				data = grown
			}
			data = append(data, part...)
		}
		c, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(c.Message) != 0 || c.DataBytes != 0 {
			s.refused.Add(1)
			return nil, status.Errorf(codes.InvalidArgument, "snapshot at index %d: a chunk after the first carries a message", index)
		}
		part = c.Data
	}
	if uint64(len(data)) != want {
		s.refused.Add(1)
		return nil, status.Errorf(codes.InvalidArgument, "snapshot at index %d: the stream ended after %d of the %d bytes announced", index, len(data), want)
	}
	return data, nil
}

// admit checks the first envelope of a stream: cluster id, known sender,
// and (with TLS) the sender's certificate.
func (s *Server) admit(ctx context.Context, req *clusterv1.SendRequest) error {
	if req.ClusterId != s.opts.ClusterID {
		return status.Errorf(codes.FailedPrecondition, "envelope for cluster %q, this is cluster %q", req.ClusterId, s.opts.ClusterID)
	}
	id := req.FromMemberId
	if id == 0 || id == s.opts.ID {
		return status.Errorf(codes.InvalidArgument, "envelope from member id %d", id)
	}
	info, ok := s.opts.Peers.Peer(id)
	if !ok {
		return status.Errorf(codes.PermissionDenied, "member %d is not in the address book of member %d", id, s.opts.ID)
	}
	if s.opts.Insecure {
		return nil
	}
	p, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return status.Error(codes.PermissionDenied, "no peer information on the stream")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return status.Error(codes.PermissionDenied, "stream is not over TLS")
	}
	if err := checkIdentity(ti.State, id, info.Name); err != nil {
		return status.Errorf(codes.PermissionDenied, "from %v: %v", p.Addr, err)
	}
	return nil
}

// deliver decodes and steps the messages of one admitted envelope.
func (s *Server) deliver(ctx context.Context, from uint64, req *clusterv1.SendRequest) error {
	if len(req.Messages) > s.opts.MaxEnvelopeMessages {
		s.refused.Add(1)
		return status.Errorf(codes.InvalidArgument, "envelope of %d messages, above the limit of %d", len(req.Messages), s.opts.MaxEnvelopeMessages)
	}
	for i, b := range req.Messages {
		var m raftpb.Message
		if err := m.Unmarshal(b); err != nil {
			s.refused.Add(1)
			return status.Errorf(codes.InvalidArgument, "message %d of an envelope from member %d: %v", i, from, err)
		}
		if m.From != from || m.To != s.opts.ID {
			s.refused.Add(1)
			return status.Errorf(codes.InvalidArgument, "message %d (%v) from %d to %d on a stream from member %d to member %d", i, m.Type, m.From, m.To, from, s.opts.ID)
		}
		if err := s.opts.Step(ctx, m); err != nil {
			s.stepFailed.Add(1)
			if m.Type == raftpb.MsgSnap {
				return status.Errorf(codes.ResourceExhausted, "step snapshot at index %d: %v", m.Snapshot.Metadata.Index, err)
			}
			continue // raft retransmits
		}
		s.received.Add(1)
	}
	return nil
}
