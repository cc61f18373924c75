package coordinator

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/coordinator/internal/transport"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/coordinator/replica"
	"github.com/tributarydb/tributary/internal/auth"
	"github.com/tributarydb/tributary/internal/loopback"
	"github.com/tributarydb/tributary/node/labels"
)

// links holds the connections a coordinator opens to others: replica
// calls to other coordinators, queries to edges. Connections are dialed on
// first use and redialed when the catalog gives a member a new address.
type links struct {
	c *Coordinator

	mu    sync.Mutex
	peers map[string]*peerLink // by coordinator node id
	edges map[string]*edgeLink // by edge node id
}

type peerLink struct {
	addr   string
	conn   *grpc.ClientConn
	client *replica.Client
}

type edgeLink struct {
	addr   string
	client *query.EdgeClient
}

func newLinks(c *Coordinator) *links {
	return &links{c: c, peers: map[string]*peerLink{}, edges: map[string]*edgeLink{}}
}

// peer returns the replica client of coordinator id, dialing its cluster
// address from the catalog.
func (l *links) peer(id string) (*replica.Client, error) {
	n, ok := l.c.fsm.Node(id)
	if !ok || n.Role != catalog.RoleCoordinator {
		return nil, fmt.Errorf("coordinator %q is not in the catalog", id)
	}
	if n.Addr == "" {
		return nil, fmt.Errorf("coordinator %q has no cluster address", id)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.peers[id]; p != nil {
		if p.addr == n.Addr {
			return p.client, nil
		}
		p.conn.Close()
		delete(l.peers, id)
	}
	creds := insecure.NewCredentials()
	if !l.c.opts.Insecure {
		creds = credentials.NewTLS(transport.VerifyServerName(l.c.opts.ClusterClientTLS, id))
	}
	conn, err := grpc.NewClient(n.Addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)),
		l.c.grpcDialOption())
	if err != nil {
		return nil, fmt.Errorf("dial coordinator %q at %s: %w", id, n.Addr, err)
	}
	p := &peerLink{addr: n.Addr, conn: conn, client: replica.NewClientWith(conn, replica.ClientOptions{Uncompressed: loopback.IsAddr(n.Addr)})}
	l.peers[id] = p
	return p.client, nil
}

// replicaSource serves the query front end: this coordinator's own store,
// or another coordinator's over the cluster link.
func (l *links) replicaSource(id string) (query.ReplicaSource, error) {
	if id == l.c.opts.NodeID {
		if err := l.c.storeBound(); err != nil {
			return nil, fmt.Errorf("this coordinator's replica store does not serve reads: %w", err)
		}
		return l.c.store, nil
	}
	return l.peer(id)
}

// edgeSource serves the query front end: an edge's query tunnel to this
// coordinator, an edge in this process, or one reachable at the query
// address it advertised.
func (l *links) edgeSource(id, addr string) (query.Source, error) {
	if n, ok := l.c.fsm.Node(id); ok && n.Revoked {
		return nil, fmt.Errorf("edge %q is revoked", id)
	}
	if cc, ok := l.c.tunnels.Client(id); ok {
		return query.NewEdgeClient("tunnel/"+id, cc), nil
	}
	if l.c.opts.LocalEdge != nil {
		if s := l.c.opts.LocalEdge(id); s != nil {
			return s, nil
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("edge %q advertised no query address", id)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.edges[id]; e != nil {
		if e.addr == addr {
			return e.client, nil
		}
		e.client.Close()
		delete(l.edges, id)
	}
	cl, err := query.DialEdge(addr, append(slices.Clone(l.c.opts.EdgeDialOptions), l.c.grpcDialOption())...)
	if err != nil {
		return nil, fmt.Errorf("dial edge %q at %s: %w", id, addr, err)
	}
	l.edges[id] = &edgeLink{addr: addr, client: cl}
	return cl, nil
}

func (l *links) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, p := range l.peers {
		p.conn.Close()
		delete(l.peers, id)
	}
	for id, e := range l.edges {
		e.client.Close()
		delete(l.edges, id)
	}
}

// replicaRouter stores segments for the intake: on this coordinator's own
// store or on another coordinator's.
type replicaRouter struct{ c *Coordinator }

func (r replicaRouter) Store(ctx context.Context, coordID, edge string, seq uint64, crc uint32, file []byte) (intake.Stored, error) {
	var a replica.Applied
	var err error
	if coordID == r.c.opts.NodeID {
		a, err = r.c.store.Apply(ctx, edge, seq, crc, file)
	} else {
		var cl *replica.Client
		if cl, err = r.c.links.peer(coordID); err == nil {
			a, err = cl.Store(ctx, edge, seq, crc, file)
		}
	}
	if errors.Is(err, replica.ErrConflict) {
		return intake.Stored{}, fmt.Errorf("%w: on %s: %v", intake.ErrConflict, coordID, err)
	}
	if err != nil {
		return intake.Stored{}, fmt.Errorf("store segment %d of %q on %s: %w", seq, edge, coordID, err)
	}
	return intake.Stored{Series: a.Series, Points: a.Points, Rejected: a.Rejected, Duplicate: a.Duplicate}, nil
}

func (r replicaRouter) CRC(ctx context.Context, coordID, edge string, seq uint64) (uint32, bool, error) {
	if coordID != r.c.opts.NodeID {
		return 0, false, nil // only the local index is checked
	}
	return r.c.store.SegmentCRC(edge, seq)
}

// authorizeMember admits replica calls from current members (by the
// name on their verified certificate; see clusterMembers); without TLS
// everyone is admitted (loopback only). The cluster listener's tap made
// the same check before the call was read.
func (c *Coordinator) authorizeMember(ctx context.Context) error {
	if c.opts.Insecure {
		return nil
	}
	_, err := transport.AuthorizeCaller(ctx, clusterMembers{c})
	return err
}

// edgeIdentity is an edge's identity: the first DNS subject alternative
// name of its verified client certificate, else its first URI SAN, else
// its common name. It must equal the edge's node id.
func edgeIdentity(ctx context.Context) (string, error) {
	leaf, err := transport.VerifiedLeaf(ctx)
	if err != nil {
		return "", errors.New("the edge presented no verified client certificate")
	}
	return leafIdentity(leaf)
}

// leafIdentity is the identity a certificate names by the edge rule of
// edgeIdentity (auth.CertIdentity: first DNS SAN, else URI SAN, else
// common name).
func leafIdentity(leaf *x509.Certificate) (string, error) {
	id, err := auth.CertIdentity(leaf)
	if err != nil {
		return "", errNoIdentity
	}
	return id, nil
}

// maintain registers this coordinator in the catalog (which places edges
// on it), heartbeats, and keeps the raft transport's address book in step
// with the catalog's members, until ctx ends.
func (c *Coordinator) maintain(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	var lastBeat time.Time
	for {
		if c.raft.Status().Removed {
			// Registering or heartbeating would only be refused now.
			c.log.Warn("this coordinator was removed from the raft cluster; it no longer serves (stop the process)")
			select {
			case c.errc <- ErrRemoved:
			default:
			}
			return
		}
		c.syncPeers()
		c.dropRevokedTunnels()
		if c.raft.Status().Lead != 0 {
			n, ok := c.fsm.Node(c.opts.NodeID)
			switch {
			case !ok || n.Addr != c.opts.ClusterAddr || n.StoreID != c.store.ID() || n.Labels.Get(catalog.FeaturesLabel) != catalog.Features:
				c.register(ctx)
				lastBeat = time.Now()
			case time.Since(lastBeat) >= c.heartbeatInterval():
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := c.raft.Propose(pctx, catalog.EncodeCommand(catalog.Heartbeat{Beats: []catalog.Beat{{ID: c.opts.NodeID, TimeMs: time.Now().UnixMilli()}}}))
				cancel()
				if err == nil {
					lastBeat = time.Now()
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Coordinator) register(ctx context.Context) {
	identity := ""
	if !c.opts.Insecure {
		identity = c.opts.NodeID
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := c.raft.Propose(pctx, catalog.EncodeCommand(catalog.RegisterNode{ID: c.opts.NodeID, Role: catalog.RoleCoordinator,
		RaftID: c.opts.RaftID, Addr: c.opts.ClusterAddr, Identity: identity, TimeMs: time.Now().UnixMilli(), StoreID: c.store.ID(),
		// The catalog features this version applies (catalog.AnnounceReady).
		Labels: labels.Labels{{Name: catalog.FeaturesLabel, Value: catalog.Features}}}))
	if err != nil && ctx.Err() == nil {
		c.log.Warn("register in the catalog failed; retrying", "err", err)
		return
	}
	if err == nil {
		c.log.Info("registered in the catalog", "cluster_addr", c.opts.ClusterAddr)
	}
}

// heartbeatInterval is how often this coordinator heartbeats: every 10 s,
// or a quarter of the dead-after when that is shorter, so that a live
// member is never taken for dead.
func (c *Coordinator) heartbeatInterval() time.Duration {
	dead := c.opts.DeadAfter
	if dead == 0 {
		dead = time.Duration(c.fsm.Config().DeadAfter()) * time.Millisecond
	}
	return max(min(10*time.Second, dead/4), 250*time.Millisecond)
}

// dropRevokedTunnels ends the query tunnels of revoked edges (the intake
// ends their replication streams itself).
func (c *Coordinator) dropRevokedTunnels() {
	for _, e := range c.tunnels.Edges() {
		if n, ok := c.fsm.Node(e); ok && n.Revoked {
			c.tunnels.Drop(e)
		}
	}
}

// syncPeers makes the transport's address book match the raft members the
// catalog knows: a member's name is the id of the coordinator registered
// with its raft id, its address the one its configuration change carried
// (or its registration's).
func (c *Coordinator) syncPeers() {
	byRaft := map[uint64]catalog.Node{}
	for _, n := range c.fsm.Nodes() {
		if n.Role == catalog.RoleCoordinator && n.RaftID != 0 {
			byRaft[n.RaftID] = n
		}
	}
	members := c.fsm.Members()
	if len(members) == 0 {
		return // the catalog has not applied a configuration yet: keep the bootstrap book
	}
	isMember := map[uint64]bool{}
	for _, m := range members {
		isMember[m.RaftID] = true
		if m.RaftID == c.opts.RaftID {
			continue
		}
		want, known := transport.Peer{Addr: m.Addr}, false
		if n, ok := byRaft[m.RaftID]; ok {
			want.Name, known = n.ID, true
			if want.Addr == "" {
				want.Addr = n.Addr
			}
		}
		have, ok := c.tr.Peer(m.RaftID)
		if !known && ok {
			// Not registered yet: keep what bootstrap, --join or the
			// AddMember call said, but remove it with the membership.
			c.book[m.RaftID] = true
			continue
		}
		if want.Addr == "" || (!c.opts.Insecure && want.Name == "") {
			continue
		}
		c.book[m.RaftID] = true
		switch {
		case !ok:
			if err := c.tr.AddPeer(m.RaftID, want); err != nil {
				c.log.Warn("add raft peer", "raft_id", m.RaftID, "err", err)
			}
		case have != want:
			if err := c.tr.UpdatePeer(m.RaftID, want); err != nil {
				c.log.Warn("update raft peer", "raft_id", m.RaftID, "err", err)
			}
		}
	}
	for id := range c.book {
		if !isMember[id] {
			c.tr.RemovePeer(id)
			delete(c.book, id)
		}
	}
}
