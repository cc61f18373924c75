// Package healbench is the self-healing system benchmark (tribench heal,
// make bench-heal): a coordinator loses its disk under load and the
// cluster heals without anybody acting. Three `tributary coordinator`
// processes (laid out as the Helm chart lays out its pods: each on its own
// loopback address, all on the same ports) and ten `tributary node` edges
// shipping to them, all on loopback.
//
// A run:
//
//  1. starts the coordinators with --dead-after DeadAfter (30 s), then the
//     edges (--wal-segment-age SegmentAge);
//  2. loads History of each edge's SeriesPerEdge series at HistoryStep
//     (ending now), one request of HistoryBatch points per series at a
//     time, and waits until the catalog holds every acknowledged point:
//     the history a replaced coordinator must get back;
//  3. starts the steady load (Interval, PointsPerWrite points per series a
//     request, timestamps at the clock's pace: 4,000 points/s over ten
//     edges by default) and, throughout, scrapes every edge's
//     acked-through gauge every AckPoll and compares a query answer with
//     the ledger every second (one coordinator, one edge, a window of the
//     acknowledged history);
//  4. after Warm, SIGKILLs one coordinator (Victim: a follower or the
//     leader), deletes its data directory and, after RestartDelay, starts
//     it with its original flags plus --rejoin, as the Helm chart restarts
//     a pod on an empty volume;
//  5. measures, from the kill: replaced_s, until every edge has RF active
//     replicas on live coordinators (the restarted one counting once the
//     catalog registered its new store), and history_restored_s, until no
//     replica lacks anything (no leaving replica, nothing under-replicated
//     or unsourced); rereplicate_mib_per_s is the segment bytes the
//     restarted coordinator copied (tributary_heal_copied_bytes_total) over
//     the time from the start of its first copy (the last read before
//     tributary_heal_copies_running was first above 0) to
//     history_restored (and, from its log, history_mib_per_s: each edge's
//     largest copy, its history once, over the same time);
//  6. stops the load, waits until the cloud holds every acknowledged point
//     on every replica, and checks every replica store alone
//     (ReplicaService/Query on its cluster listener) and every
//     coordinator's query front end against the ledgers: lost and
//     duplicated count acknowledged points missing or returned twice,
//     wrong_answers the answers that were wrong (a phantom or wrong value,
//     or acknowledged points missing without a warning);
//  7. replaces the first edge's SD card once every check has passed: the
//     edge is killed, its data directory deleted, `tributary node restore`
//     (its own command line with `restore` inserted) brings its history
//     back from the coordinators, and the edge, started again, must answer
//     its whole ledger asked alone; edge_restore_mib_per_s is the bytes the
//     restore received over the command's wall time (null when the binary
//     has no `node restore` or an earlier check failed);
//  8. prints a table (figure, measured, target), notes and one JSON line,
//     always the last line of its output.
//
// Missing a target never fails a run; lost or duplicated points, a wrong
// answer or a process that fails to start do (after the report).
//
// Run is not safe to call concurrently with itself on the same Options.Out.
package healbench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
)

// Options configures one run.
type Options struct {
	// Procs says which binary is started and how (the processes are
	// killed, never stopped, so StopTimeout is unused); Output where the
	// figures go.
	runopt.Procs
	runopt.Output
	// Coordinators and Edges are the processes; RF is min(3, Coordinators),
	// the fleet's default.
	Coordinators int
	Edges        int
	// SeriesPerEdge series on each edge.
	SeriesPerEdge int
	// History of data loaded on every edge before the fault, ending now,
	// a point every HistoryStep, HistoryBatch points per series a request.
	History      time.Duration
	HistoryStep  time.Duration
	HistoryBatch int
	// Steady load: a request every Interval with PointsPerWrite points per
	// series, timestamps at the clock's pace.
	Interval       time.Duration
	PointsPerWrite int
	// Warm is how long the steady load runs before the fault.
	Warm time.Duration
	// Victim is "follower" or "leader".
	Victim string
	// RestartDelay is the time between the kill and the start with
	// --rejoin.
	RestartDelay time.Duration
	// DeadAfter is the coordinators' --dead-after.
	DeadAfter time.Duration
	// SegmentAge is the edges' --wal-segment-age.
	SegmentAge time.Duration
	// AckPoll is how often the edges' acked-through gauges are read.
	AckPoll time.Duration
	// HealTimeout bounds the wait for the history to be restored.
	HealTimeout time.Duration
	// LoadTimeout bounds each wait for the cloud to hold what was written.
	LoadTimeout time.Duration
}

// DefaultOptions are the issue's: 3 coordinators, 10 edges at 4,000
// points/s in total, dead-after 30 s.
func DefaultOptions() Options {
	return Options{
		Procs:  runopt.Procs{Binary: "bin/tributary", ReadyTimeout: 60 * time.Second, StopTimeout: time.Minute},
		Output: runopt.DefaultOutput(), Coordinators: 3, Edges: 10, SeriesPerEdge: 4,
		History: 24 * time.Hour, HistoryStep: 50 * time.Millisecond, HistoryBatch: 10_000,
		Interval: 100 * time.Millisecond, PointsPerWrite: 10,
		Warm: 20 * time.Second, Victim: "follower", RestartDelay: 10 * time.Second,
		DeadAfter: 30 * time.Second, SegmentAge: time.Second, AckPoll: 200 * time.Millisecond,
		HealTimeout: 15 * time.Minute, LoadTimeout: 10 * time.Minute,
	}
}

// Validate reports every bad field.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Coordinators < 2 {
		bad("coordinators %d: at least 2 (one loses its disk)", o.Coordinators)
	}
	if o.Edges < 1 || o.SeriesPerEdge < 1 {
		bad("edges %d and series per edge %d: at least 1 each", o.Edges, o.SeriesPerEdge)
	}
	if o.History < 0 || (o.History > 0 && (o.HistoryStep <= 0 || o.HistoryBatch < 1)) {
		bad("history %v at step %v in batches of %d: want a history of 0, or a positive step and batch", o.History, o.HistoryStep, o.HistoryBatch)
	}
	if o.HistoryStep > 0 && o.History/o.HistoryStep > 50_000_000 {
		bad("history %v at step %v: more than 50,000,000 points per series", o.History, o.HistoryStep)
	}
	if o.Interval <= 0 || o.PointsPerWrite < 1 || o.Interval.Milliseconds()%int64(o.PointsPerWrite) != 0 || o.Interval.Milliseconds() == 0 {
		bad("interval %v and points per write %d: the interval must be whole milliseconds divisible by the points", o.Interval, o.PointsPerWrite)
	}
	if o.Victim != "follower" && o.Victim != "leader" {
		bad("victim %q: follower or leader", o.Victim)
	}
	if o.Warm < 0 || o.RestartDelay < 0 || o.DeadAfter < time.Second || o.SegmentAge <= 0 || o.AckPoll <= 0 ||
		o.HealTimeout <= 0 || o.LoadTimeout <= 0 {
		bad("durations: warm and restart delay not negative, dead-after at least 1s, the others positive")
	}
	return errors.Join(errs...)
}

// rf is the replication factor the fleet runs with (its default).
func (o Options) rf() int { return min(3, o.Coordinators) }

// pointsPerSecond is the steady load.
func (o Options) pointsPerSecond() float64 {
	return float64(o.Edges*o.SeriesPerEdge*o.PointsPerWrite) / o.Interval.Seconds()
}

// Run runs the benchmark and prints its report. It returns an error when
// the run could not measure, or when points were lost or duplicated or an
// answer was wrong (the report is printed first).
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("heal options: %w", err)
	}
	logger := o.Log()
	wd, err := workdir.Make(o.WorkDir, "tribench-heal-", o.KeepDataDir, logger)
	if err != nil {
		return Result{}, err
	}
	f, err := newFleet(o, wd.Path, logger)
	if err != nil {
		wd.Finish(err)
		return Result{}, err
	}
	r := &runner{o: o, f: f, logger: logger, m: measurement{machine: report.DetectMachine(), loadBefore: loadAvg(),
		restoreCmd: restoreAvailable(ctx, o.Binary)}}
	runErr := r.run(ctx)
	r.stopWatchers()
	f.killAll()
	r.m.loadAfter = loadAvg()
	res := r.m.result(o)
	if r.m.measured {
		if err := WriteReport(o.Out, res); err != nil {
			runErr = errors.Join(runErr, err)
		}
		if res.Lost > 0 || res.Duplicated > 0 || res.WrongAnswers > 0 {
			runErr = errors.Join(runErr, fmt.Errorf("heal: %d points lost, %d duplicated, %d wrong answers", res.Lost, res.Duplicated, res.WrongAnswers))
		}
	}
	wd.Finish(runErr)
	return res, runErr
}

// loadAvg is /proc/loadavg's three averages ("" where there is none).
func loadAvg() string { return report.LoadAveragesText("") }
