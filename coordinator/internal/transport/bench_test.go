package transport

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// BenchmarkTransport_Messages measures one-way throughput of MsgApp
// messages with one 1 KiB entry each, from one member to another over
// loopback mutual TLS, Send to Step.
func BenchmarkTransport_Messages(b *testing.B) {
	var stepped atomic.Int64
	tr := benchPair(b, Options{QueueMessages: 1 << 16}, func(raftpb.Message) { stepped.Add(1) })
	data := make([]byte, 1024)
	msgs := make([]raftpb.Message, 64)
	for i := range msgs {
		msgs[i] = raftpb.Message{Type: raftpb.MsgApp, From: 1, To: 2, Term: 1, Index: uint64(i),
			Entries: []raftpb.Entry{{Term: 1, Index: uint64(i) + 1, Data: data}}}
	}
	b.SetBytes(int64(msgs[0].Size()))
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		k := min(len(msgs), b.N-sent)
		// Send drops when the queue is full (as raft tolerates); the
		// benchmark only offers what fits, to measure delivery.
		for int64(sent)-stepped.Load()-int64(tr.Stats().Dropped) > 1<<15 {
			waitABit()
		}
		tr.Send(msgs[:k])
		sent += k
	}
	for stepped.Load()+int64(tr.Stats().Dropped) < int64(b.N) {
		waitABit()
	}
	b.StopTimer()
	if d := tr.Stats().Dropped; d > 0 {
		b.Logf("%d of %d messages dropped", d, b.N)
	}
}

// benchPair serves member 2 over loopback mutual TLS, handing what it
// receives to step, and returns member 1's Transport (o with its identity
// filled in) with member 2 in its address book; both stop when b ends.
func benchPair(b *testing.B, o Options, step func(raftpb.Message)) *Transport {
	b.Helper()
	client, server := sharedTLS(b)
	srv, err := NewServer(ServerOptions{ID: 2, ClusterID: cluster, TLS: server, Peers: peerMap{1: {Addr: "x", Name: "localhost"}}, Logger: discard,
		Step: func(_ context.Context, m raftpb.Message) error { step(m); return nil }})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	b.Cleanup(func() { srv.Stop(); <-done })
	o.ID, o.ClusterID, o.TLS, o.Logger = 1, cluster, client, discard
	tr, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tr.Close() })
	if err := tr.AddPeer(2, Peer{Addr: lis.Addr().String(), Name: "localhost"}); err != nil {
		b.Fatal(err)
	}
	return tr
}

type peerMap map[uint64]Peer

func (m peerMap) Peer(id uint64) (Peer, bool) { p, ok := m[id]; return p, ok }

// IsMember makes a peerMap the server's Members too.
func (m peerMap) IsMember(name string) bool {
	for _, p := range m {
		if p.Name == name {
			return true
		}
	}
	return false
}

// BenchmarkTransport_Snapshot measures sending one 64 MiB snapshot from one
// member to another over loopback mutual TLS, in chunks, Send to Step
// (the receiver rebuilding the message included).
func BenchmarkTransport_Snapshot(b *testing.B) {
	stepped := make(chan int, 1)
	tr := benchPair(b, Options{Reporter: newRecorder()}, func(m raftpb.Message) { stepped <- len(m.Snapshot.Data) })
	data := randomBytes(64 << 20)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		tr.Send([]raftpb.Message{snapMsg(1, 2, data)})
		if n := <-stepped; n != len(data) {
			b.Fatalf("stepped %d bytes of %d", n, len(data))
		}
	}
}
