package replbench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// loadConfig describes a paced write load on one edge.
type loadConfig struct {
	// Addr is the edge's gRPC address.
	Addr string
	// Requests[c] is written by client c, in order, round after round; each
	// client has its own connection.
	Requests [][]*tsbsRequest
	// PointsPerS is the target rate of all clients together.
	PointsPerS float64
	// CallTimeout bounds one Write or Status call.
	CallTimeout time.Duration
	// OnAck, when set, is called after every acknowledged write with the
	// time of the ack and the edge's open WAL segment read just after it.
	OnAck func(ackAt time.Time, seq uint64)
	// NodeExited, when closed, ends the load with an error at once.
	NodeExited <-chan struct{}
}

// pacedLoad is a running load: each client sends its next request when
// the schedule says (its share of the rate), at once when behind, so the
// rate held is the target unless the edge or the machine cannot keep up.
//
// Concurrency: Points may be called from any goroutine; stop once.
type pacedLoad struct {
	points atomic.Int64
	cancel context.CancelCauseFunc
	stopc  chan struct{}
	done   chan struct{}
	err    error // REQUIRES: done closed
	conns  []*grpc.ClientConn
}

// errLoadStopped is the cause a load is cancelled with when stop is called.
var errLoadStopped = errors.New("load stopped")

func startLoad(ctx context.Context, cfg loadConfig) (*pacedLoad, error) {
	if cfg.PointsPerS <= 0 || len(cfg.Requests) == 0 {
		return nil, fmt.Errorf("load on %s: rate %v points/s with %d clients", cfg.Addr, cfg.PointsPerS, len(cfg.Requests))
	}
	l := &pacedLoad{stopc: make(chan struct{}), done: make(chan struct{})}
	for range cfg.Requests {
		conn, err := nodeclient.Dial(cfg.Addr)
		if err != nil {
			l.closeConns()
			return nil, err
		}
		l.conns = append(l.conns, conn)
	}
	ctx, l.cancel = context.WithCancelCause(ctx)
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
	)
	start := time.Now()
	for c, reqs := range cfg.Requests {
		wg.Go(func() {
			if err := l.runClient(ctx, cfg, c, reqs, start); err != nil {
				errOnce.Do(func() { l.err = err })
				l.cancel(err)
			}
		})
	}
	go func() {
		select {
		case <-cfg.NodeExited:
			errOnce.Do(func() { l.err = fmt.Errorf("edge process exited during the load") })
			l.cancel(l.err)
		case <-ctx.Done():
		}
	}()
	go func() {
		wg.Wait()
		l.cancel(errLoadStopped)
		l.closeConns()
		close(l.done)
	}()
	return l, nil
}

// Points is the number of points acknowledged so far.
func (l *pacedLoad) Points() int64 { return l.points.Load() }

// stop ends the load: writes in flight complete and count. It returns the
// load's first error, if any.
func (l *pacedLoad) stop() error {
	close(l.stopc)
	<-l.done
	return l.err
}

// failed returns the load's error once it has ended by itself, else nil.
func (l *pacedLoad) failed() error {
	select {
	case <-l.done:
		return l.err
	default:
		return nil
	}
}

func (l *pacedLoad) closeConns() {
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

func (l *pacedLoad) runClient(ctx context.Context, cfg loadConfig, c int, reqs []*tsbsRequest, start time.Time) error {
	wc := tributaryv1.NewWriteServiceClient(l.conns[c])
	qc := tributaryv1.NewQueryServiceClient(l.conns[c])
	share := cfg.PointsPerS / float64(len(cfg.Requests))
	next := start
	timer := time.NewTimer(0)
	defer timer.Stop()
	for round := 0; ; round++ {
		for i, req := range reqs {
			if d := time.Until(next); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-l.stopc:
					return nil
				case <-ctx.Done():
					return nil
				}
			}
			select {
			case <-l.stopc:
				return nil
			default:
			}
			if ctx.Err() != nil {
				return nil
			}
			msg := req.next()
			if req.lastMs() > time.Now().UnixMilli() {
				return fmt.Errorf("client %d: the samples reached the wall clock (round %d); lower the rate or the run time", c, round)
			}
			callCtx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
			resp, err := wc.Write(callCtx, msg, grpc.WaitForReady(true))
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("client %d round %d request %d: write %d points: %w", c, round, i, req.points(), err)
			}
			ackAt := time.Now()
			if err := nodeclient.CheckWrite(resp, req.points()); err != nil {
				return fmt.Errorf("client %d round %d request %d: %w", c, round, i, err)
			}
			l.points.Add(int64(req.points()))
			if cfg.OnAck != nil {
				callCtx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
				st, err := qc.Status(callCtx, &tributaryv1.StatusRequest{})
				cancel()
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return fmt.Errorf("client %d: edge status after a write: %w", c, err)
				}
				cfg.OnAck(ackAt, st.GetWalSegmentSeq())
			}
			next = next.Add(time.Duration(float64(req.points()) / share * float64(time.Second)))
		}
	}
}
