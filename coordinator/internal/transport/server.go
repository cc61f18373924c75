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
}

// NewServer returns a Server with its own gRPC server (mutual TLS unless
// Insecure). Serve it with Serve.
func NewServer(opts ServerOptions) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger.With("component", "raft-transport", "member", opts.ID)}
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
		HandshakesFailed: s.handshakesFailed.Load()}
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
