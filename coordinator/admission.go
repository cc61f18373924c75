package coordinator

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/transport"
)

// Admission to the two listeners this coordinator serves happens in gRPC
// taps, which run when a stream's headers arrive and before gRPC reads any
// of its messages; a refused stream costs its headers only.
//
//   - Cluster listener (transport.Server's tap): a verified certificate
//     naming a current member (clusterMembers), on every service.
//   - Intake listener (admitEdge): a verified certificate from the edge CA
//     naming no member, not revoked in the catalog (cluster revoke-edge),
//     and AdmitEdge's consent.

// clusterMembers is who may use the cluster listener: the coordinators in
// the raft transport's address book (bootstrap and join peers until the
// catalog names the members, then the catalog's members), this coordinator
// itself, and every coordinator registered in the catalog whose raft id is
// a current member (or every registered one before the catalog holds a
// configuration). It is a transport.Members.
type clusterMembers struct{ c *Coordinator }

// IsMember implements transport.Members. It only reads: the address book
// under its lock, the catalog under its read lock.
func (m clusterMembers) IsMember(name string) bool {
	c := m.c
	if name == "" {
		return false
	}
	if name == c.opts.NodeID || c.tr.IsMember(name) {
		return true
	}
	n, ok := c.fsm.Node(name)
	if !ok || n.Role != catalog.RoleCoordinator {
		return false
	}
	members := c.fsm.Members()
	if len(members) == 0 {
		return true
	}
	for _, mb := range members {
		if mb.RaftID == n.RaftID {
			return true
		}
	}
	return false
}

// admission counts what the taps of this coordinator's listeners refused.
type admission struct {
	intakeConns, intakeStreams, intakeHandshakes atomic.Uint64
	logNext                                      atomic.Int64
}

// logAllowed rate-limits refusal logs to one a second: a refused client
// may try as fast as the network carries its attempts.
func (a *admission) logAllowed() bool {
	now := time.Now().UnixNano()
	next := a.logNext.Load()
	return now >= next && a.logNext.CompareAndSwap(next, now+int64(time.Second))
}

// handshakeTimeout bounds the TLS handshake of an intake connection: a
// client that opens connections and never finishes its handshake holds a
// place in the connection caps this long.
const handshakeTimeout = 10 * time.Second

// refusedIntakeConn counts (and now and then logs) an intake connection
// closed at accept because a cap was reached.
func (c *Coordinator) refusedIntakeConn(remote net.Addr, reason string) {
	c.admission.intakeConns.Add(1)
	if c.admission.logAllowed() {
		c.log.Warn("refuse intake connection", "peer", remote.String(), "reason", reason, "refused_since_start", c.admission.intakeConns.Load())
	}
}

// failedIntakeHandshake counts (and now and then logs) an intake
// connection whose TLS handshake failed: an edge with a certificate the
// edge CA does not verify (expired, from another CA) shows here, not in
// the stream refusals. A client that merely closed is logged at debug
// level: port probes and TCP health checks do that.
func (c *Coordinator) failedIntakeHandshake(remote net.Addr, reason string, err error) {
	n := c.admission.intakeHandshakes.Add(1)
	level := slog.LevelWarn
	if reason == transport.HandshakeClosed {
		level = slog.LevelDebug
	}
	if !c.log.Enabled(context.Background(), level) || !c.admission.logAllowed() {
		return
	}
	c.log.Log(context.Background(), level, "intake TLS handshake failed", "peer", remote.String(), "reason", reason, "err", err,
		"failed_since_start", n)
}

// admitEdge is the intake listener's tap: before anything of a stream is
// read, the caller must have presented a certificate the edge CA verified
// (with TLS the handshake already insists), whose identity and names are
// no coordinator's (an edge cannot pass for a member, nor a member's
// certificate serve as an edge's), and which AdmitEdge accepts.
func (c *Coordinator) admitEdge(ctx context.Context, info *tap.Info) (context.Context, error) {
	if c.opts.Insecure {
		return ctx, nil
	}
	leaf, err := transport.VerifiedLeaf(ctx)
	if err == nil {
		err = c.checkEdgeCert(leaf)
	}
	if err != nil {
		c.admission.intakeStreams.Add(1)
		if c.admission.logAllowed() {
			addr := "unknown"
			if p, ok := grpcpeer.FromContext(ctx); ok {
				addr = p.Addr.String()
			}
			c.log.Warn("refuse intake stream before reading it", "method", info.FullMethodName, "peer", addr, "err", err,
				"refused_since_start", c.admission.intakeStreams.Load())
		}
		return ctx, err
	}
	return ctx, nil
}

// checkEdgeCert applies the intake's identity rules to a verified leaf.
func (c *Coordinator) checkEdgeCert(leaf *x509.Certificate) error {
	id, err := leafIdentity(leaf)
	if err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	members := clusterMembers{c}
	for _, n := range append(transport.CertNames(leaf), id) {
		if members.IsMember(n) {
			return status.Errorf(codes.PermissionDenied, "certificate names coordinator %q: the intake admits edges only", n)
		}
	}
	if n, ok := c.fsm.Node(id); ok && n.Revoked {
		return status.Errorf(codes.PermissionDenied, "edge %q is revoked", id)
	}
	if c.opts.AdmitEdge == nil {
		return nil
	}
	if err := c.opts.AdmitEdge(id); err != nil {
		if st, ok := status.FromError(err); ok {
			return st.Err()
		}
		return status.Errorf(codes.PermissionDenied, "edge %q refused: %v", id, err)
	}
	return nil
}

// errNoIdentity is a certificate that names nobody.
var errNoIdentity = errors.New("the edge's certificate names nobody (no SAN, no common name)")
