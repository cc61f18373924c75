package intake_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// flakyRaft fails the proposals of one command kind with err.
type flakyRaft struct {
	intake.Raft
	mu   sync.Mutex
	kind catalog.Kind
	err  error
}

func (f *flakyRaft) set(k catalog.Kind, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.kind, f.err = k, err
}

func (f *flakyRaft) Propose(ctx context.Context, cmd []byte) (any, error) {
	f.mu.Lock()
	k, err := f.kind, f.err
	f.mu.Unlock()
	if c, derr := catalog.DecodeCommand(cmd); derr == nil && c.Kind() == k && err != nil {
		return nil, err
	}
	return f.Raft.Propose(ctx, cmd)
}

func TestIntake_FailedProposalsAreRefusedNeverAcked(t *testing.T) {
	fr := &flakyRaft{}
	e := startEnv(t, func(o *intake.Options) {
		fr.Raft = o.Raft
		o.Raft = fr
	})
	c := open(t, dial(t, e.addr), "pi-10")
	c.welcome()
	segs := makeSegments(t, "pi-10", 1, 1)
	for _, tc := range []struct {
		name      string
		kind      catalog.Kind
		err       error
		code      pb.ShipErrorCode
		retryable bool
	}{
		// First: once a later case has registered the series, no
		// RegisterSeries is proposed again.
		{"series not registered", catalog.KindRegisterSeries, raftnode.ErrProposalDropped, pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE, true},
		{"raft stopped", catalog.KindRecordStored, raftnode.ErrStopped, pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE, true},
		{"timeout", catalog.KindRecordStored, context.DeadlineExceeded, pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE, true},
		{"bad command", catalog.KindRecordStored, &catalog.CommandError{Kind: catalog.KindRecordStored, Err: catalog.ErrBadCommand, Msg: "injected"},
			pb.ShipErrorCode_SHIP_ERROR_CODE_MALFORMED, false},
		{"conflict", catalog.KindRecordStored, &catalog.CommandError{Kind: catalog.KindRecordStored, Err: catalog.ErrConflict, Msg: "injected"},
			pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT, false},
		{"limit", catalog.KindRecordStored, &catalog.CommandError{Kind: catalog.KindRecordStored, Err: catalog.ErrLimit, Msg: "injected"},
			pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE, true},
		{"stale placement", catalog.KindRecordStored, &catalog.CommandError{Kind: catalog.KindRecordStored, Err: catalog.ErrStale, Msg: "injected"},
			pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr.set(tc.kind, tc.err)
			c.send(segs[0].parts...)
			r := c.recv().GetError()
			if r == nil || r.Code != tc.code || r.Retryable != tc.retryable || r.Seq != 1 {
				t.Fatalf("answered %v, want %s retryable=%v", r, tc.code, tc.retryable)
			}
		})
	}
	if p, _ := e.fsm.Progress("pi-10"); len(p.Held) != 0 {
		t.Fatalf("recorded: %+v", p)
	}
	fr.set(0, nil)
	c.send(segs[0].parts...)
	if a := c.recv().GetAck(); a == nil || a.Seq != 1 || a.AckedThrough != 1 {
		t.Fatalf("after the failures: %v", a)
	}
	if got, _ := e.reps.get(coordID, "pi-10", 1); got.times != 1 {
		t.Errorf("stored %d times", got.times)
	}

	// A gap whose record fails is refused too.
	fr.set(catalog.KindRecordGap, raftnode.ErrStopped)
	gap := &pb.ShipGap{NodeId: "pi-10", AfterSeq: 1, ThroughSeq: 3, Reason: pb.GapReason_GAP_REASON_MISSING, Points: -1}
	if err := c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Gap{Gap: gap}}); err != nil {
		t.Fatal(err)
	}
	if r := c.recv().GetError(); r == nil || r.GapThrough != 3 || r.Code != pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE || !r.Retryable {
		t.Fatalf("failed gap answered %v", r)
	}
}

func TestIntake_NoReplicaIsUnavailable(t *testing.T) {
	e := startEnv(t, nil)
	c := open(t, dial(t, e.addr), "pi-11")
	c.welcome()
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.RemoveNode{ID: coordID})); err != nil {
		t.Fatal(err)
	}
	c.send(makeSegments(t, "pi-11", 1, 1)[0].parts...)
	if r := c.recv().GetError(); r == nil || r.Code != pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE || !r.Retryable {
		t.Fatalf("answered %v", r)
	}
	if e.reps.count(coordID) != 0 {
		t.Fatal("stored without a placement")
	}
}

// blockingReplicas holds every Store until released, counting how many
// wait at once.
type blockingReplicas struct {
	*replicas
	release       chan struct{}
	waiting, peak atomic.Int64
}

func (b *blockingReplicas) Store(ctx context.Context, coord, edge string, seq uint64, crc uint32, file []byte) (intake.Stored, error) {
	n := b.waiting.Add(1)
	for p := b.peak.Load(); n > p && !b.peak.CompareAndSwap(p, n); p = b.peak.Load() {
	}
	defer b.waiting.Add(-1)
	select {
	case <-b.release:
	case <-ctx.Done():
		return intake.Stored{}, ctx.Err()
	}
	return b.replicas.Store(ctx, coord, edge, seq, crc, file)
}

func TestIntake_StreamProcessesAtMostEightSegmentsAtOnce(t *testing.T) {
	br := &blockingReplicas{release: make(chan struct{})}
	e := startEnv(t, func(o *intake.Options) {
		br.replicas = o.Replicas.(*replicas)
		o.Replicas = br
	})
	c := open(t, dial(t, e.addr), "pi-12")
	c.welcome()
	segs := makeSegments(t, "pi-12", 12, 1)
	go func() {
		for _, s := range segs {
			for _, p := range s.parts {
				if c.stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Segment{Segment: p}}) != nil {
					return
				}
			}
		}
	}()
	eventually(t, "eight stores waiting", func() bool { return br.waiting.Load() == 8 })
	time.Sleep(50 * time.Millisecond) // a ninth would show up here if the bound did not hold
	if p := br.peak.Load(); p != 8 {
		t.Fatalf("%d segments processed at once, want 8", p)
	}
	close(br.release)
	for range segs {
		if a := c.recv().GetAck(); a == nil {
			t.Fatal("refusal")
		}
	}
	if p, _ := e.fsm.Progress("pi-12"); p.AckedThrough() != 12 {
		t.Fatalf("progress %+v", p)
	}
}

func TestIntake_CloseEndsOpenStreams(t *testing.T) {
	e := startEnv(t, nil)
	c := open(t, dial(t, e.addr), "pi-13")
	c.welcome()
	e.in.Close()
	if _, err := c.stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("after Close: %v, want Unavailable", err)
	}
	eventually(t, "no stream open", func() bool { return e.in.Stats().StreamsOpen == 0 })
}
