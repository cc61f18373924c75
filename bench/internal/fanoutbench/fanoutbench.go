// Package fanoutbench is the coordinator fan-out system benchmark
// (tribench fanout): three `tributary coordinator` processes (a raft
// catalog, replica stores and the fleet-wide query front end) and ten
// `tributary node` edges shipping their sealed WAL segments to them, all
// on loopback; at fleet scale, more edges simulated in its own process.
//
// A run:
//
//  1. starts the coordinators (concurrently: none is ready before a quorum
//     elects a leader), then the edges, each with --replicate-to all three
//     intakes and --advertise-query-addr so that coordinators can ask it for
//     the fresh tail;
//  2. loads the sensor workload: SeriesPerEdge series on every edge, one
//     device per edge, a point every Interval over the last History, one
//     Write per edge; then waits until the catalog holds every acknowledged
//     point (the sum of the fleet's held_points);
//  3. checks answers: raw, 1-minute avg and max, last point and two
//     cross-series aggregates with group-by, through every coordinator, each
//     compared with a naive computation over the points written;
//  4. times the headline query — the 10 series of sensor s0 (one on each
//     edge), the last hour, 1-minute avg — from QueryClients clients, each on
//     its own coordinator: WarmupQueries, then Queries timed, every answer
//     checked; once with the range ending now (edges are asked for the tail
//     past their watermark: the headline figure) and once ending at the
//     newest point written (replicas alone can answer);
//  5. registers RegistrationSeries new series (one point each, spread over
//     the edges in batches of RegistrationBatch) and times them until the
//     catalog's series count reaches the total; raft's applied index over
//     the same time gives catalog proposals/s;
//  6. failover: a writer adds a point to the first edge every 100 ms while
//     the edge's acked-through sequence is polled every 50 ms; the raft
//     leader is SIGKILLed Kills times and restarted each time;
//  7. SIGKILLs the last edge and runs a query past its watermark, which must
//     carry a warning naming it;
//  8. when Edges exceeds ProcessEdges, the fleet-scale phase (scale.go):
//     the other edges simulated in this process (simedge.go: the real
//     replicator announcing their series, a query service per edge, 5%
//     never answering), one-series queries timed and the edges they ask
//     counted, listings checked, new series timed until they are listed;
//  9. prints a table (figure, measured, target), notes and one JSON line,
//     always the last line of its output.
//
// Missing a target never fails a run; a wrong answer, lost points or a
// process that fails to start do (after the report, when there is one).
//
// Run is not safe to call concurrently with itself on the same Options.Out.
package fanoutbench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
)

// Options configures one run.
type Options struct {
	// Procs says which binary is started and how; Output where the
	// figures go.
	runopt.Procs
	runopt.Output
	// Coordinators is the number of coordinator processes (raft members).
	Coordinators int
	// Edges is the number of edges: up to ProcessEdges run as `tributary
	// node` processes (the phases above), the rest are simulated in this
	// process for the fleet-scale phase (simedge.go, scale.go).
	Edges        int
	ProcessEdges int
	// UnreachableEdges of the simulated edges cannot be queried (default,
	// with -1: 5% of Edges).
	UnreachableEdges int
	// VisibilityTrials is how many new series the fleet-scale phase
	// creates on simulated edges, each timed until the coordinators list
	// it.
	VisibilityTrials int
	// SeriesPerEdge is the number of sensor series each edge holds; the
	// headline query reads sensor s0 of each edge, so it must be at least 1.
	SeriesPerEdge int
	// History is how far back the loaded data reaches (ending at the start
	// of the current minute); at least an hour, for the one-hour query.
	History time.Duration
	// Interval is the time between two points of a series; it must divide
	// a minute.
	Interval time.Duration
	// SegmentAge is the edges' --wal-segment-age: how soon a write is
	// sealed and shipped.
	SegmentAge time.Duration
	// QueryClients is the number of concurrent query clients, each with a
	// connection to its own coordinator.
	QueryClients int
	// WarmupQueries are sent (and checked) before the Queries timed.
	WarmupQueries int
	Queries       int
	// Kills is how many times the raft leader is SIGKILLed.
	Kills int
	// RegistrationSeries is how many new series the edges create for the
	// registrations figure; RegistrationBatch is the series per Write.
	RegistrationSeries int
	RegistrationBatch  int
	// Seed selects the generated values.
	Seed uint64
	// ReplicationTimeout bounds each wait for the cloud to catch up.
	ReplicationTimeout time.Duration
	// CallTimeout bounds one RPC.
	CallTimeout time.Duration
	// Now is the wall clock, which places the data; default time.Now.
	Now func() time.Time
}

// DefaultOptions are the settings: 3 coordinators, 10 edges of 8
// sensor series at 10 s over the last hour, 500 timed queries from 2
// clients after 50 for warm-up, 3 leader kills, 100,000 new series.
func DefaultOptions() Options {
	return Options{
		Procs:              runopt.Procs{ReadyTimeout: 60 * time.Second, StopTimeout: 30 * time.Second},
		Output:             runopt.DefaultOutput(),
		Coordinators:       3,
		Edges:              10,
		ProcessEdges:       10,
		UnreachableEdges:   -1,
		VisibilityTrials:   20,
		SeriesPerEdge:      8,
		History:            time.Hour,
		Interval:           10 * time.Second,
		SegmentAge:         time.Second,
		QueryClients:       2,
		WarmupQueries:      50,
		Queries:            500,
		Kills:              3,
		RegistrationSeries: 100_000,
		RegistrationBatch:  10_000,
		Seed:               1,
		ReplicationTimeout: 2 * time.Minute,
		CallTimeout:        30 * time.Second,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
	if o.Coordinators < 1 {
		errs = append(errs, fmt.Errorf("coordinators must be positive, got %d", o.Coordinators))
	}
	if o.Edges < 2 || o.ProcessEdges < 2 {
		errs = append(errs, fmt.Errorf("edges and process edges must be at least 2 (one is stopped at the end), got %d and %d", o.Edges, o.ProcessEdges))
	}
	if o.UnreachableEdges > o.simEdges() {
		errs = append(errs, fmt.Errorf("%d unreachable edges, but only %d simulated edges", o.UnreachableEdges, o.simEdges()))
	}
	if o.VisibilityTrials < 0 {
		errs = append(errs, fmt.Errorf("visibility trials must not be negative, got %d", o.VisibilityTrials))
	}
	if o.SeriesPerEdge < 1 {
		errs = append(errs, fmt.Errorf("series per edge must be positive, got %d", o.SeriesPerEdge))
	}
	if o.Interval < time.Millisecond || time.Minute%o.Interval != 0 {
		errs = append(errs, fmt.Errorf("interval must be at least 1ms and divide a minute, got %v", o.Interval))
	} else if o.History < time.Hour || o.History%o.Interval != 0 || o.History > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("history must be a multiple of the interval from 1h to 7 days, got %v", o.History))
	}
	if o.SegmentAge <= 0 {
		errs = append(errs, fmt.Errorf("segment age must be positive, got %v", o.SegmentAge))
	}
	if o.QueryClients < 1 || o.Queries < 1 || o.WarmupQueries < 0 {
		errs = append(errs, fmt.Errorf("query clients and queries must be positive and warm-up queries not negative, got %d, %d and %d",
			o.QueryClients, o.Queries, o.WarmupQueries))
	}
	if o.Kills < 0 {
		errs = append(errs, fmt.Errorf("kills must not be negative, got %d", o.Kills))
	}
	if o.Kills > 0 && o.Coordinators < 3 {
		errs = append(errs, fmt.Errorf("leader kills need at least 3 coordinators (a quorum must survive), got %d", o.Coordinators))
	}
	if o.RegistrationSeries < 0 || o.RegistrationBatch < 1 {
		errs = append(errs, fmt.Errorf("registration series must not be negative and the batch positive, got %d and %d",
			o.RegistrationSeries, o.RegistrationBatch))
	}
	if o.ReplicationTimeout <= 0 || o.CallTimeout <= 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
	}
	return errors.Join(errs...)
}

// procEdges is the number of edges run as processes, simEdges the number
// simulated in this process.
func (o Options) procEdges() int { return min(o.Edges, o.ProcessEdges) }
func (o Options) simEdges() int  { return o.Edges - o.procEdges() }

// unreachable is the number of simulated edges that cannot be queried.
func (o Options) unreachable() int {
	if o.UnreachableEdges >= 0 {
		return o.UnreachableEdges
	}
	return min(o.simEdges(), (o.Edges*5+99)/100)
}

// Targets are the goals.
var (
	targetP99Ms     = report.Target{Value: 50, AtMost: true}
	targetFailoverS = report.Target{Value: 3, AtMost: true}
	targetRegsPerS  = report.Target{Value: 10_000}
	// The fleet-scale phase: a one-series query asks at most 2 edges, and
	// a new series is listed by the coordinators within 2 s.
	targetEdgesAsked = report.Target{Value: 2, AtMost: true}
	targetVisibleS   = report.Target{Value: 2, AtMost: true}
)

// Run runs the benchmark and writes its report to o.Out. The returned error
// is non-nil when the run could not be measured or the fleet answered
// wrongly or lost points; missing a target never is.
func Run(ctx context.Context, o Options) (_ Result, err error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("fanout options: %w", err)
	}
	logger := o.Log()
	o.Logger = logger
	if o.Now == nil {
		o.Now = time.Now
	}
	binary, err := nodeproc.FindBinary(o.Binary)
	if err != nil {
		return Result{}, err
	}
	wd, err := workdir.Make(o.WorkDir, "tribench-fanout-", o.KeepDataDir, logger)
	if err != nil {
		return Result{}, err
	}
	defer func() { wd.Finish(err) }()

	c, err := newCluster(o, binary, wd.DataDir, logger)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if stopErr := c.stopAll(o.StopTimeout); stopErr != nil {
			logger.Warn("stop fleet", "err", stopErr)
		}
	}()
	r := &runner{o: o, c: c, logger: logger, m: measurement{machine: report.DetectMachine()}, dir: wd.DataDir}
	runErr := r.run(ctx)
	res := r.m.result(o)
	if runErr != nil && !r.m.measured {
		return res, fmt.Errorf("%w (logs in %s)", runErr, wd.Path)
	}
	if werr := WriteReport(o.Out, res); werr != nil {
		return res, errors.Join(runErr, fmt.Errorf("write report: %w", werr))
	}
	if runErr != nil {
		return res, fmt.Errorf("%w (logs in %s)", runErr, wd.Path)
	}
	return res, nil
}
