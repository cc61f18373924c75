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

// phase is one stretch of the ingest feed, with or without the rules.
type phase struct {
	rules   bool
	points  int64
	elapsed time.Duration
}

func (p phase) rate() float64 { return float64(p.points) / p.elapsed.Seconds() }

// measurement is what a run measured.
type measurement struct {
	plan                  Plan
	phases                []phase
	evals                 []time.Duration
	livePoints            int64
	usage                 nodeproc.Usage
	usageErr              error
	checkedSeries         int
	checkedValue          bool
	machine               report.Machine
	loadBefore, loadAfter string
}

// PhaseResult is one phase in the JSON line.
type PhaseResult struct {
	Rules      bool          `json:"rules"`
	Points     int64         `json:"points"`
	Seconds    report.Number `json:"seconds"`
	PointsPerS report.Number `json:"points_per_s"`
}

// Result is the outcome of one run; its JSON form is the last line printed.
type Result struct {
	RuleEvalP99S        report.Number      `json:"rule_eval_p99_s"`
	IngestLossPct       report.Number      `json:"ingest_loss_pct"`
	RuleEvalP50S        report.Number      `json:"rule_eval_p50_s"`
	RuleEvalMaxS        report.Number      `json:"rule_eval_max_s"`
	Evaluations         int                `json:"evaluations"`
	EvaluationsOverrun  int                `json:"evaluations_longer_than_interval"`
	IngestOffPointsPerS report.Number      `json:"ingest_without_rules_points_per_s"`
	IngestOnPointsPerS  report.Number      `json:"ingest_with_rules_points_per_s"`
	Phases              []PhaseResult      `json:"phases"`
	LivePoints          int64              `json:"live_points"`
	NodePeakRSSMiB      report.Number      `json:"node_peak_rss_mib"`
	NodeCPUS            report.Number      `json:"node_cpu_s"`
	RecordedSeries      int                `json:"recorded_series"`
	ValueChecked        bool               `json:"value_checked"`
	Rules               int                `json:"rules"`
	Series              int                `json:"series"`
	EvalIntervalS       float64            `json:"eval_interval_s"`
	NodeCPUs            string             `json:"node_cpus"`
	FeedSeries          int                `json:"feed_series"`
	Clients             int                `json:"clients"`
	PhaseS              float64            `json:"phase_s"`
	WALSync             string             `json:"wal_sync"`
	LoadAvgBefore       string             `json:"load_avg_before"`
	LoadAvgAfter        string             `json:"load_avg_after"`
	Targets             map[string]float64 `json:"targets"`
	Notes               []string           `json:"notes"`
	Commit              string             `json:"commit"`
	Machine             report.Machine     `json:"machine"`
}

// ingestLoss is the share of the ingest throughput lost with the rules, in
// percent: 1 - (points/s over the phases with rules) / (points/s over
// those without). NaN without both kinds of phase.
func ingestLoss(phases []phase) (off, on, lossPct float64) {
	var pts [2]int64
	var secs [2]float64
	for _, p := range phases {
		k := 0
		if p.rules {
			k = 1
		}
		pts[k] += p.points
		secs[k] += p.elapsed.Seconds()
	}
	if secs[0] == 0 || secs[1] == 0 || pts[0] == 0 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	off, on = float64(pts[0])/secs[0], float64(pts[1])/secs[1]
	return off, on, 100 * (1 - on/off)
}

func (m *measurement) result(o Options) Result {
	nan := report.Number(math.NaN())
	seconds := func(d time.Duration) report.Number { return report.Number(report.Round(d.Seconds(), 3)) }
	off, on, loss := ingestLoss(m.phases)
	r := Result{
		RuleEvalP99S: nan, RuleEvalP50S: nan, RuleEvalMaxS: nan,
		IngestLossPct:       report.Number(report.Round(loss, 2)),
		IngestOffPointsPerS: report.Number(report.Round(off, 0)),
		IngestOnPointsPerS:  report.Number(report.Round(on, 0)),
		Evaluations:         len(m.evals),
		LivePoints:          m.livePoints,
		NodePeakRSSMiB:      nan, NodeCPUS: nan,
		RecordedSeries: m.checkedSeries, ValueChecked: m.checkedValue,
		Rules: o.Rules, Series: o.Series, EvalIntervalS: o.EvalInterval.Seconds(), NodeCPUs: o.NodeCPUs,
		FeedSeries: o.FeedSeries, Clients: o.Clients, PhaseS: o.Phase.Seconds(), WALSync: o.WALSync,
		LoadAvgBefore: m.loadBefore, LoadAvgAfter: m.loadAfter,
		Targets: map[string]float64{"rule_eval_p99_s": EvalP99Target.Value, "ingest_loss_pct": LossPctTarget.Value,
			"node_peak_rss_mib": float64(MemoryMiBLimit)},
		Notes:   []string{},
		Commit:  o.Commit,
		Machine: m.machine,
	}
	if len(m.evals) > 0 {
		evals := append([]time.Duration(nil), m.evals...)
		r.RuleEvalP99S = seconds(load.Percentile(evals, 0.99))
		r.RuleEvalP50S = seconds(load.Percentile(evals, 0.50))
		r.RuleEvalMaxS = seconds(evals[len(evals)-1]) // sorted by Percentile
		for _, d := range evals {
			if d > o.EvalInterval {
				r.EvaluationsOverrun++
			}
		}
	}
	for _, p := range m.phases {
		r.Phases = append(r.Phases, PhaseResult{Rules: p.rules, Points: p.points,
			Seconds: report.Number(report.Round(p.elapsed.Seconds(), 1)), PointsPerS: report.Number(report.Round(p.rate(), 0))})
	}
	if m.usageErr == nil {
		r.NodePeakRSSMiB = report.Number(report.Round(float64(m.usage.HWMBytes)/(1<<20), 1))
		r.NodeCPUS = report.Number(report.Round(m.usage.CPU.Seconds(), 1))
	}
	r.Notes = notes(r, len(m.evals) > 0 && len(m.evals) < 100)
	return r
}

func notes(r Result, fewEvals bool) []string {
	var ns []string
	if r.NodeCPUs == "" {
		ns = append(ns, "the node ran on every CPU (--node-cpus ''), not on the Pi profile's one")
	}
	if fewEvals {
		ns = append(ns, fmt.Sprintf("with %d evaluations (fewer than 100) the p99 is the largest: run more or longer phases for a finer tail", r.Evaluations))
	}
	if r.EvaluationsOverrun > 0 {
		ns = append(ns, fmt.Sprintf("%d evaluations took longer than the interval: the next slot of each was skipped", r.EvaluationsOverrun))
	}
	ns = append(ns, "memory is not capped: the node's peak resident set is compared with the Pi's 512 MiB (make bench-pi caps a container)")
	return ns
}

// WriteReport prints the table, the notes and the JSON line.
func WriteReport(w io.Writer, r Result) error {
	fmt.Fprintf(w, "rules: %s recording rules over %s live series every %gs, on CPUs %q; ingest feed of %s series from %d clients, --wal-sync %s; load average %s before, %s after\n\n",
		report.Int(int64(r.Rules)), report.Int(int64(r.Series)), r.EvalIntervalS, r.NodeCPUs, report.Int(int64(r.FeedSeries)), r.Clients, r.WALSync, r.LoadAvgBefore, r.LoadAvgAfter)
	ph := report.Table{Header: []string{"phase", "rules", "seconds", "points", "points/s"}, RightAlign: []bool{true, false, true, true, true}}
	for i, p := range r.Phases {
		on := "off"
		if p.Rules {
			on = "on"
		}
		ph.Add(fmt.Sprint(i+1), on, report.Float(float64(p.Seconds), 1), report.Int(p.Points), report.Whole(float64(p.PointsPerS)))
	}
	if err := ph.Write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t := report.Table{Header: []string{"figure", "value", "target", "verdict"}, RightAlign: []bool{false, true, false, false}}
	t.Add("rule group evaluation p99", report.Float(float64(r.RuleEvalP99S), 3)+" s", EvalP99Target.Format(func(x float64) string { return report.Float(x, 0) + " s" }), EvalP99Target.Verdict(float64(r.RuleEvalP99S)))
	t.Add("rule group evaluation p50 / max", report.Float(float64(r.RuleEvalP50S), 3)+" / "+report.Float(float64(r.RuleEvalMaxS), 3)+" s", "", "")
	t.Add("evaluations (longer than the interval)", fmt.Sprintf("%d (%d)", r.Evaluations, r.EvaluationsOverrun), "", "")
	t.Add("ingest without / with rules", report.Whole(float64(r.IngestOffPointsPerS))+" / "+report.Whole(float64(r.IngestOnPointsPerS))+" points/s", "", "")
	t.Add("ingest throughput lost", report.Float(float64(r.IngestLossPct), 2)+" %", LossPctTarget.Format(func(x float64) string { return report.Float(x, 0) + " %" }), LossPctTarget.Verdict(float64(r.IngestLossPct)))
	memTarget := report.Target{Value: float64(MemoryMiBLimit), AtMost: true}
	t.Add("node peak resident memory", report.Float(float64(r.NodePeakRSSMiB), 1)+" MiB", memTarget.Format(func(x float64) string { return report.Float(x, 0) + " MiB" }), memTarget.Verdict(float64(r.NodePeakRSSMiB)))
	t.Add("node CPU time", report.Float(float64(r.NodeCPUS), 1)+" s", "", "")
	t.Add("live points written", report.Int(r.LivePoints), "", "")
	t.Add("recorded series checked", fmt.Sprintf("%d, value checked: %v", r.RecordedSeries, r.ValueChecked), "", "")
	if err := t.Write(w); err != nil {
		return err
	}
	return report.WriteNotesAndJSONLine(w, r.Notes, r)
}
