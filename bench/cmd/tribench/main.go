// Command tribench runs Tributary's system benchmarks and the demo
// workload against a real node.
//
//	tribench ingest --binary bin/tributary [flags]   start a node, measure gRPC ingest
//	tribench restart --binary bin/tributary [flags]  crash a node with a big WAL, time its restarts
//	tribench demo --addr 127.0.0.1:7070 [flags]      write CAN-bus data, run example queries
//	tribench rollup [flags]                          5 years of minutely data, rollup queries
//	tribench lp --binary bin/tributary [flags]       TSBS cpu-only over HTTP line protocol, then PromQL
//	tribench fanout --binary bin/tributary [flags]   3 coordinators + 10 edges: fan-out query latency, failover, registrations
//	tribench replication --binary bin/tributary [flags]  an edge shipping to coordinators: lag, bytes/point, drain, CPU
//	tribench load --targets e1:7070,e2:7070 [flags]     continuous sensor writes to running edges
//	tribench telemetry --binary bin/tributary [flags]   ingest with telemetry off, metrics on, metrics + traces on
//	tribench iotdb --binary bin/tributary [flags]       IoTDB-benchmark style write-only and read-write sweep over clients
//	tribench tsbs-cpu --binary bin/tributary [flags]    TSBS cpu-only ingest and the kdb+ blog's queries
//	tribench canbus --binary bin/tributary [flags]      22 CAN channels at 10 Hz: one series per line, then multi-field rows
//	tribench fleet --binary bin/tributary [flags]       N simulated edges shipping to 3 coordinators: lag, intake, catalog load
//	tribench heal --binary bin/tributary [flags]        a coordinator loses its disk under load: ack pause, replacement, re-replication
//	tribench catalog [flags]                             fill an in-process catalog with 1 M series: bytes per series, snapshot size, restore time
//	tribench pi [flags]                                  the node image under --cpus 1 --memory 512m: ingest, queries, memory
//	tribench arm64-smoke --binary dist/tributary-linux-arm64  the arm64 binary under qemu: write, query back, compare
//	tribench hostile --binary bin/tributary [flags]     hostile clients against a TLS coordinator and node: memory, writer p99, refusals
//	tribench rules --binary bin/tributary [flags]       1,000 recording rules on one CPU under an ingest load: evaluation p99, ingest lost
//
// It turns flags into Options and runs them; this is the only place that
// exits the process.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tributarydb/tributary/bench/internal/demo"
	"github.com/tributarydb/tributary/bench/internal/edgebench"
	"github.com/tributarydb/tributary/bench/internal/ingest"
	"github.com/tributarydb/tributary/bench/internal/lpbench"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/restart"
	"github.com/tributarydb/tributary/bench/internal/rollupbench"
	"github.com/tributarydb/tributary/bench/internal/runopt"
)

const usage = `usage: tribench <workload> [flags]

workloads:
  ingest   start 'tributary node' as its own process, write to it over loopback
           gRPC, and report points/s, CPU-s per million points, peak RSS and
           bytes/point (a table, then one JSON line)
  restart  fill a node's WAL (256 MiB by default), kill -9 it, restart it with a
           big head and with the default flags, and report the time to ready
           and peak RSS of each and check every acknowledged point is back
           (a table, then one JSON line)
  demo     write minutes of CAN-bus data to a running node and run example queries
  rollup   load 100 series x 1 point/min x 5 years into an in-process node and
           time rollup-backed downsampling queries, then 1 month..5 years at
           30m, 12h and 1d average, cold (a fresh process) and warm (a table,
           one JSON line, rollup-*.json and a plot)
  lp       start 'tributary node', write a day of the TSBS cpu-only workload as
           InfluxDB line protocol over HTTP, compact, restart, and time the
           1-hour max-by-minute PromQL query through /api/v1/query_range,
           checking every answer (a table, then one JSON line)
  lowrate  start 'tributary node', write 8 series x 1 point per second in one
           request per second for 10 minutes with the WAL fsynced before each
           ack, and compare the bytes the node sent to storage with one 4 KiB
           page per fsync (a table, then one JSON line)
  uplink   for lag budgets of 5s, 30s, 60s and 300s (and the default), start
           a coordinator and 4 edge nodes replicating to it, set the fleet's
           lag budget, write 8 series x 1 point per second to each edge for
           11 minutes, and report the bytes shipped per point (a table, then
           one JSON line)
  fanout   start 3 coordinators and 10 edge nodes as processes, time fan-out
           queries, kill -9 the raft leader repeatedly under writes, and
           count catalog series registrations/s; with --edges above 10 the
           rest are simulated in-process: edges asked per one-series query,
           listings, new-series visibility (a table, then one JSON line)
  replication
           start coordinators and an edge node, write at a sustained rate and
           measure replication lag, bytes shipped per point, backlog drain
           after an outage and the edge's extra CPU (a table, then one JSON line)
  telemetry
           run the ingest workload against a node with telemetry off
           (--metrics=false), with metrics on, and with metrics and traces
           exported over OTLP to an in-process sink, alternating, and report
           the throughput each costs (a table, then one JSON line)
  fleet    start 3 coordinators and ship from 10, 100 and 1,000 simulated
           edges (the real replicator over in-memory WAL segments) and report
           replication lag, intake, catalog load and coordinator CPU and RSS
           per fleet size (a table, one JSON line, fleet.json and plots)
  catalog  fill an in-process coordinator catalog with 1 M series (100 per
           edge) through its commands, snapshot it and restore the snapshot;
           report heap bytes per series, snapshot MiB and the snapshot and
           restore times (a table, then one JSON line)
  heal     start 3 coordinators and 10 edges as processes, load history, then
           under 4,000 points/s kill -9 a coordinator, delete its data
           directory and start it again with --rejoin; report the longest
           acknowledgement pause, the time until every edge is back at RF
           healthy replicas and until its whole history is, the
           re-replication rate, and every replica checked alone (a table,
           then one JSON line)
  pi       run the node's FROM-scratch image in a container limited to
           --cpus 1 --memory 512m, write the sensor workload, time a query
           mix, and report points/s, query latency, peak memory and OOM kills
           (a table, one JSON line, pi.json); skipped with a
           message when docker is unavailable
  arm64-smoke
           start the arm64 static binary as a node under qemu-user, write a
           small sensor workload, read every series back and compare
           (correctness only)
  iotdb    after IoTDB-benchmark: groups x devices x sensors, each client
           bound to a device, half the writes out of order; write-only and a
           50/50 read-write mix with five read types, over a sweep of client
           counts; throughput and avg/p50/p90/p95/p99/p999/max latency per
           operation (a table, one JSON line, iotdb-*.json and plots)
  tsbs-cpu TSBS cpu-only (hosts x 10 tags x 10 fields every 10 s) as line
           protocol over HTTP, then the kdb+ blog's max-by-minute queries,
           lastpoint and max of all fields; rows/s, queries/s and latency
  canbus   after the Warp 10 Pi benchmark: 22 CAN-bus channels at 10 Hz as
           line protocol, one series per line and then multi-field rows
  hostile  start a coordinator and a node with TLS (peer and edge CA) and
           tokens, write 4,000 points/s to the node, and attack both at once:
           unauthenticated 64 MB writes, 200 MB first messages on the cluster
           listener and the intake, 20 MB lines of 2 M fields with a valid
           token, 10,000 half-open TLS handshakes; report every process's
           resident growth, the writer's p99 and what was refused (a table,
           then one JSON line)
  rules    start 'tributary node' on one CPU (taskset) with 10,000 live series
           at 1 Hz and an ingest feed written as fast as it takes it, and
           alternate phases without and with 1,000 recording rules evaluated
           every 15 s; report the group's evaluation p50/p99/max, the ingest
           throughput lost with the rules and the node's peak memory,
           checking the recorded series (a table, then one JSON line)
  load     write the sensor workload in real time to running edge nodes
           (--targets host:port,...) until interrupted, logging acknowledged
           points; the load generator of the docker-compose cluster

Result files (JSON and plots) go to bench/results/local/, which git
ignores; --results (--results-dir for fleet, pi and arm64-smoke)
bench/results updates the published ones, and '' writes none.

'tribench <workload> -h' lists a workload's flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	w, ok := workloads[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tribench: unknown workload %q\n\n%s", args[0], usage)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	err := w(ctx, args[1:], stdout, stderr, logger)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "tribench %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// workload runs one workload with its command-line arguments (those after
// its name).
type workload func(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error

// workloads are the workloads by name.
var workloads = map[string]workload{
	"ingest":      runIngest,
	"restart":     runRestart,
	"demo":        runDemo,
	"lp":          runLP,
	"lowrate":     runLowRate,
	"fanout":      runFanout,
	"replication": runReplication,
	"telemetry":   runTelemetry,
	"iotdb":       runIoTDB,
	"tsbs-cpu":    runTSBSCPU,
	"canbus":      runCANBus,
	"fleet":       runFleet,
	"uplink":      runUplink,
	"heal":        runHeal,
	"catalog":     runCatalog,
	"pi":          runPi,
	"arm64-smoke": runARM64Smoke,
	"rules":       runRulesBench,
	"hostile":     runHostile,
	"rollup": func(ctx context.Context, args []string, stdout, stderr io.Writer, _ *slog.Logger) error {
		return runRollup(ctx, args, stdout, stderr)
	},
	// The child process of rollup that times one cold query.
	"rollup-cold": func(ctx context.Context, args []string, stdout, stderr io.Writer, _ *slog.Logger) error {
		return runRollupCold(ctx, args, stdout, stderr)
	},
	"load": func(ctx context.Context, args []string, _, stderr io.Writer, logger *slog.Logger) error {
		return runLoad(ctx, args, stderr, logger)
	},
	// The child process of hostile.
	"hostile-attacker": func(ctx context.Context, _ []string, _, _ io.Writer, _ *slog.Logger) error {
		return runHostileAttacker(ctx)
	},
}

// errUsage marks a command-line mistake, already reported by the flag set.
var errUsage = errors.New("usage")

// Where the result files go. The published figures (docs/benchmarks.md)
// are committed under publishedResultsDir; a run writes to the untracked
// defaultResultsDir unless told to update them (make bench
// BENCH_RESULTS=bench/results, or the flag).
const (
	defaultResultsDir   = "bench/results/local"
	publishedResultsDir = "bench/results"
)

// resultsDirFlag defines the flag name (--results or --results-dir) of the
// directory a workload writes what to: defaultResultsDir by default,
// publishedResultsDir to replace the published figures, empty for none.
func resultsDirFlag(fs *flag.FlagSet, p *string, name, what string) {
	fs.StringVar(p, name, defaultResultsDir, "`dir`ectory for "+what+" (empty: none; "+publishedResultsDir+": the published figures)")
}

// newFlagSet is the flag set of one workload: it reports mistakes and
// -h on stderr and returns them to the caller (parse) instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		fs.Usage()
		return errUsage
	}
	return nil
}

// procFlags defines the flags of p (how the workload starts tributary
// processes; role says as what): always --binary and --work-dir, and
// those of with ("keep", "node-arg", "coordinator-arg", "ready-timeout",
// "stop-timeout"); their defaults are p's.
func procFlags(fs *flag.FlagSet, p *runopt.Procs, role string, with ...string) {
	fs.StringVar(&p.Binary, "binary", cmp.Or(p.Binary, "bin/tributary"), "tributary `executable` to start as "+role)
	fs.StringVar(&p.WorkDir, "work-dir", "", "`dir`ectory for the temporary work directory (default: the system temp dir)")
	for _, name := range with {
		switch name {
		case "keep":
			fs.BoolVar(&p.KeepDataDir, name, false, "keep the data directories and logs after the run")
		case "node-arg":
			fs.Var((*stringList)(&p.NodeArgs), name, "extra `argument` for every 'tributary node' start (repeatable)")
		case "coordinator-arg":
			fs.Var((*stringList)(&p.CoordinatorArgs), name, "extra `argument` for every 'tributary coordinator' start (repeatable)")
		case "ready-timeout":
			fs.DurationVar(&p.ReadyTimeout, name, p.ReadyTimeout, "how long each process start may take")
		case "stop-timeout":
			fs.DurationVar(&p.StopTimeout, name, p.StopTimeout, "how long each process may take to exit after SIGTERM")
		default:
			panic("procFlags: no flag " + name)
		}
	}
}

// parseRun defines --commit, parses args and fills out: the commit, the
// output and the logger of the run.
func parseRun(ctx context.Context, fs *flag.FlagSet, args []string, out *runopt.Output, stdout io.Writer, logger *slog.Logger) error {
	commit := commitFlag(ctx, fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	out.Commit, out.Out, out.Logger = commit(), stdout, logger
	return nil
}

// parseAndRun is parseRun, then the benchmark run on the options *o the
// flags filled (out is their Output); the benchmark prints its own
// report, so its result is dropped.
func parseAndRun[O, R any](ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer, logger *slog.Logger,
	o *O, out *runopt.Output, run func(context.Context, O) (R, error)) error {
	if err := parseRun(ctx, fs, args, out, stdout, logger); err != nil {
		return err
	}
	_, err := run(ctx, *o)
	return err
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func runIngest(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := ingest.DefaultOptions()
	fs := newFlagSet("tribench ingest", stderr)
	procFlags(fs, &o.Procs, "the node", "keep", "node-arg", "ready-timeout", "stop-timeout")
	ingestFlags(fs, &o)
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long to write")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "sensor sampling interval (1s or 100ms; canbus is always 100ms)")
	settleFlag(fs, &o.Settle)
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, ingest.Run)
}

func runRestart(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := restart.DefaultOptions()
	fs := newFlagSet("tribench restart", stderr)
	procFlags(fs, &o.Procs, "the node", "keep", "node-arg", "ready-timeout", "stop-timeout")
	walMiB := fs.Int64("wal-mib", o.WALBytes>>20, "write until the node's WAL segments hold this many `MiB`, then kill -9 it")
	fs.IntVar(&o.Series, "series", o.Series, "number of sensor series (each gets at most 1h / interval points)")
	writeLoadFlags(fs, &o.BatchPoints, &o.PointsPerSeriesPerBatch, &o.Clients, &o.Seed)
	fs.DurationVar(&o.Interval, "interval", o.Interval, "sensor sampling interval")
	fs.DurationVar(&o.MaxLoad, "max-load", o.MaxLoad, "give up if the WAL is not full after this long (at most 9m: the node flushes chunks open for 10m)")
	fs.DurationVar(&o.QueryTimeout, "query-timeout", o.QueryTimeout, "how long each verification query (one metric name) may take")
	if err := parseRun(ctx, fs, args, &o.Output, stdout, logger); err != nil {
		return err
	}
	o.WALBytes = *walMiB << 20
	_, err := restart.Run(ctx, o)
	return err
}

func runLP(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := lpbench.DefaultOptions()
	fs := newFlagSet("tribench lp", stderr)
	procFlags(fs, &o.Procs, "the node", "keep", "node-arg", "ready-timeout", "stop-timeout")
	fs.IntVar(&o.Hosts, "hosts", o.Hosts, "TSBS hosts (10 series each)")
	fs.DurationVar(&o.Span, "span", o.Span, "time the data covers, ending now")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two lines of a host")
	fs.IntVar(&o.BatchLines, "batch-lines", o.BatchLines, "lines per write request")
	fs.IntVar(&o.Clients, "clients", o.Clients, "concurrent writers, one keep-alive connection and one group of hosts each")
	fs.IntVar(&o.QueryClients, "query-clients", o.QueryClients, "concurrent query clients")
	fs.IntVar(&o.Queries, "queries", o.Queries, "timed queries")
	fs.IntVar(&o.WarmupQueries, "warmup-queries", o.WarmupQueries, "queries sent before the timed ones")
	fs.BoolVar(&o.TSBSQueries, "tsbs-queries", o.TSBSQueries, "also run the TSBS cpu-only query types (1-1-1, 1-1-12, 1-8-1, cpu-max-all-1, lastpoint), each with the same warm-up and timed counts")
	fs.StringVar(&o.TSBSBin, "tsbs-bin", o.TSBSBin, "`directory` of TSBS's tsbs_generate_queries and tsbs_run_queries_influx (make tsbs builds them into bin/tsbs); when they are there, the TSBS query types also run through InfluxQL")
	fs.IntVar(&o.InfluxQueries, "influxql-queries", o.InfluxQueries, "timed InfluxQL queries of each TSBS type (with --tsbs-bin)")
	fs.IntVar(&o.InfluxBurnIn, "influxql-burn-in", o.InfluxBurnIn, "InfluxQL queries of each TSBS type sent before the timed ones (tsbs_run_queries_influx --burn-in)")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the generated data and queries")
	fs.StringVar(&o.DB, "db", o.DB, "db parameter of the writes (the node's db label)")
	fs.StringVar(&o.WALSync, "wal-sync", o.WALSync, "node --wal-sync policy: always (fsync before ack) or interval:1s")
	fs.DurationVar(&o.CallTimeout, "timeout", o.CallTimeout, "timeout of each HTTP request")
	settleFlag(fs, &o.Settle)
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, lpbench.Run)
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := demo.DefaultOptions()
	fs := newFlagSet("tribench demo", stderr)
	fs.StringVar(&o.Addr, "addr", o.Addr, "node gRPC `address`")
	fs.IntVar(&o.Vehicles, "vehicles", o.Vehicles, "number of vehicles (22 series each)")
	fs.IntVar(&o.Minutes, "minutes", o.Minutes, "minutes of 10 Hz data to write, ending now")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the generated driving")
	fs.DurationVar(&o.CallTimeout, "timeout", o.CallTimeout, "timeout of each RPC")
	httpAddr := fs.String("http-addr", "", "node HTTP `address`; when set, also show line protocol, PromQL and OpenTSDB on it")
	fleetURL := fs.String("fleet-url", "", "a coordinator's GET /api/v1/fleet `URL`; when set, wait until the cloud holds every acknowledged point and show it")
	endMs := fs.Int64("end-ms", 0, "end of the data in Unix `ms` (default: now); a --skip-write run needs the value of the run that wrote")
	fs.BoolVar(&o.SkipWrite, "skip-write", false, "only query, checking against the data a run with the same --end-ms wrote")
	if err := parse(fs, args); err != nil {
		return err
	}
	o.Out, o.Logger = stdout, logger
	if *endMs != 0 {
		end := time.UnixMilli(*endMs)
		o.Now = func() time.Time { return end }
	}
	if *fleetURL != "" {
		if err := demo.WaitFleet(ctx, *fleetURL, time.Minute); err != nil {
			return err
		}
	}
	if _, err := demo.Run(ctx, o); err != nil {
		return err
	}
	if *httpAddr != "" {
		outs, err := demo.RunCompat(ctx, demo.CompatOptions{HTTPAddr: *httpAddr, Minutes: o.Minutes,
			CallTimeout: o.CallTimeout, Now: o.Now, Location: o.Location, Out: stdout, SkipWrite: o.SkipWrite})
		if err != nil {
			return err
		}
		for _, q := range outs {
			if q.Err != nil {
				return fmt.Errorf("%s: %w", q.Title, q.Err)
			}
		}
	}
	if *fleetURL == "" || o.SkipWrite {
		return nil
	}
	acked, err := demo.AcceptedPoints(ctx, o.Addr, o.CallTimeout)
	if err != nil {
		return err
	}
	return demo.WaitReplicated(ctx, demo.ReplicationOptions{FleetURL: *fleetURL, Points: acked, Timeout: time.Minute,
		Location: o.Location, Out: stdout})
}

// commitFlag defines --commit. The function it returns, called once the
// flags are parsed, names the code measured: the flag's value, or by default
// what gitDescribe says.
func commitFlag(ctx context.Context, fs *flag.FlagSet) func() string {
	commit := fs.String("commit", "", "name of the code measured (default: git describe of the working directory)")
	return func() string {
		if *commit != "" {
			return *commit
		}
		return gitDescribe(ctx)
	}
}

// gitDescribe names the checked-out code, or "unknown" outside a git
// checkout.
func gitDescribe(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func runRollup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("rollup", stderr)
	var o rollupbench.Options
	var c edgebench.Common
	fs.StringVar(&c.Profile, "profile", "full", "run size: short (20 series) or full (100 series); --series overrides")
	resultsDirFlag(fs, &c.ResultsDir, "results", "the JSON record and the PNG plot")
	fs.IntVar(&o.Series, "series", 0, "number of series (default: 100; short profile: 20)")
	fs.Float64Var(&o.Years, "years", 5, "years of data per series")
	fs.Int64Var(&o.IntervalMs, "interval-ms", 60_000, "sample interval in milliseconds")
	fs.IntVar(&o.Repeats, "repeats", 20, "runs per query (the first is the cold one)")
	fs.IntVar(&o.GridRepeats, "grid-repeats", 3, "warm runs of each range x step cell (after one to warm up)")
	inProcess := fs.Bool("cold-in-process", false, "run the grid's cold queries on a freshly opened node in this process instead of a fresh process")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed for the generated data")
	fs.StringVar(&o.Dir, "work-dir", "", "data directory to use and keep (default: a temp dir, removed)")
	commit := fs.String("commit", "", "code name for the JSON line (default: git describe)")
	fs.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the query phase to this file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if c.Profile != "short" && c.Profile != "full" {
		fmt.Fprintf(stderr, "--profile must be short or full, got %q\n", c.Profile)
		return errUsage
	}
	if o.Series == 0 {
		o.Series = map[string]int{"short": 20, "full": 100}[c.Profile]
	}
	if !*inProcess {
		o.ColdQuery = coldQueryInProcess
	}
	o.Log = stderr
	host := edgebench.DetectHost()
	res, err := rollupbench.Run(ctx, o)
	if err != nil {
		return err
	}
	host.Finish()
	res.Commit = *commit
	if res.Commit == "" {
		res.Commit = gitDescribe(ctx)
	}
	if err := rollupbench.Print(stdout, res); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "machine: %s\n", host)
	if err := saveRollup(c, host, o, res, stdout); err != nil {
		return err
	}
	return report.WriteJSONLine(stdout, res)
}

// writeLoadFlags registers the flags of a gRPC write load (ingest,
// telemetry, restart): the shape of a request, the writers and the seed.
func writeLoadFlags(fs *flag.FlagSet, batchPoints, pointsPerSeriesPerBatch, clients *int, seed *uint64) {
	fs.IntVar(batchPoints, "batch-points", *batchPoints, "points per Write request")
	fs.IntVar(pointsPerSeriesPerBatch, "points-per-series-per-batch", *pointsPerSeriesPerBatch, "consecutive points of each series in a request")
	fs.IntVar(clients, "clients", *clients, "concurrent writers, one gRPC connection each")
	fs.Uint64Var(seed, "seed", *seed, "seed of the generated values")
}

// ingestFlags registers the flags of the ingest workload that telemetry
// runs too: what is written, how, and the node's WAL policy.
func ingestFlags(fs *flag.FlagSet, o *ingest.Options) {
	fs.StringVar(&o.Workload, "workload", o.Workload, "sensor or canbus (22 channels per vehicle at 10 Hz)")
	fs.IntVar(&o.Series, "series", o.Series, "number of series")
	writeLoadFlags(fs, &o.BatchPoints, &o.PointsPerSeriesPerBatch, &o.Clients, &o.Seed)
	fs.StringVar(&o.WALSync, "wal-sync", o.WALSync, "node --wal-sync policy: always (fsync before ack) or interval:1s")
}

// settleFlag registers --settle, the wait after a load before the node's
// storage writes and data directory are measured.
func settleFlag(fs *flag.FlagSet, d *time.Duration) {
	fs.DurationVar(d, "settle", *d, "how long the node runs on after the load before write_bytes and the data directory are measured")
}
