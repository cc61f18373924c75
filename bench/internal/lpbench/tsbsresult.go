package lpbench

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/report"
)

// TSBSTargetSet is the goals of the TSBS query types for one data set.
type TSBSTargetSet struct {
	Q111P50Ms       report.Target
	Q1112QPS        report.Target
	Q181QPS         report.Target
	QMaxAllQPS      report.Target
	QLastpointP50Ms report.Target
}

// TSBSTargets are the goals at the default settings (100 hosts, one day,
// 2 query clients).
var TSBSTargets = TSBSTargetSet{
	Q111P50Ms:       report.Target{Value: 0.20, AtMost: true},
	Q1112QPS:        report.Target{Value: 4000},
	Q181QPS:         report.Target{Value: 3500},
	QMaxAllQPS:      report.Target{Value: 3500},
	QLastpointP50Ms: report.Target{Value: 2, AtMost: true},
}

// TSBSTargets1000 are the goals with --hosts 1000 --span 12h (10,000
// series; the other settings at their defaults): those of TSBSTargets
// but for 1-1-1's p50, 0.25 ms, and lastpoint's, 10 ms (ten times the
// hosts).
var TSBSTargets1000 = func() TSBSTargetSet {
	t := TSBSTargets
	t.Q111P50Ms.Value = 0.25
	t.QLastpointP50Ms.Value = 10
	return t
}()

// tsbsTargetsFor returns the TSBS goals of a data set of hosts hosts over
// span, and whether the data set is the 1,000-host one.
func tsbsTargetsFor(hosts int, span time.Duration) (TSBSTargetSet, bool) {
	if hosts == 1000 && span == 12*time.Hour {
		return TSBSTargets1000, true
	}
	return TSBSTargets, false
}

// TSBSFigures are the TSBS query types' figures: median and 99th
// percentile client round trip and timed queries per second, each type
// run alone from the query clients. They follow the other figures in the
// JSON line.
type TSBSFigures struct {
	Q111P50Ms          report.Number `json:"q_1_1_1_p50_ms"`
	Q111P99Ms          report.Number `json:"q_1_1_1_p99_ms"`
	Q111QPS            report.Number `json:"q_1_1_1_qps"`
	Q1112P50Ms         report.Number `json:"q_1_1_12_p50_ms"`
	Q1112P99Ms         report.Number `json:"q_1_1_12_p99_ms"`
	Q1112QPS           report.Number `json:"q_1_1_12_qps"`
	Q181P50Ms          report.Number `json:"q_1_8_1_p50_ms"`
	Q181P99Ms          report.Number `json:"q_1_8_1_p99_ms"`
	Q181QPS            report.Number `json:"q_1_8_1_qps"`
	QMaxAllP50Ms       report.Number `json:"q_cpu_max_all_1_p50_ms"`
	QMaxAllP99Ms       report.Number `json:"q_cpu_max_all_1_p99_ms"`
	QMaxAllQPS         report.Number `json:"q_cpu_max_all_1_qps"`
	QLastpointP50Ms    report.Number `json:"q_lastpoint_p50_ms"`
	QLastpointP99Ms    report.Number `json:"q_lastpoint_p99_ms"`
	QLastpointQPS      report.Number `json:"q_lastpoint_qps"`
	TSBSQueriesChecked int64         `json:"tsbs_queries_checked"`
	TSBSQueriesWrong   int64         `json:"tsbs_queries_wrong"`
	// PromQLMaxAllP50Ms repeats QMaxAllP50Ms under the name the
	// InfluxQL comparison uses (influxql_cpu_max_all_p50_ms beside it).
	PromQLMaxAllP50Ms report.Number `json:"promql_cpu_max_all_p50_ms"`
}

// tsbsFigures derives the figures from each type's stats, keyed by TSBS
// name; a type not measured is NaN.
func tsbsFigures(stats map[string]timedStats) TSBSFigures {
	fig := func(name string) (p50, p99, qps report.Number) {
		st, ok := stats[name]
		if !ok || len(st.Latencies) == 0 {
			nan := report.Number(math.NaN())
			return nan, nan, nan
		}
		lat := append([]time.Duration(nil), st.Latencies...)
		ms := func(q float64) report.Number {
			return report.Number(report.Round(float64(load.Percentile(lat, q))/float64(time.Millisecond), 4))
		}
		return ms(0.50), ms(0.99), report.Number(report.Round(float64(st.Queries)/st.Elapsed.Seconds(), 0))
	}
	var f TSBSFigures
	f.Q111P50Ms, f.Q111P99Ms, f.Q111QPS = fig("single-groupby-1-1-1")
	f.Q1112P50Ms, f.Q1112P99Ms, f.Q1112QPS = fig("single-groupby-1-1-12")
	f.Q181P50Ms, f.Q181P99Ms, f.Q181QPS = fig("single-groupby-1-8-1")
	f.QMaxAllP50Ms, f.QMaxAllP99Ms, f.QMaxAllQPS = fig("cpu-max-all-1")
	f.PromQLMaxAllP50Ms = f.QMaxAllP50Ms
	f.QLastpointP50Ms, f.QLastpointP99Ms, f.QLastpointQPS = fig("lastpoint")
	for _, st := range stats {
		f.TSBSQueriesChecked += st.Checked
		f.TSBSQueriesWrong += st.Wrong
	}
	return f
}

// addTSBSTargets adds the TSBS targets t to a result's target map.
func addTSBSTargets(m map[string]float64, t TSBSTargetSet) {
	m["q_1_1_1_p50_ms"] = t.Q111P50Ms.Value
	m["q_1_1_12_qps"] = t.Q1112QPS.Value
	m["q_1_8_1_qps"] = t.Q181QPS.Value
	m["q_cpu_max_all_1_qps"] = t.QMaxAllQPS.Value
	m["q_lastpoint_p50_ms"] = t.QLastpointP50Ms.Value
}

// writeTSBSTable prints one row per TSBS query type against the targets
// t, or nothing when the types were not run.
func writeTSBSTable(w io.Writer, f TSBSFigures, t TSBSTargetSet) error {
	if f.TSBSQueriesChecked == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nTSBS cpu-only queries through PromQL (%d answers checked, %d wrong):\n", f.TSBSQueriesChecked, f.TSBSQueriesWrong)
	tb := report.Table{Header: []string{"query type", "p50 (ms)", "p99 (ms)", "q/s", "target", "met?"}, RightAlign: []bool{false, true, true, true, true, false}}
	tb.Add("single-groupby-1-1-1", f.Q111P50Ms.Text(3), f.Q111P99Ms.Text(3), report.Whole(float64(f.Q111QPS)),
		"p50 "+t.Q111P50Ms.Format(report.Decimals(2)), t.Q111P50Ms.Verdict(float64(f.Q111P50Ms)))
	tb.Add("single-groupby-1-1-12", f.Q1112P50Ms.Text(3), f.Q1112P99Ms.Text(3), report.Whole(float64(f.Q1112QPS)),
		"q/s "+t.Q1112QPS.Format(report.Whole), t.Q1112QPS.Verdict(float64(f.Q1112QPS)))
	tb.Add("single-groupby-1-8-1", f.Q181P50Ms.Text(3), f.Q181P99Ms.Text(3), report.Whole(float64(f.Q181QPS)),
		"q/s "+t.Q181QPS.Format(report.Whole), t.Q181QPS.Verdict(float64(f.Q181QPS)))
	tb.Add("cpu-max-all-1", f.QMaxAllP50Ms.Text(3), f.QMaxAllP99Ms.Text(3), report.Whole(float64(f.QMaxAllQPS)),
		"q/s "+t.QMaxAllQPS.Format(report.Whole), t.QMaxAllQPS.Verdict(float64(f.QMaxAllQPS)))
	tb.Add("lastpoint", f.QLastpointP50Ms.Text(3), f.QLastpointP99Ms.Text(3), report.Whole(float64(f.QLastpointQPS)),
		"p50 "+t.QLastpointP50Ms.Format(report.Decimals(0)), t.QLastpointP50Ms.Verdict(float64(f.QLastpointP50Ms)))
	return tb.Write(w)
}
