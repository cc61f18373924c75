// Package fleetbench is the fleet benchmark (`tribench fleet`): N simulated
// edges ship sealed WAL segments to 3 real `tributary coordinator`
// processes through the real replicator, and it measures, for each N:
//
//   - replication lag: from a segment's seal on the edge until the edge's
//     Shipper has the cloud's acknowledgement and has saved its cursor
//     (RetainFrom passed the segment), p50/p99/max;
//   - intake throughput: points and segments acknowledged per second;
//   - catalog load: raft proposals per second over the coordinators, and
//     per segment the coordinators stored (proposals_per_segment: every
//     proposal counts, heartbeats and announcements too), the intakes'
//     catalog records per proposal (their batching), the raft log entries
//     applied per second, and the apply latency (proposal to application,
//     from tributary_raft_proposal_duration);
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
	"syscall"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
)

// Options configures a run.
type Options struct {
	// Procs says how the coordinators are started (the edges are
	// simulated in this process); Output where the figures go.
	runopt.Procs
	runopt.Output
	// Coordinators is the number of coordinator processes (one raft
	// cluster); every edge lists all of them.
	Coordinators int
	// Edges are the fleet sizes to measure, one run each, in order.
	Edges []int
	// SeriesPerEdge sensor series, sampled every Interval, on each edge.
	SeriesPerEdge int
	Interval      time.Duration
	// SealEvery is how often each edge seals a segment (a node's
	// --wal-segment-age or the fleet's lag budget; 5s by default, a short
	// budget, which loads the intake most; the node's default is 30s).
	SealEvery time.Duration
	// Duration is the measured window of each run; WarmupTimeout bounds the
	// wait for every edge's first acknowledgement before it; SettleTimeout
	// the wait, after it, for the window's segments to be acknowledged.
	Duration, WarmupTimeout, SettleTimeout time.Duration
	// PollInterval is how often the Shippers' cursors are read (the lag's
	// resolution).
	PollInterval time.Duration
	// ResultsDir, when set, receives fleet.json and fleet.png.
	ResultsDir string
}

// DefaultOptions are the full profile: 10, 100 and 1,000 edges of 8 series
// at 1 s, sealing every 5 s, 60 s measured each.
func DefaultOptions() Options {
	return Options{
		Procs:         runopt.Procs{ReadyTimeout: 60 * time.Second, StopTimeout: 60 * time.Second},
		Coordinators:  3,
		Edges:         []int{10, 100, 1000},
		SeriesPerEdge: 8,
		Interval:      time.Second,
		SealEvery:     5 * time.Second,
		Duration:      60 * time.Second,
		WarmupTimeout: 2 * time.Minute,
		SettleTimeout: 30 * time.Second,
		PollInterval:  50 * time.Millisecond,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
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

func runOne(ctx context.Context, o Options, n int, dir string, logger *slog.Logger) (RunResult, error) {
	r := RunResult{Edges: n, Series: n * o.SeriesPerEdge}
	if err := os.MkdirAll(filepath.Join(dir, "cursors"), 0o755); err != nil {
		return r, err
	}
	cs, err := startCoords(ctx, o, o.Coordinators, n, dir, logger)
	if err != nil {
		return r, err
	}
	defer stopCoords(cs, o.StopTimeout)
	intakes := make([]string, len(cs))
	for i, c := range cs {
		intakes[i] = c.intake
	}
	f, err := startFleet(ctx, o, n, dir, intakes)
	if err != nil {
		return r, err
	}
	defer f.stop() // before the coordinators stop

	warmStart := time.Now()
	if err := f.warmUp(o.WarmupTimeout); err != nil {
		return r, err
	}
	r.WarmupS = report.Round(time.Since(warmStart).Seconds(), 1)
	logger.Info("fleet warm", "edges", n, "after", time.Since(warmStart).Round(100*time.Millisecond))

	m, err := f.measure(cs, o.Duration)
	if err != nil {
		return r, err
	}
	f.settle(o.SettleTimeout)
	totals := f.shipperTotals()
	f.stop()

	f.w.fill(&r, totals, m)
	catalog(&r, cs, m.before, m.after, m.elapsed)
	return r, nil
}

// catalog fills the coordinator and catalog figures of r from two samples
// of every coordinator.
func catalog(r *RunResult, cs []*coord, before, after []coordSample, elapsed float64) {
	var proposals hist
	var intakeSegs, intakeRecs, intakeProps float64
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
		intakeRecs += a.m.sum(metricIntakeRecs) - b.m.sum(metricIntakeRecs)
		intakeProps += a.m.sum(metricIntakeProps) - b.m.sum(metricIntakeProps)
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
	r.ProposalsPerSegment = report.Number(math.NaN())
	if intakeSegs > 0 {
		r.ProposalsPerSegment = report.Number(report.Round(proposals.Count/intakeSegs, 3))
	}
	r.RecordsPerProposal = report.Number(math.NaN())
	if intakeProps > 0 {
		r.RecordsPerProposal = report.Number(report.Round(intakeRecs/intakeProps, 2))
	}
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
	if p, ok := report.NearestRank(sorted, q); ok {
		return p
	}
	return math.NaN()
}

// selfCPU is this process's user plus system time: the simulated edges'.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
