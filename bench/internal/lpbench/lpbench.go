// Package lpbench is the line-protocol system benchmark (tribench lp): the
// TSBS cpu-only workload written as InfluxDB line protocol over HTTP to
// `tributary node` running as its own process, then the kdb+ blog query —
// the maximum of one field of one host over one hour, by minute — through
// the Prometheus query API.
//
// A run:
//
//  1. renders every write body before the node starts (about 350 bytes a
//     line, 300 MB for the default day), so that the clients do nothing
//     during the timed phase but send bytes;
//  2. starts the node with its HTTP listener on a free loopback port;
//  3. writes: each of Clients clients owns a contiguous group of hosts and
//     POSTs its lines in time order, BatchLines lines a request, to
//     /write?db=DB&precision=ns over one keep-alive connection; every
//     response must be 204 No Content;
//  4. stops the node with SIGTERM, runs `tributary compact` on its data
//     directory (bytes at rest per point; it must hold every acknowledged
//     point) and starts it again;
//  5. queries: QueryClients clients send WarmupQueries and then Queries
//     GET /api/v1/query_range requests for random hosts and random
//     minute-aligned hours, and every answer is compared with the values
//     computed from the generated data (the timed ones after the clock
//     stops);
//  6. when Options.TSBSBin holds TSBS's tools, runs the five TSBS cpu-only
//     query types again through InfluxQL with TSBS's own query runner
//     (influxql.go);
//  7. prints a table for people, then one JSON line, always the last line
//     of its output.
//
// Missing a target never fails a run; lost points, a failed request or a
// wrong answer do (after the report is printed, when there is one).
//
// Run is not safe to call concurrently with itself on the same Options.Out.
package lpbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/tributarydb/tributary/bench/internal/diskio"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
	"github.com/tributarydb/tributary/bench/workload"
	"github.com/tributarydb/tributary/internal/loopback"
)

// Options configures one run.
type Options struct {
	// Procs says which binary is started and how; Output where the
	// figures go.
	runopt.Procs
	runopt.Output
	// Hosts is the number of TSBS hosts (ten series each).
	Hosts int
	// Span is how much time the data covers, ending at the start of the
	// run's current minute.
	Span time.Duration
	// Interval is the time between two lines of a host; it must divide a
	// minute.
	Interval time.Duration
	// BatchLines is the number of lines per write request.
	BatchLines int
	// Clients is the number of concurrent writers.
	Clients int
	// QueryClients is the number of concurrent query clients.
	QueryClients int
	// WarmupQueries are sent, and checked, before the timed Queries.
	WarmupQueries int
	Queries       int
	// TSBSQueries runs the TSBS cpu-only query types after the kdb+ blog
	// query, each with WarmupQueries and Queries of its own.
	TSBSQueries bool
	// TSBSBin is a directory holding TSBS's tsbs_generate_queries and
	// tsbs_run_queries_influx (make tsbs builds them into bin/tsbs); when
	// they are there, the TSBS query types also run through InfluxQL,
	// InfluxBurnIn and then InfluxQueries timed queries of each. Empty or
	// missing: that phase is skipped.
	TSBSBin       string
	InfluxQueries int
	InfluxBurnIn  int
	// Seed selects the generated data and the queries.
	Seed uint64
	// DB is the db parameter of the writes.
	DB string
	// WALSync is the node's --wal-sync policy.
	WALSync string
	// CallTimeout bounds one HTTP request.
	CallTimeout time.Duration
	// Settle is how long the node runs on after the load before its
	// storage writes and data directory are measured.
	Settle time.Duration
	// Now is the wall clock, which places the data; default time.Now.
	Now func() time.Time
}

// DefaultOptions are the settings: 100 hosts, one day at 10 s
// (8.64 million points), 10,000-line requests from 2 clients, then 2,000
// queries from 2 clients after 200 for warm-up; through InfluxQL, 1,000
// of each TSBS type after 100 of burn-in.
func DefaultOptions() Options {
	return Options{
		Procs:         runopt.Procs{ReadyTimeout: 60 * time.Second, StopTimeout: 5 * time.Minute},
		Output:        runopt.DefaultOutput(),
		Hosts:         100,
		Span:          24 * time.Hour,
		Interval:      10 * time.Second,
		BatchLines:    10_000,
		Clients:       2,
		QueryClients:  2,
		WarmupQueries: 200,
		Queries:       2000,
		TSBSQueries:   true,
		InfluxQueries: 1000,
		InfluxBurnIn:  100,
		Seed:          1,
		DB:            "benchmark",
		WALSync:       "always",
		CallTimeout:   60 * time.Second,
		Settle:        diskio.DefaultSettle,
	}
}

// maxSpan keeps the data inside the node's default raw retention (15 days),
// with a day to spare.
const maxSpan = 14 * 24 * time.Hour

// Validate reports every problem with the options.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
	if o.Hosts <= 0 {
		errs = append(errs, fmt.Errorf("hosts must be positive, got %d", o.Hosts))
	}
	if o.Interval < time.Millisecond || time.Minute%o.Interval != 0 {
		errs = append(errs, fmt.Errorf("interval must be at least 1ms and divide a minute, got %v", o.Interval))
	} else if o.Span < time.Hour+2*time.Minute || o.Span%o.Interval != 0 || o.Span > maxSpan {
		errs = append(errs, fmt.Errorf("span must be a multiple of the interval from 1h2m (room for a one-hour query) to %v (inside raw retention), got %v", maxSpan, o.Span))
	}
	if o.BatchLines <= 0 {
		errs = append(errs, fmt.Errorf("batch lines must be positive, got %d", o.BatchLines))
	}
	if o.Clients <= 0 || o.Clients > o.Hosts {
		errs = append(errs, fmt.Errorf("clients must be between 1 and the number of hosts (%d), got %d", o.Hosts, o.Clients))
	}
	if o.QueryClients <= 0 {
		errs = append(errs, fmt.Errorf("query clients must be positive, got %d", o.QueryClients))
	}
	if o.Queries <= 0 || o.WarmupQueries < 0 {
		errs = append(errs, fmt.Errorf("queries must be positive and warm-up queries not negative, got %d and %d", o.Queries, o.WarmupQueries))
	}
	if o.DB == "" {
		errs = append(errs, errors.New("db is required"))
	}
	if o.WALSync == "" {
		errs = append(errs, errors.New("wal-sync is required"))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
	}
	if o.Settle < 0 {
		errs = append(errs, fmt.Errorf("settle must not be negative, got %v", o.Settle))
	}
	errs = append(errs, o.influxProblems()...)
	return errors.Join(errs...)
}

// newWorkload places the data: Span of rows ending at the start of now's
// minute, so that the last line is at most a minute old and none is in the
// future, and the queried hours are whole minutes.
func newWorkload(o Options, now time.Time) (*workload.TSBSCPU, error) {
	end := now.Truncate(time.Minute)
	return workload.NewTSBSCPU(workload.TSBSCPUOptions{
		Hosts:      o.Hosts,
		Rows:       int(o.Span / o.Interval),
		StartNs:    end.Add(-o.Span).UnixNano(),
		IntervalNs: o.Interval.Nanoseconds(),
		Seed:       o.Seed,
	})
}

// Run runs the benchmark and writes its report to o.Out. The returned error
// is non-nil when the run could not be measured, the node failed a request,
// lost points or answered a query wrongly; missing a target never is.
func Run(ctx context.Context, o Options) (_ Result, err error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("lp options: %w", err)
	}
	logger := o.Log()
	now := o.Now
	if now == nil {
		now = time.Now
	}
	binary, err := nodeproc.FindBinary(o.Binary)
	if err != nil {
		return Result{}, err
	}
	withInflux, err := findInfluxTools(o.TSBSBin)
	if err != nil {
		return Result{}, err
	}
	var influxNote string
	switch {
	case !withInflux && o.TSBSBin != "":
		influxNote = "the InfluxQL figures were not measured: TSBS's tools are not in " + o.TSBSBin + " (make tsbs builds them)"
	case withInflux && o.influxSkip() != "":
		withInflux, influxNote = false, o.influxSkip()
	}
	if influxNote != "" {
		logger.Warn(influxNote)
	}

	m := &measurement{opts: o, machine: report.DetectMachine(), influxNote: influxNote}
	t0 := time.Now()
	gen, err := newWorkload(o, now())
	if err != nil {
		return Result{}, err
	}
	logger.Info("rendering line protocol", "hosts", gen.Hosts(), "lines", gen.Lines(), "points", gen.Points())
	batches := buildBatches(gen, o.Clients, o.BatchLines)
	plan, err := newQueryPlan(gen, o.WarmupQueries+o.Queries, o.Seed)
	if err != nil {
		return Result{}, err
	}
	m.gen, m.generate = gen, time.Since(t0)
	for _, bs := range batches {
		for _, b := range bs {
			m.bodyBytes += int64(len(b.body))
			m.plannedRequests++
		}
	}
	logger.Info("rendered", "bytes", m.bodyBytes, "seconds", m.generate.Seconds())

	wd, err := workdir.Make(o.WorkDir, "tribench-lp-", o.KeepDataDir, logger)
	if err != nil {
		return Result{}, err
	}
	// A failed run keeps its data directory and node logs for a post-mortem.
	defer func() { wd.Finish(err) }()
	ph := phases{ctx: ctx, m: m, binary: binary, wd: wd, logger: logger}
	if err := ph.write(batches); err != nil {
		return Result{}, err
	}
	var types []tsbsType
	if o.TSBSQueries {
		if types, err = newTSBSTypes(gen, o.WarmupQueries+o.Queries, o.Seed); err != nil {
			return Result{}, err
		}
	}
	if err := ph.query(plan, types, withInflux); err != nil {
		return Result{}, err
	}

	res := m.result()
	if err := WriteReport(o.Out, res); err != nil {
		return res, fmt.Errorf("write report: %w", err)
	}
	return res, m.check()
}

// phases runs the node processes of a measurement and records what they
// cost in m.
type phases struct {
	ctx    context.Context
	m      *measurement
	binary string
	wd     *workdir.Dir
	logger *slog.Logger
}

// write starts a node, writes every batch to it over HTTP while sampling
// its usage and the machine's CPU, stops it, and compacts its store.
func (ph phases) write(batches [][]batch) (err error) {
	o, m := ph.m.opts, ph.m
	node, err := ph.startNode("node-write.log")
	if err != nil {
		return err
	}
	defer func() { _, _ = node.stop(o.StopTimeout) }()
	if m.before, err = node.Usage(); err != nil {
		return err
	}
	probe, err := diskio.Begin(node.PID(), ph.wd.DataDir)
	if err != nil {
		return err
	}
	selfBefore, selfErr := nodeproc.SelfCPU()
	machBusy0, machTotal0, machErr := nodeproc.MachineCPU()
	q := url.Values{"db": {o.DB}, "precision": {"ns"}}
	ph.logger.Info("writing", "clients", o.Clients, "requests", m.plannedRequests, "lines_per_request", o.BatchLines)
	m.write, err = runWrites(ph.ctx, writeConfig{
		URL:         "http://" + node.httpAddr + "/write?" + q.Encode(),
		Batches:     batches,
		CallTimeout: o.CallTimeout,
		NodeExited:  node.Exited(),
	})
	after, usageErr := node.Usage()
	selfAfter, selfErr2 := nodeproc.SelfCPU()
	machBusy1, machTotal1, machErr2 := nodeproc.MachineCPU()
	if err != nil {
		return node.failed(fmt.Errorf("write: %w", err))
	}
	if usageErr != nil {
		return usageErr
	}
	m.after = after
	m.selfCPU, m.selfCPUErr = selfAfter-selfBefore, errors.Join(selfErr, selfErr2)
	m.machineBusy, m.machineTotal, m.machineErr = machBusy1-machBusy0, machTotal1-machTotal0, errors.Join(machErr, machErr2)
	ph.logger.Info("write done", "points", m.write.Lines*workload.TSBSCPUFields, "seconds", m.write.Elapsed.Seconds())
	clear(batches) // let the bodies go before the node restarts

	ph.logger.Info("settling before the storage is measured", "wait", o.Settle)
	if err := probe.Settle(ph.ctx, o.Settle, node.Exited()); err != nil {
		return err
	}
	if m.exit, err = node.stop(o.StopTimeout); err != nil {
		return err
	}
	if err := probe.AfterStop(); err != nil {
		return err
	}
	m.disk = probe.Figures()
	m.hwm = node.hwm.Final()
	logf, err := os.OpenFile(node.log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open node log: %w", err)
	}
	ph.logger.Info("compacting", "data_dir", ph.wd.DataDir)
	m.compact, err = nodeproc.Compact(ph.ctx, ph.binary, ph.wd.DataDir, o.Env, logf)
	logf.Close()
	if err != nil {
		return fmt.Errorf("%w (log: %s)", err, node.log)
	}
	return nil
}

// query starts the node again over the compacted store, measures the
// HTTP round trip, runs the query plan and stops the node.
func (ph phases) query(plan *queryPlan, types []tsbsType, withInflux bool) (err error) {
	o, m := ph.m.opts, ph.m
	qnode, err := ph.startNode("node-query.log")
	if err != nil {
		return err
	}
	defer func() { _, _ = qnode.stop(o.StopTimeout) }()
	base := "http://" + qnode.httpAddr
	plan.setBaseURL(base)
	m.pings = runPings(ph.ctx, base+"/ping", o.QueryClients, pings, o.CallTimeout)
	if m.qBefore, err = qnode.Usage(); err != nil {
		return err
	}
	ph.logger.Info("querying", "clients", o.QueryClients, "warmup", o.WarmupQueries, "queries", o.Queries)
	m.query, err = runQueries(ph.ctx, queryConfig{
		Plan:        plan,
		Warmup:      o.WarmupQueries,
		Clients:     o.QueryClients,
		CallTimeout: o.CallTimeout,
		NodeExited:  qnode.Exited(),
	})
	qAfter, usageErr := qnode.Usage()
	if err != nil {
		return qnode.failed(fmt.Errorf("query: %w", err))
	}
	if usageErr != nil {
		return usageErr
	}
	if err := ph.queryTSBS(types, base, qnode.Exited()); err != nil {
		return qnode.failed(err)
	}
	if withInflux {
		if err := ph.queryInfluxQL(base); err != nil {
			return qnode.failed(err)
		}
	}
	m.qAfter = qAfter
	if m.qExit, err = qnode.stop(o.StopTimeout); err != nil {
		return err
	}
	m.qHWM = qnode.hwm.Final()
	return nil
}

// phaseNode is the node of one phase, with its log, its HTTP address and
// the watch on its peak memory.
type phaseNode struct {
	*nodeproc.Node
	log      string
	httpAddr string
	hwm      *hwmWatch
	stopped  bool
}

// startNode starts a node over the work directory's data directory,
// logging to logName in the work directory, and watches its peak memory.
func (ph phases) startNode(logName string) (*phaseNode, error) {
	log := filepath.Join(ph.wd.Path, logName)
	node, httpAddr, err := startNode(ph.ctx, ph.m.opts, ph.binary, ph.wd.DataDir, log, ph.logger)
	if err != nil {
		return nil, err
	}
	return &phaseNode{Node: node, log: log, httpAddr: httpAddr, hwm: watchHWM(node, hwmEvery)}, nil
}

// stop stops the node (see nodeproc.Node.Stop) the first time it is
// called and does nothing after: a phase stops its node where it measures
// the stop and again, deferred, on every way out.
func (n *phaseNode) stop(timeout time.Duration) (nodeproc.Exit, error) {
	if n.stopped {
		return nodeproc.Exit{}, nil
	}
	n.stopped = true
	return n.Node.Stop(timeout)
}

// failed is err followed by the end of the node's log.
func (n *phaseNode) failed(err error) error {
	return fmt.Errorf("%w\nnode log %s ends with:\n%s", err, n.log, n.LogTail())
}

// check is the run's verdict: no acknowledged point lost, every checked
// query answer right.
func (m *measurement) check() error {
	var errs []error
	if acked := m.write.Lines * workload.TSBSCPUFields; m.compact.Points < acked {
		errs = append(errs, fmt.Errorf("node acknowledged %d points but its compacted store holds %d: acknowledged points were lost", acked, m.compact.Points))
	}
	for _, st := range m.tsbs {
		if st.Wrong > 0 {
			errs = append(errs, fmt.Errorf("%d of %d TSBS query answers did not match the written data, e.g.:\n  %s",
				st.Wrong, st.Checked, joinLines(st.Examples)))
		}
	}
	if m.query.Wrong > 0 {
		errs = append(errs, fmt.Errorf("%d of %d query answers did not match the written data, e.g.:\n  %s",
			m.query.Wrong, m.query.Checked, joinLines(m.query.Examples)))
	}
	errs = append(errs, m.influxCheck())
	return errors.Join(errs...)
}

// pings is how many GET /ping requests measure the HTTP round-trip floor
// before the queries.
const pings = 500

// startNode starts `tributary node` with its gRPC and HTTP listeners on free
// loopback ports and returns it and its HTTP address.
func startNode(ctx context.Context, o Options, binary, dataDir, logPath string, logger *slog.Logger) (*nodeproc.Node, string, error) {
	addrs, err := loopback.FreePorts(2)
	if err != nil {
		return nil, "", err
	}
	grpcAddr, httpAddr := addrs[0], addrs[1]
	// NB: no --node-id: `tributary compact` opens the data directory with
	// the default id and refuses a WAL written under another one.
	n, err := nodeproc.Start(ctx, nodeproc.Options{
		Binary:       binary,
		DataDir:      dataDir,
		ListenAddr:   grpcAddr,
		WALSync:      o.WALSync,
		LogLevel:     "info",
		ExtraArgs:    append([]string{"--http-listen", httpAddr}, o.NodeArgs...),
		Env:          o.Env,
		LogPath:      logPath,
		ReadyTimeout: o.ReadyTimeout,
		Logger:       logger,
	})
	return n, httpAddr, err
}

func joinLines(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += "\n  "
		}
		out += s
	}
	return out
}
