// Package replbench is the edge-to-cloud replication benchmark (`tribench
// replication`): it starts `tributary coordinator` processes and a
// `tributary node` that ships its sealed WAL segments to them, writes the
// TSBS cpu-only workload to the edge over gRPC (columnar writes) at a
// sustained rate, and measures:
//
//   - replication lag: for every acknowledged write, the time until the
//     edge's tributary_replication_acked_through_seq reaches the WAL segment
//     that was open just after the ack (p50, p99);
//   - bytes shipped per point: shipped_bytes_total / shipped_points_total
//     from the edge's metrics;
//   - backlog drain: the coordinators are killed (SIGKILL) for an outage
//     while the load goes on, then restarted; the points the cloud
//     acknowledges per second until the backlog is down to one segment,
//     over the live rate;
//   - the edge's extra CPU: the edge's utime+stime per million points with
//     replication on, against a second edge without --replicate-to under
//     the same load.
//
// It prints a table with the targets beside the figures (a missed
// target never fails the run) and one JSON line, always the last line of
// the output. bench/README.md describes the method.
//
// Concurrency: Run starts its own processes and goroutines and has
// stopped all of them when it returns. Two concurrent runs would not
// interfere (each has its own directory and ports) but would share the
// machine, which spoils the figures.
package replbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/tick"
	"github.com/tributarydb/tributary/bench/internal/workdir"
	"github.com/tributarydb/tributary/internal/loopback"
)

// Options configures a run.
type Options struct {
	// Procs says which binary is started and how (NodeArgs go to both
	// edges, replication on and off); Output where the figures go.
	runopt.Procs
	runopt.Output
	// Coordinators is the number of coordinator processes (1 or more); the
	// edge ships to all of them.
	Coordinators int
	// PointsPerS is the sustained write rate to the edge.
	PointsPerS float64
	// Duration is how long the lag phase (and the replication-off run for
	// the CPU comparison) writes.
	Duration time.Duration
	// Outage is how long the coordinators stay down while the load goes
	// on; 0 skips the drain phase.
	Outage time.Duration
	// DrainTimeout bounds the wait for the backlog to drain after the
	// coordinators are back. 0: twice Outage, at least 2 minutes.
	DrainTimeout time.Duration
	// SettleTimeout bounds the wait, after the lag phase, for its writes to
	// reach the cloud before the outage starts.
	SettleTimeout time.Duration
	// Hosts is the number of TSBS hosts (ten series each).
	Hosts int
	// HostsPerRequest and RowsPerRequest shape a Write: 10 hosts × 100 rows
	// is 100 series × 100 points.
	HostsPerRequest int
	RowsPerRequest  int
	// Clients is the number of concurrent writers, one connection each.
	Clients int
	// Seed selects the generated values.
	Seed uint64
	// WALSync is the edges' --wal-sync.
	WALSync string
	// SegmentAge is the edges' --wal-segment-age, their lag budget: the lag
	// measured includes up to this wait for a segment to be sealed (5s;
	// the node's default, 30s, trades lag for bytes at low rates).
	SegmentAge time.Duration
	// BudgetBytes is the edge's --replication-budget-bytes. 0: enough for
	// the outage's backlog at 16 bytes per point, twice over, at least 1 GiB.
	BudgetBytes int64
	// PollInterval is how often the edge's metrics are read.
	PollInterval time.Duration
	// CallTimeout bounds each RPC.
	CallTimeout time.Duration
}

// DefaultOptions are the settings: 200,000 points/s for 60 s, a
// 10-minute outage, one coordinator, 1,000 TSBS hosts (10,000 series).
func DefaultOptions() Options {
	return Options{
		Procs:           runopt.Procs{ReadyTimeout: 60 * time.Second, StopTimeout: 60 * time.Second},
		Coordinators:    1,
		PointsPerS:      200_000,
		Duration:        60 * time.Second,
		Outage:          10 * time.Minute,
		SettleTimeout:   30 * time.Second,
		Hosts:           1000,
		HostsPerRequest: 10,
		RowsPerRequest:  100,
		Clients:         4,
		Seed:            1,
		WALSync:         "always",
		SegmentAge:      5 * time.Second,
		PollInterval:    100 * time.Millisecond,
		CallTimeout:     30 * time.Second,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
	if o.Coordinators < 1 || o.Coordinators > 9 {
		errs = append(errs, fmt.Errorf("coordinators must be 1 to 9, got %d", o.Coordinators))
	}
	if !(o.PointsPerS > 0) || math.IsInf(o.PointsPerS, 0) {
		errs = append(errs, fmt.Errorf("rate must be positive, got %v points/s", o.PointsPerS))
	}
	if o.SegmentAge <= 0 {
		errs = append(errs, fmt.Errorf("segment age must be positive, got %v", o.SegmentAge))
	}
	if o.Duration < time.Second {
		errs = append(errs, fmt.Errorf("duration must be at least 1s, got %v", o.Duration))
	}
	if o.Outage < 0 || o.DrainTimeout < 0 || o.SettleTimeout < 0 {
		errs = append(errs, fmt.Errorf("outage (%v), drain timeout (%v) and settle timeout (%v) must not be negative", o.Outage, o.DrainTimeout, o.SettleTimeout))
	}
	if o.Hosts <= 0 || o.HostsPerRequest <= 0 || o.RowsPerRequest <= 0 {
		errs = append(errs, fmt.Errorf("hosts (%d), hosts per request (%d) and rows per request (%d) must be positive", o.Hosts, o.HostsPerRequest, o.RowsPerRequest))
	}
	if o.Clients <= 0 || (o.HostsPerRequest > 0 && o.Clients > (o.Hosts+o.HostsPerRequest-1)/o.HostsPerRequest) {
		errs = append(errs, fmt.Errorf("clients must be between 1 and the number of requests per round, got %d", o.Clients))
	}
	if o.BudgetBytes < 0 {
		errs = append(errs, fmt.Errorf("budget must not be negative, got %d bytes", o.BudgetBytes))
	}
	if o.PollInterval <= 0 || o.PollInterval > 5*time.Second {
		errs = append(errs, fmt.Errorf("poll interval must be in (0, 5s], got %v", o.PollInterval))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, errors.New("call timeout must be positive"))
	}
	if len(errs) == 0 {
		// The edge keeps raw samples 15 days by default: the data, which
		// ends before the wall clock, must start within them.
		if span := time.Duration(o.rowSpan()) * tsbsIntervalMs * time.Millisecond; span > maxDataSpan {
			errs = append(errs, fmt.Errorf("at %v points/s over %d series the run's data would span %v of 10 s rows, over %v: raise --hosts or shorten the run", o.PointsPerS, o.Hosts*10, span.Round(time.Hour), maxDataSpan))
		}
	}
	return errors.Join(errs...)
}

// drainTimeout is DrainTimeout or its default.
func (o Options) drainTimeout() time.Duration {
	if o.DrainTimeout > 0 {
		return o.DrainTimeout
	}
	return max(2*o.Outage, 2*time.Minute)
}

// budgetBytes is BudgetBytes or its default.
func (o Options) budgetBytes() int64 {
	if o.BudgetBytes > 0 {
		return o.BudgetBytes
	}
	return max(int64(2*16*o.PointsPerS*(o.Outage+o.drainTimeout()+o.Duration).Seconds()), 1<<30)
}

// rowSpan is how many rows per series the replication-on edge may need:
// the whole run at the target rate, with room for catching up.
func (o Options) rowSpan() int64 {
	secs := (2*o.Duration + 2*o.SettleTimeout + o.Outage + o.drainTimeout()).Seconds() + 60
	return int64(secs*o.PointsPerS*1.5)/int64(o.Hosts*10) + int64(o.RowsPerRequest) + 1
}

// tsbsIntervalMs is the TSBS interval between two rows of a host.
const tsbsIntervalMs = 10_000

// maxDataSpan bounds how far back the generated data may start.
const maxDataSpan = 14 * 24 * time.Hour

// tsbsCycleRows is how many rows of values are generated; they repeat.
const tsbsCycleRows = 2000

// Run runs the benchmark and writes its report to o.Out. Missed targets
// and an invalid run (the load fell below 90% of its rate) are reported,
// not returned as errors.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("replication benchmark options: %w", err)
	}
	logger := o.Log()
	o.Logger = logger
	bin, err := nodeproc.FindBinary(o.Binary)
	if err != nil {
		return Result{}, err
	}
	o.Binary = bin
	dir, err := workdir.Make(o.WorkDir, "tribench-replication-", o.KeepDataDir, logger)
	if err != nil {
		return Result{}, err
	}
	r := &run{o: o, dir: dir.Path, logger: logger}
	res, err := r.run(ctx)
	dir.Finish(err)
	if err != nil {
		return res, err
	}
	if err := WriteReport(o.Out, res); err != nil {
		return res, err
	}
	return res, nil
}

// run holds one run's state. Only Run's goroutine uses it, apart from the
// poller, which owns polls until it has stopped.
type run struct {
	o      Options
	dir    string
	logger *slog.Logger
	table  *tsbsTable
}

func (r *run) run(ctx context.Context) (Result, error) {
	o := r.o
	res := Result{Workload: "tsbs-cpu", Transport: "grpc-columnar", Hosts: o.Hosts, Series: o.Hosts * 10,
		TargetPointsPerS: o.PointsPerS, DurationS: o.Duration.Seconds(), OutageS: o.Outage.Seconds(),
		Coordinators: o.Coordinators, Commit: o.Commit, Machine: report.DetectMachine().String(),
		LagP50S: report.Number(math.NaN()), LagP99S: report.Number(math.NaN()), LagMaxS: report.Number(math.NaN()),
		BytesPerPointShipped: report.Number(math.NaN()), DrainRatio: report.Number(math.NaN()),
		DrainPointsPerS: report.Number(math.NaN()), ReconnectS: report.Number(math.NaN()),
		EdgeCPUOverheadPct: report.Number(math.NaN()), WALSync: o.WALSync, Clients: o.Clients,
		PointsPerRequest: o.HostsPerRequest * 10 * o.RowsPerRequest}
	span := o.rowSpan()
	startMs := time.Now().Add(-time.Minute).UnixMilli() - span*tsbsIntervalMs
	t0 := time.Now()
	table, err := newTSBSTable(o.Hosts, tsbsCycleRows, startMs, tsbsIntervalMs, o.Seed)
	if err != nil {
		return res, err
	}
	r.table = table
	r.logger.Info("generated the TSBS cpu workload", "hosts", o.Hosts, "series", table.numSeries(),
		"rows_per_cycle", tsbsCycleRows, "took", time.Since(t0).Round(time.Millisecond))

	// 1. Replication off: the edge's CPU per million points without shipping.
	off, err := r.offRun(ctx)
	if err != nil {
		return res, fmt.Errorf("replication-off run: %w", err)
	}
	res.OffPointsPerSHeld = off.pointsPerS
	res.EdgeCPUSPerMPointsOff = report.Number(off.cpuPerM)

	// 2. Replication on: lag, bytes/point, outage and drain.
	on, err := r.onRun(ctx)
	if err != nil {
		return res, fmt.Errorf("replication-on run: %w", err)
	}
	on.fill(&res)
	res.EdgeCPUSPerMPointsOn = report.Number(on.cpuPerM)
	if off.cpuPerM > 0 {
		res.EdgeCPUOverheadPct = report.Number((on.cpuPerM - off.cpuPerM) / off.cpuPerM * 100)
	}
	res.finish()
	return res, nil
}

// edgeSpec returns the options of an edge with its own data directory;
// replicateTo empty means replication off.
func (r *run) edgeSpec(name, replicateTo string) (nodeproc.Options, string, error) {
	addrs, err := loopback.FreePorts(2)
	if err != nil {
		return nodeproc.Options{}, "", err
	}
	grpcAddr, httpAddr := addrs[0], addrs[1]
	dataDir := filepath.Join(r.dir, name)
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nodeproc.Options{}, "", fmt.Errorf("make %s data dir: %w", name, err)
	}
	args := []string{"--http-listen", httpAddr, "--wal-segment-age", r.o.SegmentAge.String()}
	if replicateTo != "" {
		args = append(args, "--replicate-to", replicateTo, "--replicate-insecure",
			"--replication-budget-bytes", fmt.Sprint(r.o.budgetBytes()))
	}
	return nodeproc.Options{
		Binary: r.o.Binary, DataDir: dataDir, ListenAddr: grpcAddr, NodeID: name, WALSync: r.o.WALSync,
		LogLevel: "info", ExtraArgs: append(args, r.o.NodeArgs...), LogPath: filepath.Join(r.dir, name+".log"),
		ReadyTimeout: r.o.ReadyTimeout, Logger: r.logger,
	}, httpAddr, nil
}

func (r *run) requests() [][]*tsbsRequest {
	reqs := r.table.requests(r.o.HostsPerRequest, r.o.RowsPerRequest)
	out := make([][]*tsbsRequest, r.o.Clients)
	for i, q := range reqs {
		c := i * r.o.Clients / len(reqs)
		out[c] = append(out[c], q)
	}
	return out
}

// phase is what one load window measured on an edge.
type phase struct {
	points     int64
	seconds    float64
	pointsPerS float64
	cpuPerM    float64 // edge CPU seconds per million points
}

func measure(points int64, elapsed, cpu time.Duration) phase {
	p := phase{points: points, seconds: elapsed.Seconds(), cpuPerM: math.NaN(), pointsPerS: math.NaN()}
	if elapsed > 0 {
		p.pointsPerS = float64(points) / elapsed.Seconds()
	}
	if points > 0 {
		p.cpuPerM = cpu.Seconds() / (float64(points) / 1e6)
	}
	return p
}

// offRun writes Duration of load to an edge without replication.
func (r *run) offRun(ctx context.Context) (phase, error) {
	spec, _, err := r.edgeSpec("edge-off", "")
	if err != nil {
		return phase{}, err
	}
	edge, err := nodeproc.Start(ctx, spec)
	if err != nil {
		return phase{}, err
	}
	ph, err := r.timedLoad(ctx, edge, spec.ListenAddr, func(time.Time, uint64) {})
	if _, serr := edge.Stop(r.o.StopTimeout); serr != nil && err == nil {
		err = serr
	}
	if err == nil {
		r.logger.Info("replication off", "points_per_s", math.Round(ph.pointsPerS), "cpu_s_per_million_points", ph.cpuPerM)
	}
	return ph, err
}

// timedLoad runs the load for Duration on its own and measures it.
func (r *run) timedLoad(ctx context.Context, edge *nodeproc.Node, addr string, onAck func(time.Time, uint64)) (phase, error) {
	u0, err := edge.Usage()
	if err != nil {
		return phase{}, err
	}
	t0 := time.Now()
	l, err := startLoad(ctx, loadConfig{Addr: addr, Requests: r.requests(), PointsPerS: r.o.PointsPerS,
		CallTimeout: r.o.CallTimeout, OnAck: onAck, NodeExited: edge.Exited()})
	if err != nil {
		return phase{}, err
	}
	select {
	case <-time.After(r.o.Duration):
	case <-ctx.Done():
	}
	lerr := l.stop()
	elapsed := time.Since(t0)
	u1, err := edge.Usage()
	if err != nil {
		return phase{}, err
	}
	if lerr != nil {
		return phase{}, lerr
	}
	if ctx.Err() != nil {
		return phase{}, fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return measure(l.Points(), elapsed, u1.CPU-u0.CPU), nil
}

// onResult is what the replication-on run measured.
type onResult struct {
	lag            phase
	cpuPerM        float64
	lags           []time.Duration
	unresolved     int
	outagePhase    phase // load while the coordinators were down
	drainLivePhase phase // load while the backlog drained
	drain          drainStats
	drainRan       bool
	final          sample
	settleS        float64
	notes          []string
}

func (on *onResult) fill(res *Result) {
	res.PointsPerSHeld = on.lag.pointsPerS
	res.LagPoints = on.lag.points
	res.LagBatches = len(on.lags)
	res.LagUnresolved = on.unresolved
	res.LagP50S = report.Number(percentile(on.lags, 0.50))
	res.LagP99S = report.Number(percentile(on.lags, 0.99))
	res.LagMaxS = report.Number(percentile(on.lags, 1))
	if on.final.ShippedPoints > 0 {
		res.BytesPerPointShipped = report.Number(float64(on.final.ShippedBytes) / float64(on.final.ShippedPoints))
	}
	res.ShippedPoints, res.ShippedBytes, res.ShippedSegments = on.final.ShippedPoints, on.final.ShippedBytes, on.final.ShippedSegments
	res.GapPoints, res.Refusals = on.final.GapPoints, on.final.Refusals
	res.DrainRan = on.drainRan
	if on.drainRan {
		res.OutagePointsPerSHeld = report.Number(on.outagePhase.pointsPerS)
		res.DrainLivePointsPerSHeld = report.Number(on.drainLivePhase.pointsPerS)
		res.BacklogSegmentsAtReturn = on.drain.BacklogSegments
		res.BacklogBytesAtReturn = on.drain.BacklogBytes
		res.ReconnectS = report.Number(on.drain.ReconnectS)
		res.DrainS = on.drain.Seconds
		res.DrainPoints = on.drain.Points
		res.Drained = on.drain.Drained
		res.DrainPointsPerS = report.Number(on.drain.PointsPerS)
		// The ratio is over the target live rate R (the rate held during
		// the outage is reported beside it; under 90% of R the run is
		// invalid).
		res.DrainRatio = report.Number(on.drain.PointsPerS / res.TargetPointsPerS)
	} else {
		res.OutagePointsPerSHeld = report.Number(math.NaN())
		res.DrainLivePointsPerSHeld = report.Number(math.NaN())
	}
	res.SettleS = on.settleS
	res.Notes = append(res.Notes, on.notes...)
}

// waitEvery is how often a wait checks its condition again.
const waitEvery = 50 * time.Millisecond

// poller reads the edge's metrics every interval, feeds the lag tracker and
// keeps every sample.
type poller struct {
	mu    sync.Mutex
	polls []sample // REQUIRES: mu held
	errs  int
	last  error
}

func (p *poller) run(ctx context.Context, m *metricsReader, every time.Duration, lag *lagTracker) {
	tick.Paced(ctx, every, func() bool {
		s, err := m.read(ctx)
		p.mu.Lock()
		if err != nil {
			p.errs++
			p.last = err
		} else {
			p.polls = append(p.polls, s)
		}
		p.mu.Unlock()
		if err == nil {
			lag.observe(s.At, s.AckedThrough)
		}
		return true
	})
}

func (p *poller) latest() (sample, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.polls) == 0 {
		return sample{}, false
	}
	return p.polls[len(p.polls)-1], true
}

func (p *poller) all() []sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]sample(nil), p.polls...)
}

// coordSpecs lays out the coordinators and returns their specs
// and the edge's --replicate-to.
func (r *run) coordSpecs() ([]coordSpec, string, error) {
	plan, err := nodeproc.PlanCoordinators(r.o.Coordinators)
	if err != nil {
		return nil, "", err
	}
	run := nodeproc.Options{Binary: r.o.Binary, ReadyTimeout: r.o.ReadyTimeout, Logger: r.logger}
	specs := make([]coordSpec, len(plan))
	for i, co := range plan {
		specs[i] = coordSpec{id: co.Name, opts: co.Options(run, r.dir, "--peers", nodeproc.Peers(plan))}
	}
	return specs, strings.Join(nodeproc.Intakes(plan), ","), nil
}

// startCoords starts every coordinator at once (a raft cluster of several
// needs its quorum up to elect a leader).
func (r *run) startCoords(ctx context.Context, specs []coordSpec) ([]*coordProc, error) {
	procs := make([]*coordProc, len(specs))
	err := nodeproc.Concurrently(len(specs), func(i int) (err error) {
		procs[i], err = startCoord(ctx, specs[i])
		return err
	})
	if err != nil {
		for _, p := range procs {
			if p != nil {
				p.kill()
			}
		}
		return nil, err
	}
	return procs, nil
}

func (r *run) onRun(ctx context.Context) (on onResult, err error) {
	specs, intakes, err := r.coordSpecs()
	if err != nil {
		return on, err
	}
	coords, err := r.startCoords(ctx, specs)
	if err != nil {
		return on, err
	}
	defer func() {
		for _, c := range coords {
			if c == nil {
				continue
			}
			if serr := c.stop(r.o.StopTimeout); serr != nil {
				r.logger.Warn("stop coordinator", "err", serr)
			}
		}
	}()
	spec, httpAddr, err := r.edgeSpec("edge-1", intakes)
	if err != nil {
		return on, err
	}
	edge, err := nodeproc.Start(ctx, spec)
	if err != nil {
		return on, err
	}
	defer func() {
		if _, serr := edge.Stop(r.o.StopTimeout); serr != nil && err == nil {
			err = serr
		}
	}()

	var lag lagTracker
	pctx, stopPoll := context.WithCancel(ctx)
	var p poller
	var pollDone sync.WaitGroup
	pollDone.Go(func() { p.run(pctx, newMetricsReader(httpAddr), r.o.PollInterval, &lag) })
	defer func() { stopPoll(); pollDone.Wait() }()

	// Wait for the stream to be open, so that the lag does not include the
	// first connection.
	if err := tick.Until(ctx, waitEvery, 60*time.Second, func() bool { s, ok := p.latest(); return ok && s.Connected }); err != nil {
		return on, fmt.Errorf("edge never connected to the coordinators: %w", err)
	}

	var tracking sync.Mutex
	trackOn := true
	onAck := func(at time.Time, seq uint64) {
		tracking.Lock()
		rec := trackOn
		tracking.Unlock()
		if rec {
			lag.record(at, seq)
		}
	}
	u0, err := edge.Usage()
	if err != nil {
		return on, err
	}
	t0 := time.Now()
	l, err := startLoad(ctx, loadConfig{Addr: spec.ListenAddr, Requests: r.requests(), PointsPerS: r.o.PointsPerS,
		CallTimeout: r.o.CallTimeout, OnAck: onAck, NodeExited: edge.Exited()})
	if err != nil {
		return on, err
	}
	defer func() {
		if lerr := l.stop(); lerr != nil && err == nil {
			err = lerr
		}
	}()
	sleep := func(d time.Duration) error {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		}
		return l.failed()
	}

	// Lag phase.
	if err := sleep(r.o.Duration); err != nil {
		return on, err
	}
	tracking.Lock()
	trackOn = false
	tracking.Unlock()
	points1, t1 := l.Points(), time.Now()
	u1, err := edge.Usage()
	if err != nil {
		return on, err
	}
	on.lag = measure(points1, t1.Sub(t0), u1.CPU-u0.CPU)
	on.cpuPerM = on.lag.cpuPerM
	r.logger.Info("lag phase done", "points_per_s", math.Round(on.lag.pointsPerS), "pending_batches", lag.pendingCount())

	// Let the lag phase's writes reach the cloud, the load going on.
	_ = tick.Until(ctx, waitEvery, r.o.SettleTimeout, func() bool { return lag.pendingCount() == 0 || l.failed() != nil })
	if err := l.failed(); err != nil {
		return on, err
	}
	settled := time.Now()
	on.settleS = settled.Sub(t1).Seconds()
	on.lags, on.unresolved = lag.result(settled)
	if on.unresolved > 0 {
		on.notes = append(on.notes, fmt.Sprintf("%d write batches of the lag phase were not in the cloud %.0f s after it; counted with their age then (a lower bound)", on.unresolved, on.settleS))
	}

	if r.o.Outage > 0 {
		if err := r.outage(ctx, &on, l, specs, coords, &p); err != nil {
			return on, err
		}
	}
	if s, ok := p.latest(); ok {
		on.final = s
	}
	return on, nil
}

// outage kills the coordinators for Outage with the load going on, starts
// them again and waits for the backlog to drain.
func (r *run) outage(ctx context.Context, on *onResult, l *pacedLoad, specs []coordSpec, coords []*coordProc, p *poller) error {
	r.logger.Info("outage: killing the coordinators (SIGKILL)", "for", r.o.Outage)
	for i, c := range coords {
		c.kill()
		coords[i] = nil
	}
	on.drainRan = true
	pts0, t0 := l.Points(), time.Now()
	select {
	case <-time.After(r.o.Outage):
	case <-ctx.Done():
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	if err := l.failed(); err != nil {
		return err
	}
	pts1, t1 := l.Points(), time.Now()
	on.outagePhase = measure(pts1-pts0, t1.Sub(t0), 0)
	r.logger.Info("outage over: starting the coordinators", "points_per_s", math.Round(on.outagePhase.pointsPerS))
	started, err := r.startCoords(ctx, specs)
	if err != nil {
		return err
	}
	copy(coords, started)
	back := time.Now()
	const threshold = 1
	deadline := r.o.drainTimeout()
	_ = tick.Until(ctx, waitEvery, deadline, func() bool {
		d := computeDrain(p.all(), back, threshold)
		return d.Drained || l.failed() != nil
	})
	if err := l.failed(); err != nil {
		return err
	}
	pts2, t2 := l.Points(), time.Now()
	on.drainLivePhase = measure(pts2-pts1, t2.Sub(t1), 0)
	on.drain = computeDrain(p.all(), back, threshold)
	if !on.drain.Drained {
		on.notes = append(on.notes, fmt.Sprintf("the backlog had not drained %v after the coordinators returned; the drain rate is that of the part that did", deadline))
	}
	r.logger.Info("drain", "drained", on.drain.Drained, "seconds", on.drain.Seconds, "points_per_s", math.Round(on.drain.PointsPerS))
	return nil
}
