// Package uplinkbench is the uplink benchmark (`tribench uplink`): what a
// fleet's lag budget costs on a metered link. For each lag budget it starts
// one `tributary coordinator` and Edges `tributary node` processes that
// replicate to it, sets the budget in the fleet configuration (`tributary
// cluster config --lag-budget`; the row at the default budget sets
// nothing, so it measures what an edge does out of the box), waits until
// every edge has applied it, and writes to each edge what a typical device
// sends: Series series, one point each every Interval, in one
// line-protocol request. After Duration it reads, from every edge's
// /metrics, the compressed bytes of the segments the cloud acknowledged
// (tributary_replication_shipped_bytes_total: the segment files as the
// edge sent them on the stream, zstd-compressed, without the gRPC
// framing) and the points they held, and reports bytes per point shipped.
//
// The rows run side by side (each with its own coordinator and edges), so
// a run lasts about Duration whatever the number of rows; byte counts do
// not depend on the machine's load. The row of the longest budget ships
// only a few segments per edge: its figure is the mean over Edges edges.
//
// It prints a table for people and then one JSON line, the last line of
// its output, whose bytes_per_point_shipped is the figure at the default
// lag budget. A missed target never fails a run.
//
// Concurrency: Run starts its own processes and goroutines and has
// stopped all of them when it returns.
package uplinkbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/lowrate"
	"github.com/tributarydb/tributary/bench/internal/lpbench"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/internal/loopback"
)

// Target is the goal for bytes shipped per point at the default lag
// budget, 8 series × 1 Hz per edge.
var Target = report.Target{Value: 2.0, AtMost: true}

// DefaultLagBudget is the lag budget of a fleet whose configuration sets
// none (and of a node without --wal-segment-age).
var DefaultLagBudget = time.Duration(catalog.DefaultLagBudgetMs) * time.Millisecond

// Options configures a run.
type Options struct {
	// Procs says how the coordinators and edges are started (NodeArgs go
	// to every edge); Output where the figures go.
	runopt.Procs
	runopt.Output
	// LagBudgets are the rows, each 1s..1h; the default budget is added
	// when missing.
	LagBudgets []time.Duration
	// Edges is the number of edge processes per row.
	Edges int
	// Series per edge, one point each every Interval, in one request.
	Series   int
	Interval time.Duration
	// Duration is how long every edge is written to.
	Duration time.Duration
	// CallTimeout bounds one request.
	CallTimeout time.Duration
}

// DefaultOptions: lag budgets of 5 s, 30 s, 60 s and 300 s (and the
// default), 4 edges of 8 series at 1 Hz each, 11 minutes: two segments per
// edge at 300 s.
func DefaultOptions() Options {
	return Options{
		Procs:       runopt.Procs{ReadyTimeout: 60 * time.Second, StopTimeout: time.Minute},
		Output:      runopt.DefaultOutput(),
		LagBudgets:  []time.Duration{5 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute},
		Edges:       4,
		Series:      8,
		Interval:    time.Second,
		Duration:    11 * time.Minute,
		CallTimeout: 10 * time.Second,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
	if len(o.LagBudgets) == 0 || len(o.LagBudgets) > 10 {
		errs = append(errs, fmt.Errorf("1 to 10 lag budgets are needed, got %d", len(o.LagBudgets)))
	}
	for _, l := range o.LagBudgets {
		if l < time.Second || l > time.Hour || l%time.Millisecond != 0 {
			errs = append(errs, fmt.Errorf("lag budget %v is outside 1s..1h", l))
		} else if o.Duration <= l {
			errs = append(errs, fmt.Errorf("duration %v does not reach the lag budget %v: no segment would ship", o.Duration, l))
		}
	}
	if o.Edges < 1 || o.Edges > 50 {
		errs = append(errs, fmt.Errorf("edges per row must be 1 to 50, got %d", o.Edges))
	}
	if o.Series < 1 || o.Series > 10_000 {
		errs = append(errs, fmt.Errorf("series must be 1 to 10000, got %d", o.Series))
	}
	if o.Interval < 10*time.Millisecond || o.Interval%time.Millisecond != 0 {
		errs = append(errs, fmt.Errorf("interval must be a whole number of milliseconds, at least 10ms, got %v", o.Interval))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, errors.New("call timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Row is the figures of one lag budget.
type Row struct {
	LagBudgetS float64 `json:"lag_budget_s"`
	// FleetConfigSet is false for the default budget: no fleet
	// configuration was set, the edges sealed by their own default.
	FleetConfigSet   bool          `json:"fleet_config_set"`
	Edges            int           `json:"edges"`
	PointsWritten    int64         `json:"points_written"`
	ShippedSegments  int64         `json:"shipped_segments"`
	ShippedPoints    int64         `json:"shipped_points"`
	ShippedBytes     int64         `json:"shipped_bytes"`
	PointsPerSegment report.Number `json:"points_per_segment"`
	BytesPerSegment  report.Number `json:"bytes_per_segment"`
	BytesPerPoint    report.Number `json:"bytes_per_point"`
	// MBPerDayPerKPointsPerS is the uplink a fleet taking 1,000 points/s
	// in all would use a day at this budget (10^6 bytes).
	MBPerDayPerKPointsPerS report.Number `json:"mb_per_day_per_1000_points_per_s"`
}

// Result is the outcome of a run; its JSON form is the last line printed.
type Result struct {
	// BytesPerPointShipped is the figure at the default lag budget.
	BytesPerPointShipped report.Number `json:"bytes_per_point_shipped"`
	DefaultLagBudgetS    float64       `json:"default_lag_budget_s"`
	Rows                 []Row         `json:"rows"`
	Series               int           `json:"series_per_edge"`
	IntervalS            float64       `json:"interval_s"`
	DurationS            float64       `json:"duration_s"`
	report.Provenance
}

// Run measures every row, side by side, and prints the report.
func Run(ctx context.Context, o Options) (_ Result, err error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("uplink options: %w", err)
	}
	budgets := slices.Clone(o.LagBudgets)
	if !slices.Contains(budgets, DefaultLagBudget) {
		budgets = append(budgets, DefaultLagBudget)
	}
	slices.Sort(budgets)
	budgets = slices.Compact(budgets)
	binary, err := nodeproc.FindBinary(o.Binary)
	if err != nil {
		return Result{}, err
	}
	o.Binary = binary
	logger := o.Log()
	wd, err := workdir.Make(o.WorkDir, "tribench-uplink-", o.KeepDataDir, logger)
	if err != nil {
		return Result{}, err
	}
	defer func() { wd.Finish(err) }()
	rows := make([]Row, len(budgets))
	err = nodeproc.Concurrently(len(budgets), func(i int) error {
		r, err := runRow(ctx, o, budgets[i], filepath.Join(wd.Path, fmt.Sprintf("lag-%s", budgets[i])))
		rows[i] = r
		if err != nil {
			return fmt.Errorf("lag budget %v: %w", budgets[i], err)
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	res := result(o, rows)
	return res, WriteReport(o.Out, res)
}

func result(o Options, rows []Row) Result {
	res := Result{BytesPerPointShipped: report.Number(math.NaN()), DefaultLagBudgetS: DefaultLagBudget.Seconds(), Rows: rows,
		Series: o.Series, IntervalS: o.Interval.Seconds(), DurationS: o.Duration.Seconds(),
		Provenance: report.NewProvenance(map[string]float64{"bytes_per_point_shipped": Target.Value}, o.Commit, report.DetectMachine())}
	for i := range res.Rows {
		r := &res.Rows[i]
		ratio := func(a, b float64, d int) report.Number {
			if b == 0 {
				return report.Number(math.NaN())
			}
			return report.Number(report.Round(a/b, d))
		}
		r.PointsPerSegment = ratio(float64(r.ShippedPoints), float64(r.ShippedSegments), 1)
		r.BytesPerSegment = ratio(float64(r.ShippedBytes), float64(r.ShippedSegments), 0)
		r.BytesPerPoint = ratio(float64(r.ShippedBytes), float64(r.ShippedPoints), 3)
		r.MBPerDayPerKPointsPerS = report.Number(report.Round(float64(r.BytesPerPoint)*1000*86400/1e6, 0))
		if r.LagBudgetS == DefaultLagBudget.Seconds() {
			res.BytesPerPointShipped = r.BytesPerPoint
		}
		if r.ShippedSegments < 3*int64(r.Edges) {
			res.Notes = append(res.Notes, fmt.Sprintf("lag budget %gs: %d segments shipped by %d edges; its figure rests on few segments",
				r.LagBudgetS, r.ShippedSegments, r.Edges))
		}
	}
	return res
}

// runRow runs one lag budget: a coordinator, its configuration, the edges
// and their writers.
func runRow(ctx context.Context, o Options, lag time.Duration, dir string) (Row, error) {
	row := Row{LagBudgetS: lag.Seconds(), FleetConfigSet: lag != DefaultLagBudget, Edges: o.Edges}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return row, err
	}
	c, err := startCoordinator(ctx, o, dir)
	if err != nil {
		return row, err
	}
	defer c.node.Stop(o.StopTimeout)
	if row.FleetConfigSet {
		if err := setLagBudget(ctx, o, c.grpc, lag); err != nil {
			return row, err
		}
	}
	edges := make([]*edge, o.Edges)
	defer func() {
		nodeproc.Concurrently(len(edges), func(i int) error {
			if edges[i] != nil {
				edges[i].node.Stop(o.StopTimeout)
			}
			return nil
		})
	}()
	err = nodeproc.Concurrently(o.Edges, func(i int) error {
		e, err := startEdge(ctx, o, dir, fmt.Sprintf("edge-%d", i+1), c.intake)
		edges[i] = e
		if err != nil {
			return err
		}
		if row.FleetConfigSet {
			return e.waitApplied(ctx, lag, o.ReadyTimeout)
		}
		return nil
	})
	if err != nil {
		return row, err
	}
	hc := &http.Client{Timeout: o.CallTimeout}
	var mu sync.Mutex
	err = nodeproc.Concurrently(len(edges), func(i int) error {
		points, err := edges[i].write(ctx, hc, o)
		mu.Lock()
		row.PointsWritten += points
		mu.Unlock()
		return err
	})
	if err != nil {
		return row, err
	}
	for _, e := range edges {
		for _, m := range []struct {
			name string
			into *int64
		}{
			{"tributary_replication_shipped_segments", &row.ShippedSegments},
			{"tributary_replication_shipped_points", &row.ShippedPoints},
			{"tributary_replication_shipped_bytes", &row.ShippedBytes},
		} {
			v, err := lowrate.ScrapeCounter(ctx, hc, "http://"+e.http+"/metrics", m.name)
			if err != nil {
				return row, fmt.Errorf("%s: %w", e.id, err)
			}
			*m.into += v
		}
	}
	return row, nil
}

// coordinator is the one coordinator of a row.
type coordinator struct {
	grpc, intake string
	node         *nodeproc.Node
}

func startCoordinator(ctx context.Context, o Options, dir string) (*coordinator, error) {
	plan, err := nodeproc.PlanCoordinators(1)
	if err != nil {
		return nil, err
	}
	co := plan[0]
	c := &coordinator{grpc: co.GRPC, intake: co.Intake}
	run := nodeproc.Options{Binary: o.Binary, Env: o.Env, ReadyTimeout: o.ReadyTimeout, Logger: o.Log()}
	c.node, err = nodeproc.Start(ctx, co.Options(run, dir, append([]string{"--peers", co.Peer()}, o.CoordinatorArgs...)...))
	if err != nil {
		return nil, fmt.Errorf("coordinator: %w", err)
	}
	return c, nil
}

// setLagBudget sets the fleet's lag budget with `tributary cluster
// config`, retrying while the coordinator is not yet ready to take it (it
// registers itself, with the catalog features it applies, after start).
func setLagBudget(ctx context.Context, o Options, addr string, lag time.Duration) error {
	deadline := time.Now().Add(o.ReadyTimeout)
	for {
		cmd := exec.CommandContext(ctx, o.Binary, "cluster", "config", "--addr", addr, "--lag-budget", lag.String())
		cmd.Env = append(os.Environ(), o.Env...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("tributary cluster config --lag-budget %v: %v: %s", lag, err, out)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// edge is one edge node of a row and what was written to it.
type edge struct {
	id, http, logPath string
	node              *nodeproc.Node
	values            []float64
}

func startEdge(ctx context.Context, o Options, dir, id, intake string) (*edge, error) {
	addrs, err := loopback.FreePorts(2)
	if err != nil {
		return nil, err
	}
	e := &edge{id: id, http: addrs[1], logPath: filepath.Join(dir, id+".log"), values: make([]float64, o.Series)}
	for i := range e.values {
		e.values[i] = 20 + float64(i)
	}
	// NB: no --wal-segment-age: given, it would win over the fleet's lag
	// budget.
	args := append([]string{"--http-listen", e.http, "--replicate-to", intake, "--replicate-insecure", "--query-tunnel=false"}, o.NodeArgs...)
	e.node, err = nodeproc.Start(ctx, nodeproc.Options{Binary: o.Binary, DataDir: filepath.Join(dir, id), ListenAddr: addrs[0],
		NodeID: id, WALSync: "always", LogLevel: "info", ExtraArgs: args, LogPath: e.logPath, Env: o.Env,
		ReadyTimeout: o.ReadyTimeout, Logger: o.Log()})
	if err != nil {
		return nil, fmt.Errorf("edge %s: %w", id, err)
	}
	return e, nil
}

// waitApplied waits until the edge's log says it applied a fleet
// configuration with segment age lag.
func (e *edge) waitApplied(ctx context.Context, lag time.Duration, timeout time.Duration) error {
	want := "wal_segment_age=" + lag.String()
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(e.logPath)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "fleet config applied") && strings.Contains(line, want) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("edge %s: no \"fleet config applied\" with %s in its log after %v; last output:\n%s", e.id, want, timeout, e.node.LogTail())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// write sends one request of o.Series points every o.Interval for
// o.Duration and returns the points written.
func (e *edge) write(ctx context.Context, hc *http.Client, o Options) (int64, error) {
	url := "http://" + e.http + "/write?db=uplink&precision=ms"
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	end := time.Now().Add(o.Duration)
	intervalMs := o.Interval.Milliseconds()
	var body bytes.Buffer
	var points int64
	for now := time.Now(); now.Before(end); {
		ts := now.UnixMilli() / intervalMs * intervalMs
		body.Reset()
		for i := range e.values {
			// A slow bounded wave, two decimals: compresses like sensor data.
			e.values[i] += math.Sin(float64(ts/intervalMs+int64(i))) / 10
			v := math.Round(e.values[i]*100) / 100
			fmt.Fprintf(&body, "fleet_temperature,edge=%s,sensor=s%d value=%s %d\n", e.id, i, strconv.FormatFloat(v, 'f', -1, 64), ts)
		}
		if err := lpbench.Post(ctx, hc, url, body.Bytes()); err != nil {
			return points, fmt.Errorf("edge %s: %w", e.id, err)
		}
		points += int64(len(e.values))
		select {
		case now = <-tick.C:
		case <-ctx.Done():
			return points, ctx.Err()
		case <-e.node.Exited():
			return points, fmt.Errorf("edge %s exited during the run; last output:\n%s", e.id, e.node.LogTail())
		}
	}
	return points, nil
}

// WriteReport prints the table for people and then, as the last line, the
// JSON form of r.
func WriteReport(w io.Writer, r Result) error {
	fmt.Fprintf(w, "tribench uplink: edges of %d series × 1 point every %gs (one request each), %gs written per row, one coordinator per row\n",
		r.Series, r.IntervalS, r.DurationS)
	fmt.Fprintf(w, "machine: %s; commit %s\n\n", r.Machine, r.Commit)
	tb := report.Table{Header: []string{"lag budget", "edges", "segments shipped", "points/segment", "bytes/segment", "bytes/point shipped", "MB/day per 1,000 points/s"},
		RightAlign: []bool{false, true, true, true, true, true, true}}
	for _, row := range r.Rows {
		name := (time.Duration(row.LagBudgetS * float64(time.Second))).String()
		if !row.FleetConfigSet {
			name += " (default, no fleet config)"
		}
		tb.Add(name, strconv.Itoa(row.Edges), strconv.FormatInt(row.ShippedSegments, 10), row.PointsPerSegment.Text(1),
			row.BytesPerSegment.Text(0), row.BytesPerPoint.Text(3), row.MBPerDayPerKPointsPerS.Text(0))
	}
	if err := tb.Write(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nbytes/point shipped at the default lag budget (%gs): %s (target %s: %s)\n\n", r.DefaultLagBudgetS,
		r.BytesPerPointShipped.Text(3), Target.Format(report.Decimals(1)), Target.Verdict(float64(r.BytesPerPointShipped)))
	return report.WriteNotesAndJSONLine(w, r.Notes, r)
}
