package rulesbench

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
)

// The kinds of phase: the ingest feed on top of the live one, or the live
// feed alone.
const (
	phaseFeed = "feed"
	phaseLive = "live"
)

// phase is one stretch of the run, with or without the rules.
type phase struct {
	kind    string
	rules   bool
	points  int64 // of the ingest feed
	elapsed time.Duration
	cpu     time.Duration // the node's; negative when not measured
	// runqueueWait is the time the node's threads waited for a CPU
	// (schedstat); negative when not measured.
	runqueueWait time.Duration
	evals        []time.Duration
}

func (p phase) rate() float64 { return float64(p.points) / p.elapsed.Seconds() }

// perCPU is the ingest feed's points per CPU-second of the node, NaN when
// the CPU was not measured.
func (p phase) perCPU() float64 {
	if p.cpu <= 0 {
		return math.NaN()
	}
	return float64(p.points) / p.cpu.Seconds()
}

// measurement is what a run measured.
type measurement struct {
	plan                  Plan
	phases                []phase
	livePoints            int64
	usage                 nodeproc.Usage
	usageErr              error
	checkedSeries         int
	checkedValue          bool
	pollFailures          int
	machine               report.Machine
	loadBefore, loadAfter string
}

// PhaseResult is one phase in the JSON line.
type PhaseResult struct {
	Kind          string        `json:"kind"`
	Rules         bool          `json:"rules"`
	Points        int64         `json:"points"`
	Seconds       report.Number `json:"seconds"`
	PointsPerS    report.Number `json:"points_per_s"`
	NodeCPUS      report.Number `json:"node_cpu_s"`
	PointsPerCPUS report.Number `json:"points_per_cpu_s"`
	RunqueueWaitS report.Number `json:"node_runqueue_wait_s"`
	Evaluations   int           `json:"evaluations"`
	EvalP50S      report.Number `json:"eval_p50_s"`
	EvalMaxS      report.Number `json:"eval_max_s"`
}

// Result is the outcome of one run; its JSON form is the last line printed.
type Result struct {
	RuleEvalP99S         report.Number `json:"rule_eval_p99_s"`
	IngestLossPct        report.Number `json:"ingest_loss_pct"`
	RuleEvalP50S         report.Number `json:"rule_eval_p50_s"`
	RuleEvalMaxS         report.Number `json:"rule_eval_max_s"`
	Evaluations          int           `json:"evaluations"`
	LiveNodeCPUPct       report.Number `json:"live_phase_node_cpu_pct"`
	SaturatedEvalP99S    report.Number `json:"rule_eval_under_ingest_p99_s"`
	SaturatedEvalP50S    report.Number `json:"rule_eval_under_ingest_p50_s"`
	SaturatedEvaluations int           `json:"evaluations_under_ingest"`
	EvaluationsOverrun   int           `json:"evaluations_longer_than_interval"`
	IngestLossWallPct    report.Number `json:"ingest_loss_wall_pct"`
	IngestOffPerCPUS     report.Number `json:"ingest_without_rules_points_per_cpu_s"`
	IngestOnPerCPUS      report.Number `json:"ingest_with_rules_points_per_cpu_s"`
	IngestOffPointsPerS  report.Number `json:"ingest_without_rules_points_per_s"`
	IngestOnPointsPerS   report.Number `json:"ingest_with_rules_points_per_s"`
	Phases               []PhaseResult `json:"phases"`
	LivePoints           int64         `json:"live_points"`
	NodePeakRSSMiB       report.Number `json:"node_peak_rss_mib"`
	NodeCPUS             report.Number `json:"node_cpu_s"`
	RecordedSeries       int           `json:"recorded_series"`
	ValueChecked         bool          `json:"value_checked"`
	Rules                int           `json:"rules"`
	Series               int           `json:"series"`
	EvalIntervalS        float64       `json:"eval_interval_s"`
	NodeCPUs             string        `json:"node_cpus"`
	FeedSeries           int           `json:"feed_series"`
	Clients              int           `json:"clients"`
	PhaseS               float64       `json:"phase_s"`
	WALSync              string        `json:"wal_sync"`
	LoadAvgBefore        string        `json:"load_avg_before"`
	LoadAvgAfter         string        `json:"load_avg_after"`
	report.Provenance
}

// ingestLoss compares the ingest feed's phases with the rules and without:
// the points per second (wall) and per CPU-second of the node, each
// pooled over the phases, and the loss 1 - with/without in percent of
// each. NaN where a kind of phase or its CPU is missing.
func ingestLoss(phases []phase) (offRate, onRate, wallPct, offPerCPU, onPerCPU, cpuPct float64) {
	var pts [2]int64
	var secs, cpu [2]float64
	cpuOK := true
	for _, p := range phases {
		if p.kind != phaseFeed {
			continue
		}
		k := 0
		if p.rules {
			k = 1
		}
		pts[k] += p.points
		secs[k] += p.elapsed.Seconds()
		cpu[k] += p.cpu.Seconds()
		cpuOK = cpuOK && p.cpu > 0
	}
	nan := math.NaN()
	offRate, onRate, wallPct, offPerCPU, onPerCPU, cpuPct = nan, nan, nan, nan, nan, nan
	if secs[0] == 0 || secs[1] == 0 || pts[0] == 0 {
		return
	}
	offRate, onRate = float64(pts[0])/secs[0], float64(pts[1])/secs[1]
	wallPct = 100 * (1 - onRate/offRate)
	if cpuOK {
		offPerCPU, onPerCPU = float64(pts[0])/cpu[0], float64(pts[1])/cpu[1]
		cpuPct = 100 * (1 - onPerCPU/offPerCPU)
	}
	return
}

// evalFigures are the p50, p99 and max of ds, NaN when empty.
func evalFigures(ds []time.Duration) (p50, p99, maxS report.Number) {
	if len(ds) == 0 {
		nan := report.Number(math.NaN())
		return nan, nan, nan
	}
	ds = append([]time.Duration(nil), ds...)
	s := func(d time.Duration) report.Number { return report.Number(report.Round(d.Seconds(), 3)) }
	p99 = s(load.Percentile(ds, 0.99)) // sorts ds
	return s(load.Percentile(ds, 0.50)), p99, s(ds[len(ds)-1])
}

func round(x float64, d int) report.Number { return report.Number(report.Round(x, d)) }

func (m *measurement) result(o Options) Result {
	nan := report.Number(math.NaN())
	offRate, onRate, wallPct, offPerCPU, onPerCPU, cpuPct := ingestLoss(m.phases)
	r := Result{
		IngestLossPct: round(cpuPct, 2), IngestLossWallPct: round(wallPct, 2),
		IngestOffPerCPUS: round(offPerCPU, 0), IngestOnPerCPUS: round(onPerCPU, 0),
		IngestOffPointsPerS: round(offRate, 0), IngestOnPointsPerS: round(onRate, 0),
		LiveNodeCPUPct: nan, LivePoints: m.livePoints, NodePeakRSSMiB: nan, NodeCPUS: nan,
		RecordedSeries: m.checkedSeries, ValueChecked: m.checkedValue,
		Rules: o.Rules, Series: o.Series, EvalIntervalS: o.EvalInterval.Seconds(), NodeCPUs: o.NodeCPUs,
		FeedSeries: o.FeedSeries, Clients: o.Clients, PhaseS: o.Phase.Seconds(), WALSync: o.WALSync,
		LoadAvgBefore: m.loadBefore, LoadAvgAfter: m.loadAfter,
		Provenance: report.NewProvenance(map[string]float64{"rule_eval_p99_s": EvalP99Target.Value,
			"ingest_loss_pct": LossPctTarget.Value, "node_peak_rss_mib": float64(MemoryMiBLimit)}, o.Commit, m.machine),
	}
	var live, fed []time.Duration
	for _, p := range m.phases {
		p50, _, pmax := evalFigures(p.evals)
		pr := PhaseResult{Kind: p.kind, Rules: p.rules, Points: p.points, Seconds: round(p.elapsed.Seconds(), 1),
			PointsPerS: round(p.rate(), 0), NodeCPUS: nan, PointsPerCPUS: round(p.perCPU(), 0),
			Evaluations: len(p.evals), EvalP50S: p50, EvalMaxS: pmax}
		if p.cpu > 0 {
			pr.NodeCPUS = round(p.cpu.Seconds(), 1)
		}
		pr.RunqueueWaitS = nan
		if p.runqueueWait >= 0 {
			pr.RunqueueWaitS = round(p.runqueueWait.Seconds(), 1)
		}
		r.Phases = append(r.Phases, pr)
		if p.kind == phaseLive {
			live = append(live, p.evals...)
			if p.cpu > 0 {
				r.LiveNodeCPUPct = round(100*p.cpu.Seconds()/p.elapsed.Seconds(), 1)
			}
		} else {
			fed = append(fed, p.evals...)
		}
		for _, d := range p.evals {
			if d > o.EvalInterval {
				r.EvaluationsOverrun++
			}
		}
	}
	r.RuleEvalP50S, r.RuleEvalP99S, r.RuleEvalMaxS = evalFigures(live)
	r.SaturatedEvalP50S, r.SaturatedEvalP99S, _ = evalFigures(fed)
	r.Evaluations, r.SaturatedEvaluations = len(live), len(fed)
	if m.usageErr == nil {
		r.NodePeakRSSMiB = round(float64(m.usage.HWMBytes)/(1<<20), 1)
		r.NodeCPUS = round(m.usage.CPU.Seconds(), 1)
	}
	r.Notes = notes(r, m.pollFailures)
	return r
}

func notes(r Result, pollFailures int) []string {
	ns := []string{"ingest_loss_pct compares the ingest feed's points per CPU-second of the node with and without the rules (what one CPU of its own would take); ingest_loss_wall_pct compares points per second, which other work on the machine skews"}
	if r.NodeCPUs == "" {
		ns = append(ns, "the node ran on every CPU (--node-cpus ''), not on the Pi profile's one")
	}
	if r.Evaluations > 0 && r.Evaluations < 100 {
		ns = append(ns, fmt.Sprintf("with %d evaluations (fewer than 100) the p99 is the largest: run longer phases for a finer tail", r.Evaluations))
	}
	if r.EvaluationsOverrun > 0 {
		ns = append(ns, fmt.Sprintf("%d evaluations took longer than the interval: the next slot of each was skipped", r.EvaluationsOverrun))
	}
	if pollFailures > 0 {
		ns = append(ns, fmt.Sprintf("%d reads of /api/v1/rules failed: evaluations may be missing from the figures", pollFailures))
	}
	ns = append(ns, "memory is not capped: the node's peak resident set is compared with the Pi's 512 MiB (make bench-pi caps a container)")
	return ns
}

// WriteReport prints the tables, the notes and the JSON line.
func WriteReport(w io.Writer, r Result) error {
	fmt.Fprintf(w, "rules: %s recording rules over %s live series every %gs, node on CPUs %q; ingest feed of %s series from %d clients, --wal-sync %s; load average %s before, %s after\n\n",
		report.Int(int64(r.Rules)), report.Int(int64(r.Series)), r.EvalIntervalS, r.NodeCPUs, report.Int(int64(r.FeedSeries)), r.Clients, r.WALSync, r.LoadAvgBefore, r.LoadAvgAfter)
	ph := report.Table{Header: []string{"phase", "feed", "rules", "seconds", "points/s", "node CPU s", "waiting for a CPU s", "points/CPU-s", "evaluations", "eval p50 s", "eval max s"},
		RightAlign: []bool{true, false, false, true, true, true, true, true, true, true, true}}
	for i, p := range r.Phases {
		on := "off"
		if p.Rules {
			on = "on"
		}
		feed := "ingest + live"
		if p.Kind == phaseLive {
			feed = "live only"
		}
		ph.Add(fmt.Sprint(i+1), feed, on, p.Seconds.Text(1), report.Whole(float64(p.PointsPerS)), p.NodeCPUS.Text(1),
			p.RunqueueWaitS.Text(1), report.Whole(float64(p.PointsPerCPUS)), fmt.Sprint(p.Evaluations), p.EvalP50S.Text(3), p.EvalMaxS.Text(3))
	}
	if err := ph.Write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	sec := func(x float64) string { return report.Float(x, 0) + " s" }
	pct := func(x float64) string { return report.Float(x, 0) + " %" }
	mem := report.Target{Value: float64(MemoryMiBLimit), AtMost: true}
	t := report.Table{Header: []string{"figure", "value", "target", "verdict"}, RightAlign: []bool{false, true, false, false}}
	t.AddTarget("group evaluation p99, live feed only", r.RuleEvalP99S.Text(3)+" s", EvalP99Target, sec, r.RuleEvalP99S)
	t.Add("  p50 / max, evaluations", fmt.Sprintf("%s / %s s, %d", r.RuleEvalP50S.Text(3), r.RuleEvalMaxS.Text(3), r.Evaluations), "", "")
	t.Add("  node CPU, live feed and rules", r.LiveNodeCPUPct.Text(1)+" % of a CPU", "", "")
	t.Add("group evaluation p50 / p99 under the ingest feed", fmt.Sprintf("%s / %s s, %d", r.SaturatedEvalP50S.Text(3), r.SaturatedEvalP99S.Text(3), r.SaturatedEvaluations), "", "")
	t.AddTarget("ingest lost, per node CPU-second", r.IngestLossPct.Text(2)+" %", LossPctTarget, pct, r.IngestLossPct)
	t.Add("  points per CPU-s without / with rules", report.Whole(float64(r.IngestOffPerCPUS))+" / "+report.Whole(float64(r.IngestOnPerCPUS)), "", "")
	t.Add("ingest lost, per wall-clock second", r.IngestLossWallPct.Text(2)+" %", "", "")
	t.Add("  points/s without / with rules", report.Whole(float64(r.IngestOffPointsPerS))+" / "+report.Whole(float64(r.IngestOnPointsPerS)), "", "")
	t.Add("evaluations longer than the interval", fmt.Sprint(r.EvaluationsOverrun), "", "")
	t.AddTarget("node peak resident memory", r.NodePeakRSSMiB.Text(1)+" MiB", mem, func(x float64) string { return report.Float(x, 0) + " MiB" }, r.NodePeakRSSMiB)
	t.Add("node CPU time, whole run", r.NodeCPUS.Text(1)+" s", "", "")
	t.Add("live points written", report.Int(r.LivePoints), "", "")
	t.Add("recorded series checked", fmt.Sprintf("%d, value checked: %v", r.RecordedSeries, r.ValueChecked), "", "")
	if err := t.Write(w); err != nil {
		return err
	}
	return report.WriteNotesAndJSONLine(w, r.Notes, r)
}
