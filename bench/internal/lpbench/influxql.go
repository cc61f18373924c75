package lpbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
)

// The InfluxQL phase runs TSBS's own tools (make tsbs builds them into
// bin/tsbs from bench/tsbs's pinned module) against the query node: for
// every cpu-only type, tsbs_generate_queries writes InfluxBurnIn +
// InfluxQueries queries over the written time range, a short
// tsbs_run_queries_influx --print-responses pass checks that the first
// influxCheckQueries are answered with series and no error, and a second
// pass, with --burn-in and --results-file, is measured: TSBS's own q/s
// (every query sent, burn-in included, over the run's wall time) and its
// p50 and p99 of the timed ones (its --burn-in needs --max-queries set,
// to all of them). That the answers equal PromQL's is
// checked by make compat (compat/tsbs_test.go), not here.

// influxTools are the TSBS commands the phase needs in Options.TSBSBin.
var influxTools = []string{"tsbs_generate_queries", "tsbs_run_queries_influx"}

// influxCheckQueries is how many answers of each type are checked.
const influxCheckQueries = 20

// influxMinSpan is the least data TSBS draws single-groupby-1-1-12's
// 12-hour windows from (it wants more than the window).
const influxMinSpan = 12*time.Hour + time.Minute

// influxMinHosts is what single-groupby-1-8-1 needs.
const influxMinHosts = 8

// influxStats are one type's figures as tsbs_run_queries_influx reports
// them.
type influxStats struct {
	QPS, P50Ms, P99Ms float64
	Queries           int64 // timed, burn-in excluded
	Checked, Wrong    int64
	Examples          []string
}

// influxProblems checks the options of the InfluxQL phase.
func (o Options) influxProblems() []error {
	if o.TSBSBin != "" && (o.InfluxQueries <= 0 || o.InfluxBurnIn < 0) {
		return []error{fmt.Errorf("InfluxQL queries must be positive and burn-in not negative, got %d and %d", o.InfluxQueries, o.InfluxBurnIn)}
	}
	return nil
}

// influxSkip says why the data is too small for TSBS's query generator
// ("" when it is not): the phase is then skipped with a note.
func (o Options) influxSkip() string {
	switch {
	case o.Span < influxMinSpan:
		return fmt.Sprintf("the InfluxQL figures were not measured: TSBS's single-groupby-1-1-12 draws 12-hour windows from more than 12 h of data, the span is %v", o.Span)
	case o.Hosts < influxMinHosts:
		return fmt.Sprintf("the InfluxQL figures were not measured: TSBS's single-groupby-1-8-1 needs %d hosts, the run has %d", influxMinHosts, o.Hosts)
	}
	return ""
}

// findInfluxTools reports whether dir holds the TSBS tools; a missing
// directory or tool is no error (the phase is skipped), anything else is.
func findInfluxTools(dir string) (bool, error) {
	if dir == "" {
		return false, nil
	}
	for _, name := range influxTools {
		st, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if st.IsDir() || st.Mode()&0o111 == 0 {
			return false, fmt.Errorf("%s is not an executable", filepath.Join(dir, name))
		}
	}
	return true, nil
}

// queryInfluxQL runs every type through InfluxQL against base and records
// the figures in m.influx.
func (ph phases) queryInfluxQL(base string) error {
	o, g := ph.m.opts, ph.m.gen
	ph.m.influx = make(map[string]influxStats, len(tsbsTypeNames))
	start := time.Unix(0, g.StartNs()).UTC()
	end := time.Unix(0, g.TimestampNs(g.Rows()-1)+g.IntervalNs()).UTC()
	for _, typ := range tsbsTypeNames {
		qfile := filepath.Join(ph.wd.Path, "influxql-"+typ+".queries")
		err := ph.tsbsTool("tsbs_generate_queries", nil, "--use-case=cpu-only", "--format=influx",
			"--scale="+strconv.Itoa(g.Hosts()), "--seed="+strconv.FormatUint(o.Seed, 10),
			"--queries="+strconv.Itoa(o.InfluxBurnIn+o.InfluxQueries), "--query-type="+typ, "--file="+qfile,
			"--timestamp-start="+start.Format(time.RFC3339), "--timestamp-end="+end.Format(time.RFC3339))
		if err != nil {
			return err
		}
		ph.logger.Info("querying through InfluxQL (tsbs_run_queries_influx)", "type", typ, "workers", o.QueryClients, "burn_in", o.InfluxBurnIn, "queries", o.InfluxQueries)
		common := []string{"--urls=" + base, "--db-name=" + o.DB, "--file=" + qfile, "--workers=" + strconv.Itoa(o.QueryClients), "--print-interval=0"}
		var out bytes.Buffer
		if err := ph.tsbsTool("tsbs_run_queries_influx", &out, append(common, "--print-responses", "--max-queries="+strconv.Itoa(influxCheckQueries))...); err != nil {
			return err
		}
		var st influxStats
		st.Checked, st.Wrong, st.Examples = checkInfluxAnswers(out.Bytes(), typ)
		results := filepath.Join(ph.wd.Path, "influxql-"+typ+".json")
		out.Reset()
		if err := ph.tsbsTool("tsbs_run_queries_influx", &out, append(common, "--burn-in="+strconv.Itoa(o.InfluxBurnIn),
			"--max-queries="+strconv.Itoa(o.InfluxBurnIn+o.InfluxQueries), "--results-file="+results)...); err != nil {
			return err
		}
		if err := st.read(out.Bytes(), results); err != nil {
			return fmt.Errorf("tsbs_run_queries_influx %s: %w", typ, err)
		}
		ph.m.influx[typ] = st
	}
	return nil
}

// tsbsTool runs a TSBS command from Options.TSBSBin; its standard output
// goes to stdout when not nil.
func (ph phases) tsbsTool(name string, stdout io.Writer, args ...string) error {
	ctx, cancel := context.WithTimeout(ph.ctx, 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(ph.m.opts.TSBSBin, name), args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, lastBytes(stderr.String(), 4000))
	}
	return nil
}

// lastBytes is the end of s, at most n bytes.
func lastBytes(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// influxIDPrefix starts every line but the first of an answer printed by
// tsbs_run_queries_influx --print-responses.
var influxIDPrefix = regexp.MustCompile(`^ID \d+: `)

// influxPrinted is the part of a printed answer checked.
type influxPrinted struct {
	InfluxQL string `json:"influxql"`
	Response struct {
		Error   string `json:"error"`
		Results []struct {
			Error  string            `json:"error"`
			Series []json.RawMessage `json:"series"`
		} `json:"results"`
	} `json:"response"`
}

// checkInfluxAnswers reads the answers of a --print-responses run and
// counts those that are not one result with at least one series and no
// error (lastpoint: one series a host is not checked here). Fewer answers
// than influxCheckQueries count as wrong.
func checkInfluxAnswers(out []byte, typ string) (checked, wrong int64, examples []string) {
	bad := func(what string) {
		wrong++
		if len(examples) < maxExamples {
			examples = append(examples, fmt.Sprintf("%s (InfluxQL): %s", typ, what))
		}
	}
	var cur []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Text()
		if cur == nil {
			if line == "{" {
				cur = []string{line}
			}
			continue
		}
		line = influxIDPrefix.ReplaceAllString(line, "")
		cur = append(cur, line)
		if line != "}" {
			continue
		}
		checked++
		var a influxPrinted
		switch err := json.Unmarshal([]byte(strings.Join(cur, "\n")), &a); {
		case err != nil:
			bad("answer is not JSON: " + err.Error())
		case a.Response.Error != "":
			bad(a.InfluxQL + ": " + a.Response.Error)
		case len(a.Response.Results) != 1:
			bad(fmt.Sprintf("%s: %d results", a.InfluxQL, len(a.Response.Results)))
		case a.Response.Results[0].Error != "":
			bad(a.InfluxQL + ": " + a.Response.Results[0].Error)
		case len(a.Response.Results[0].Series) == 0:
			bad(a.InfluxQL + ": no series")
		}
		cur = nil
	}
	if checked < influxCheckQueries {
		bad(fmt.Sprintf("tsbs_run_queries_influx printed %d answers, want %d", checked, influxCheckQueries))
	}
	return checked, wrong, examples
}

// influxRunComplete is the runner's summary line.
var influxRunComplete = regexp.MustCompile(`Run complete after (\d+) queries with \d+ workers \(Overall query rate ([0-9.]+) queries/sec\)`)

// read takes the figures from a measured run's standard output and its
// --results-file.
func (st *influxStats) read(stdout []byte, resultsFile string) error {
	m := influxRunComplete.FindSubmatch(stdout)
	if m == nil {
		return fmt.Errorf("no summary line in its output:\n%s", lastBytes(string(stdout), 2000))
	}
	st.Queries, _ = strconv.ParseInt(string(m[1]), 10, 64)
	st.QPS, _ = strconv.ParseFloat(string(m[2]), 64)
	b, err := os.ReadFile(resultsFile)
	if err != nil {
		return err
	}
	var res struct {
		Totals struct {
			Quantiles map[string]map[string]float64 `json:"overallQuantiles"`
		} `json:"Totals"`
	}
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("results file: %w", err)
	}
	all, ok := res.Totals.Quantiles["all_queries"]
	if !ok {
		return fmt.Errorf("results file has no all_queries quantiles")
	}
	st.P50Ms, st.P99Ms = all["q50"], all["q99"]
	return nil
}

// influxCheck is the InfluxQL phase's verdict: every checked answer
// carried series and no error.
func (m *measurement) influxCheck() error {
	var errs []error
	for _, typ := range tsbsTypeNames {
		if st, ok := m.influx[typ]; ok && st.Wrong > 0 {
			errs = append(errs, fmt.Errorf("%d of %d %s InfluxQL answers were errors or empty, e.g.:\n  %s", st.Wrong, st.Checked, typ, joinLines(st.Examples)))
		}
	}
	return errors.Join(errs...)
}

// InfluxQLFigures are the TSBS query types' figures through InfluxQL, as
// tsbs_run_queries_influx measured them (q/s over every query sent, p50
// and p99 of the timed ones); NaN when the phase did not run. They follow
// the PromQL ones (TSBSFigures, q_*) in the JSON line.
type InfluxQLFigures struct {
	I111P50Ms       report.Number `json:"influxql_1_1_1_p50_ms"`
	I111P99Ms       report.Number `json:"influxql_1_1_1_p99_ms"`
	I111QPS         report.Number `json:"influxql_1_1_1_qps"`
	I1112P50Ms      report.Number `json:"influxql_1_1_12_p50_ms"`
	I1112P99Ms      report.Number `json:"influxql_1_1_12_p99_ms"`
	I1112QPS        report.Number `json:"influxql_1_1_12_qps"`
	I181P50Ms       report.Number `json:"influxql_1_8_1_p50_ms"`
	I181P99Ms       report.Number `json:"influxql_1_8_1_p99_ms"`
	I181QPS         report.Number `json:"influxql_1_8_1_qps"`
	IMaxAllP50Ms    report.Number `json:"influxql_cpu_max_all_p50_ms"`
	IMaxAllP99Ms    report.Number `json:"influxql_cpu_max_all_p99_ms"`
	IMaxAllQPS      report.Number `json:"influxql_cpu_max_all_qps"`
	ILastpointP50Ms report.Number `json:"influxql_lastpoint_p50_ms"`
	ILastpointP99Ms report.Number `json:"influxql_lastpoint_p99_ms"`
	ILastpointQPS   report.Number `json:"influxql_lastpoint_qps"`
	InfluxQLQueries int64         `json:"influxql_queries"` // timed, all types
	InfluxQLChecked int64         `json:"influxql_queries_checked"`
	InfluxQLWrong   int64         `json:"influxql_queries_wrong"`
}

// influxFigures derives the figures from each type's stats.
func influxFigures(stats map[string]influxStats) InfluxQLFigures {
	fig := func(name string) (p50, p99, qps report.Number) {
		st, ok := stats[name]
		if !ok {
			nan := report.Number(math.NaN())
			return nan, nan, nan
		}
		return report.Number(report.Round(st.P50Ms, 4)), report.Number(report.Round(st.P99Ms, 4)), report.Number(report.Round(st.QPS, 0))
	}
	var f InfluxQLFigures
	f.I111P50Ms, f.I111P99Ms, f.I111QPS = fig("single-groupby-1-1-1")
	f.I1112P50Ms, f.I1112P99Ms, f.I1112QPS = fig("single-groupby-1-1-12")
	f.I181P50Ms, f.I181P99Ms, f.I181QPS = fig("single-groupby-1-8-1")
	f.IMaxAllP50Ms, f.IMaxAllP99Ms, f.IMaxAllQPS = fig("cpu-max-all-1")
	f.ILastpointP50Ms, f.ILastpointP99Ms, f.ILastpointQPS = fig("lastpoint")
	for _, st := range stats {
		f.InfluxQLQueries += st.Queries
		f.InfluxQLChecked += st.Checked
		f.InfluxQLWrong += st.Wrong
	}
	return f
}

// writeInfluxTable prints the InfluxQL figures of each type beside the
// PromQL ones, or nothing when the InfluxQL phase did not run.
func writeInfluxTable(w io.Writer, f InfluxQLFigures, p TSBSFigures, workers int) error {
	if f.InfluxQLChecked == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nTSBS cpu-only queries through InfluxQL, tsbs_run_queries_influx with %d workers (%s timed; %d answers checked, %d errors or empty), beside PromQL:\n",
		workers, report.Int(f.InfluxQLQueries), f.InfluxQLChecked, f.InfluxQLWrong)
	q := func(x report.Number) string { return report.Whole(float64(x)) }
	tb := report.Table{Header: []string{"query type", "InfluxQL p50 (ms)", "p99 (ms)", "q/s", "PromQL p50 (ms)", "p99 (ms)", "q/s"},
		RightAlign: []bool{false, true, true, true, true, true, true}}
	tb.Add("single-groupby-1-1-1", f.I111P50Ms.Text(3), f.I111P99Ms.Text(3), q(f.I111QPS), p.Q111P50Ms.Text(3), p.Q111P99Ms.Text(3), q(p.Q111QPS))
	tb.Add("single-groupby-1-1-12", f.I1112P50Ms.Text(3), f.I1112P99Ms.Text(3), q(f.I1112QPS), p.Q1112P50Ms.Text(3), p.Q1112P99Ms.Text(3), q(p.Q1112QPS))
	tb.Add("single-groupby-1-8-1", f.I181P50Ms.Text(3), f.I181P99Ms.Text(3), q(f.I181QPS), p.Q181P50Ms.Text(3), p.Q181P99Ms.Text(3), q(p.Q181QPS))
	tb.Add("cpu-max-all-1", f.IMaxAllP50Ms.Text(3), f.IMaxAllP99Ms.Text(3), q(f.IMaxAllQPS), p.QMaxAllP50Ms.Text(3), p.QMaxAllP99Ms.Text(3), q(p.QMaxAllQPS))
	tb.Add("lastpoint", f.ILastpointP50Ms.Text(3), f.ILastpointP99Ms.Text(3), q(f.ILastpointQPS), p.QLastpointP50Ms.Text(3), p.QLastpointP99Ms.Text(3), q(p.QLastpointQPS))
	return tb.Write(w)
}
