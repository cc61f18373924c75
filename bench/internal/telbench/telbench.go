// Package telbench measures what telemetry costs ingest: the ingest
// benchmark (package ingest: a `tributary node` process written to over
// loopback gRPC) run with the OpenTelemetry instruments off
// (--metrics=false), with metrics on (the default), and with metrics and
// traces on, exporting every span and the metrics over OTLP/gRPC to an
// in-process sink that discards them (package otlpsink). The three modes
// run in turn, in a rotated order each round, so that drift of the
// machine (other load, thermal throttling, page cache) falls on all of
// them alike; each mode's figure is the median of its rounds.
//
// The target: ingest throughput with metrics and tracing on is
// within 3% of off.
//
// Run is not safe for concurrent use (it starts node processes).
package telbench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/tributarydb/tributary/bench/internal/ingest"
	"github.com/tributarydb/tributary/bench/internal/otlpsink"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
)

// TargetOverheadPct is the most ingest throughput telemetry may cost.
const TargetOverheadPct = 3.0

// Mode is one telemetry configuration of the node.
type Mode string

// The modes, in the order of the first round.
const (
	ModeOff     Mode = "off"            // --metrics=false, no traces
	ModeMetrics Mode = "metrics"        // the default: instruments on, /metrics
	ModeOn      Mode = "metrics+traces" // and OTLP export of traces (every span) and metrics
)

var modes = []Mode{ModeOff, ModeMetrics, ModeOn}

// Options configure a run.
type Options struct {
	// Ingest is the workload of every run; its NodeArgs are kept and the
	// mode's flags added. Its Out is ignored (each run's own report is
	// not printed).
	Ingest ingest.Options
	// Rounds is how many times each mode runs (default 3).
	Rounds int
	// OTLPInterval is the node's --otlp-interval in the traced mode
	// (default 10s, so a run pushes metrics a few times).
	OTLPInterval string
	// Output says where the figures go.
	runopt.Output

	// run is ingest.Run; tests replace it.
	run func(context.Context, ingest.Options) (ingest.Result, error)
}

// RunResult is one ingest run.
type RunResult struct {
	Round                int           `json:"round"`
	Mode                 Mode          `json:"mode"`
	PointsPerS           report.Number `json:"points_per_s"`
	CPUSPerMillionPoints report.Number `json:"cpu_s_per_million_points"`
	PeakRSSMiB           report.Number `json:"peak_rss_mib"`
}

// Result is the report's JSON line.
type Result struct {
	Bench          string  `json:"bench"`
	Workload       string  `json:"workload"`
	Series         int     `json:"series"`
	BatchPoints    int     `json:"batch_points"`
	Clients        int     `json:"clients"`
	WALSync        string  `json:"wal_sync"`
	RunDurationS   float64 `json:"run_duration_s"`
	Rounds         int     `json:"rounds"`
	TraceSampling  float64 `json:"trace_sample_ratio"`
	OTLPInterval   string  `json:"otlp_interval"`
	SpansExported  int64   `json:"spans_exported"`
	MetricExports  int64   `json:"metric_exports"`
	MetricPointsEx int64   `json:"metric_points_exported"`

	// Medians over the rounds.
	PointsPerSOff     report.Number `json:"ingest_points_per_s_off"`
	PointsPerSMetrics report.Number `json:"ingest_points_per_s_metrics"`
	PointsPerSOn      report.Number `json:"ingest_points_per_s_on"`
	CPUOff            report.Number `json:"cpu_s_per_million_points_off"`
	CPUMetrics        report.Number `json:"cpu_s_per_million_points_metrics"`
	CPUOn             report.Number `json:"cpu_s_per_million_points_on"`
	// Throughput lost against off, in percent (negative: faster).
	OverheadMetricsPct report.Number `json:"overhead_metrics_pct"`
	OverheadPct        report.Number `json:"overhead_pct"` // metrics and traces on
	// The same per round (each mode against the off run of its own round,
	// which ran minutes apart at most), median over the rounds: steadier
	// than the medians' ratio when the machine's load drifts.
	OverheadMetricsPairedPct report.Number `json:"overhead_metrics_paired_pct"`
	OverheadPairedPct        report.Number `json:"overhead_paired_pct"`
	// Node CPU per point added against off, in percent.
	CPUOverheadMetricsPct report.Number `json:"cpu_overhead_metrics_pct"`
	CPUOverheadPct        report.Number `json:"cpu_overhead_pct"`
	// Spread: (max - min) / median of off's rounds, in percent: the
	// noise the overhead figures stand against.
	SpreadOffPct report.Number `json:"spread_off_pct"`

	TargetOverheadPct float64 `json:"target_overhead_pct"`
	// Met: both modes lose at most the target in throughput (medians).
	// MetCPU: both add at most the target in node CPU per point, the
	// steadier figure on a shared machine (ingest is CPU-bound, so its
	// throughput cost on a quiet machine is its CPU cost).
	Met     bool           `json:"met"`
	MetCPU  bool           `json:"met_cpu"`
	Runs    []RunResult    `json:"runs"`
	Commit  string         `json:"commit"`
	Machine report.Machine `json:"machine"`
}

// Run runs the rounds and writes the report (a table, notes and the JSON
// line) to o.Out.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	if o.Rounds < 1 {
		return Result{}, fmt.Errorf("telemetry bench: --rounds %d: want at least 1", o.Rounds)
	}
	o.OTLPInterval = cmp.Or(o.OTLPInterval, "10s")
	log := o.Log()
	run := o.run
	if run == nil {
		run = ingest.Run
	}
	if err := o.Ingest.Validate(); err != nil {
		return Result{}, fmt.Errorf("ingest options: %w", err)
	}
	sink, err := otlpsink.Start()
	if err != nil {
		return Result{}, err
	}
	defer sink.Stop()

	var runs []RunResult
	for round := range o.Rounds {
		for i := range modes {
			mode := modes[(i+round)%len(modes)]
			ro := o.Ingest
			ro.Out = io.Discard
			ro.Logger = log.With("mode", mode, "round", round+1)
			ro.NodeArgs = append(slices.Clone(o.Ingest.NodeArgs), modeArgs(mode, sink.Addr(), o.OTLPInterval)...)
			log.Info("ingest run", "round", round+1, "mode", mode)
			res, err := run(ctx, ro)
			if err != nil {
				return Result{}, fmt.Errorf("round %d, %s: %w", round+1, mode, err)
			}
			r := RunResult{Round: round + 1, Mode: mode, PointsPerS: res.PointsPerS,
				CPUSPerMillionPoints: res.CPUSPerMillionPoints, PeakRSSMiB: res.PeakRSSMiB}
			log.Info("ingest run done", "round", round+1, "mode", mode, "points_per_s", float64(r.PointsPerS),
				"cpu_s_per_million_points", float64(r.CPUSPerMillionPoints))
			runs = append(runs, r)
		}
	}
	counts := sink.Counts()
	if counts.Spans == 0 {
		return Result{}, errors.New("the traced runs exported no span to the OTLP sink: traces were not on")
	}
	res := summarize(o, runs, counts)
	return res, writeReport(o.Out, res)
}

// modeArgs are the node flags of a mode.
func modeArgs(m Mode, sink, interval string) []string {
	switch m {
	case ModeOff:
		return []string{"--metrics=false"}
	case ModeOn:
		return []string{"--otlp-endpoint", sink, "--otlp-insecure", "--otlp-interval", interval, "--trace-sample-ratio", "1"}
	}
	return nil
}

func summarize(o Options, runs []RunResult, c otlpsink.Counts) Result {
	med := func(m Mode, f func(RunResult) report.Number) float64 {
		var xs []float64
		for _, r := range runs {
			if r.Mode == m && !math.IsNaN(float64(f(r))) {
				xs = append(xs, float64(f(r)))
			}
		}
		return median(xs)
	}
	pps := func(r RunResult) report.Number { return r.PointsPerS }
	cpu := func(r RunResult) report.Number { return r.CPUSPerMillionPoints }
	off, met, on := med(ModeOff, pps), med(ModeMetrics, pps), med(ModeOn, pps)
	cOff, cMet, cOn := med(ModeOff, cpu), med(ModeMetrics, cpu), med(ModeOn, cpu)
	loss := func(base, x float64) report.Number { return report.Number(report.Round((base-x)/base*100, 2)) }
	gain := func(base, x float64) report.Number { return report.Number(report.Round((x-base)/base*100, 2)) }
	var lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		if r.Mode == ModeOff {
			lo, hi = min(lo, float64(r.PointsPerS)), max(hi, float64(r.PointsPerS))
		}
	}
	res := Result{
		Bench: "telemetry", Workload: o.Ingest.Workload, Series: o.Ingest.Series, BatchPoints: o.Ingest.BatchPoints,
		Clients: o.Ingest.Clients, WALSync: o.Ingest.WALSync, RunDurationS: o.Ingest.Duration.Seconds(), Rounds: o.Rounds,
		TraceSampling: 1, OTLPInterval: o.OTLPInterval,
		SpansExported: c.Spans, MetricExports: c.MetricRequests, MetricPointsEx: c.DataPoints,
		PointsPerSOff: report.Number(report.Round(off, 0)), PointsPerSMetrics: report.Number(report.Round(met, 0)),
		PointsPerSOn: report.Number(report.Round(on, 0)),
		CPUOff:       report.Number(report.Round(cOff, 4)), CPUMetrics: report.Number(report.Round(cMet, 4)),
		CPUOn:              report.Number(report.Round(cOn, 4)),
		OverheadMetricsPct: loss(off, met), OverheadPct: loss(off, on),
		CPUOverheadMetricsPct: gain(cOff, cMet), CPUOverheadPct: gain(cOff, cOn),
		SpreadOffPct:      report.Number(report.Round((hi-lo)/off*100, 2)),
		TargetOverheadPct: TargetOverheadPct,
		Runs:              runs, Commit: o.Commit, Machine: report.DetectMachine(),
	}
	res.OverheadMetricsPairedPct = report.Number(report.Round(paired(runs, ModeMetrics), 2))
	res.OverheadPairedPct = report.Number(report.Round(paired(runs, ModeOn), 2))
	t := report.Target{Value: TargetOverheadPct, AtMost: true}
	res.Met = t.Met(float64(res.OverheadPct)) && t.Met(float64(res.OverheadMetricsPct))
	res.MetCPU = t.Met(float64(res.CPUOverheadPct)) && t.Met(float64(res.CPUOverheadMetricsPct))
	return res
}

// paired is the median over the rounds of the throughput mode m lost
// against the off run of the same round, in percent.
func paired(runs []RunResult, m Mode) float64 {
	off := map[int]float64{}
	for _, r := range runs {
		if r.Mode == ModeOff {
			off[r.Round] = float64(r.PointsPerS)
		}
	}
	var xs []float64
	for _, r := range runs {
		if base := off[r.Round]; r.Mode == m && base > 0 && !math.IsNaN(float64(r.PointsPerS)) {
			xs = append(xs, (base-float64(r.PointsPerS))/base*100)
		}
	}
	return median(xs)
}

// median of xs; NaN when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func writeReport(w io.Writer, r Result) error {
	fmt.Fprintf(w, "telemetry overhead: %s, %d series, %d points/request, %d clients, wal-sync %s, %gs per run, %d rounds of 3 modes (rotated)\n",
		r.Workload, r.Series, r.BatchPoints, r.Clients, r.WALSync, r.RunDurationS, r.Rounds)
	fmt.Fprintf(w, "machine: %s; commit %s\n\n", r.Machine, r.Commit)
	runs := report.Table{Header: []string{"round", "mode", "points/s", "CPU-s/Mpoint", "peak RSS MiB"}, RightAlign: []bool{true, false, true, true, true}}
	for _, x := range r.Runs {
		runs.Add(fmt.Sprint(x.Round), string(x.Mode), report.Whole(float64(x.PointsPerS)),
			x.CPUSPerMillionPoints.Text(3), x.PeakRSSMiB.Text(0))
	}
	if err := runs.Write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	target := report.Target{Value: TargetOverheadPct, AtMost: true}
	pct := func(x report.Number) string { return x.Text(2) + " %" }
	sum := report.Table{Header: []string{"mode (median)", "points/s", "throughput lost", "lost, paired", "CPU-s/Mpoint", "CPU added", "target", "throughput", "CPU"},
		RightAlign: []bool{false, true, true, true, true, true, false, false, false}}
	sum.Add(string(ModeOff), report.Whole(float64(r.PointsPerSOff)), "", "", r.CPUOff.Text(3), "", "", "", "")
	sum.Add(string(ModeMetrics), report.Whole(float64(r.PointsPerSMetrics)), pct(r.OverheadMetricsPct), pct(r.OverheadMetricsPairedPct), r.CPUMetrics.Text(3),
		pct(r.CPUOverheadMetricsPct), target.Format(func(x float64) string { return report.Float(x, 0) + " %" }), target.Verdict(float64(r.OverheadMetricsPct)),
		target.Verdict(float64(r.CPUOverheadMetricsPct)))
	sum.Add(string(ModeOn), report.Whole(float64(r.PointsPerSOn)), pct(r.OverheadPct), pct(r.OverheadPairedPct), r.CPUOn.Text(3),
		pct(r.CPUOverheadPct), target.Format(func(x float64) string { return report.Float(x, 0) + " %" }), target.Verdict(float64(r.OverheadPct)),
		target.Verdict(float64(r.CPUOverheadPct)))
	if err := sum.Write(w); err != nil {
		return err
	}
	notes := []string{
		fmt.Sprintf("run-to-run spread of the off runs: %.2f %% of their median; an overhead inside it is noise", float64(r.SpreadOffPct)),
		"lost, paired: median over the rounds of each run against the off run of its own round; the verdict uses the medians' ratio",
		fmt.Sprintf("traced runs exported %d spans and %d metric batches to the in-process OTLP sink (every request sampled)", r.SpansExported, r.MetricExports),
	}
	return report.WriteNotesAndJSONLine(w, notes, r)
}
