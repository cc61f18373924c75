package compat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The TSBS run: a small cpu-only dataset (tsbsScale hosts, ten fields
// each, one line every tsbsInterval over tsbsSpan, which must exceed the
// 12 hours single-groupby-1-1-12 draws its windows from) and tsbsQueries
// queries of each of the five cpu-only query types.
const (
	tsbsScale    = 10
	tsbsSpan     = 13 * time.Hour
	tsbsInterval = 10 * time.Second
	tsbsSeed     = 123
	tsbsQueries  = 10
	tsbsDB       = "benchmark"
	tsbsFields   = 10
)

// tsbsTypes are TSBS's cpu-only query types checked.
var tsbsTypes = []string{"single-groupby-1-1-1", "single-groupby-1-1-12", "single-groupby-1-8-1", "cpu-max-all-1", "lastpoint"}

// tsbsTools are the TSBS commands used, built from bench/tsbs.
var tsbsTools = []string{"tsbs_generate_data", "tsbs_generate_queries", "tsbs_load_influx", "tsbs_run_queries_influx"}

// TestCompat_TSBS loads a TSBS cpu-only dataset with TSBS's own InfluxDB
// loader (its default path: SHOW DATABASES, then CREATE DATABASE) and runs
// TSBS's five cpu-only query types with its InfluxDB query runner, first
// against a node, then against `tributary local`, whose queries go
// through the coordinator. Every answer the runner prints is compared,
// bucket by bucket, with the same question asked through PromQL on the
// same process.
func TestCompat_TSBS(t *testing.T) {
	requireCompat(t)
	bin := tsbsBinaries(t)
	ds := tsbsGenerate(t, bin)
	t.Run("node", func(t *testing.T) { tsbsCheck(t, bin, ds, startNode(t)) })
	t.Run("local", func(t *testing.T) { tsbsCheck(t, bin, ds, startLocal(t)) })
}

// tsbsBinaries returns the directory of the TSBS commands: that of
// TRIBUTARY_TSBS_BIN (make compat builds them into bin/tsbs), else a
// temporary one they are built into from bench/tsbs's module.
func tsbsBinaries(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TRIBUTARY_TSBS_BIN")
	if dir == "" {
		dir = t.TempDir()
		for _, name := range tsbsTools {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/timescale/tsbs/cmd/"+name)
			cmd.Dir = filepath.Join("..", "bench", "tsbs")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("build %s: %v\n%s", name, err, out)
			}
		}
	}
	for _, name := range tsbsTools {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("TSBS tool missing (make tsbs builds them): %v", err)
		}
	}
	return dir
}

// tsbsDataset is a generated data file and the time range it covers.
type tsbsDataset struct {
	dir, file  string
	start, end time.Time
	lines      int
}

// tsbsGenerate writes the dataset: tsbsSpan ending at least an hour ago
// (whole hours, inside the node's raw retention).
func tsbsGenerate(t *testing.T, bin string) tsbsDataset {
	t.Helper()
	ds := tsbsDataset{dir: t.TempDir()}
	ds.end = time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	ds.start = ds.end.Add(-tsbsSpan)
	ds.file = filepath.Join(ds.dir, "data.lp")
	f, err := os.Create(ds.file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "tsbs_generate_data"), "--use-case=cpu-only", "--format=influx",
		fmt.Sprintf("--scale=%d", tsbsScale), fmt.Sprintf("--seed=%d", tsbsSeed), "--log-interval="+tsbsInterval.String(),
		"--timestamp-start="+ds.start.Format(time.RFC3339), "--timestamp-end="+ds.end.Format(time.RFC3339))
	cmd.Stdout, cmd.Stderr = f, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tsbs_generate_data: %v\n%s", err, stderr.String())
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if len(sc.Bytes()) > 0 {
			ds.lines++
		}
	}
	if want := tsbsScale * int(tsbsSpan/tsbsInterval); ds.lines != want || sc.Err() != nil {
		t.Fatalf("tsbs_generate_data wrote %d lines (%v), want %d", ds.lines, sc.Err(), want)
	}
	return ds
}

// tsbsCheck loads ds into n with tsbs_load_influx, then runs and checks
// every query type.
func tsbsCheck(t *testing.T, bin string, ds tsbsDataset, n *node) {
	base := "http://" + n.http
	if dbs := showDatabases(t, n); strings.Contains(dbs, `"`+tsbsDB+`"`) {
		t.Fatalf("SHOW DATABASES lists %s before the load: %s", tsbsDB, dbs)
	}
	// Two workers, each host's lines always to the same one: without
	// --hash-workers a worker may fall more than the node's --ooo-window
	// behind the other and have its lines refused.
	out, err := exec.Command(filepath.Join(bin, "tsbs_load_influx"), "--urls="+base, "--db-name="+tsbsDB,
		"--file="+ds.file, "--workers=2", "--hash-workers", "--batch-size=1000").CombinedOutput()
	if err != nil {
		t.Fatalf("tsbs_load_influx: %v\n%s", err, out)
	}
	points := ds.lines * tsbsFields
	if want := fmt.Sprintf("loaded %d metrics", points); !strings.Contains(string(out), want) {
		t.Fatalf("tsbs_load_influx did not report %q:\n%s", want, out)
	}
	// On tributary local the listing is the catalog's, which learns an
	// edge's new series from its announcements a moment later
	// (docs/coordinator.md): wait for it, within the same bound as the
	// points below.
	loaded := time.Now()
	for dbs := ""; !strings.Contains(dbs, `"`+tsbsDB+`"`); time.Sleep(200 * time.Millisecond) {
		if dbs = showDatabases(t, n); time.Since(loaded) > 60*time.Second {
			t.Fatalf("SHOW DATABASES does not list %s 60 s after the load: %s", tsbsDB, dbs)
		}
	}
	t.Logf("SHOW DATABASES lists %s %v after the load", tsbsDB, time.Since(loaded).Round(time.Millisecond))
	// Every point is readable through PromQL (tributary local: once the
	// coordinator's front end sees the edge's data).
	count := fmt.Sprintf(`sum(count_over_time({__name__=~"cpu_usage_.*",db=%q}[%dms]))`, tsbsDB, (tsbsSpan + 3*time.Hour).Milliseconds())
	var got string
	for deadline := time.Now().Add(60 * time.Second); got != strconv.Itoa(points); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("PromQL counts %q points after tsbs_load_influx loaded %d", got, points)
		}
		r := promQuery(t, n, "/api/v1/query", url.Values{"query": {count}, "time": {promTime(ds.end.Add(time.Hour))}})
		got = ""
		if len(r) == 1 && len(r[0].Value) == 2 {
			got, _ = r[0].Value[1].(string)
		}
	}
	for _, typ := range tsbsTypes {
		answers := tsbsRun(t, bin, ds, typ, base)
		checked := 0
		for _, a := range answers {
			if err := tsbsCompare(t, n, typ, a); err != nil {
				t.Errorf("%s: %s\n  %v", typ, a.InfluxQL, err)
				continue
			}
			checked++
		}
		t.Logf("%s: %d answers of tsbs_run_queries_influx equal to PromQL's", typ, checked)
	}
}

// showDatabases returns the body of SHOW DATABASES as TSBS's loader asks it.
func showDatabases(t *testing.T, n *node) string {
	t.Helper()
	st, b := n.do(http.MethodGet, "http://"+n.http+"/query?q=show%20databases", "", nil)
	if st != http.StatusOK {
		t.Fatalf("SHOW DATABASES: %d %s", st, b)
	}
	return string(b)
}

// tsbsAnswer is one query and answer printed by tsbs_run_queries_influx
// --print-responses.
type tsbsAnswer struct {
	InfluxQL string `json:"influxql"`
	Response struct {
		Results []struct {
			Error  string `json:"error"`
			Series []struct {
				Name    string            `json:"name"`
				Tags    map[string]string `json:"tags"`
				Columns []string          `json:"columns"`
				Values  [][]any           `json:"values"`
			} `json:"series"`
		} `json:"results"`
		Error string `json:"error"`
	} `json:"response"`
}

// tsbsRun generates tsbsQueries queries of type typ over ds's time range
// and runs them with tsbs_run_queries_influx (2 workers, as TSBS runs
// them) against base, returning the answers it printed.
func tsbsRun(t *testing.T, bin string, ds tsbsDataset, typ, base string) []tsbsAnswer {
	t.Helper()
	qfile := filepath.Join(ds.dir, "queries-"+typ)
	if _, err := os.Stat(qfile); err != nil {
		out, err := exec.Command(filepath.Join(bin, "tsbs_generate_queries"), "--use-case=cpu-only", "--format=influx",
			fmt.Sprintf("--scale=%d", tsbsScale), fmt.Sprintf("--seed=%d", tsbsSeed), fmt.Sprintf("--queries=%d", tsbsQueries),
			"--query-type="+typ, "--file="+qfile,
			"--timestamp-start="+ds.start.Format(time.RFC3339), "--timestamp-end="+ds.end.Format(time.RFC3339)).CombinedOutput()
		if err != nil {
			t.Fatalf("tsbs_generate_queries %s: %v\n%s", typ, err, out)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "tsbs_run_queries_influx"), "--urls="+base, "--db-name="+tsbsDB,
		"--file="+qfile, "--workers=2", "--print-responses")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tsbs_run_queries_influx %s: %v\n%s\n%s", typ, err, tail(stdout.String(), 2000), tail(stderr.String(), 2000))
	}
	answers, err := parseTSBSResponses(stdout.Bytes())
	if err != nil {
		t.Fatalf("tsbs_run_queries_influx %s output: %v", typ, err)
	}
	if len(answers) != tsbsQueries {
		t.Fatalf("tsbs_run_queries_influx %s printed %d answers, want %d:\n%s", typ, len(answers), tsbsQueries, tail(stdout.String(), 2000))
	}
	return answers
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// tsbsIDPrefix is the prefix the runner puts before every line of a
// printed answer but its first ("{").
var tsbsIDPrefix = regexp.MustCompile(`^ID \d+: `)

// parseTSBSResponses reads the answers the runner printed: each a JSON
// object whose lines after the first carry an "ID n: " prefix, followed
// by an empty line.
func parseTSBSResponses(out []byte) ([]tsbsAnswer, error) {
	var (
		answers []tsbsAnswer
		cur     []string
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && line == "{":
			cur = []string{line}
		case cur != nil:
			if !tsbsIDPrefix.MatchString(line) {
				return nil, fmt.Errorf("unexpected line inside an answer: %q", line)
			}
			line = tsbsIDPrefix.ReplaceAllString(line, "")
			cur = append(cur, line)
			if line == "}" {
				var a tsbsAnswer
				if err := json.Unmarshal([]byte(strings.Join(cur, "\n")), &a); err != nil {
					return nil, err
				}
				answers = append(answers, a)
				cur = nil
			}
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("output ends inside an answer")
	}
	return answers, sc.Err()
}

// tsbsGroupBy is the InfluxQL TSBS generates for single-groupby-* and
// cpu-max-all-*: max of some fields of some hosts over [start, end), by
// minute or hour.
var (
	tsbsGroupBy = regexp.MustCompile(`^SELECT (.+) from cpu where \((.+)\) and time >= '([^']+)' and time < '([^']+)' group by time\((1m|1h)\)$`)
	tsbsMax     = regexp.MustCompile(`^max\((\w+)\)$`)
	tsbsHost    = regexp.MustCompile(`hostname = '([^']+)'`)
)

// tsbsLastpoint is the InfluxQL of lastpoint.
const tsbsLastpoint = `SELECT * from cpu group by "hostname" order by time desc limit 1`

// tsbsCompare checks one answer against PromQL.
func tsbsCompare(t *testing.T, n *node, typ string, a tsbsAnswer) error {
	if a.Response.Error != "" {
		return fmt.Errorf("error: %s", a.Response.Error)
	}
	if len(a.Response.Results) != 1 {
		return fmt.Errorf("%d results, want 1", len(a.Response.Results))
	}
	if e := a.Response.Results[0].Error; e != "" {
		return fmt.Errorf("error: %s", e)
	}
	if typ == "lastpoint" {
		if a.InfluxQL != tsbsLastpoint {
			return fmt.Errorf("not TSBS's lastpoint query")
		}
		return tsbsCompareLastpoint(t, n, a)
	}
	m := tsbsGroupBy.FindStringSubmatch(a.InfluxQL)
	if m == nil {
		return fmt.Errorf("not a TSBS group-by query")
	}
	var fields []string
	for _, s := range strings.Split(m[1], ",") {
		f := tsbsMax.FindStringSubmatch(strings.TrimSpace(s))
		if f == nil {
			return fmt.Errorf("select clause %q is not max(field)", s)
		}
		fields = append(fields, f[1])
	}
	var hosts []string
	for _, h := range tsbsHost.FindAllStringSubmatch(m[2], -1) {
		hosts = append(hosts, h[1])
	}
	start, err1 := time.Parse(time.RFC3339, m[3])
	end, err2 := time.Parse(time.RFC3339, m[4])
	step := time.Minute
	if m[5] == "1h" {
		step = time.Hour
	}
	if err1 != nil || err2 != nil || len(hosts) == 0 {
		return fmt.Errorf("cannot read the query's hosts and time range")
	}
	want, err := tsbsPromBuckets(t, n, fields, hosts, start, end, step)
	if err != nil {
		return err
	}
	return tsbsCompareBuckets(a, fields, want)
}

// tsbsPromBuckets answers a group-by query through PromQL: for every
// bucket [b, b+step) of [start, end) (clipped to the range), the maximum
// of each field over the hosts, nil where there is no sample. Whole
// buckets are one query_range (max_over_time over step evaluated at the
// bucket's last millisecond, so over exactly [b, b+step)); the clipped
// first and last buckets are instant queries over their own window.
func tsbsPromBuckets(t *testing.T, n *node, fields, hosts []string, start, end time.Time, step time.Duration) (map[int64][]*float64, error) {
	sel := fmt.Sprintf(`{__name__=~"cpu_(%s)",db=%q,hostname=~%q}`, strings.Join(fields, "|"), tsbsDB, strings.Join(hosts, "|"))
	expr := func(w time.Duration) string {
		return fmt.Sprintf(`max by (__name__) (max_over_time(%s[%dms]))`, sel, w.Milliseconds())
	}
	out := map[int64][]*float64{}
	add := func(r []promSeries, shift time.Duration) error {
		for _, s := range r {
			f := indexOf(fields, strings.TrimPrefix(s.Metric["__name__"], "cpu_"))
			if len(fields) == 1 && len(s.Metric) == 0 {
				// One field: max_over_time dropped the name (delayed
				// name removal keeps it only where series would clash).
				f = 0
			}
			if f < 0 {
				return fmt.Errorf("PromQL answered series %v", s.Metric)
			}
			pts := s.Values
			if s.Value != nil {
				pts = [][]any{s.Value}
			}
			for _, p := range pts {
				ts, v, err := promPoint(p)
				if err != nil {
					return err
				}
				b := ts - shift.Milliseconds()
				if out[b] == nil {
					out[b] = make([]*float64, len(fields))
				}
				out[b][f] = &v
			}
		}
		return nil
	}
	var whole []time.Time
	for b := start.Truncate(step); b.Before(end); b = b.Add(step) {
		lo, hi := maxTime(b, start), minTime(b.Add(step), end)
		if lo.Equal(b) && hi.Equal(b.Add(step)) {
			whole = append(whole, b)
			continue
		}
		// Evaluated at hi-1ms, a window of hi-lo covers (lo-1ms, hi-1ms]:
		// [lo, hi) at millisecond precision. The point is filed under b.
		at := hi.Add(-time.Millisecond)
		r := promQuery(t, n, "/api/v1/query", url.Values{"query": {expr(hi.Sub(lo))}, "time": {promTime(at)}})
		if err := add(r, at.Sub(b)); err != nil {
			return nil, err
		}
	}
	if len(whole) > 0 {
		shift := step - time.Millisecond
		r := promQuery(t, n, "/api/v1/query_range", url.Values{"query": {expr(step)},
			"start": {promTime(whole[0].Add(shift))}, "end": {promTime(whole[len(whole)-1].Add(shift))},
			"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
		if err := add(r, shift); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tsbsCompareBuckets compares a group-by answer (one series "cpu",
// columns time, max, max_1, …) with the PromQL buckets.
func tsbsCompareBuckets(a tsbsAnswer, fields []string, want map[int64][]*float64) error {
	series := a.Response.Results[0].Series
	if len(series) != 1 || series[0].Name != "cpu" || len(series[0].Tags) != 0 {
		return fmt.Errorf("want one untagged series cpu, got %d series", len(series))
	}
	s := series[0]
	if len(s.Columns) != 1+len(fields) || s.Columns[0] != "time" {
		return fmt.Errorf("columns %v", s.Columns)
	}
	seen := 0
	for _, row := range s.Values {
		if len(row) != len(s.Columns) {
			return fmt.Errorf("row %v has %d values, want %d", row, len(row), len(s.Columns))
		}
		ts, ok := row[0].(string)
		tm, err := time.Parse(time.RFC3339Nano, ts)
		if !ok || err != nil {
			return fmt.Errorf("row time %v", row[0])
		}
		w := want[tm.UnixMilli()]
		if w != nil {
			seen++
		}
		for f := range fields {
			var wf *float64
			if w != nil {
				wf = w[f]
			}
			switch got := row[1+f].(type) {
			case nil:
				if wf != nil {
					return fmt.Errorf("%s %s: InfluxQL null, PromQL %v", ts, fields[f], *wf)
				}
			case float64:
				if wf == nil || *wf != got {
					return fmt.Errorf("%s %s: InfluxQL %v, PromQL %v", ts, fields[f], got, fmtPtr(wf))
				}
			default:
				return fmt.Errorf("%s %s: value %v is not a number", ts, fields[f], got)
			}
		}
	}
	if seen != len(want) || len(want) == 0 {
		return fmt.Errorf("InfluxQL answered %d of the %d buckets PromQL has", seen, len(want))
	}
	return nil
}

// tsbsCompareLastpoint checks lastpoint's answer — one series per host,
// one row: the time of the host's newest line, its tags and fields —
// against PromQL's last_over_time of each field, the tags of that series,
// and the time of its newest sample.
func tsbsCompareLastpoint(t *testing.T, n *node, a tsbsAnswer) error {
	series := a.Response.Results[0].Series
	if len(series) != tsbsScale {
		return fmt.Errorf("%d series, want one per host (%d)", len(series), tsbsScale)
	}
	now := promTime(time.Now())
	lookback := fmt.Sprintf("%dms", (tsbsSpan + 3*time.Hour).Milliseconds())
	type hostField struct{ host, field string }
	last := map[hostField]promSeries{}
	lastTime := map[hostField]float64{}
	for f := range tsbsFields {
		name := tsbsFieldName(f)
		sel := fmt.Sprintf(`cpu_%s{db=%q}`, name, tsbsDB)
		for _, s := range promQuery(t, n, "/api/v1/query", url.Values{"query": {"last_over_time(" + sel + "[" + lookback + "])"}, "time": {now}}) {
			last[hostField{s.Metric["hostname"], name}] = s
		}
		// The time of the newest sample: timestamp() of the selector at
		// every 10 s step of the span, the largest.
		for _, s := range promQuery(t, n, "/api/v1/query", url.Values{"query": {"max_over_time(timestamp(" + sel + ")[" + lookback + ":10s])"}, "time": {now}}) {
			_, v, err := promPoint(s.Value)
			if err != nil {
				return err
			}
			lastTime[hostField{s.Metric["hostname"], name}] = v
		}
	}
	for _, s := range series {
		host := s.Tags["hostname"]
		if s.Name != "cpu" || host == "" || len(s.Values) != 1 || len(s.Values[0]) != len(s.Columns) || len(s.Columns) == 0 || s.Columns[0] != "time" {
			return fmt.Errorf("series %s %v: want cpu by hostname, one row of %v", s.Name, s.Tags, s.Columns)
		}
		row := s.Values[0]
		ts, _ := row[0].(string)
		tm, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return fmt.Errorf("host %s: time %v", host, row[0])
		}
		fieldsSeen := 0
		for i, col := range s.Columns[1:] {
			v := row[1+i]
			if !strings.HasPrefix(col, "usage_") {
				// A tag column: the label of the host's series.
				if p, ok := last[hostField{host, "usage_user"}]; !ok || p.Metric[col] != v {
					return fmt.Errorf("host %s: tag %s is %v, PromQL's series has %q", host, col, v, p.Metric[col])
				}
				continue
			}
			fieldsSeen++
			p, ok := last[hostField{host, col}]
			if !ok {
				return fmt.Errorf("host %s: PromQL has no %s", host, col)
			}
			_, pv, err := promPoint(p.Value)
			if err != nil {
				return err
			}
			if got, ok := v.(float64); !ok || got != pv {
				return fmt.Errorf("host %s %s: InfluxQL %v, PromQL %v", host, col, v, pv)
			}
			if lt := lastTime[hostField{host, col}]; int64(math.Round(lt*1000)) != tm.UnixMilli() {
				return fmt.Errorf("host %s %s: InfluxQL's time %s, PromQL's newest sample at %v", host, col, ts, lt)
			}
		}
		if fieldsSeen != tsbsFields {
			return fmt.Errorf("host %s: %d field columns, want %d", host, fieldsSeen, tsbsFields)
		}
	}
	return nil
}

// tsbsFieldName is the f-th cpu field TSBS writes.
func tsbsFieldName(f int) string {
	return [...]string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
		"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}[f]
}

// promSeries is one series of a PromQL answer (vector or matrix).
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// promQuery asks the node's Prometheus API and returns the answer's series.
func promQuery(t *testing.T, n *node, path string, q url.Values) []promSeries {
	t.Helper()
	st, b := n.get(path, q)
	var ans struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSeries `json:"result"`
		} `json:"data"`
	}
	if st != http.StatusOK || json.Unmarshal(b, &ans) != nil || ans.Status != "success" {
		t.Fatalf("%s %v: %d %s", path, q, st, b)
	}
	return ans.Data.Result
}

// promPoint reads a [time, "value"] pair.
func promPoint(p []any) (ms int64, v float64, err error) {
	if len(p) != 2 {
		return 0, 0, fmt.Errorf("point %v", p)
	}
	ts, ok1 := p[0].(float64)
	vs, ok2 := p[1].(string)
	v, err = strconv.ParseFloat(vs, 64)
	if !ok1 || !ok2 || err != nil {
		return 0, 0, fmt.Errorf("point %v", p)
	}
	return int64(math.Round(ts * 1000)), v, nil
}

// promTime is t as the API's seconds with millisecond decimals.
func promTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

func indexOf(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func fmtPtr(p *float64) string {
	if p == nil {
		return "nothing"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}
