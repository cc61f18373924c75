// Package restart is the restart system benchmark: how long a storage node
// takes to serve again after a crash that left a large write-ahead log, and
// how much memory replaying it takes.
//
// It starts `tributary node` on a fresh data directory with flags that keep
// every acknowledged write in the head, and so in the WAL (nothing is
// flushed to RocksDB), writes the sensor workload to it over loopback gRPC
// until the WAL's segment files hold the target size, and SIGKILLs it. Then
// it restarts the node twice, timing each start from the process's start to
// its ready line and reading its peak RSS (VmHWM) at that moment:
//
//	a. with the same big-head flags, so the whole WAL is replayed into memory;
//	b. after SIGKILLing a, with the default flags, so the head is bounded and
//	   the replay flushes to RocksDB as it goes.
//
// Once b is ready, raw queries read every series back, and the run fails if
// any acknowledged point is missing. It prints a table for people and then
// one JSON line for machines; a missed target never fails the run.
//
// Run is not safe to call concurrently with itself on the same Options.Out.
package restart

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

	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/tick"
	"github.com/tributarydb/tributary/bench/internal/workdir"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// BigHeadArgs keep every acknowledged point in the node's head, and so in
// its WAL: a head bound (8 GiB) the load never reaches, and head chunks of
// 65,536 samples (the most a node allows), more than a series gets in the
// one clock hour of samples written, so no chunk closes by size or at an
// hour boundary. Chunks also close after ten minutes of wall time, which
// Options.MaxLoad stays under.
var BigHeadArgs = []string{"--head-max-bytes", "8589934592", "--head-chunk-samples", "65536"}

// maxHeadChunkSamples is the --head-chunk-samples of BigHeadArgs.
const maxHeadChunkSamples = 65536

// maxLoadLimit keeps the load shorter than the node's ten-minute chunk age,
// past which it would close head chunks and flush them out of the WAL.
const maxLoadLimit = 9 * time.Minute

// Options configures one restart benchmark run.
type Options struct {
	// Procs says which binary is started and how; Output where the
	// figures go.
	runopt.Procs
	runopt.Output
	// WALBytes is the WAL size to write before the crash: the load stops
	// once the WAL's segment files hold at least this much.
	WALBytes int64
	// Series is the number of sensor series.
	Series int
	// BatchPoints is the number of points per Write request.
	BatchPoints int
	// PointsPerSeriesPerBatch is the number of consecutive points of each
	// series in a request.
	PointsPerSeriesPerBatch int
	// Clients is the number of concurrent writers, each with its own gRPC
	// connection.
	Clients int
	// Interval is the sampling interval. A series gets 1h / Interval
	// samples at most, all in the clock hour before the run started.
	Interval time.Duration
	// Seed selects the generated values.
	Seed uint64
	// MaxLoad bounds the load; reaching it before WALBytes fails the run.
	MaxLoad time.Duration
	// CallTimeout bounds one Write or Status call.
	CallTimeout time.Duration
	// QueryTimeout bounds each verification query (one metric name).
	QueryTimeout time.Duration
	// Now is the clock that picks the hour of samples. Default time.Now.
	Now func() time.Time
}

// DefaultWALMiB is the WAL a default run crashes with, and the size the
// target is set for. A node writes compressed WAL records (format 2, about
// 0.35 bytes a sensor point), and a restart replays only the segments not
// yet flushed to its store: at default flags at most --store-flush-wal-bytes
// (8 MiB) of them plus those behind the head's open chunks. 32 MiB held
// entirely in the head, 94 M points, is four times that bound. (The target
// was first set for 256 MiB of raw format 1 records, 25 M points; 256 MiB
// of format 2 would be about 750 M points, which no flag setting but a head
// of several GiB lets a node accumulate, and which 10,000 series cannot
// reach in the hour this benchmark writes.)
const DefaultWALMiB = 32

// DefaultOptions are the settings: a 32 MiB WAL of 30,000 sensor
// series at 1 s, written in 10,000-point requests with fsync before ack.
func DefaultOptions() Options {
	return Options{
		Procs:                   runopt.Procs{ReadyTimeout: 10 * time.Minute, StopTimeout: 5 * time.Minute},
		Output:                  runopt.DefaultOutput(),
		WALBytes:                DefaultWALMiB << 20,
		Series:                  30_000,
		BatchPoints:             10_000,
		PointsPerSeriesPerBatch: 100,
		Clients:                 4,
		Interval:                time.Second,
		Seed:                    1,
		MaxLoad:                 8 * time.Minute,
		CallTimeout:             60 * time.Second,
		QueryTimeout:            10 * time.Minute,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
	if o.WALBytes <= 0 {
		errs = append(errs, fmt.Errorf("wal size must be positive, got %d bytes", o.WALBytes))
	}
	errs = append(errs, load.ShapeProblems(o.Series, o.BatchPoints, o.PointsPerSeriesPerBatch, o.Clients)...)
	switch {
	case o.Interval < time.Millisecond || o.Interval%time.Millisecond != 0:
		errs = append(errs, fmt.Errorf("interval must be a whole number of milliseconds, at least 1ms, got %v", o.Interval))
	case time.Hour/o.Interval > maxHeadChunkSamples:
		errs = append(errs, fmt.Errorf("at an interval of %v a series gets %d samples in an hour, more than a head chunk holds (%d): chunks would close and flush; use %v or longer",
			o.Interval, time.Hour/o.Interval, maxHeadChunkSamples, time.Hour/maxHeadChunkSamples+time.Millisecond))
	case o.PointsPerSeriesPerBatch > 0 && time.Duration(o.PointsPerSeriesPerBatch)*o.Interval > time.Hour:
		errs = append(errs, fmt.Errorf("%d points per series per batch at %v span more than the hour written", o.PointsPerSeriesPerBatch, o.Interval))
	}
	if o.MaxLoad <= 0 || o.MaxLoad > maxLoadLimit {
		errs = append(errs, fmt.Errorf("max load must be positive and at most %v (the node closes head chunks after 10 minutes, flushing them out of the WAL), got %v", maxLoadLimit, o.MaxLoad))
	}
	if o.CallTimeout <= 0 || o.QueryTimeout <= 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
	}
	return errors.Join(errs...)
}

// phase is one of the node's three lives in a run.
type phase int

const (
	phaseLoad    phase = iota // written to until the WAL is big enough, then SIGKILLed
	phaseBigHead              // restart a: same flags, replay into memory, SIGKILLed once ready
	phaseDefault              // restart b: default head flags, replay flushes as it goes
)

func (p phase) logName() string {
	return [...]string{"node-load.log", "node-restart-big-head.log", "node-restart-default.log"}[p]
}

// nodeOptions is how the node is started in phase p: the load and restart a
// with BigHeadArgs, restart b with the node's default head settings; all
// with fsync before every acknowledgement.
//
// NB: no --node-id, so that the data directory keeps the default one.
func (o Options) nodeOptions(p phase, binary, dataDir, addr, logPath string, logger *slog.Logger) nodeproc.Options {
	var args []string
	if p != phaseDefault {
		args = append(args, BigHeadArgs...)
	}
	return nodeproc.Options{
		Binary:       binary,
		DataDir:      dataDir,
		ListenAddr:   addr,
		WALSync:      "always",
		LogLevel:     "info",
		ExtraArgs:    append(args, o.NodeArgs...),
		Env:          o.Env,
		LogPath:      logPath,
		ReadyTimeout: o.ReadyTimeout,
		Logger:       logger,
	}
}

// hourMs is one clock hour in milliseconds.
const hourMs = int64(time.Hour / time.Millisecond)

// progressEvery is how often the load reports the WAL's size.
const progressEvery = 2 * time.Second

// Run runs the benchmark and writes its report to o.Out. The returned error
// is non-nil when the run could not be measured or the node lost or
// rejected acknowledged points; missing a target is never an error.
func Run(ctx context.Context, o Options) (_ Result, err error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("restart options: %w", err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	logger := o.Log()
	binary, err := nodeproc.FindBinary(o.Binary)
	if err != nil {
		return Result{}, err
	}

	// Every sample falls in the last whole clock hour: in the past, so the
	// node accepts it, and within one hour, so no head chunk closes at an
	// hour boundary.
	nowMs := o.Now().UnixMilli()
	startMs := nowMs - nowMs%hourMs - hourMs
	gen, err := workload.NewSensor(workload.SensorOptions{Series: o.Series, StartMs: startMs, IntervalMs: o.Interval.Milliseconds(), Seed: o.Seed})
	if err != nil {
		return Result{}, err
	}
	reqs := gen.Requests(o.BatchPoints/o.PointsPerSeriesPerBatch, o.PointsPerSeriesPerBatch)
	perClient := load.Split(reqs, o.Clients)
	clients := len(perClient)

	wd, err := workdir.Make(o.WorkDir, "tribench-restart-", o.KeepDataDir, logger)
	if err != nil {
		return Result{}, err
	}
	// A failed run keeps its data directory and node logs for a post-mortem.
	defer func() { wd.Finish(err) }()
	r := &runner{o: o, logger: logger, binary: binary, workDir: wd.Path, dataDir: wd.DataDir}
	// On a failure path, SIGKILL whatever node is left: that keeps its data
	// directory as the failure left it.
	defer func() {
		if r.live != nil {
			_, _ = r.live.Kill()
		}
	}()

	m := measurement{opts: o, gen: gen, clients: clients, machine: report.DetectMachine()}
	limitMs := startMs + hourMs - 1
	if err := r.load(ctx, perClient, limitMs, &m); err != nil {
		return Result{}, err
	}
	exp := expect(gen, reqs, o.PointsPerSeriesPerBatch, limitMs)
	if exp.Points != m.stats.Points {
		return Result{}, fmt.Errorf("BUG: the requests account for %d points but the node acknowledged %d", exp.Points, m.stats.Points)
	}

	logger.Info("restart a: the same big-head flags; the whole WAL is replayed into memory")
	if m.bigHead, err = r.restart(ctx, phaseBigHead); err != nil {
		return Result{}, err
	}
	if _, err := r.kill(); err != nil {
		return Result{}, err
	}
	logger.Info("restart b: default flags; the replay flushes to RocksDB as it goes")
	if m.dflt, err = r.restart(ctx, phaseDefault); err != nil {
		return Result{}, err
	}
	logger.Info("verifying every acknowledged point", "points", exp.Points, "series", len(exp.Counts))
	if m.verify, err = r.verify(ctx, exp); err != nil {
		return Result{}, err
	}
	node := r.live
	r.live = nil
	if _, err := node.Stop(o.StopTimeout); err != nil {
		return Result{}, err
	}

	res := m.result()
	if err := WriteReport(o.Out, res); err != nil {
		return res, fmt.Errorf("write report: %w", err)
	}
	if m.verify.NumProblems > 0 {
		return res, fmt.Errorf("acknowledged points were lost or changed across the restarts: the node acknowledged %s points in %s series and answered %s; %d series differ, e.g.\n  %s\n(node logs in %s)",
			report.Int(exp.Points), report.Int(int64(len(exp.Counts))), report.Int(m.verify.Points), m.verify.NumProblems,
			strings.Join(m.verify.Problems, "\n  "), wd.Path)
	}
	return res, nil
}

// runner holds what the phases of one run share.
type runner struct {
	o       Options
	logger  *slog.Logger
	binary  string
	workDir string
	dataDir string
	// live is the node process currently running, if any, and addr its
	// gRPC address.
	live *nodeproc.Node
	addr string
}

func (r *runner) start(ctx context.Context, p phase) (*nodeproc.Node, error) {
	addr, err := nodeproc.FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	node, err := nodeproc.Start(ctx, r.o.nodeOptions(p, r.binary, r.dataDir, addr, filepath.Join(r.workDir, p.logName()), r.logger))
	if err != nil {
		return nil, err
	}
	r.live, r.addr = node, addr
	return node, nil
}

func (r *runner) kill() (nodeproc.Exit, error) {
	node := r.live
	r.live = nil
	return node.Kill()
}

// load starts the node with the big-head flags, writes until its WAL holds
// o.WALBytes, notes what the node holds, SIGKILLs it and measures the WAL
// it left.
func (r *runner) load(ctx context.Context, perClient [][]*workload.Request, limitMs int64, m *measurement) error {
	o := r.o
	node, err := r.start(ctx, phaseLoad)
	if err != nil {
		return err
	}
	conns, err := load.Dial(r.addr, len(perClient))
	if err != nil {
		return err
	}
	defer conns.Close()

	r.logger.Info("writing until the WAL holds the target", "target_mib", report.Round(float64(o.WALBytes)/mib, 1),
		"series", m.gen.NumSeries(), "clients", len(perClient), "samples_from", time.UnixMilli(m.gen.StartMs()).UTC().Format(time.RFC3339))
	loadCtx, cancelLoad := context.WithCancelCause(ctx)
	defer cancelLoad(nil)
	stop := make(chan struct{})
	var (
		wg      sync.WaitGroup
		reached bool // written by the watcher; read after wg.Wait
	)
	wg.Go(func() {
		reached = r.watchWAL(loadCtx, cancelLoad, stop)
	})
	stats, loadErr := load.Run(loadCtx, load.Config{
		Clients:         conns.WriteClients(),
		Requests:        perClient,
		PointsPerSeries: o.PointsPerSeriesPerBatch,
		Duration:        o.MaxLoad,
		CallTimeout:     o.CallTimeout,
		Now:             func() time.Time { return time.UnixMilli(limitMs) },
		Stop:            stop,
		NodeExited:      node.Exited(),
	})
	watchErr := context.Cause(loadCtx)
	cancelLoad(nil)
	wg.Wait()
	if loadErr != nil {
		return fmt.Errorf("%w\nnode log %s ends with:\n%s", loadErr, filepath.Join(r.workDir, phaseLoad.logName()), node.LogTail())
	}
	if watchErr != nil {
		return watchErr
	}
	m.stats = stats
	if !reached {
		ws, _ := measureWAL(walDir(r.dataDir))
		if stats.CaughtUp {
			return fmt.Errorf("the hour of samples ran out with the WAL at %.1f of %.1f MiB (%s points in %s series): raise --series",
				float64(ws.Bytes)/mib, float64(o.WALBytes)/mib, report.Int(stats.Points), report.Int(int64(m.gen.NumSeries())))
		}
		return fmt.Errorf("the WAL reached only %.1f of %.1f MiB in %v (%s points): the node wrote too slowly for --max-load",
			float64(ws.Bytes)/mib, float64(o.WALBytes)/mib, o.MaxLoad, report.Int(stats.Points))
	}
	r.logger.Info("load done", "points", stats.Points, "seconds", report.Round(stats.Elapsed.Seconds(), 2))

	// What the node holds just before the crash: every acknowledged point
	// should still be in its head (so in the WAL), none flushed.
	m.headSamplesAtKill = -1
	callCtx, cancel := context.WithTimeout(ctx, o.CallTimeout)
	st, err := tributaryv1.NewQueryServiceClient(conns[0]).Status(callCtx, &tributaryv1.StatusRequest{})
	cancel()
	if err != nil {
		r.logger.Warn("node status before the crash", "err", err)
	} else {
		m.headSamplesAtKill = st.GetHeadSamples()
	}
	if _, err := r.kill(); err != nil {
		return err
	}
	if m.wal, err = measureWAL(walDir(r.dataDir)); err != nil {
		return err
	}
	r.logger.Info("node killed (SIGKILL)", "wal_mib", report.Round(float64(m.wal.Bytes)/mib, 1), "wal_segments", m.wal.Segments, "points", stats.Points)
	return nil
}

// watchWAL measures the WAL until it holds o.WALBytes, then closes stop and
// reports true; it reports false if ctx ends first. It logs progress, and
// cancels the load if the WAL cannot be measured.
func (r *runner) watchWAL(ctx context.Context, cancel context.CancelCauseFunc, stop chan<- struct{}) bool {
	t0 := time.Now()
	lastLog := t0
	// NB: often, so the WAL overshoots the target by little: a node can
	// write 50 MiB/s of WAL.
	full := false
	tick.Every(ctx, 20*time.Millisecond, func(time.Time) bool {
		ws, err := measureWAL(walDir(r.dataDir))
		if err != nil {
			cancel(err)
			return false
		}
		if ws.Bytes >= r.o.WALBytes {
			close(stop)
			full = true
			return false
		}
		if time.Since(lastLog) >= progressEvery {
			lastLog = time.Now()
			secs := time.Since(t0).Seconds()
			r.logger.Info("load progress", "wal_mib", report.Round(float64(ws.Bytes)/mib, 1),
				"target_mib", report.Round(float64(r.o.WALBytes)/mib, 1), "wal_mib_per_s", report.Round(float64(ws.Bytes)/mib/secs, 1),
				"segments", ws.Segments, "elapsed_s", report.Round(secs, 1))
		}
		return true
	})
	return full
}

// restart starts the node in phase p and measures its start: time to ready,
// its CPU time and peak RSS by then, and how busy the rest of the machine
// was meanwhile. The node is left running as r.live.
func (r *runner) restart(ctx context.Context, p phase) (restartFigures, error) {
	busy0, _, cpuErr := nodeproc.MachineCPU()
	t0 := time.Now()
	node, err := r.start(ctx, p)
	if err != nil {
		return restartFigures{}, err
	}
	u, err := node.Usage()
	if err != nil {
		return restartFigures{}, err
	}
	busy1, _, cpuErr1 := nodeproc.MachineCPU()
	wall := time.Since(t0)
	f := restartFigures{
		Ready:        node.ReadyAfter(),
		CPU:          u.CPU,
		PeakRSSBytes: u.HWMBytes,
		OtherCores:   math.NaN(),
	}
	if cpuErr == nil && cpuErr1 == nil && wall > 0 {
		// The machine's busy time includes the node's own and this
		// process's (idle while it waits); the rest is other work.
		f.OtherCores = max(0, (busy1-busy0-u.CPU).Seconds()/wall.Seconds())
	}
	if log, err := os.ReadFile(filepath.Join(r.workDir, p.logName())); err == nil {
		f.Opened, f.OpenedOK = parseNodeOpened(log)
	}
	r.logger.Info("restarted", "ready_s", report.Round(f.Ready.Seconds(), 3), "peak_rss_mib", report.Round(float64(f.PeakRSSBytes)/mib, 1),
		"cpu_s", report.Round(f.CPU.Seconds(), 2), "replayed_points", f.Opened.ReplayedPoints)
	return f, nil
}

// verify reads every series back from the running node.
func (r *runner) verify(ctx context.Context, e expectation) (verification, error) {
	conn, err := nodeclient.Dial(r.addr)
	if err != nil {
		return verification{}, err
	}
	defer conn.Close()
	v, err := verify(ctx, tributaryv1.NewQueryServiceClient(conn), e, r.o.QueryTimeout)
	if err != nil {
		return v, fmt.Errorf("verify after restart b: %w", err)
	}
	r.logger.Info("verified", "points", v.Points, "series", v.Series, "problem_series", v.NumProblems, "seconds", report.Round(v.Elapsed.Seconds(), 2))
	return v, nil
}
