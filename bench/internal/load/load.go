// Package load is the benchmark driver's write load: several clients, each
// with its own gRPC connection, send prepared workload requests to a node
// round after round until a duration passes, the caller says stop, or the
// samples would reach the wall clock. Every response must accept exactly the
// points sent; anything else stops the load with an error.
//
// Each series belongs to exactly one request and each request to exactly one
// client, so every series is written in time order however the clients
// interleave.
//
// Concurrency: Run starts one goroutine per client (and one that watches
// Config.NodeExited) and returns once they have all finished; it must not be
// given the same Requests twice at once. Conns is not safe for concurrent
// use.
package load

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// ShapeProblems lists what is wrong with the shape of a write load:
// series, points per request, consecutive points of a series in a
// request and concurrent writers (one connection each).
func ShapeProblems(series, batchPoints, pointsPerSeriesPerBatch, clients int) []error {
	var errs []error
	if series <= 0 {
		errs = append(errs, fmt.Errorf("series must be positive, got %d", series))
	}
	if pointsPerSeriesPerBatch <= 0 {
		errs = append(errs, fmt.Errorf("points per series per batch must be positive, got %d", pointsPerSeriesPerBatch))
	}
	if batchPoints < pointsPerSeriesPerBatch {
		errs = append(errs, fmt.Errorf("batch points (%d) must be at least points per series per batch (%d)", batchPoints, pointsPerSeriesPerBatch))
	}
	if clients <= 0 {
		errs = append(errs, fmt.Errorf("clients must be positive, got %d", clients))
	}
	return errs
}

// Config describes one load run.
type Config struct {
	// Clients[c] sends Requests[c], in order, round after round.
	Clients  []tributaryv1.WriteServiceClient
	Requests [][]*workload.Request
	// PointsPerSeries is the number of points per series in each request.
	PointsPerSeries int
	// Duration is how long to keep starting new requests.
	Duration time.Duration
	// CallTimeout bounds one Write call.
	CallTimeout time.Duration
	// Now is the wall clock; a client stops instead of writing samples newer
	// than Now(), which a node may reject as too far in the future.
	// Default time.Now.
	Now func() time.Time
	// Stop, when closed, ends the load the way Duration passing does:
	// requests in flight complete and count. Nil never stops.
	Stop <-chan struct{}
	// NodeExited, when closed, says the node process has died: the load
	// stops at once, rather than waiting out CallTimeout, and its error is
	// an ErrNodeExited. Nil for a node that is not watched.
	NodeExited <-chan struct{}
}

// ErrNodeExited ends a load whose node died.
var ErrNodeExited = errors.New("the node process exited during the load")

// Split deals reqs to clients in contiguous runs, each request to exactly
// one client, for Config.Requests: one list per client, or one per request
// when there are fewer requests than clients.
func Split(reqs []*workload.Request, clients int) [][]*workload.Request {
	clients = min(clients, len(reqs))
	out := make([][]*workload.Request, clients)
	for i, r := range reqs {
		out[i*clients/len(reqs)] = append(out[i*clients/len(reqs)], r)
	}
	return out
}

// Conns are the clients' gRPC connections, one each, as separate writers
// would have.
type Conns []*grpc.ClientConn

// Dial opens n connections to the node at addr. On an error it closes the
// ones it opened.
func Dial(addr string, n int) (Conns, error) {
	cs := make(Conns, 0, n)
	for range n {
		conn, err := nodeclient.Dial(addr)
		if err != nil {
			cs.Close()
			return nil, err
		}
		cs = append(cs, conn)
	}
	return cs, nil
}

// WriteClients returns a WriteService client on each connection, for
// Config.Clients.
func (cs Conns) WriteClients() []tributaryv1.WriteServiceClient {
	clients := make([]tributaryv1.WriteServiceClient, len(cs))
	for i, conn := range cs {
		clients[i] = tributaryv1.NewWriteServiceClient(conn)
	}
	return clients
}

// Close closes every connection and forgets them, so that calling it again
// (say, deferred after an early close) does nothing.
func (cs *Conns) Close() {
	for _, conn := range *cs {
		conn.Close()
	}
	*cs = nil
}

// Stats is what a load run measured.
type Stats struct {
	Points   int64 // acknowledged points
	Requests int64
	Elapsed  time.Duration
	// Latencies holds every Write call's round-trip time.
	Latencies []time.Duration
	// FillTime is the total time clients spent refilling requests.
	FillTime time.Duration
	// WaitTime is the total time clients spent inside Write calls.
	WaitTime time.Duration
	// CaughtUp is set when a client stopped early because its next samples
	// would have been newer than Now(). The request it had filled was not
	// sent.
	CaughtUp bool
}

// Run runs the clients concurrently until Duration has passed or Stop is
// closed (requests in flight then are completed and counted, never
// cancelled, so that every sent point is accounted for). Every response must
// accept exactly the points sent; anything else stops the run with an error.
func Run(ctx context.Context, cfg Config) (Stats, error) {
	if len(cfg.Clients) != len(cfg.Requests) || len(cfg.Clients) == 0 {
		panic(fmt.Sprintf("BUG: load.Run with %d clients and %d request lists", len(cfg.Clients), len(cfg.Requests)))
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if cfg.NodeExited != nil {
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-cfg.NodeExited:
				cancel(ErrNodeExited)
			case <-ctx.Done():
			}
		}()
		defer func() {
			cancel(nil)
			<-watched
		}()
	}

	var (
		mu       sync.Mutex
		total    Stats
		firstErr error
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for c := range cfg.Clients {
		wg.Go(func() {
			st, err := runClient(ctx, cfg, c, deadline)
			mu.Lock()
			defer mu.Unlock()
			total.Points += st.Points
			total.Requests += st.Requests
			total.Latencies = append(total.Latencies, st.Latencies...)
			total.FillTime += st.FillTime
			total.WaitTime += st.WaitTime
			total.CaughtUp = total.CaughtUp || st.CaughtUp
			if err != nil && firstErr == nil {
				firstErr = err
				cancel(nil)
			}
		})
	}
	wg.Wait()
	total.Elapsed = time.Since(start)
	if firstErr == nil && ended(ctx) {
		firstErr = errors.New("load interrupted before its duration ended")
		if ctx.Err() != nil {
			firstErr = fmt.Errorf("load interrupted: %w", context.Cause(ctx))
		}
	}
	if firstErr != nil && cfg.NodeExited != nil {
		// A write can fail on the broken connection a moment before the
		// watcher sees the node exit; say what happened either way.
		select {
		case <-cfg.NodeExited:
			if !errors.Is(firstErr, ErrNodeExited) {
				firstErr = fmt.Errorf("%w: %w", ErrNodeExited, firstErr)
			}
		case <-time.After(time.Second):
		}
	}
	return total, firstErr
}

func runClient(ctx context.Context, cfg Config, c int, deadline time.Time) (Stats, error) {
	var st Stats
	client, reqs := cfg.Clients[c], cfg.Requests[c]
	for round := 0; ; round++ {
		for i, req := range reqs {
			if ctx.Err() != nil || !time.Now().Before(deadline) || stopped(cfg.Stop) {
				return st, nil
			}
			t0 := time.Now()
			req.Next(cfg.PointsPerSeries)
			t1 := time.Now()
			st.FillTime += t1.Sub(t0)
			if req.LastMs() > cfg.Now().UnixMilli() {
				st.CaughtUp = true
				return st, nil
			}
			callCtx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
			resp, err := client.Write(callCtx, req.Msg, grpc.WaitForReady(true))
			cancel()
			lat := time.Since(t1)
			st.WaitTime += lat
			if err != nil {
				if ended(ctx) {
					return st, nil // interrupted, or another client failed first
				}
				return st, fmt.Errorf("client %d round %d request %d: write %d points: %w", c, round, i, req.Points(), err)
			}
			if err := nodeclient.CheckWrite(resp, req.Points()); err != nil {
				return st, fmt.Errorf("client %d round %d request %d: %w", c, round, i, err)
			}
			st.Points += resp.GetAccepted()
			st.Requests++
			st.Latencies = append(st.Latencies, lat)
		}
	}
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// ended reports whether ctx is done or past its deadline. NB: gRPC can fail
// a call with DeadlineExceeded (the server enforces the deadline too) a
// moment before the context's own timer has marked it done.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Percentile returns the nearest-rank q-quantile (0 < q ≤ 1) of ds, or 0 when
// ds is empty. It sorts ds.
func Percentile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	p, _ := report.NearestRank(ds, q)
	return p
}
