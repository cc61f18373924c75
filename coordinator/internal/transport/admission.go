package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// Members decides who may open a stream on the cluster listener.
type Members interface {
	// IsMember reports whether name, a DNS or URI subject alternative name
	// of a caller's verified certificate, names a current member of the
	// cluster. It is called for every new stream on gRPC's connection
	// goroutine, before anything of the stream is read: it must be quick
	// and must not block.
	IsMember(name string) bool
}

// Metadata keys a sender puts on a raft stream, so that the receiver
// checks who is sending before it reads anything of the stream.
const (
	// HeaderClusterID carries the sender's cluster id.
	HeaderClusterID = "tributary-cluster-id"
	// HeaderMemberID carries the sender's raft member id, in decimal.
	HeaderMemberID = "tributary-member-id"
)

// senderKey is the context key of a raft stream's sender, set by the tap
// when the stream's headers proved it.
type senderKey struct{}

// VerifiedLeaf returns the leaf certificate of a call's verified TLS
// client certificate chain: an error with code UNAUTHENTICATED when the
// connection is not TLS or its client presented no certificate that the
// server verified.
func VerifiedLeaf(ctx context.Context) (*x509.Certificate, error) {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "no peer information on the call")
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, status.Errorf(codes.Unauthenticated, "call from %v is not over TLS", p.Addr)
	}
	if len(ti.State.VerifiedChains) == 0 || len(ti.State.PeerCertificates) == 0 {
		return nil, status.Errorf(codes.Unauthenticated, "%v presented no verified client certificate", p.Addr)
	}
	return ti.State.PeerCertificates[0], nil
}

// CertNames are the DNS and URI subject alternative names of c, the names
// a member's identity is matched against (see the package doc).
func CertNames(c *x509.Certificate) []string {
	out := make([]string, 0, len(c.DNSNames)+len(c.URIs))
	out = append(out, c.DNSNames...)
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}

// MemberName returns the first name of c that m says is a member; ok is
// false when none is.
func MemberName(m Members, c *x509.Certificate) (name string, ok bool) {
	for _, n := range CertNames(c) {
		if m.IsMember(n) {
			return n, true
		}
	}
	return "", false
}

// AuthorizeCaller checks that the caller of a cluster-internal call
// presented a verified client certificate naming a current member of m,
// and returns that name. The cluster listener's tap already did this
// before the call was read; services call it again on their own behalf.
func AuthorizeCaller(ctx context.Context, m Members) (string, error) {
	leaf, err := VerifiedLeaf(ctx)
	if err != nil {
		return "", err
	}
	name, ok := MemberName(m, leaf)
	if !ok {
		return "", status.Errorf(codes.PermissionDenied, "the caller's certificate (%s) names no current member of the cluster", describeNames(leaf))
	}
	return name, nil
}

// describeNames lists a certificate's names for an error message, short.
func describeNames(c *x509.Certificate) string {
	names := CertNames(c)
	if len(names) == 0 {
		return "no DNS or URI SAN, CN " + strconv.Quote(c.Subject.CommonName)
	}
	if len(names) > 4 {
		names = append(names[:4:4], "...")
	}
	return "SANs " + strings.Join(names, ", ")
}

// RequireClientCert returns cfg, cloned, with ClientAuth set so that the
// TLS handshake itself refuses a client without a certificate from the
// configured client CAs; a GetConfigForClient hook (certificate reloading)
// gets the same treatment for the configurations it returns.
func RequireClientCert(cfg *tls.Config) *tls.Config {
	c := cfg.Clone()
	c.ClientAuth = tls.RequireAndVerifyClientCert
	if get := c.GetConfigForClient; get != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			inner, err := get(hello)
			if inner == nil || err != nil {
				return inner, err
			}
			inner = inner.Clone()
			inner.ClientAuth = tls.RequireAndVerifyClientCert
			return inner, nil
		}
	}
	return c
}

// tap admits a new stream on the cluster listener before gRPC reads any of
// it: with TLS, its client certificate must name a current member (every
// service on the listener, whatever its methods); a raft stream whose
// headers name its sender must also name this cluster and a member of the
// address book whose certificate it presents, and a snapshot stream must
// have those headers. It runs on gRPC's connection
// goroutine for every stream: everything it does is a lookup.
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	var leaf *x509.Certificate
	if !s.opts.Insecure {
		var err error
		if leaf, err = VerifiedLeaf(ctx); err != nil {
			return ctx, s.refuseStream(ctx, info, err)
		}
		if _, ok := MemberName(s.opts.Members, leaf); !ok {
			return ctx, s.refuseStream(ctx, info, status.Errorf(codes.PermissionDenied,
				"certificate (%s) names no current member of cluster %q", describeNames(leaf), s.opts.ClusterID))
		}
	}
	snapshot := info.FullMethodName == clusterv1.RaftService_SendSnapshot_FullMethodName
	if info.FullMethodName != clusterv1.RaftService_Send_FullMethodName && !snapshot {
		return ctx, nil
	}
	id, err := s.raftSender(info.Header, leaf)
	if err != nil {
		return ctx, s.refuseStream(ctx, info, err)
	}
	if id == 0 {
		if snapshot {
			return ctx, s.refuseStream(ctx, info, status.Errorf(codes.InvalidArgument,
				"snapshot stream without the %s and %s headers", HeaderClusterID, HeaderMemberID))
		}
		s.legacyStreams.Add(1)
		return ctx, nil // no headers: the first envelope names the sender
	}
	return context.WithValue(ctx, senderKey{}, id), nil
}

// raftSender checks the sender a raft stream's headers name: 0 without
// headers (a sender of an earlier version).
func (s *Server) raftSender(md metadata.MD, leaf *x509.Certificate) (uint64, error) {
	cid, mid := first(md, HeaderClusterID), first(md, HeaderMemberID)
	if cid == "" && mid == "" {
		return 0, nil
	}
	if cid != s.opts.ClusterID {
		return 0, status.Errorf(codes.FailedPrecondition, "raft stream for cluster %q, this is cluster %q", cid, s.opts.ClusterID)
	}
	id, err := strconv.ParseUint(mid, 10, 64)
	if err != nil || id == 0 || id == s.opts.ID {
		return 0, status.Errorf(codes.InvalidArgument, "raft stream from member id %q", mid)
	}
	p, ok := s.opts.Peers.Peer(id)
	if !ok {
		return 0, status.Errorf(codes.PermissionDenied, "member %d is not in the address book of member %d", id, s.opts.ID)
	}
	if leaf != nil && !certHasName(leaf, p.Name) {
		return 0, status.Errorf(codes.PermissionDenied, "certificate (%s) does not carry the name %q of member %d", describeNames(leaf), p.Name, id)
	}
	return id, nil
}

func first(md metadata.MD, key string) string {
	if v := md[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// refuseStream counts and logs a stream refused by the tap and returns err.
// The log is rate-limited: a refused peer may open streams as fast as the
// network carries them.
func (s *Server) refuseStream(ctx context.Context, info *tap.Info, err error) error {
	s.refusedAtAdmission.Add(1)
	if s.logLimit.allow(time.Now()) {
		addr := "unknown"
		if p, ok := grpcpeer.FromContext(ctx); ok {
			addr = p.Addr.String()
		}
		s.log.Warn("refuse cluster stream before reading it", "method", info.FullMethodName, "peer", addr, "err", err,
			"refused_since_start", s.refusedAtAdmission.Load())
	}
	return err
}

// logLimiter allows one event per interval.
type logLimiter struct{ next atomic.Int64 }

const refusalLogInterval = time.Second

func (l *logLimiter) allow(now time.Time) bool {
	n := l.next.Load()
	if now.UnixNano() < n {
		return false
	}
	return l.next.CompareAndSwap(n, now.Add(refusalLogInterval).UnixNano())
}
