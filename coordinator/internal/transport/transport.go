package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3/raftpb"
)

// Transport sends raft messages to the other members; see the package doc.
type Transport struct {
	opts Options
	log  *slog.Logger

	mu     sync.RWMutex
	peers  map[uint64]*peer // REQUIRES: mu held
	closed bool             // REQUIRES: mu held

	stats counters
}

type counters struct {
	sent, dropped, unknownPeer, streamFailures, connects atomic.Uint64
	snapshotsSent, snapshotsFailed                       atomic.Uint64
}

// Stats are a Transport's counters since New.
type Stats struct {
	Sent            uint64 // messages written to a stream
	Dropped         uint64 // messages dropped: queue full, stream failure or peer change
	UnknownPeer     uint64 // messages for a member not in the address book
	StreamFailures  uint64 // streams that failed to open or broke
	Connects        uint64 // message streams opened
	SnapshotsSent   uint64 // snapshots acknowledged by their receiver
	SnapshotsFailed uint64 // snapshots reported failed
}

// ErrClosed is returned by address-book changes after Close.
var ErrClosed = errors.New("transport: closed")

// New returns a Transport with an empty address book.
func New(opts Options) (*Transport, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Transport{opts: opts, log: opts.Logger.With("component", "raft-transport", "member", opts.ID), peers: map[uint64]*peer{}}, nil
}

func (t *Transport) reportUnreachable(id uint64) {
	if t.opts.Reporter != nil {
		t.opts.Reporter.ReportUnreachable(id)
	}
}

func (t *Transport) reportSnapshot(id uint64, ok bool) {
	if ok {
		t.stats.snapshotsSent.Add(1)
	} else {
		t.stats.snapshotsFailed.Add(1)
	}
	if t.opts.Reporter != nil {
		t.opts.Reporter.ReportSnapshot(id, ok)
	}
}

// Send queues messages for their destinations and returns at once; see the
// package doc for what happens to a message that cannot be queued. It does
// not modify the messages.
func (t *Transport) Send(msgs []raftpb.Message) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	unreachable := uint64(0)
	for i := range msgs {
		m := msgs[i]
		if m.To == t.opts.ID {
			continue // raft never does this; do not loop a message back
		}
		p := t.peers[m.To]
		if p == nil || t.closed {
			t.stats.unknownPeer.Add(1)
			t.dropped(m, &unreachable)
			continue
		}
		q := p.msgs
		if m.Type == raftpb.MsgSnap {
			q = p.snaps
		}
		select {
		case q <- m:
		default:
			t.stats.dropped.Add(1)
			t.dropped(m, &unreachable)
		}
	}
}

// dropped reports a message that was not delivered: a snapshot as failed,
// any other message by reporting its peer unreachable (once per peer in a
// row, in *last).
func (t *Transport) dropped(m raftpb.Message, last *uint64) {
	if m.Type == raftpb.MsgSnap {
		t.reportSnapshot(m.To, false)
		return
	}
	if *last != m.To {
		*last = m.To
		t.reportUnreachable(m.To)
	}
}

// Peer returns the address-book entry of member id.
func (t *Transport) Peer(id uint64) (Peer, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	p, ok := t.peers[id]
	if !ok {
		return Peer{}, false
	}
	return p.info, true
}

// IsMember reports whether name is the Name of a member in the address
// book; it makes a Transport the Members of a Server by default.
func (t *Transport) IsMember(name string) bool {
	if name == "" {
		return false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, p := range t.peers {
		if p.info.Name == name {
			return true
		}
	}
	return false
}

func (t *Transport) checkPeer(id uint64, info Peer) error {
	switch {
	case id == 0:
		return errors.New("transport: peer id 0")
	case id == t.opts.ID:
		return fmt.Errorf("transport: peer %d is this member", id)
	case info.Addr == "":
		return fmt.Errorf("transport: peer %d has no address", id)
	case info.Name == "" && !t.opts.Insecure:
		return fmt.Errorf("transport: peer %d has no certificate name", id)
	}
	return nil
}

// AddPeer adds member id to the address book and starts its workers.
func (t *Transport) AddPeer(id uint64, info Peer) error {
	if err := t.checkPeer(id, info); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if _, ok := t.peers[id]; ok {
		return fmt.Errorf("transport: peer %d already exists", id)
	}
	p, err := t.startPeer(id, info)
	if err != nil {
		return err
	}
	t.peers[id] = p
	return nil
}

// UpdatePeer changes the address or name of member id: its connections are
// replaced and what was queued for it is dropped.
func (t *Transport) UpdatePeer(id uint64, info Peer) error {
	if err := t.checkPeer(id, info); err != nil {
		return err
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return ErrClosed
	}
	old, ok := t.peers[id]
	if !ok {
		t.mu.Unlock()
		return fmt.Errorf("transport: peer %d does not exist", id)
	}
	p, err := t.startPeer(id, info)
	if err != nil {
		t.mu.Unlock()
		return err
	}
	t.peers[id] = p
	t.mu.Unlock()
	old.stop()
	return nil
}

// RemovePeer removes member id from the address book, dropping what was
// queued for it. Removing an unknown member does nothing.
func (t *Transport) RemovePeer(id uint64) {
	t.mu.Lock()
	p := t.peers[id]
	delete(t.peers, id)
	t.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	s := &t.stats
	return Stats{
		Sent: s.sent.Load(), Dropped: s.dropped.Load(), UnknownPeer: s.unknownPeer.Load(),
		StreamFailures: s.streamFailures.Load(), Connects: s.connects.Load(),
		SnapshotsSent: s.snapshotsSent.Load(), SnapshotsFailed: s.snapshotsFailed.Load(),
	}
}

// Close stops every peer's workers and waits for them. Later Sends drop
// everything.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	peers := t.peers
	t.peers = map[uint64]*peer{}
	t.mu.Unlock()
	for _, p := range peers {
		p.stop()
	}
	return nil
}
