// Package loadgen is a continuous write load for a running fleet: it sends
// the Sensor workload (bench/workload) to several edge nodes over gRPC in
// real time — each target gets its own sensors, sampled every
// Options.Interval, written in batches every Options.Flush — until it is
// stopped, and logs the points each target acknowledged. It is the load
// generator of the docker-compose cluster (deploy/compose).
//
// Unlike the benchmark drivers it does not stop at the first error: an edge
// that is down or restarting is retried at the next flush, and the points
// of the windows it missed are counted as failed, not resent. Every series
// carries an extra label edge=<target name> so that the same sensors written
// to different edges stay distinct series fleet-wide.
//
// Concurrency: Run starts one goroutine per target and returns once they
// have all finished. A Stats value is a snapshot; Run is safe to call from
// several goroutines with distinct Options.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/tick"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// EdgeLabel is the label naming the target a series is written to.
const EdgeLabel = "edge"

// Options configure a load. The zero values of the optional fields take the
// defaults named on them.
type Options struct {
	// Targets are the gRPC addresses (host:port) of the edge nodes.
	// Required.
	Targets []string
	// Names are the values of the edge label, one per target. Default: the
	// host part of each target.
	Names []string
	// Series is the number of sensors per target. Default 64.
	Series int
	// Interval is the sampling interval of every sensor. Default 1s.
	Interval time.Duration
	// Flush is how often each target gets a write carrying the samples due
	// since the previous one. Default 1s; at most 10,000 intervals.
	Flush time.Duration
	// SeriesPerRequest bounds the series of one Write call. Default 500.
	SeriesPerRequest int
	// CallTimeout bounds one Write call. Default 10s.
	CallTimeout time.Duration
	// Report is how often the totals are logged. Default 10s; negative: never.
	Report time.Duration
	// Seed selects the sample streams; target i uses Seed+i, so the edges'
	// sensors differ. Equal options write equal values.
	Seed uint64
	// Dial opens a connection to a target. Default nodeclient.Dial
	// (plaintext gRPC).
	Dial func(addr string) (*grpc.ClientConn, error)
	// Now is the wall clock. Default time.Now.
	Now func() time.Time
	// Logger receives the reports and the failed writes. Required.
	Logger *slog.Logger
}

const maxPointsPerWrite = 10_000

// Validate fills in defaults and reports what is wrong with the options.
func (o *Options) Validate() error {
	if o.Series == 0 {
		o.Series = 64
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Flush == 0 {
		o.Flush = time.Second
	}
	if o.SeriesPerRequest == 0 {
		o.SeriesPerRequest = 500
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 10 * time.Second
	}
	if o.Report == 0 {
		o.Report = 10 * time.Second
	}
	if o.Dial == nil {
		o.Dial = nodeclient.Dial
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if len(o.Names) == 0 {
		for _, t := range o.Targets {
			host, _, err := net.SplitHostPort(t)
			if err != nil {
				host = t // reported below
			}
			o.Names = append(o.Names, host)
		}
	}
	var errs []error
	if len(o.Targets) == 0 {
		errs = append(errs, errors.New("no targets"))
	}
	seen := map[string]bool{}
	for _, t := range o.Targets {
		if _, _, err := net.SplitHostPort(t); err != nil {
			errs = append(errs, fmt.Errorf("target %q: want host:port: %w", t, err))
		}
	}
	if len(o.Names) != len(o.Targets) {
		errs = append(errs, fmt.Errorf("%d names for %d targets", len(o.Names), len(o.Targets)))
	}
	for _, n := range o.Names {
		if n == "" || seen[n] {
			errs = append(errs, fmt.Errorf("target name %q: empty or repeated (names must tell the targets apart)", n))
		}
		seen[n] = true
	}
	if o.Series < 0 {
		errs = append(errs, fmt.Errorf("series must be positive, got %d", o.Series))
	}
	if o.Interval < time.Millisecond {
		errs = append(errs, fmt.Errorf("interval must be at least 1ms, got %v", o.Interval))
	}
	if o.Flush <= 0 || (o.Interval > 0 && o.Flush/o.Interval > maxPointsPerWrite) {
		errs = append(errs, fmt.Errorf("flush must be positive and at most %d intervals, got %v", maxPointsPerWrite, o.Flush))
	}
	if o.SeriesPerRequest < 0 || o.CallTimeout < 0 {
		errs = append(errs, errors.New("series per request and call timeout must be positive"))
	}
	if o.Logger == nil {
		errs = append(errs, errors.New("no logger"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("load options: %w", err)
	}
	return nil
}

// Stats count what a target (or the whole load) did.
type Stats struct {
	Writes       int64 // Write calls answered without error
	AckedPoints  int64 // points the nodes accepted
	FailedWrites int64 // Write calls that failed or did not accept everything
	FailedPoints int64 // points of the failed calls
}

func (s *Stats) add(o Stats) {
	s.Writes += o.Writes
	s.AckedPoints += o.AckedPoints
	s.FailedWrites += o.FailedWrites
	s.FailedPoints += o.FailedPoints
}

// Run writes to every target until ctx is done, then returns the totals;
// writes in flight then are completed (each within CallTimeout) and counted.
// It returns an error only for bad options or a target it cannot dial; a
// failed write is logged, counted and retried with the next window.
func Run(ctx context.Context, o Options) (Stats, error) {
	if err := o.Validate(); err != nil {
		return Stats{}, err
	}
	type target struct {
		name  string
		addr  string
		conn  *grpc.ClientConn
		reqs  []*workload.Request
		mu    sync.Mutex
		stats Stats
	}
	startMs := o.Now().Truncate(o.Interval).UnixMilli()
	// A write carries up to two flushes' worth of samples, so a late tick
	// catches up at once.
	capN := min(maxPointsPerWrite, 2*max(1, int(o.Flush/o.Interval))+1)
	var targets []*target
	defer func() {
		for _, t := range targets {
			t.conn.Close()
		}
	}()
	for i, addr := range o.Targets {
		g, err := workload.NewSensor(workload.SensorOptions{Series: o.Series, StartMs: startMs,
			IntervalMs: o.Interval.Milliseconds(), Seed: o.Seed + uint64(i)})
		if err != nil {
			return Stats{}, fmt.Errorf("load for %s: %w", addr, err)
		}
		conn, err := o.Dial(addr)
		if err != nil {
			return Stats{}, fmt.Errorf("load for %s: %w", addr, err)
		}
		t := &target{name: o.Names[i], addr: addr, conn: conn,
			reqs: g.Requests(o.SeriesPerRequest, capN)}
		targets = append(targets, t)
		// The generator's series are shared; each target writes copies
		// that also name it.
		for _, r := range t.reqs {
			for _, b := range r.Msg.Batches {
				s := proto.Clone(b.Series).(*tributaryv1.Series)
				s.Labels = append(s.Labels, &tributaryv1.Label{Name: EdgeLabel, Value: t.name})
				b.Series = s
			}
		}
	}
	o.Logger.Info("load started", "targets", strings.Join(o.Targets, ","), "series_per_target", o.Series,
		"interval", o.Interval, "points_per_s", float64(o.Series*len(targets))/o.Interval.Seconds())

	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			wc := tributaryv1.NewWriteServiceClient(t.conn)
			tick.Paced(ctx, o.Flush, func() bool {
				for _, r := range t.reqs {
					if ctx.Err() != nil {
						return false
					}
					st := writeDue(ctx, o, wc, r, capN, t.name)
					t.mu.Lock()
					t.stats.add(st)
					t.mu.Unlock()
				}
				return true
			})
		})
	}
	snapshot := func() (Stats, []any) {
		var total Stats
		var attrs []any
		for _, t := range targets {
			t.mu.Lock()
			st := t.stats
			t.mu.Unlock()
			total.add(st)
			attrs = append(attrs, t.name, fmt.Sprintf("%d acked, %d failed", st.AckedPoints, st.FailedPoints))
		}
		return total, attrs
	}
	if o.Report > 0 {
		wg.Go(func() {
			tick.Every(ctx, o.Report, func(time.Time) bool {
				total, attrs := snapshot()
				o.Logger.Info("load", append([]any{"acked_points", total.AckedPoints, "failed_points", total.FailedPoints}, attrs...)...)
				return true
			})
		})
	}
	wg.Wait()
	total, attrs := snapshot()
	o.Logger.Info("load stopped", append([]any{"acked_points", total.AckedPoints, "failed_points", total.FailedPoints}, attrs...)...)
	return total, nil
}

// writeDue sends r's samples that are due (not newer than now), at most
// capN of them (r's capacity) per series; older ones, which pile up while a
// target is unreachable or the process was paused, are skipped, not sent.
func writeDue(ctx context.Context, o Options, wc tributaryv1.WriteServiceClient, r *workload.Request, capN int, name string) Stats {
	behind := o.Now().UnixMilli() - r.NextMs()
	if behind < 0 {
		return Stats{}
	}
	due := behind/o.Interval.Milliseconds() + 1
	for skip := due - int64(capN); skip > 0; skip -= int64(capN) {
		r.Next(int(min(skip, int64(capN)))) // generated, never sent
	}
	r.Next(int(min(due, int64(capN))))
	points := r.Points()
	// A write in flight when the load stops is completed, so that the
	// totals say what the targets hold.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.CallTimeout)
	resp, err := wc.Write(cctx, r.Msg)
	cancel()
	if err == nil {
		err = nodeclient.CheckWrite(resp, points)
	}
	if err != nil {
		o.Logger.Warn("write failed", "edge", name, "points", points, "err", err)
		return Stats{FailedWrites: 1, FailedPoints: int64(points), AckedPoints: resp.GetAccepted()}
	}
	return Stats{Writes: 1, AckedPoints: int64(points)}
}
