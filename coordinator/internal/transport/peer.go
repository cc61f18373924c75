package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// peer is one address-book entry and its two workers.
type peer struct {
	t    *Transport
	id   uint64
	info Peer

	// msgs and snaps are the queues Send fills; they are never closed.
	msgs  chan raftpb.Message
	snaps chan raftpb.Message

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// conn carries the message stream, snapConn the snapshot streams: two
	// TCP connections, so snapshot bytes never delay a heartbeat.
	conn, snapConn *grpc.ClientConn
}

// startPeer dials (lazily) and starts the workers of member id.
func (t *Transport) startPeer(id uint64, info Peer) (*peer, error) {
	var creds credentials.TransportCredentials
	if t.opts.Insecure {
		creds = insecure.NewCredentials()
	} else {
		creds = credentials.NewTLS(clientTLS(t.opts.TLS, id, info.Name))
	}
	bc := backoff.DefaultConfig
	bc.BaseDelay, bc.MaxDelay = t.opts.MinBackoff, t.opts.MaxBackoff
	dial := func() (*grpc.ClientConn, error) {
		return grpc.NewClient(info.Addr, append([]grpc.DialOption{
			grpc.WithTransportCredentials(creds),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 5 * time.Second}),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(t.opts.MaxSnapshotBytes + 1024)),
		}, t.opts.GRPCDialOptions...)...)
	}
	conn, err := dial()
	if err != nil {
		return nil, fmt.Errorf("transport: peer %d at %q: %w", id, info.Addr, err)
	}
	snapConn, err := dial()
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("transport: peer %d at %q: %w", id, info.Addr, err)
	}
	p := &peer{
		t: t, id: id, info: info,
		msgs:  make(chan raftpb.Message, t.opts.QueueMessages),
		snaps: make(chan raftpb.Message, t.opts.QueueSnapshots),
		conn:  conn, snapConn: snapConn,
	}
	// Every stream names its sender in its headers: the receiver checks
	// them before it reads the stream (see Server's tap).
	ctx := metadata.AppendToOutgoingContext(context.Background(),
		HeaderClusterID, t.opts.ClusterID, HeaderMemberID, strconv.FormatUint(t.opts.ID, 10))
	p.ctx, p.cancel = context.WithCancel(ctx)
	p.wg.Add(2)
	go p.runMessages()
	go p.runSnapshots()
	return p, nil
}

// stop ends the workers, closes the connections and drops what is queued.
// It must be called once, after the peer left the address book.
func (p *peer) stop() {
	p.cancel()
	p.wg.Wait()
	_ = p.conn.Close()
	_ = p.snapConn.Close()
	p.dropQueued()
	for {
		select {
		case m := <-p.snaps:
			p.t.reportSnapshot(m.To, false)
		default:
			return
		}
	}
}

// dropQueued drops the waiting messages and reports the peer unreachable
// if there were any.
func (p *peer) dropQueued() {
	n := 0
	for drained := false; !drained; {
		select {
		case <-p.msgs:
			n++
		default:
			drained = true
		}
	}
	if n > 0 {
		p.t.stats.dropped.Add(uint64(n))
		p.t.reportUnreachable(p.id)
	}
}

// envelope encodes messages into one SendRequest from this member.
func (p *peer) envelope(msgs []raftpb.Message) (*clusterv1.SendRequest, error) {
	req := &clusterv1.SendRequest{ClusterId: p.t.opts.ClusterID, FromMemberId: p.t.opts.ID, Messages: make([][]byte, len(msgs))}
	for i := range msgs {
		b, err := msgs[i].Marshal()
		if err != nil {
			return nil, fmt.Errorf("marshal %v: %w", msgs[i].Type, err)
		}
		req.Messages[i] = b
	}
	return req, nil
}

// runMessages is the message worker: queue → one long-lived stream.
func (p *peer) runMessages() {
	defer p.wg.Done()
	client := clusterv1.NewRaftServiceClient(p.conn)
	var (
		stream       clusterv1.RaftService_SendClient
		cancelStream context.CancelFunc
		ended        chan error // the receiver ended the stream
		failures     int
		batch        []raftpb.Message
	)
	closeStream := func() {
		if stream != nil {
			cancelStream()
			<-ended // the watcher has returned
			stream, cancelStream, ended = nil, nil, nil
		}
	}
	defer closeStream()
	fail := func(n int, err error) {
		closeStream()
		p.t.stats.streamFailures.Add(1)
		p.t.stats.dropped.Add(uint64(n))
		p.t.reportUnreachable(p.id)
		p.dropQueued()
		failures++
		p.logFailure("message stream", failures, err)
		p.sleep(failures)
	}
	for {
		select {
		case <-p.ctx.Done():
			return
		case err := <-ended: // nil channel while there is no stream
			ended <- err // closeStream waits for it
			fail(0, err)
			continue
		case m := <-p.msgs:
			batch = append(batch[:0], m)
		}
		size := batch[0].Size()
	fill:
		for size < p.t.opts.MaxBatchBytes {
			select {
			case m := <-p.msgs:
				batch = append(batch, m)
				size += m.Size()
			default:
				break fill
			}
		}
		req, err := p.envelope(batch)
		if err != nil {
			// A message raft built that does not marshal is a bug in
			// raft; drop it rather than wedging the peer.
			p.t.stats.dropped.Add(uint64(len(batch)))
			p.t.log.Error("drop raft messages", "peer", p.id, "err", err)
			continue
		}
		if stream == nil {
			ctx, cancel := context.WithCancel(p.ctx)
			s, err := client.Send(ctx)
			if err != nil {
				cancel()
				fail(len(batch), err)
				continue
			}
			stream, cancelStream, ended = s, cancel, make(chan error, 1)
			// The receiver sends nothing: Recv returns when it ends the
			// stream (a refusal, a restart) or when we cancel it.
			go func(s clusterv1.RaftService_SendClient, ended chan<- error) {
				_, err := s.Recv()
				if err == nil || errors.Is(err, io.EOF) {
					err = errors.New("receiver ended the stream")
				}
				ended <- err
			}(s, ended)
			p.t.stats.connects.Add(1)
		}
		if err := stream.Send(req); err != nil {
			// The receiver's status, if it ended the stream, is what
			// the watcher got from Recv.
			if errors.Is(err, io.EOF) {
				err = <-ended
				ended <- err
			}
			fail(len(batch), err)
			continue
		}
		if failures > 0 {
			p.t.log.Info("raft peer reachable again", "peer", p.id, "addr", p.info.Addr)
		}
		failures = 0
		p.t.stats.sent.Add(uint64(len(batch)))
	}
}

// runSnapshots is the snapshot worker: one stream per MsgSnap, reported
// once its receiver acknowledged it.
func (p *peer) runSnapshots() {
	defer p.wg.Done()
	client := clusterv1.NewRaftServiceClient(p.snapConn)
	failures := 0
	for {
		var m raftpb.Message
		select {
		case <-p.ctx.Done():
			return
		case m = <-p.snaps:
		}
		err := p.sendSnapshot(client, m)
		p.t.reportSnapshot(p.id, err == nil)
		if err == nil {
			failures = 0
			continue
		}
		if p.ctx.Err() != nil {
			return
		}
		failures++
		p.logFailure("snapshot", failures, err)
		p.sleep(failures)
	}
}

// sendSnapshot sends one MsgSnap and returns once the receiver handed it
// to its raft member: in chunks (SendSnapshot), or to a receiver of an
// earlier version, which answers UNIMPLEMENTED, in one envelope (Send) if
// it fits in one.
func (p *peer) sendSnapshot(client clusterv1.RaftServiceClient, m raftpb.Message) error {
	if m.Snapshot == nil {
		return fmt.Errorf("snapshot message to %d without a snapshot", m.To)
	}
	if n := len(m.Snapshot.Data); n > p.t.opts.MaxSnapshotBytes {
		return fmt.Errorf("snapshot at index %d holds %d bytes, above MaxSnapshotBytes %d", m.Snapshot.Metadata.Index, n, p.t.opts.MaxSnapshotBytes)
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.t.opts.SnapshotTimeout)
	defer cancel()
	err := p.sendSnapshotChunks(ctx, client, m)
	if status.Code(err) != codes.Unimplemented {
		return err
	}
	if size := m.Size(); size > LegacySnapshotBytes {
		return fmt.Errorf("snapshot at index %d is %d bytes: member %d predates chunked snapshots and takes at most %d in one message", m.Snapshot.Metadata.Index, size, p.id, LegacySnapshotBytes)
	}
	return p.sendSnapshotEnvelope(ctx, client, m)
}

// sendSnapshotChunks sends m on a SendSnapshot stream: the message without
// its snapshot data, then the data in chunks of at most
// Options.SnapshotChunkBytes, without copying it.
func (p *peer) sendSnapshotChunks(ctx context.Context, client clusterv1.RaftServiceClient, m raftpb.Message) error {
	data := m.Snapshot.Data
	head := m
	snap := *m.Snapshot
	snap.Data = nil
	head.Snapshot = &snap
	hb, err := head.Marshal()
	if err != nil {
		return fmt.Errorf("marshal snapshot message: %w", err)
	}
	s, err := client.SendSnapshot(ctx)
	if err != nil {
		return err
	}
	chunk := &clusterv1.SendSnapshotRequest{Message: hb, DataBytes: uint64(len(data))}
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), p.t.opts.SnapshotChunkBytes)
		chunk.Data, data = data[:n], data[n:]
		if err := s.Send(chunk); err != nil {
			// io.EOF: the receiver ended the stream; Recv has its status.
			return recvStatus(s, new(clusterv1.SendSnapshotResponse))
		}
		chunk = &clusterv1.SendSnapshotRequest{}
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	return recvStatus(s, new(clusterv1.SendSnapshotResponse))
}

// recvStatus waits for the end of a stream the receiver answers only by
// ending it (resp: a message of the stream's response type): nil when it
// ended with OK.
func recvStatus(s grpc.ClientStream, resp any) error {
	for {
		if err := s.RecvMsg(resp); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// sendSnapshotEnvelope sends m in one envelope on a Send stream of its
// own (to a receiver without SendSnapshot).
func (p *peer) sendSnapshotEnvelope(ctx context.Context, client clusterv1.RaftServiceClient, m raftpb.Message) error {
	req, err := p.envelope([]raftpb.Message{m})
	if err != nil {
		return err
	}
	s, err := client.Send(ctx)
	if err != nil {
		return err
	}
	// An error of Send (io.EOF when the receiver ended the stream) is
	// superseded by the receiver's status, which Recv returns.
	if err := s.Send(req); err == nil {
		if err := s.CloseSend(); err != nil {
			return err
		}
	}
	return recvStatus(s, new(clusterv1.SendResponse))
}

func (p *peer) logFailure(what string, failures int, err error) {
	if p.ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	lvl := p.t.log.Debug
	if failures == 1 {
		lvl = p.t.log.Warn // once per outage; the rest at debug level
	}
	lvl("raft peer "+what+" failed", "peer", p.id, "addr", p.info.Addr, "failures", failures, "err", err)
}

// sleep waits before the next attempt: MinBackoff doubled per consecutive
// failure up to MaxBackoff, jittered to between half and all of it so that
// members do not reconnect in lockstep.
func (p *peer) sleep(failures int) {
	d := p.t.opts.MinBackoff
	for i := 1; i < failures && d < p.t.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.t.opts.MaxBackoff)
	if d <= 0 {
		return
	}
	d = d/2 + rand.N(d/2+1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.ctx.Done():
	case <-timer.C:
	}
}
