// Package pibench is the Raspberry Pi profile (`tribench pi`): the node's
// FROM-scratch image (deploy/Dockerfile around the static binary) runs in a
// container limited to one CPU and 512 MiB (`--cpus 1 --memory 512m`, no
// swap), roughly a Pi 3's share, and the benchmark writes the sensor
// workload to it over gRPC as fast as it takes, then times a query mix on
// what it wrote, while `docker stats` is sampled for the container's memory
// and CPU. It reports points/s, query latency per query type, the peak
// memory docker reports and the cgroup's own peak, and whether the kernel
// ever OOM-killed the node (a run where it did fails).
//
// Without a docker daemon the profile is skipped with a message (Run
// returns an error matching ErrNoDocker, which tribench reports and does
// not count as a failure).
//
// Concurrency: Run starts its own container and goroutines and has removed
// and stopped them when it returns.
package pibench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Options configures a run.
type Options struct {
	// Image is the node image to run; empty: build one from StaticBinary
	// and Dockerfile, tagged BuildTag.
	Image        string
	StaticBinary string
	Dockerfile   string
	BuildTag     string
	// CPUs and Memory are docker's --cpus and --memory (swap is off).
	CPUs, Memory string
	// NodeArgs, when set, replace the image's default node flags after the
	// listeners (for example a smaller --head-max-bytes).
	NodeArgs []string
	// The ingest phase: Series sensor series at Interval, written for
	// Duration from Clients connections in requests of SeriesPerRequest
	// series × PointsPerSeries points.
	Series, SeriesPerRequest, PointsPerSeries, Clients int
	Interval, Duration                                 time.Duration
	// Queries is how many times each query type runs (after Warmup
	// untimed runs of each).
	Queries, Warmup int
	Seed            uint64
	// ResultsDir, when set, receives pi.json.
	ResultsDir string
	// WorkDir is the parent of the temporary image context.
	WorkDir string
	// ReadyTimeout bounds the wait for the node; CallTimeout each RPC.
	ReadyTimeout, CallTimeout time.Duration
	// Output says where the figures go.
	runopt.Output
}

// DefaultOptions: 1 CPU, 512 MiB, 1,000 sensor series at 1 s written for
// 60 s from 2 clients, 50 timed runs of each query type.
func DefaultOptions() Options {
	return Options{
		StaticBinary: "dist/tributary-linux-amd64", Dockerfile: "deploy/Dockerfile", BuildTag: "tributary-bench-pi:local",
		CPUs: "1", Memory: "512m",
		Series: 1000, SeriesPerRequest: 100, PointsPerSeries: 100, Clients: 2,
		Interval: time.Second, Duration: 60 * time.Second,
		Queries: 50, Warmup: 5, Seed: 1,
		ReadyTimeout: 60 * time.Second, CallTimeout: 30 * time.Second,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	var errs []error
	if o.Image == "" && (o.StaticBinary == "" || o.Dockerfile == "" || o.BuildTag == "") {
		errs = append(errs, errors.New("an image, or a static binary, a Dockerfile and a tag to build one, is required"))
	}
	if o.CPUs == "" || o.Memory == "" {
		errs = append(errs, errors.New("cpus and memory limits are required"))
	}
	if o.Series < 10 || o.SeriesPerRequest < 1 || o.PointsPerSeries < 1 || o.Clients < 1 {
		errs = append(errs, fmt.Errorf("series (%d, at least 10), series per request (%d), points per series (%d) and clients (%d) must be positive",
			o.Series, o.SeriesPerRequest, o.PointsPerSeries, o.Clients))
	}
	if o.Interval < time.Millisecond || o.Duration < time.Second {
		errs = append(errs, fmt.Errorf("interval (%v) must be at least 1ms and duration (%v) at least 1s", o.Interval, o.Duration))
	}
	if o.Queries < 1 || o.Warmup < 0 {
		errs = append(errs, fmt.Errorf("queries must be positive (%d) and warm-up not negative (%d)", o.Queries, o.Warmup))
	}
	if o.ReadyTimeout <= 0 || o.CallTimeout <= 0 {
		errs = append(errs, errors.New("timeouts must be positive"))
	}
	errs = append(errs, o.Output.Problems()...)
	return errors.Join(errs...)
}

// Result is what a run measured; its JSON form is the last line of the
// output and bench/results/pi.json.
type Result struct {
	CPUs   string `json:"cpus"`
	Memory string `json:"memory"`
	Image  string `json:"image"`

	PointsPerS     float64       `json:"points_per_s"`
	Points         int64         `json:"points"`
	IngestS        float64       `json:"ingest_s"`
	WriteP50Ms     float64       `json:"write_p50_ms"`
	WriteP99Ms     float64       `json:"write_p99_ms"`
	Queries        []QueryResult `json:"queries"`
	MemPeakMiB     float64       `json:"docker_stats_mem_peak_mib"`
	CgroupPeakMiB  report.Number `json:"cgroup_mem_peak_mib"`
	CPUPeakPct     float64       `json:"docker_stats_cpu_peak_pct"`
	StatsSamples   int           `json:"docker_stats_samples"`
	CaughtUp       bool          `json:"ingest_caught_up_with_clock"`
	OOMKilled      bool          `json:"oom_killed"`
	RunningAtEnd   bool          `json:"running_at_end"`
	LoadAvg1       [2]float64    `json:"loadavg_1m_start_end"`
	Series         int           `json:"series"`
	Clients        int           `json:"clients"`
	IntervalMs     int64         `json:"interval_ms"`
	DurationS      float64       `json:"duration_s"`
	Commit         string        `json:"commit"`
	Machine        string        `json:"machine"`
	WallClockStart string        `json:"started"`
}

// QueryResult is one query type's latency.
type QueryResult struct {
	Name   string  `json:"name"`
	Runs   int     `json:"runs"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	QPS    float64 `json:"queries_per_s"`
	Series int     `json:"series_answered"`
	Points int     `json:"points_answered"`
}

// Run runs the profile and writes its report to o.Out.
func Run(ctx context.Context, o Options) (Result, error) {
	res := Result{CPUs: o.CPUs, Memory: o.Memory, Series: o.Series, Clients: o.Clients,
		IntervalMs: o.Interval.Milliseconds(), DurationS: o.Duration.Seconds(), Commit: o.Commit,
		Machine: report.DetectMachine().String(), WallClockStart: time.Now().UTC().Format(time.RFC3339),
		CgroupPeakMiB: report.Number(math.NaN())}
	if err := o.Validate(); err != nil {
		return res, err
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := checkDocker(ctx); err != nil {
		return res, err
	}
	image, err := prepareImage(ctx, o, logger)
	if err != nil {
		return res, err
	}
	res.Image = image
	c, err := runContainer(ctx, image, o.CPUs, o.Memory, o.NodeArgs)
	if err != nil {
		return res, err
	}
	defer c.remove()
	logger.Info("container started", "id", c.id[:12], "grpc", c.grpcAddr, "cpus", o.CPUs, "memory", o.Memory)
	res.LoadAvg1[0] = report.LoadAverage1m()

	conns, err := load.Dial(c.grpcAddr, o.Clients)
	if err != nil {
		return res, err
	}
	defer conns.Close()
	if err := waitReady(ctx, tributaryv1.NewQueryServiceClient(conns[0]), o.ReadyTimeout); err != nil {
		return res, err
	}
	endStats := watchStats(ctx, c, &res, logger)
	err = measure(ctx, o, conns, &res, logger)
	endStats()
	if err != nil {
		return res, err
	}

	s, err := c.state(ctx)
	if err != nil {
		return res, err
	}
	res.OOMKilled, res.RunningAtEnd = s.OOMKilled, s.Running
	if peak := c.cgroupMaxUsage(); peak >= 0 {
		res.CgroupPeakMiB = report.Number(report.Round(float64(peak)/(1<<20), 1))
	}
	res.LoadAvg1[1] = report.LoadAverage1m()
	if err := writeReport(o.Out, res); err != nil {
		return res, err
	}
	if o.ResultsDir != "" {
		if err := writeJSONFile(filepath.Join(o.ResultsDir, "pi.json"), res); err != nil {
			return res, err
		}
	}
	if res.OOMKilled || !res.RunningAtEnd {
		return res, fmt.Errorf("the node did not survive the %s limit (OOM killed: %v, running: %v)", o.Memory, res.OOMKilled, res.RunningAtEnd)
	}
	return res, nil
}

// prepareImage returns o.Image, or builds the node's image around
// o.StaticBinary and returns its tag.
func prepareImage(ctx context.Context, o Options, logger *slog.Logger) (string, error) {
	if o.Image != "" {
		return o.Image, nil
	}
	if _, err := os.Stat(o.StaticBinary); err != nil {
		return "", fmt.Errorf("static binary for the image: %w (build it with: RELEASE_TARGETS=amd64 scripts/release.sh build)", err)
	}
	dir, err := workdir.Make(o.WorkDir, "tribench-pi-", false, logger)
	if err != nil {
		return "", err
	}
	logger.Info("building image", "tag", o.BuildTag, "from", o.StaticBinary)
	err = buildImage(ctx, o.Dockerfile, o.StaticBinary, o.BuildTag, dir.Path)
	dir.Finish(nil)
	if err != nil {
		return "", err
	}
	return o.BuildTag, nil
}

// watchStats samples docker stats about every second into res's peaks
// until the returned function is called.
func watchStats(ctx context.Context, c *container, res *Result, logger *slog.Logger) (stop func()) {
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-quit:
				return
			default:
			}
			s, err := c.stats(ctx)
			if err != nil {
				logger.Warn("docker stats", "err", err)
				time.Sleep(time.Second)
				continue
			}
			res.StatsSamples++
			res.MemPeakMiB = max(res.MemPeakMiB, report.Round(float64(s.MemBytes)/(1<<20), 1))
			res.CPUPeakPct = max(res.CPUPeakPct, s.CPUPct)
		}
	})
	return func() {
		close(quit)
		wg.Wait()
	}
}

// measure writes the sensor workload as fast as the node takes it for
// o.Duration, then times the query mix on the range every series holds.
// It sets the ingest and query figures of res (not those watchStats
// sets).
func measure(ctx context.Context, o Options, conns load.Conns, res *Result, logger *slog.Logger) error {
	now := time.Now()
	intervalMs := o.Interval.Milliseconds()
	// Room for 10 M points/s, far above what one core takes, so that the
	// load runs its whole duration before its samples reach the wall clock.
	perSeries := int64(o.Duration.Seconds()*1e7)/int64(o.Series) + int64(o.PointsPerSeries)
	startMs := now.UnixMilli() - perSeries*intervalMs
	startMs -= startMs % intervalMs
	gen, err := workload.NewSensor(workload.SensorOptions{Series: o.Series, StartMs: startMs, IntervalMs: intervalMs, Seed: o.Seed})
	if err != nil {
		return err
	}
	reqs := gen.Requests(o.SeriesPerRequest, o.PointsPerSeries)
	logger.Info("ingest", "series", o.Series, "clients", o.Clients, "duration", o.Duration)
	st, err := load.Run(ctx, load.Config{Clients: conns.WriteClients(), Requests: load.Split(reqs, o.Clients),
		PointsPerSeries: o.PointsPerSeries, Duration: o.Duration, CallTimeout: o.CallTimeout})
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	res.Points = st.Points
	res.CaughtUp = st.CaughtUp
	res.IngestS = report.Round(st.Elapsed.Seconds(), 2)
	res.PointsPerS = report.Round(float64(st.Points)/st.Elapsed.Seconds(), 0)
	sort.Slice(st.Latencies, func(i, j int) bool { return st.Latencies[i] < st.Latencies[j] })
	res.WriteP50Ms = ms(load.Percentile(st.Latencies, 0.5))
	res.WriteP99Ms = ms(load.Percentile(st.Latencies, 0.99))

	// Queries, on the range every series holds.
	endMs := int64(math.MaxInt64)
	for _, r := range reqs {
		endMs = min(endMs, r.LastMs())
	}
	qc := tributaryv1.NewQueryServiceClient(conns[0])
	for _, q := range queryMix(gen, endMs, intervalMs) {
		logger.Info("queries", "type", q.name)
		qr, err := timeQuery(ctx, qc, q, o.Warmup, o.Queries, o.CallTimeout)
		if err != nil {
			return err
		}
		res.Queries = append(res.Queries, qr)
	}
	return nil
}

// waitReady polls the node's Status until it answers.
func waitReady(ctx context.Context, conn tributaryv1.QueryServiceClient, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := conn.Status(cctx, &tributaryv1.StatusRequest{})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node in the container not ready after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// query is one type of the mix, with the answer's expected shape.
type query struct {
	name       string
	req        *tributaryv1.QueryRequest
	wantSeries int
	wantPoints int // per series; 0: at least one
}

func eq(name, value string) *tributaryv1.Matcher {
	return &tributaryv1.Matcher{Type: tributaryv1.Matcher_EQUAL, Name: name, Value: value}
}

// queryMix is the four query types, over the data that ends at endMs: raw
// 5 minutes of one series, the 1-minute average of one series over 1 hour,
// the per-minute maximum over every temperature series for 1 hour (one
// aggregated series), and the last point of every series of one metric.
func queryMix(gen *workload.Generator, endMs, intervalMs int64) []query {
	s0 := gen.Series()[0]
	one := func() []*tributaryv1.Matcher {
		var ms []*tributaryv1.Matcher
		for _, l := range s0.GetLabels() {
			ms = append(ms, eq(l.GetName(), l.GetValue()))
		}
		return ms
	}
	temps := 0
	for _, s := range gen.Series() {
		if workload.Label(s, "__name__") == workload.Label(s0, "__name__") {
			temps++
		}
	}
	hourStart := endMs - time.Hour.Milliseconds() + 1
	hourStart += (60_000 - hourStart%60_000) % 60_000 // whole minutes
	return []query{
		{name: "raw 5 min, 1 series", wantSeries: 1, wantPoints: int(5 * 60_000 / intervalMs),
			req: &tributaryv1.QueryRequest{Matchers: one(), StartMs: endMs - 5*60_000 + 1, EndMs: endMs, Mode: tributaryv1.QueryMode_QUERY_MODE_RAW}},
		{name: "1 h avg by 1 min, 1 series", wantSeries: 1,
			req: &tributaryv1.QueryRequest{Matchers: one(), StartMs: hourStart, EndMs: endMs, Mode: tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE,
				StepMs: 60_000, Downsample: tributaryv1.Aggregate_AGGREGATE_AVG}},
		{name: "1 h max by 1 min over " + fmt.Sprint(temps) + " series", wantSeries: 1,
			req: &tributaryv1.QueryRequest{Matchers: []*tributaryv1.Matcher{eq("__name__", workload.Label(s0, "__name__"))},
				StartMs: hourStart, EndMs: endMs, Mode: tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE, StepMs: 60_000,
				Downsample: tributaryv1.Aggregate_AGGREGATE_MAX, Aggregate: tributaryv1.Aggregate_AGGREGATE_MAX}},
		{name: "last point, " + fmt.Sprint(temps) + " series", wantSeries: temps, wantPoints: 1,
			req: &tributaryv1.QueryRequest{Matchers: []*tributaryv1.Matcher{eq("__name__", workload.Label(s0, "__name__"))},
				StartMs: endMs - 3_600_000, EndMs: endMs, Mode: tributaryv1.QueryMode_QUERY_MODE_LAST_POINT}},
	}
}

// timeQuery runs q warmup times untimed, then runs times timed, checking
// the shape of every answer.
func timeQuery(ctx context.Context, qc tributaryv1.QueryServiceClient, q query, warmup, runs int, timeout time.Duration) (QueryResult, error) {
	qr := QueryResult{Name: q.name, Runs: runs}
	var lat []time.Duration
	start := time.Now()
	for i := range warmup + runs {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		t0 := time.Now()
		ans, err := nodeclient.Query(cctx, qc, q.req)
		d := time.Since(t0)
		cancel()
		if err != nil {
			return qr, fmt.Errorf("query %q: %w", q.name, err)
		}
		if err := checkAnswer(q, ans); err != nil {
			return qr, err
		}
		if i == warmup {
			start = t0
		}
		if i >= warmup {
			lat = append(lat, d)
		}
		qr.Series = len(ans.Series)
		qr.Points = 0
		for _, s := range ans.Series {
			qr.Points += len(s.TimestampsMs)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	qr.P50Ms, qr.P99Ms, qr.MaxMs = ms(load.Percentile(lat, 0.5)), ms(load.Percentile(lat, 0.99)), ms(lat[len(lat)-1])
	qr.QPS = report.Round(float64(runs)/time.Since(start).Seconds(), 1)
	return qr, nil
}

func checkAnswer(q query, ans nodeclient.Answer) error {
	if len(ans.Series) != q.wantSeries {
		return fmt.Errorf("query %q: %d series, want %d", q.name, len(ans.Series), q.wantSeries)
	}
	for _, s := range ans.Series {
		n := len(s.TimestampsMs)
		if (q.wantPoints == 0 && n == 0) || (q.wantPoints > 0 && n != q.wantPoints) {
			return fmt.Errorf("query %q: a series with %d points, want %d", q.name, n, q.wantPoints)
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return report.Round(float64(d)/float64(time.Millisecond), 2) }

func writeReport(w io.Writer, r Result) error {
	fmt.Fprintf(w, "pi profile: node image %s in a container with --cpus %s --memory %s (no swap); %s, commit %s\n\n",
		r.Image, r.CPUs, r.Memory, r.Machine, r.Commit)
	kv := [][2]string{
		{"ingest", fmt.Sprintf("%s points/s (%s points in %.1f s, %d series at %d ms, %d clients)", report.Whole(r.PointsPerS), report.Int(r.Points), r.IngestS, r.Series, r.IntervalMs, r.Clients)},
		{"write p50 / p99", fmt.Sprintf("%.1f / %.1f ms", r.WriteP50Ms, r.WriteP99Ms)},
		{"memory peak (docker stats)", fmt.Sprintf("%.1f MiB of %s (%d samples)", r.MemPeakMiB, r.Memory, r.StatsSamples)},
		{"memory peak (cgroup, with page cache)", r.CgroupPeakMiB.Text(1) + " MiB"},
		{"CPU peak (docker stats)", fmt.Sprintf("%.0f%%", r.CPUPeakPct)},
		{"OOM killed", fmt.Sprint(r.OOMKilled)},
		{"load average (1 min) start → end", fmt.Sprintf("%.2f → %.2f", r.LoadAvg1[0], r.LoadAvg1[1])},
	}
	if err := report.KeyValues(w, kv); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t := report.Table{Header: []string{"query", "p50", "p99", "max", "queries/s", "series", "points"}}
	for _, q := range r.Queries {
		t.Add(q.Name, report.Float(q.P50Ms, 2)+" ms", report.Float(q.P99Ms, 2)+" ms", report.Float(q.MaxMs, 2)+" ms",
			report.Float(q.QPS, 1), fmt.Sprint(q.Series), fmt.Sprint(q.Points))
	}
	if err := t.Write(w); err != nil {
		return err
	}
	var notes []string
	if r.CaughtUp {
		notes = append(notes, "the ingest stopped early: its samples reached the wall clock")
	}
	return report.WriteNotesAndJSONLine(w, notes, r)
}

// writeJSONFile writes v, indented, to path, making its directory.
func writeJSONFile(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}
