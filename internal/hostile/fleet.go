package hostile

import (
	"fmt"
	"time"
)

// Addresses the attacks of FleetPlan dial from: loopback aliases of their
// own, so that the per-address connection caps count them apart from a
// fleet's links and legitimate clients on 127.0.0.1, as attackers on
// other hosts would be.
const (
	FromWrites   = "127.0.0.2"
	FromCluster  = "127.0.0.3"
	FromLines    = "127.0.0.4"
	FromHalfOpen = "127.0.0.5"
	FromShip     = "127.0.0.6"
)

// Fleet is what FleetPlan attacks: the listeners of a fleet run with TLS
// and tokens, and the certificates an attacker holds.
type Fleet struct {
	Nodes        []NodeListeners
	Coordinators []CoordinatorListeners
	// Token is a valid token (the long lines are sent with it).
	Token string
	// StolenEdge is an edge CA certificate and key (a stolen Pi's);
	// Stranger a peer CA certificate naming no member (what a shared CA
	// would let through the cluster listener's handshake); UnknownEdge an
	// edge CA certificate of an edge never registered.
	StolenEdge, Stranger, UnknownEdge CertFiles
}

// NodeListeners are a node's client listeners.
type NodeListeners struct{ Name, GRPC, HTTP string }

// CoordinatorListeners are a coordinator's four listeners.
type CoordinatorListeners struct{ Name, GRPC, HTTP, Cluster, Intake string }

// CertFiles are a PEM certificate and its key.
type CertFiles struct{ Cert, Key string }

// Sizes are how much FleetPlan sends.
type Sizes struct {
	Writes      int // unauthenticated Write calls on each gRPC client listener
	WriteBytes  int // each one's message
	Streams     int // raft streams, replica calls (each kind, each certificate) and ship streams per coordinator
	StreamBytes int // each one's first message
	Lines       int // long-line bodies on each node's /write
	LineFields  int // fields of each (ten bytes a field)
	HalfOpen    int // half-open handshakes, spread over every TLS listener
	// Hold is how long the half-open connections wait for the server to
	// close them.
	Hold time.Duration
}

// DefaultSizes are the sizes of the hostile-clients scenario: 100 × 64 MB
// unauthenticated writes, 50 streams × 200 MB, 20 bodies of one 20 MB line
// of 2,000,000 fields, 10,000 half-open handshakes held up to 20 s.
func DefaultSizes() Sizes {
	return Sizes{Writes: 100, WriteBytes: 64 << 20, Streams: 50, StreamBytes: 200 << 20, Lines: 20, LineFields: 2_000_000,
		HalfOpen: 10_000, Hold: 20 * time.Second}
}

// Listener is one TLS listener a plan opens half-open handshakes to, with
// the per-address connection cap it has by default.
type Listener struct {
	Name, Addr string
	PerIP      int
}

// Default per-address connection caps (docs/security.md).
const (
	clientPerIP  = 64  // --max-conns-per-ip
	clusterPerIP = 32  // --cluster-max-conns-per-ip
	intakePerIP  = 256 // --intake-max-conns-per-ip
)

// FleetPlan is the hostile-clients scenario against f, all at once:
//
//   - s.Writes unauthenticated Write calls of s.WriteBytes on every gRPC
//     client listener, over 4 connections (refused UNAUTHENTICATED
//     naming the token);
//   - on every coordinator's cluster listener, s.Streams raft streams and
//     as many ReplicaService.Store calls of s.StreamBytes, once with the
//     stolen edge certificate (refused in the TLS handshake: the listener
//     trusts the peer CA alone) and once with the stranger's (refused by
//     the listener's admission: it names no member);
//   - on every intake, s.Streams Ship streams of s.StreamBytes with the
//     unknown edge's valid certificate (refused for their size before
//     they are read);
//   - s.Lines bodies of one line of s.LineFields fields with the token on
//     every node's /write (refused 400 or 413 naming max-line-bytes);
//   - s.HalfOpen connections spread over every TLS listener, each sending
//     the start of a ClientHello and nothing more (closed at accept over
//     the per-address cap, or at the handshake timeout).
//
// It returns the plan and the half-open handshakes' listeners by name.
func FleetPlan(f Fleet, s Sizes) (Plan, map[string]Listener) {
	var p Plan
	write := func(label, addr string) GRPCAttack {
		return GRPCAttack{Name: fmt.Sprintf("unauthenticated %d MB write", s.WriteBytes>>20), Label: label, Addr: addr, LocalIP: FromWrites, Conns: 4,
			TLS: true, Method: "write", Calls: s.Writes, Bytes: s.WriteBytes, Want: "no-token"}
	}
	var ls []Listener
	for _, n := range f.Nodes {
		p.GRPC = append(p.GRPC, write(n.Name+" grpc", n.GRPC))
		p.HTTP = append(p.HTTP, HTTPAttack{Name: fmt.Sprintf("%d MB line of %d fields, valid token", s.LineFields*10/1_000_000, s.LineFields),
			Label: n.Name + " http /write", URL: "https://" + n.HTTP + "/write?db=hostile", LocalIP: FromLines, Token: f.Token, Requests: s.Lines, Fields: s.LineFields,
			Refuse: []int{400, 413}, Words: []string{"max-line-bytes"}})
		ls = append(ls, Listener{n.Name + " grpc", n.GRPC, clientPerIP}, Listener{n.Name + " http", n.HTTP, clientPerIP})
	}
	mb := s.StreamBytes >> 20
	for _, c := range f.Coordinators {
		p.GRPC = append(p.GRPC, write(c.Name+" grpc", c.GRPC))
		for _, who := range []struct {
			name string
			cert CertFiles
		}{{"edge certificate", f.StolenEdge}, {"non-member peer certificate", f.Stranger}} {
			for _, m := range []string{"raft-send", "replica-store"} {
				p.GRPC = append(p.GRPC, GRPCAttack{Name: fmt.Sprintf("cluster %s %d MB, %s", m, mb, who.name), Label: c.Name + " cluster", Addr: c.Cluster,
					LocalIP: FromCluster, Conns: 4, TLS: true, CertFile: who.cert.Cert, KeyFile: who.cert.Key,
					Method: m, Calls: s.Streams, Bytes: s.StreamBytes, Want: "not-a-member"})
			}
		}
		p.GRPC = append(p.GRPC, GRPCAttack{Name: fmt.Sprintf("intake ship %d MB, valid edge certificate", mb), Label: c.Name + " intake", Addr: c.Intake,
			LocalIP: FromShip, Conns: 4, TLS: true, CertFile: f.UnknownEdge.Cert, KeyFile: f.UnknownEdge.Key,
			Method: "ship", Calls: s.Streams, Bytes: s.StreamBytes, Want: "too-large"})
		ls = append(ls, Listener{c.Name + " grpc", c.GRPC, clientPerIP}, Listener{c.Name + " http", c.HTTP, clientPerIP},
			Listener{c.Name + " cluster", c.Cluster, clusterPerIP}, Listener{c.Name + " intake", c.Intake, intakePerIP})
	}
	byName := map[string]Listener{}
	for i, l := range ls {
		n := s.HalfOpen / len(ls)
		if i < s.HalfOpen%len(ls) {
			n++
		}
		byName[l.Name] = l
		p.HalfOpen = append(p.HalfOpen, HalfOpenAttack{Name: l.Name,
			HalfOpen: HalfOpen{Addr: l.Addr, LocalIPs: []string{FromHalfOpen}, Conns: n, Hold: s.Hold}})
	}
	return p, byName
}
