// Package rulesbench is the rules benchmark (tribench rules, make
// bench-rules): a node on the Raspberry Pi profile evaluating many
// recording rules over live series while it takes a write load, and what
// the rules cost that load.
//
// The node runs as its own process kept on one CPU (taskset, inherited by
// all its threads; Options.NodeCPUs), with its peak resident memory
// compared with the Pi's 512 MiB. Two feeds write to it for the whole run:
//
//   - the live feed (bench/internal/loadgen): Options.Series sensor series
//     at one point a second each, in real time, the rules' input;
//   - the ingest feed (bench/internal/load): Options.FeedSeries other
//     series written as fast as the node takes them, from
//     Options.Clients connections, the throughput measured.
//
// The rules (Plan) are one group of Options.Rules recording rules, each
// the per-device one-minute average of about ten live series, evaluated
// every Options.EvalInterval. The run alternates phases without and with
// the rules (the rule file is added and removed and the node reloaded
// with POST /-/reload), in the order off-on, on-off, ... so that a drift
// of the machine's load weighs on both alike, and reports the ingest
// throughput lost with the rules (1 - on/off, over all phases) and the
// group's evaluation times read from /api/v1/rules (p50, p99, max).
//
// A rule in error, a write refused by either feed, a recorded series
// missing, or a recorded value that differs from its expression evaluated
// at the same time fails the run; missing a target does not.
//
// Run is not safe to call concurrently with itself on the same Options.Out.
package rulesbench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/loadgen"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
	"github.com/tributarydb/tributary/bench/workload"
)

// Targets of the issue: a group evaluation within a second at the 99th
// percentile, and at most 10% of the ingest throughput lost to the rules.
var (
	EvalP99Target  = report.Target{Value: 1, AtMost: true}
	LossPctTarget  = report.Target{Value: 10, AtMost: true}
	MemoryMiBLimit = 512
)

// Options configures one run.
type Options struct {
	// The node process (Binary, WorkDir, KeepDataDir, NodeArgs, Env,
	// ReadyTimeout, StopTimeout) and the report (Commit, Out, Logger).
	runopt.Procs
	runopt.Output
	// Rules is the number of recording rules (a multiple of 4).
	Rules int
	// Series is the number of live series the rules read (a multiple of
	// 8), written at one point a second each.
	Series int
	// EvalInterval is the rule group's interval.
	EvalInterval time.Duration
	// MaxConcurrentEvals is the node's --rules-max-concurrent-evals; 0
	// leaves the node's default.
	MaxConcurrentEvals int
	// NodeCPUs is the taskset CPU list the node runs on ("" runs it
	// unbound). Default: the machine's last CPU, one CPU as on a Pi.
	NodeCPUs string
	// FeedSeries, BatchPoints, PointsPerSeriesPerBatch and Clients shape
	// the ingest feed, as for the ingest benchmark.
	FeedSeries              int
	BatchPoints             int
	PointsPerSeriesPerBatch int
	Clients                 int
	// Warmup is how long the live feed writes before the first phase, so
	// that the rules' one-minute windows are full.
	Warmup time.Duration
	// Phase is the length of one phase; Pairs the number of off/on pairs.
	Phase time.Duration
	Pairs int
	// WALSync is the node's --wal-sync policy.
	WALSync string
	// CallTimeout bounds one request.
	CallTimeout time.Duration
}

// DefaultOptions: 1,000 rules over 10,000 series every 15 s on one CPU,
// two pairs of 90-second phases, fsync before every acknowledgement.
func DefaultOptions() Options {
	return Options{
		Procs:                   runopt.Procs{ReadyTimeout: 60 * time.Second, StopTimeout: 2 * time.Minute},
		Output:                  runopt.DefaultOutput(),
		Rules:                   1_000,
		Series:                  10_000,
		EvalInterval:            15 * time.Second,
		NodeCPUs:                strconv.Itoa(runtime.NumCPU() - 1),
		FeedSeries:              10_000,
		BatchPoints:             10_000,
		PointsPerSeriesPerBatch: 100,
		Clients:                 4,
		Warmup:                  65 * time.Second,
		Phase:                   90 * time.Second,
		Pairs:                   2,
		WALSync:                 "always",
		CallTimeout:             60 * time.Second,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
	if _, err := NewPlan(o.Rules, o.Series); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, load.ShapeProblems(o.FeedSeries, o.BatchPoints, o.PointsPerSeriesPerBatch, o.Clients)...)
	if o.EvalInterval < time.Second {
		errs = append(errs, fmt.Errorf("evaluation interval must be at least 1s, got %v", o.EvalInterval))
	}
	if o.Phase < 2*o.EvalInterval {
		errs = append(errs, fmt.Errorf("a phase (%v) must last at least two evaluation intervals (%v)", o.Phase, 2*o.EvalInterval))
	}
	if o.Pairs <= 0 || o.Warmup < 0 || o.MaxConcurrentEvals < 0 {
		errs = append(errs, fmt.Errorf("pairs must be positive, warm-up and concurrency not negative, got %d, %v, %d", o.Pairs, o.Warmup, o.MaxConcurrentEvals))
	}
	if o.WALSync == "" || o.CallTimeout <= 0 {
		errs = append(errs, errors.New("wal-sync and a positive call timeout are required"))
	}
	return errors.Join(errs...)
}

// run is one benchmark run's state.
type run struct {
	o        Options
	plan     Plan
	node     *nodeproc.Node
	nodeLog  string
	grpcAddr string
	api      *apiClient
	ruleFile string // the installed rule file (present: rules on)
	ruleText string
	poller   *evalPoller
}

// Run runs the benchmark and writes its report to o.Out.
func Run(ctx context.Context, o Options) (_ Result, err error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("rules benchmark options: %w", err)
	}
	logger := o.Log()
	binary, err := nodeproc.FindBinary(o.Binary)
	if err != nil {
		return Result{}, err
	}
	plan, _ := NewPlan(o.Rules, o.Series)
	wd, err := workdir.Make(o.WorkDir, "tribench-rules-", o.KeepDataDir, logger)
	if err != nil {
		return Result{}, err
	}
	defer func() { wd.Finish(err) }()
	r := &run{o: o, plan: plan, nodeLog: filepath.Join(wd.Path, "node.log"), ruleText: plan.File(o.EvalInterval)}
	ruleDir := filepath.Join(wd.Path, "rules")
	if err := os.Mkdir(ruleDir, 0o755); err != nil {
		return Result{}, err
	}
	r.ruleFile = filepath.Join(ruleDir, "bench.yml")
	load0 := report.LoadAveragesText("unknown")
	if err := r.startNode(ctx, binary, wd.DataDir, filepath.Join(ruleDir, "*.yml")); err != nil {
		return Result{}, err
	}
	defer func() {
		if _, serr := r.node.Stop(o.StopTimeout); serr != nil && err == nil {
			err = serr
		}
	}()
	m, err := r.measure(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("%w\nnode log %s ends with:\n%s", err, r.nodeLog, r.node.LogTail())
	}
	m.loadBefore, m.loadAfter = load0, report.LoadAveragesText("unknown")
	res := m.result(o)
	if err := WriteReport(o.Out, res); err != nil {
		return res, err
	}
	return res, nil
}

// startNode starts the node with the rule file pattern, on o.NodeCPUs.
func (r *run) startNode(ctx context.Context, binary, dataDir, pattern string) error {
	o := r.o
	grpcAddr, err := nodeproc.FreeLoopbackAddr()
	if err != nil {
		return err
	}
	httpAddr, err := nodeproc.FreeLoopbackAddr()
	if err != nil {
		return err
	}
	var wrap []string
	if o.NodeCPUs != "" {
		taskset, err := exec.LookPath("taskset")
		if err != nil {
			return fmt.Errorf("--node-cpus %s needs taskset (util-linux): %w", o.NodeCPUs, err)
		}
		wrap = []string{taskset, "-c", o.NodeCPUs}
	}
	args := []string{"--http-listen", httpAddr, "--rules", pattern, "--rules-evaluation-interval", o.EvalInterval.String()}
	if o.MaxConcurrentEvals > 0 {
		args = append(args, "--rules-max-concurrent-evals", strconv.Itoa(o.MaxConcurrentEvals))
	}
	r.node, err = nodeproc.Start(ctx, nodeproc.Options{
		Binary: binary, Wrap: wrap, DataDir: dataDir, ListenAddr: grpcAddr, WALSync: o.WALSync, LogLevel: "info",
		ExtraArgs: append(args, o.NodeArgs...), Env: o.Env, LogPath: r.nodeLog, ReadyTimeout: o.ReadyTimeout, Logger: o.Log(),
	})
	if err != nil {
		return err
	}
	r.grpcAddr = grpcAddr
	r.api = &apiClient{base: "http://" + httpAddr, client: &http.Client{Timeout: o.CallTimeout}}
	return nil
}

// measure runs the live feed, the warm-up and the phases, and checks the
// rules' output.
func (r *run) measure(ctx context.Context) (*measurement, error) {
	o, logger := r.o, r.o.Log()
	liveCtx, stopLive := context.WithCancel(ctx)
	defer stopLive()
	type liveResult struct {
		st  loadgen.Stats
		err error
	}
	liveDone := make(chan liveResult, 1)
	go func() {
		st, err := loadgen.Run(liveCtx, loadgen.Options{Targets: []string{r.grpcAddr}, Names: []string{LiveEdge},
			Series: o.Series, Interval: time.Second, Flush: time.Second, Report: -1, CallTimeout: o.CallTimeout, Logger: logger})
		liveDone <- liveResult{st, err}
	}()
	r.poller = newEvalPoller(r.api, RecordName(metricNames[0]))
	pollCtx, stopPoll := context.WithCancel(ctx)
	pollDone := make(chan struct{})
	go func() { defer close(pollDone); r.poller.run(pollCtx, 2*time.Second) }()
	defer func() { stopPoll(); <-pollDone }()

	m := &measurement{plan: r.plan, machine: report.DetectMachine()}
	logger.Info("warming up: live series only", "series", o.Series, "for", o.Warmup)
	if err := sleep(ctx, o.Warmup, r.node.Exited()); err != nil {
		return nil, err
	}
	if err := r.phases(ctx, m); err != nil {
		return nil, err
	}
	stopLive()
	live := <-liveDone
	if live.err != nil {
		return nil, fmt.Errorf("live feed: %w", live.err)
	}
	if live.st.FailedPoints > 0 {
		return nil, fmt.Errorf("live feed: %d writes (%d points) failed", live.st.FailedWrites, live.st.FailedPoints)
	}
	m.livePoints = live.st.AckedPoints
	stopPoll()
	<-pollDone
	m.pollFailures = r.poller.failures()
	if m.usage, m.usageErr = r.node.Usage(); m.usageErr != nil {
		logger.Warn("node usage", "err", m.usageErr)
	}
	return m, nil
}

// phases alternates the ingest feed without and with the rules, then
// runs the rules on the live feed alone.
func (r *run) phases(ctx context.Context, m *measurement) error {
	o := r.o
	gen, err := workload.NewSensor(workload.SensorOptions{Series: o.FeedSeries, StartMs: feedStartMs(o, time.Now()), IntervalMs: 1000, Seed: 7})
	if err != nil {
		return err
	}
	reqs := gen.Requests(o.BatchPoints/o.PointsPerSeriesPerBatch, o.PointsPerSeriesPerBatch)
	perClient := load.Split(reqs, o.Clients)
	conns, err := load.Dial(r.grpcAddr, len(perClient))
	if err != nil {
		return err
	}
	defer conns.Close()
	feed := func(ctx context.Context) (int64, time.Duration, error) {
		st, err := load.Run(ctx, load.Config{Clients: conns.WriteClients(), Requests: perClient,
			PointsPerSeries: o.PointsPerSeriesPerBatch, Duration: o.Phase, CallTimeout: o.CallTimeout, NodeExited: r.node.Exited()})
		if err != nil {
			return 0, 0, fmt.Errorf("ingest feed: %w", err)
		}
		if st.CaughtUp {
			return 0, 0, errors.New("ingest feed reached the wall clock: raise the ceiling of feedStartMs")
		}
		return st.Points, st.Elapsed, nil
	}
	for pair := range o.Pairs {
		order := []bool{false, true}
		if pair%2 == 1 {
			order = []bool{true, false}
		}
		for _, on := range order {
			if err := r.phase(ctx, m, phaseFeed, on, feed); err != nil {
				return err
			}
		}
	}
	live := func(ctx context.Context) (int64, time.Duration, error) {
		t0 := time.Now()
		err := sleep(ctx, o.Phase, r.node.Exited())
		return 0, time.Since(t0), err
	}
	if err := r.phase(ctx, m, phaseLive, true, live); err != nil {
		return err
	}
	if err := r.checkValues(ctx, m); err != nil {
		return err
	}
	return r.setRules(ctx, false)
}

// phase runs one phase: the rules on or off, then run, measuring the
// node's CPU and the evaluations seen meanwhile.
func (r *run) phase(ctx context.Context, m *measurement, kind string, on bool, run func(context.Context) (int64, time.Duration, error)) error {
	if err := r.setRules(ctx, on); err != nil {
		return err
	}
	r.o.Log().Info("phase", "kind", kind, "rules", on, "for", r.o.Phase)
	u0, uerr := r.node.Usage()
	w0, werr := runqueueWait(r.node.PID())
	e0 := r.poller.count()
	points, elapsed, err := run(ctx)
	if err != nil {
		return err
	}
	u1, uerr2 := r.node.Usage()
	w1, werr2 := runqueueWait(r.node.PID())
	p := phase{kind: kind, rules: on, points: points, elapsed: elapsed, cpu: -1, runqueueWait: -1, evals: r.poller.since(e0)}
	if uerr == nil && uerr2 == nil {
		p.cpu = u1.CPU - u0.CPU
	}
	if werr == nil && werr2 == nil && w1 >= w0 {
		p.runqueueWait = w1 - w0
	}
	m.phases = append(m.phases, p)
	r.o.Log().Info("phase done", "kind", kind, "rules", on, "points_per_s", p.rate(), "node_cpu_s", p.cpu.Seconds(), "evaluations", len(p.evals))
	if on {
		return r.checkRules(ctx)
	}
	return nil
}

// feedCeilingPointsPerS sizes the time range of the ingest feed's samples:
// they start far enough in the past for the whole run at this rate.
const feedCeilingPointsPerS = 10_000_000

func feedStartMs(o Options, now time.Time) int64 {
	total := time.Duration(2*o.Pairs) * o.Phase
	perSeries := int64(total.Seconds()*feedCeilingPointsPerS)/int64(o.FeedSeries) + int64(o.PointsPerSeriesPerBatch)
	start := now.UnixMilli() - perSeries*1000
	return start - start%1000
}

// setRules installs (on) or removes the rule file and has the node reload.
func (r *run) setRules(ctx context.Context, on bool) error {
	if on {
		if err := os.WriteFile(r.ruleFile, []byte(r.ruleText), 0o644); err != nil {
			return err
		}
	} else if err := os.Remove(r.ruleFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return r.api.reload(ctx)
}

// checkRules checks, at the end of a phase with the rules, that every
// rule is healthy.
func (r *run) checkRules(ctx context.Context) error {
	g, err := r.api.group(ctx, "")
	if err != nil {
		return err
	}
	if len(g.Rules) != r.plan.Rules {
		return fmt.Errorf("/api/v1/rules lists %d rules, want %d", len(g.Rules), r.plan.Rules)
	}
	for _, rule := range g.Rules {
		if rule.Health != "ok" {
			return fmt.Errorf("rule %s %s: health %q: %s", rule.Name, rule.Query, rule.Health, rule.LastError)
		}
	}
	return nil
}

// checkValues checks that every rule's series are there and that one
// recorded value equals its expression.
func (r *run) checkValues(ctx context.Context, m *measurement) error {
	n, err := r.api.scalar(ctx, `count({__name__=~"device:.+:avg1m"})`, time.Now())
	if err != nil {
		return err
	}
	if int(n) != r.plan.OutputSeries() {
		return fmt.Errorf("the rules recorded %v series, want %d", n, r.plan.OutputSeries())
	}
	m.checkedSeries = int(n)
	return r.checkValue(ctx, m)
}

// checkValue compares device 0's newest recorded temperature average with
// its expression evaluated at the sample's time.
func (r *run) checkValue(ctx context.Context, m *measurement) error {
	sel := fmt.Sprintf(`%s{device=%q}`, RecordName(metricNames[0]), Device(0))
	ts, err := r.api.scalar(ctx, "timestamp("+sel+")", time.Now())
	if err != nil {
		return err
	}
	at := time.UnixMilli(int64(ts * 1000))
	got, err := r.api.scalar(ctx, sel, at)
	if err != nil {
		return err
	}
	want, err := r.api.scalar(ctx, r.plan.DeviceExpr(metricNames[0], 0), at)
	if err != nil {
		return err
	}
	if !closeEnough(got, want) {
		return fmt.Errorf("%s at %s recorded %v, its expression gives %v", sel, at.UTC().Format(time.RFC3339Nano), got, want)
	}
	m.checkedValue = true
	return nil
}

// sleep waits d, or fails when ctx ends or the node exits.
func sleep(ctx context.Context, d time.Duration, exited <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-exited:
		return load.ErrNodeExited
	}
}
