package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"

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

	received, stepFailed, refused atomic.Uint64
}

// ServerStats are a Server's counters since NewServer.
type ServerStats struct {
	Received   uint64 // messages handed to Step
	StepFailed uint64 // messages Step refused (dropped)
	Refused    uint64 // streams refused: identity, cluster id or malformed
}

// NewServer returns a Server with its own gRPC server (mutual TLS unless
// Insecure). Serve it with Serve.
func NewServer(opts ServerOptions) (*Server, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger.With("component", "raft-transport", "member", opts.ID)}
	gopts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(opts.MaxEnvelopeBytes),
		grpc.MaxConcurrentStreams(opts.MaxStreams),
	}
	if !opts.Insecure {
		cfg := opts.TLS.Clone()
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	s.grpc = grpc.NewServer(append(gopts, opts.GRPCServerOptions...)...)
	clusterv1.RegisterRaftServiceServer(s.grpc, s)
	if opts.Register != nil {
		opts.Register(s.grpc)
	}
	return s, nil
}

// Serve accepts connections on lis until Stop; see grpc.Server.Serve.
func (s *Server) Serve(lis net.Listener) error { return s.grpc.Serve(lis) }

// Stop closes the listeners and every stream at once.
func (s *Server) Stop() { s.grpc.Stop() }

// GracefulStop stops accepting streams and waits for the open ones; raft
// streams are long-lived, so bound it with Stop.
func (s *Server) GracefulStop() { s.grpc.GracefulStop() }

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	return ServerStats{Received: s.received.Load(), StepFailed: s.stepFailed.Load(), Refused: s.refused.Load()}
}

// Send implements clusterv1.RaftServiceServer.
func (s *Server) Send(stream clusterv1.RaftService_SendServer) error {
	ctx := stream.Context()
	var from uint64
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
