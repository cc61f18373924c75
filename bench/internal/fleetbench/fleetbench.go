// Package fleetbench is the fleet benchmark (`tribench fleet`): N simulated
// edges ship sealed WAL segments to 3 real `tributary coordinator`
// processes through the real replicator, and it measures, for each N:
//
//   - replication lag: from a segment's seal on the edge until the edge's
//     Shipper has the cloud's acknowledgement and has saved its cursor
//     (RetainFrom passed the segment), p50/p99/max;
//   - intake throughput: points and segments acknowledged per second;
//   - catalog load: raft proposals per second over the coordinators, the
//     raft log entries applied per second, and the apply latency
//     (proposal to application, from tributary_raft_proposal_duration);
//   - the coordinators' CPU (cores) and RSS.
//
// A simulated edge is a replicator.Shipper (the same code a node runs)
// over an in-memory source that seals one segment in the node/wal format
// every SealEvery, holding SeriesPerEdge sensor series sampled every
// Interval: no node store, no disk WAL, so that 1,000 edges fit in one
// process on a small machine while the coordinators see exactly the
// protocol and the segment files real edges send.
//
// Concurrency: Run starts its own processes and goroutines and has stopped
// all of them when it returns.
package fleetbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/workdir"
	"github.com/tributarydb/tributary/replicator"
)

// errGone is what reading a segment the edge already dropped returns.
var errGone = os.ErrNotExist

// Options configures a run.
type Options struct {
	// Binary is the tributary executable started as the coordinators.
	Binary string
	// Coordinators is the number of coordinator processes (one raft
	// cluster); every edge lists all of them.
	Coordinators int
	// Edges are the fleet sizes to measure, one run each, in order.
	Edges []int
	// SeriesPerEdge sensor series, sampled every Interval, on each edge.
	SeriesPerEdge int
	Interval      time.Duration
	// SealEvery is how often each edge seals a segment (a node's
	// --wal-segment-age; 5s by default, as the node's).
	SealEvery time.Duration
	// Duration is the measured window of each run; WarmupTimeout bounds the
	// wait for every edge's first acknowledgement before it; SettleTimeout
	// the wait, after it, for the window's segments to be acknowledged.
	Duration, WarmupTimeout, SettleTimeout time.Duration
	// PollInterval is how often the Shippers' cursors are read (the lag's
	// resolution).
	PollInterval time.Duration
	// CoordinatorArgs are extra arguments for every coordinator.
	CoordinatorArgs []string
	// WorkDir is the parent of the run's temporary directory ("" = the
	// system temp dir); KeepDataDir keeps it after a successful run.
	WorkDir     string
	KeepDataDir bool
	// ResultsDir, when set, receives fleet.json and fleet.png.
	ResultsDir string
	// ReadyTimeout, StopTimeout bound process starts and stops.
	ReadyTimeout, StopTimeout time.Duration
	// Commit names the code measured, for the JSON.
	Commit string
	// Out receives the table and the JSON line; Logger the progress.
	Out    io.Writer
	Logger *slog.Logger
}

// DefaultOptions are the full profile: 10, 100 and 1,000 edges of 8 series
// at 1 s, sealing every 5 s, 60 s measured each.
func DefaultOptions() Options {
	return Options{
		Coordinators:  3,
		Edges:         []int{10, 100, 1000},
		SeriesPerEdge: 8,
		Interval:      time.Second,
		SealEvery:     5 * time.Second,
		Duration:      60 * time.Second,
		WarmupTimeout: 2 * time.Minute,
		SettleTimeout: 30 * time.Second,
		PollInterval:  50 * time.Millisecond,
		ReadyTimeout:  60 * time.Second,
		StopTimeout:   60 * time.Second,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	var errs []error
	if o.Binary == "" {
		errs = append(errs, errors.New("binary is required"))
	}
	if o.Coordinators < 1 || o.Coordinators > 9 {
		errs = append(errs, fmt.Errorf("coordinators must be 1 to 9, got %d", o.Coordinators))
	}
	if len(o.Edges) == 0 {
		errs = append(errs, errors.New("at least one fleet size is required"))
	}
	for _, n := range o.Edges {
		if n < 1 || n > 10_000 {
			errs = append(errs, fmt.Errorf("fleet size must be 1 to 10000, got %d", n))
		}
	}
	if o.SeriesPerEdge < 1 {
		errs = append(errs, fmt.Errorf("series per edge must be positive, got %d", o.SeriesPerEdge))
	}
	if o.Interval < time.Millisecond || o.Interval%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("interval must be a whole number of milliseconds, at least 1ms, got %v", o.Interval))
	}
	if o.SealEvery < o.Interval || o.SealEvery < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("seal period must be at least the interval and 100ms, got %v", o.SealEvery))
	}
	if o.Duration < o.SealEvery || o.Duration < time.Second {
		errs = append(errs, fmt.Errorf("duration must be at least the seal period and 1s, got %v", o.Duration))
	}
	if o.WarmupTimeout <= 0 || o.SettleTimeout < 0 {
		errs = append(errs, errors.New("warm-up timeout must be positive and settle timeout not negative"))
	}
	if o.PollInterval <= 0 || o.PollInterval > time.Second {
		errs = append(errs, fmt.Errorf("poll interval must be in (0, 1s], got %v", o.PollInterval))
	}
	if o.ReadyTimeout <= 0 || o.StopTimeout <= 0 {
		errs = append(errs, errors.New("ready and stop timeouts must be positive"))
	}
	if o.Out == nil {
		errs = append(errs, errors.New("an output writer is required"))
	}
	return errors.Join(errs...)
}

// Run measures every fleet size in turn, prints the table and the JSON
// line, and writes the results files.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	res := Result{Commit: o.Commit, Machine: report.DetectMachine().String(), Coordinators: o.Coordinators,
		SeriesPerEdge: o.SeriesPerEdge, IntervalS: o.Interval.Seconds(), SealEveryS: o.SealEvery.Seconds(),
		DurationS: o.Duration.Seconds(), Started: time.Now().UTC().Format(time.RFC3339)}
	dir, err := workdir.Make(o.WorkDir, "tribench-fleet-", o.KeepDataDir, logger)
	if err != nil {
		return res, err
	}
	var runErr error
	for _, n := range o.Edges {
		logger.Info("fleet run", "edges", n)
		r, err := runOne(ctx, o, n, filepath.Join(dir.Path, fmt.Sprintf("edges-%d", n)), logger)
		if err != nil {
			runErr = fmt.Errorf("%d edges: %w", n, err)
			break
		}
		res.Runs = append(res.Runs, r)
	}
	dir.Finish(runErr)
	if len(res.Runs) == 0 {
		return res, runErr
	}
	if err := writeTable(o.Out, res); err != nil {
		return res, err
	}
	if o.ResultsDir != "" {
		if err := writeFiles(o.ResultsDir, res); err != nil {
			return res, errors.Join(runErr, err)
		}
		logger.Info("wrote results", "dir", o.ResultsDir)
	}
	if err := report.WriteNotesAndJSONLine(o.Out, res.Notes(), res); err != nil {
		return res, errors.Join(runErr, err)
	}
	return res, runErr
}

// edge is one simulated edge of a run.
type edge struct {
	src     *edgeSource
	shipper *replicator.Shipper

	mu      sync.Mutex
	pending []pendingSeg // sealed, not yet released, ascending seq
	lastTo  int64        // end of the last segment's samples (ms)
	acked   bool         // at least one segment released
}

type pendingSeg struct {
	seq    uint64
	points int64
	at     time.Time
}

// release moves the segments below retainFrom out of pending, calling fn
// with each.
func (e *edge) release(retainFrom uint64, fn func(pendingSeg)) {
	e.mu.Lock()
	i := 0
	for i < len(e.pending) && e.pending[i].seq < retainFrom {
		fn(e.pending[i])
		i++
	}
	if i > 0 {
		e.pending = e.pending[i:]
		e.acked = true
	}
	e.mu.Unlock()
	if i > 0 {
		e.src.Release(retainFrom)
	}
}

// window accumulates what the measured window saw.
type window struct {
	mu             sync.Mutex
	start, end     time.Time // zero until set
	lags           []float64 // seconds, segments sealed in the window
	ackedPoints    int64     // acknowledged in the window
	ackedSegments  int64
	sealedPoints   int64 // sealed in the window
	sealedSegments int64
	unresolved     int
}

func (w *window) inWindow(t time.Time) bool {
	return !w.start.IsZero() && !t.Before(w.start) && (w.end.IsZero() || t.Before(w.end))
}

func runOne(ctx context.Context, o Options, n int, dir string, logger *slog.Logger) (RunResult, error) {
	r := RunResult{Edges: n, Series: n * o.SeriesPerEdge}
	if err := os.MkdirAll(filepath.Join(dir, "cursors"), 0o755); err != nil {
		return r, err
	}
	cs, err := startCoords(ctx, o, o.Coordinators, dir, logger)
	if err != nil {
		return r, err
	}
	defer stopCoords(cs, o.StopTimeout)
	intakes := make([]string, len(cs))
	for i, c := range cs {
		intakes[i] = c.intake
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	edges := make([]*edge, n)
	intervalMs := o.Interval.Milliseconds()
	startMs := time.Now().UnixMilli()
	for i := range edges {
		id := fmt.Sprintf("fleet-%04d", i)
		// Each edge lists the coordinators from a different first one, so
		// that the streams spread over them as a real fleet's do.
		targets := append(slices.Clone(intakes[i%len(intakes):]), intakes[:i%len(intakes)]...)
		sh, err := replicator.New(replicator.Options{Targets: targets, Insecure: true,
			CursorPath: filepath.Join(dir, "cursors", id+".cursor"), Logger: quiet, SoftwareVersion: "tribench-fleet"})
		if err != nil {
			return r, fmt.Errorf("edge %s: %w", id, err)
		}
		edges[i] = &edge{src: newEdgeSource(id, o.SeriesPerEdge), shipper: sh, lastTo: startMs}
	}

	var w window
	var wg sync.WaitGroup
	runErrs := make(chan error, n)
	for _, e := range edges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.shipper.Run(ctx, e.src); err != nil && ctx.Err() == nil {
				runErrs <- fmt.Errorf("edge %s: shipper: %w", e.src.id, err)
			}
		}()
	}
	// Generators: each edge seals every SealEvery, the edges' phases spread
	// evenly over the period.
	for i, e := range edges {
		wg.Add(1)
		go func() {
			defer wg.Done()
			phase := o.SealEvery * time.Duration(i) / time.Duration(n)
			select {
			case <-ctx.Done():
				return
			case <-time.After(phase):
			}
			t := time.NewTicker(o.SealEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
					to := now.UnixMilli()
					if (to/intervalMs)*intervalMs <= e.lastTo {
						continue
					}
					info, err := e.src.Seal(e.lastTo, to, intervalMs, now)
					if err != nil {
						runErrs <- err
						return
					}
					e.mu.Lock()
					e.lastTo = (to / intervalMs) * intervalMs
					e.pending = append(e.pending, pendingSeg{seq: info.Seq, points: info.Points, at: now})
					e.mu.Unlock()
					w.mu.Lock()
					if w.inWindow(now) {
						w.sealedPoints += info.Points
						w.sealedSegments++
					}
					w.mu.Unlock()
				}
			}
		}()
	}
	// Poller: reads every Shipper's RetainFrom; a segment is acknowledged
	// at the first poll that finds it released.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(o.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				for _, e := range edges {
					e.release(e.shipper.RetainFrom(), func(p pendingSeg) {
						w.mu.Lock()
						if w.inWindow(p.at) {
							w.lags = append(w.lags, now.Sub(p.at).Seconds())
						}
						if w.inWindow(now) {
							w.ackedPoints += p.points
							w.ackedSegments++
						}
						w.mu.Unlock()
					})
				}
			}
		}
	}()
	stopAll := func() {
		cancel()
		wg.Wait()
	}
	fail := func(err error) (RunResult, error) {
		stopAll()
		return r, err
	}

	// Warm-up: every edge has connected and had a segment acknowledged.
	warmStart := time.Now()
	for {
		all := 0
		for _, e := range edges {
			e.mu.Lock()
			if e.acked {
				all++
			}
			e.mu.Unlock()
		}
		if all == n {
			break
		}
		if time.Since(warmStart) > o.WarmupTimeout {
			return fail(fmt.Errorf("warm-up: %d of %d edges had a segment acknowledged after %v", all, n, o.WarmupTimeout))
		}
		select {
		case err := <-runErrs:
			return fail(err)
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	r.WarmupS = report.Round(time.Since(warmStart).Seconds(), 1)
	logger.Info("fleet warm", "edges", n, "after", time.Since(warmStart).Round(100*time.Millisecond))

	hc := &http.Client{Timeout: 10 * time.Second}
	before, err := sampleAll(ctx, cs, hc)
	if err != nil {
		return fail(err)
	}
	cpu0 := selfCPU()
	load0 := loadAvg()
	w.mu.Lock()
	w.start = time.Now()
	w.mu.Unlock()
	select {
	case err := <-runErrs:
		return fail(err)
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-time.After(o.Duration):
	}
	w.mu.Lock()
	w.end = time.Now()
	w.mu.Unlock()
	after, err := sampleAll(ctx, cs, hc)
	if err != nil {
		return fail(err)
	}
	cpu1 := selfCPU()
	r.LoadAvg1 = [2]float64{load0, loadAvg()}
	elapsed := w.end.Sub(w.start).Seconds()

	// Settle: wait until every segment sealed in the window is released.
	settleEnd := time.Now().Add(o.SettleTimeout)
	for {
		oldest := time.Time{}
		left := 0
		for _, e := range edges {
			e.mu.Lock()
			for _, p := range e.pending {
				if !p.at.Before(w.start) && p.at.Before(w.end) {
					left++
					if oldest.IsZero() || p.at.Before(oldest) {
						oldest = p.at
					}
				}
			}
			e.mu.Unlock()
		}
		if left == 0 {
			break
		}
		if time.Now().After(settleEnd) {
			now := time.Now()
			w.mu.Lock()
			for _, e := range edges {
				e.mu.Lock()
				for _, p := range e.pending {
					if !p.at.Before(w.start) && p.at.Before(w.end) {
						w.lags = append(w.lags, now.Sub(p.at).Seconds())
						w.unresolved++
					}
				}
				e.mu.Unlock()
			}
			w.mu.Unlock()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var gapPoints uint64
	var refusals, shippedBytes, shippedPoints int64
	for _, e := range edges {
		st := e.shipper.Stats()
		gapPoints += st.GapPoints
		refusals += st.Refusals
		shippedBytes += st.ShippedBytes
		shippedPoints += st.ShippedPoints
	}
	stopAll()

	w.mu.Lock()
	defer w.mu.Unlock()
	sort.Float64s(w.lags)
	r.LagP50S = report.Number(report.Round(percentile(w.lags, 0.50), 3))
	r.LagP99S = report.Number(report.Round(percentile(w.lags, 0.99), 3))
	r.LagMaxS = report.Number(report.Round(percentile(w.lags, 1), 3))
	r.LagSegments = len(w.lags)
	r.LagUnresolved = w.unresolved
	r.PointsPerS = report.Round(float64(w.ackedPoints)/elapsed, 1)
	r.SegmentsPerS = report.Round(float64(w.ackedSegments)/elapsed, 2)
	r.OfferedPointsPerS = report.Round(float64(w.sealedPoints)/elapsed, 1)
	r.OfferedSegmentsPerS = report.Round(float64(w.sealedSegments)/elapsed, 2)
	r.GapPoints = int64(gapPoints)
	r.Refusals = refusals
	r.BytesPerPointShipped = report.Number(math.NaN())
	if shippedPoints > 0 {
		r.BytesPerPointShipped = report.Number(report.Round(float64(shippedBytes)/float64(shippedPoints), 3))
	}
	r.EdgesCores = report.Round((cpu1-cpu0).Seconds()/elapsed, 3)
	r.WindowS = report.Round(elapsed, 2)
	catalog(&r, cs, before, after, elapsed)
	return r, nil
}

// catalog fills the coordinator and catalog figures of r from two samples
// of every coordinator.
func catalog(r *RunResult, cs []*coord, before, after []coordSample, elapsed float64) {
	var proposals hist
	var intakeSegs float64
	r.LeaderAppliedPerS = report.Number(math.NaN())
	for i := range cs {
		b, a := before[i], after[i]
		cores := (a.CPU - b.CPU).Seconds() / elapsed
		r.CoordCores = append(r.CoordCores, report.Round(cores, 3))
		r.CoordRSSMiB = append(r.CoordRSSMiB, report.Round(float64(a.RSS)/(1<<20), 1))
		r.CoordPeakRSSMiB = append(r.CoordPeakRSSMiB, report.Round(float64(a.HWM)/(1<<20), 1))
		d := a.m.histogram(metricProposal).sub(b.m.histogram(metricProposal))
		proposals = merge(proposals, d)
		intakeSegs += a.m.sum(metricIntakeSegs, "outcome", "stored") - b.m.sum(metricIntakeSegs, "outcome", "stored")
		if a.m.sum(metricIsLeader) == 1 {
			r.LeaderAppliedPerS = report.Number(report.Round((a.m.sum(metricApplied)-b.m.sum(metricApplied))/elapsed, 2))
			r.CatalogSeries = int64(a.m.sum(metricCatalogSerie))
		}
	}
	var sumCores float64
	for _, c := range r.CoordCores {
		sumCores += c
	}
	r.CoordCoresTotal = report.Round(sumCores, 3)
	r.ProposalsPerS = report.Round(proposals.Count/elapsed, 2)
	r.ApplyMeanMs = report.Number(report.Round(proposals.mean()*1000, 2))
	r.ApplyP99Ms = report.Number(proposals.quantile(0.99) * 1000)
	r.IntakeStoredSegmentsPerS = report.Round(intakeSegs/elapsed, 2)
}

// merge adds two histogram deltas with the same buckets (either may be
// empty).
func merge(a, b hist) hist {
	if len(a.Bounds) == 0 {
		return b
	}
	if len(b.Bounds) == 0 {
		return a
	}
	out := hist{Count: a.Count + b.Count, Sum: a.Sum + b.Sum, Bounds: a.Bounds}
	for i := range a.Bounds {
		c := a.Cum[i]
		if i < len(b.Cum) {
			c += b.Cum[i]
		}
		out.Cum = append(out.Cum, c)
	}
	return out
}

// sampleAll samples every coordinator.
func sampleAll(ctx context.Context, cs []*coord, hc *http.Client) ([]coordSample, error) {
	out := make([]coordSample, len(cs))
	for i, c := range cs {
		s, err := c.sample(ctx, hc)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// percentile is the nearest-rank q-quantile of sorted xs, NaN when empty.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// selfCPU is this process's user plus system time: the simulated edges'.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the machine's 1-minute load average, NaN where unknown.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	var x float64
	if _, err := fmt.Sscan(strings.Fields(string(b))[0], &x); err != nil {
		return math.NaN()
	}
	return x
}
