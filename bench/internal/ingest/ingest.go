// Package ingest is the ingest system benchmark: it starts `tributary node`
// as its own process on a fresh data directory, writes a generated workload
// to it over loopback gRPC from several concurrent clients, measures the
// node process alone (throughput, CPU time per point, peak memory), stops it
// with SIGTERM, compacts the data directory offline to measure bytes per
// point, and prints a table for people followed by one JSON line for
// machines.
//
// Every Write response is checked: the node must accept every point sent,
// and the compacted store must hold every acknowledged point.
//
// Run is not safe to call concurrently with itself on the same Options.Out.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/diskio"
	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
	"github.com/tributarydb/tributary/bench/workload"
)

// Options configures one ingest benchmark run.
type Options struct {
	// Procs says which binary is started and how; Output where the
	// figures go.
	runopt.Procs
	runopt.Output
	// Workload is "sensor" or "canbus".
	Workload string
	// Series is the number of series (rounded up to whole vehicles of 22
	// channels for canbus).
	Series int
	// BatchPoints is the number of points per Write request.
	BatchPoints int
	// PointsPerSeriesPerBatch is the number of consecutive points of each
	// series in a request; BatchPoints / PointsPerSeriesPerBatch series go
	// in one request.
	PointsPerSeriesPerBatch int
	// Clients is the number of concurrent writers, each with its own gRPC
	// connection.
	Clients int
	// Duration is how long to write.
	Duration time.Duration
	// WALSync is the node's --wal-sync policy.
	WALSync string
	// Interval is the sensor sampling interval (canbus is always 100ms).
	Interval time.Duration
	// Seed selects the generated values.
	Seed uint64
	// CallTimeout bounds one Write call.
	CallTimeout time.Duration
	// Settle is how long the node runs on after the load before its
	// storage writes and data directory are measured.
	Settle time.Duration
}

// DefaultOptions are the benchmark settings: 10,000 series,
// 10,000-point requests of 100 series × 100 points, WAL fsync before ack.
func DefaultOptions() Options {
	return Options{
		Procs:                   runopt.Procs{ReadyTimeout: 60 * time.Second, StopTimeout: 5 * time.Minute},
		Output:                  runopt.DefaultOutput(),
		Workload:                "sensor",
		Series:                  10_000,
		BatchPoints:             10_000,
		PointsPerSeriesPerBatch: 100,
		Clients:                 4,
		Duration:                20 * time.Second,
		WALSync:                 "always",
		Interval:                time.Second,
		Seed:                    1,
		CallTimeout:             60 * time.Second,
		Settle:                  diskio.DefaultSettle,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
	if o.Workload != "sensor" && o.Workload != "canbus" {
		errs = append(errs, fmt.Errorf("workload %q: want sensor or canbus", o.Workload))
	}
	errs = append(errs, load.ShapeProblems(o.Series, o.BatchPoints, o.PointsPerSeriesPerBatch, o.Clients)...)
	if o.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration must be positive, got %v", o.Duration))
	}
	if o.Interval < time.Millisecond {
		errs = append(errs, fmt.Errorf("interval must be at least 1ms, got %v", o.Interval))
	}
	if o.WALSync == "" {
		errs = append(errs, errors.New("wal-sync is required"))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, errors.New("call timeout must be positive"))
	}
	if o.Settle < 0 {
		errs = append(errs, fmt.Errorf("settle must not be negative, got %v", o.Settle))
	}
	return errors.Join(errs...)
}

// ceilingPointsPerS sizes the time range the generated samples cover. The
// samples start this far in the past, at the newest, so that the run ends
// before the wall clock: a run that writes faster than this stops early
// (and says so) rather than writing future samples.
const ceilingPointsPerS = 10_000_000

// newGenerator builds the workload with samples that start far enough in
// the past for Duration at ceilingPointsPerS.
func newGenerator(o Options, now time.Time) (*workload.Generator, error) {
	series, intervalMs := o.Series, o.Interval.Milliseconds()
	if o.Workload == "canbus" {
		intervalMs = workload.CANIntervalMs
		series = (o.Series + 21) / 22 * 22
	}
	pointsPerSeries := int64(o.Duration.Seconds()*ceilingPointsPerS)/int64(series) + int64(o.PointsPerSeriesPerBatch)
	startMs := now.UnixMilli() - pointsPerSeries*intervalMs
	startMs -= startMs % intervalMs
	if o.Workload == "canbus" {
		return workload.NewCANBus(workload.CANBusOptions{Vehicles: series / 22, StartMs: startMs, Seed: o.Seed})
	}
	return workload.NewSensor(workload.SensorOptions{Series: series, StartMs: startMs, IntervalMs: intervalMs, Seed: o.Seed})
}

// Run runs the benchmark and writes its report to o.Out. The returned error
// is non-nil when the run could not be measured or the node lost or
// rejected points; missing a target is never an error.
func Run(ctx context.Context, o Options) (_ Result, err error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("ingest options: %w", err)
	}
	logger := o.Log()
	binary, err := nodeproc.FindBinary(o.Binary)
	if err != nil {
		return Result{}, err
	}

	// Build every request before the node starts, so that nothing but
	// refilling them happens in the timed loop.
	gen, err := newGenerator(o, time.Now())
	if err != nil {
		return Result{}, err
	}
	seriesPerRequest := o.BatchPoints / o.PointsPerSeriesPerBatch
	reqs := gen.Requests(seriesPerRequest, o.PointsPerSeriesPerBatch)
	perClient := load.Split(reqs, o.Clients)
	m := &measurement{opts: o, gen: gen, reqs: reqs, clients: len(perClient), machine: report.DetectMachine()}

	wd, err := workdir.Make(o.WorkDir, "tribench-ingest-", o.KeepDataDir, logger)
	if err != nil {
		return Result{}, err
	}
	// A failed run keeps its data directory and node log for a post-mortem.
	defer func() { wd.Finish(err) }()
	nodeLog := filepath.Join(wd.Path, "node.log")
	node, addr, err := startNode(ctx, o, binary, wd.DataDir, nodeLog, logger)
	if err != nil {
		return Result{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_, _ = node.Stop(o.StopTimeout)
		}
	}()
	probe, err := diskio.Begin(node.PID(), wd.DataDir)
	if err != nil {
		return Result{}, err
	}
	if err := m.load(ctx, node, addr, perClient, nodeLog, logger); err != nil {
		return Result{}, err
	}
	logger.Info("settling before the storage is measured", "wait", o.Settle)
	if err := probe.Settle(ctx, o.Settle, node.Exited()); err != nil {
		return Result{}, err
	}
	stopped = true
	if m.exit, err = node.Stop(o.StopTimeout); err != nil {
		return Result{}, err
	}
	if err := probe.AfterStop(); err != nil {
		return Result{}, err
	}
	m.disk = probe.Figures()
	if m.compact, err = compact(ctx, binary, wd.DataDir, o.Env, nodeLog, logger); err != nil {
		return Result{}, err
	}
	m.dataBytes = dirBytes(wd.DataDir)
	res := m.result()
	if err := WriteReport(o.Out, res); err != nil {
		return res, fmt.Errorf("write report: %w", err)
	}
	if m.compact.Points < m.stats.Points {
		return res, fmt.Errorf("node acknowledged %d points but its compacted store holds %d: acknowledged points were lost", m.stats.Points, m.compact.Points)
	}
	return res, nil
}

// startNode starts the node measured, on a free loopback port, and returns
// it and its gRPC address.
func startNode(ctx context.Context, o Options, binary, dataDir, nodeLog string, logger *slog.Logger) (*nodeproc.Node, string, error) {
	addr, err := nodeproc.FreeLoopbackAddr()
	if err != nil {
		return nil, "", err
	}
	// NB: no --node-id: `tributary compact` opens the data directory with
	// the default id and refuses a WAL written under another one.
	node, err := nodeproc.Start(ctx, nodeproc.Options{
		Binary:       binary,
		DataDir:      dataDir,
		ListenAddr:   addr,
		WALSync:      o.WALSync,
		LogLevel:     "info",
		ExtraArgs:    o.NodeArgs,
		Env:          o.Env,
		LogPath:      nodeLog,
		ReadyTimeout: o.ReadyTimeout,
		Logger:       logger,
	})
	return node, addr, err
}

// load writes the requests for o.Duration over one connection per client,
// sampling the node's usage and this process's CPU around it.
func (m *measurement) load(ctx context.Context, node *nodeproc.Node, addr string, perClient [][]*workload.Request, nodeLog string, logger *slog.Logger) error {
	o := m.opts
	conns, err := load.Dial(addr, m.clients)
	if err != nil {
		return err
	}
	defer conns.Close()
	if m.before, err = node.Usage(); err != nil {
		return err
	}
	selfBefore, selfErr := nodeproc.SelfCPU()
	logger.Info("writing", "workload", m.gen.Name(), "series", m.gen.NumSeries(), "requests", len(m.reqs),
		"points_per_request", m.reqs[0].NumSeries()*o.PointsPerSeriesPerBatch, "clients", m.clients, "duration", o.Duration)
	stats, loadErr := load.Run(ctx, load.Config{
		Clients:         conns.WriteClients(),
		Requests:        perClient,
		PointsPerSeries: o.PointsPerSeriesPerBatch,
		Duration:        o.Duration,
		CallTimeout:     o.CallTimeout,
		NodeExited:      node.Exited(),
	})
	after, usageErr := node.Usage()
	selfAfter, selfErr2 := nodeproc.SelfCPU()
	conns.Close()
	if loadErr != nil {
		return fmt.Errorf("%w\nnode log %s ends with:\n%s", loadErr, nodeLog, node.LogTail())
	}
	if usageErr != nil {
		return usageErr
	}
	m.stats, m.after = stats, after
	m.selfCPU, m.selfCPUErr = selfAfter-selfBefore, errors.Join(selfErr, selfErr2)
	logger.Info("load done", "points", stats.Points, "seconds", stats.Elapsed.Seconds())
	return nil
}

// compact compacts the stopped node's store, its output appended to the
// node's log.
func compact(ctx context.Context, binary, dataDir string, env []string, nodeLog string, logger *slog.Logger) (nodeproc.CompactResult, error) {
	logf, err := os.OpenFile(nodeLog, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nodeproc.CompactResult{}, fmt.Errorf("open node log: %w", err)
	}
	defer logf.Close()
	logger.Info("compacting", "data_dir", dataDir)
	c, err := nodeproc.Compact(ctx, binary, dataDir, env, logf)
	if err != nil {
		return c, fmt.Errorf("%w (log: %s)", err, nodeLog)
	}
	return c, nil
}

// dirBytes is the total size of the files under dir, or -1 if it cannot be
// walked.
func dirBytes(dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		return -1
	}
	return n
}

// describeArgs renders the run's settings for the table heading.
func describeArgs(r Result) string {
	parts := []string{
		fmt.Sprintf("%s workload", r.Workload),
		report.Int(int64(r.Series)) + " series",
		fmt.Sprintf("%s-point requests (%d series × %d points)", report.Int(int64(r.BatchPoints)), r.SeriesPerBatch, r.PointsPerSeriesPerBatch),
		fmt.Sprintf("%d clients", r.Clients),
		"--wal-sync " + r.WALSync,
	}
	return strings.Join(parts, ", ")
}
