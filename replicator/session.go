package replicator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/tributarydb/tributary/internal/auth"
	"github.com/tributarydb/tributary/internal/telemetry"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// A session is one stream to one coordinator. Its goroutines (the
// receiver, which also dials and says hello, and the sender) touch only
// the stream and post events to the loop; every piece of replication state
// belongs to the loop goroutine.
type session struct {
	id     uint64
	target string
	ctx    context.Context
	cancel context.CancelCauseFunc
	// dead is closed by the loop when it stops listening to this session,
	// so that no goroutine of it blocks on posting an event.
	dead   chan struct{}
	wg     sync.WaitGroup
	sendCh chan *outgoing // capacity 1; the loop sends only when !sending

	// Loop goroutine only:
	welcomed     bool
	coordinator  string
	maxPartBytes int
	// maxSegmentBytes is the welcome's max_segment_bytes (0: not said).
	maxSegmentBytes uint64
	// formats are the segment format versions the welcome says the cloud
	// reads (version 1 alone when it lists none); formatRefused notes that
	// a segment of another version was held back on this stream.
	formats       []uint32
	formatRefused bool
	sending       bool
	inflight      map[uint64]*flight // segments sent, not yet acknowledged or refused
	inflightB     int64
	gapsInflight  map[uint64]bool // through_seq of gaps sent, not yet acknowledged or refused
	acked         bool            // an acknowledgement arrived: the link works
	watch         *time.Timer     // the dead-stream watchdog
	armed         bool
	progress      bool
	sendingSeq    uint64    // the segment the sender is writing (0: a gap)
	answeredAt    time.Time // the welcome or the latest response
	ann           announceState
}

// flight is a segment sent and not yet acknowledged.
type flight struct {
	seq, prev uint64
	bytes     int64 // compressed, on the wire
	points    int64
	writtenAt time.Time  // its last part was written (zero before)
	span      trace.Span // the ship span (trace.go); nil for a backfill
	// backfill: a piece of a gap's backfill built from the node's store,
	// not a WAL segment; points is its backfill_points.
	backfill bool
	// reship: a file of a run the cloud asked to ship again (reship.go).
	reship bool
	// compacted: a WAL segment shipped compacted (loop.compact).
	compacted bool
}

// outgoing is what the sender writes to the stream in one go: the parts of
// one segment, or one gap declaration.
type outgoing struct {
	seq  uint64 // the segment, or 0 for a gap
	msgs []*pb.ShipRequest
}

type eventKind int

const (
	evWelcome  eventKind = iota // the stream is open and welcomed
	evResponse                  // an ack or an error
	evSent                      // the sender wrote an outgoing
	evEnded                     // the stream is over; every goroutine of the session is done or about to be
)

type event struct {
	sess    *session
	kind    eventKind
	welcome *pb.ShipWelcome
	resp    *pb.ShipResponse
	err     error
}

// errAckTimeout is the watchdog's cause for cancelling a stream.
var errAckTimeout = errors.New("no progress on the stream within the ack timeout (dead or half-open peer)")

// dialOptions are the options of every connection.
func (o *Options) dialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = auth.ClientCredentials(o.TLS)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                o.KeepaliveTime,
			Timeout:             o.KeepaliveTimeout,
			PermitWithoutStream: true,
		}),
		telemetry.GRPCDialOption(o.MeterProvider, o.TracerProvider),
	}
	return append(opts, o.DialOptions...)
}

// post hands ev to the loop unless the loop has given the session up.
func (l *loop) post(s *session, ev event) {
	ev.sess = s
	select {
	case l.events <- ev:
	case <-s.dead:
	}
}

// runSession dials, says hello, waits for the welcome, then receives
// until the stream ends; it runs the sender beside it. It posts evEnded
// last, once the sender has stopped.
func (l *loop) runSession(s *session, hello *pb.ShipHello) {
	defer s.wg.Done()
	end := func(err error) {
		s.cancel(err)
		// The first cause wins: the watchdog's or the loop's if they came
		// first.
		l.post(s, event{kind: evEnded, err: context.Cause(s.ctx)})
	}
	conn, err := grpc.NewClient(s.target, l.dialOpts...)
	if err != nil {
		end(fmt.Errorf("dial %s: %w", s.target, err))
		return
	}
	defer conn.Close()
	stream, err := pb.NewReplicationServiceClient(conn).Ship(s.ctx)
	if err != nil {
		end(fmt.Errorf("open stream: %w", err))
		return
	}
	if err := stream.Send(&pb.ShipRequest{Body: &pb.ShipRequest_Hello{Hello: hello}}); err != nil {
		end(recvError(stream, fmt.Errorf("send hello: %w", err)))
		return
	}
	resp, err := stream.Recv()
	if err != nil {
		end(fmt.Errorf("receive welcome: %w", err))
		return
	}
	w := resp.GetWelcome()
	if w == nil {
		end(fmt.Errorf("protocol violation: first response is not a welcome (%T)", resp.GetBody()))
		return
	}
	l.post(s, event{kind: evWelcome, welcome: w})

	var sender sync.WaitGroup
	sender.Add(1)
	go func() {
		defer sender.Done()
		l.runSender(s, stream)
	}()
	for {
		resp, err := stream.Recv()
		if err != nil {
			s.cancel(fmt.Errorf("receive: %w", err))
			break
		}
		if resp.GetWelcome() != nil {
			s.cancel(errors.New("protocol violation: a second welcome"))
			break
		}
		l.post(s, event{kind: evResponse, resp: resp})
	}
	sender.Wait()
	end(nil)
}

// runSender writes what the loop hands it until the session ends.
func (l *loop) runSender(s *session, stream grpc.BidiStreamingClient[pb.ShipRequest, pb.ShipResponse]) {
	for {
		select {
		case <-s.ctx.Done():
			return
		case out := <-s.sendCh:
			for _, m := range out.msgs {
				// Send blocks while the peer does not read (flow control);
				// the watchdog cancels the stream, which unblocks it.
				if err := stream.Send(m); err != nil {
					s.cancel(fmt.Errorf("send: %w", err))
					return
				}
			}
			l.post(s, event{kind: evSent})
		}
	}
}

// recvError returns the stream's final status after a failed Send (which
// reports only io.EOF), or err.
func recvError(stream grpc.BidiStreamingClient[pb.ShipRequest, pb.ShipResponse], err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	if _, rerr := stream.Recv(); rerr != nil {
		return rerr
	}
	return err
}
