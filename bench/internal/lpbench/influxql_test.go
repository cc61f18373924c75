package lpbench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// printed renders an answer as tsbs_run_queries_influx --print-responses
// prints it: indented JSON whose lines after the first carry "ID n: ".
func printed(t *testing.T, id int, q string, response any) string {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"influxql": q, "response": response}, fmt.Sprintf("ID %d: ", id), "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n\n"
}

func TestCheckInfluxAnswers(t *testing.T) {
	good := map[string]any{"results": []any{map[string]any{"statement_id": 0, "series": []any{
		map[string]any{"name": "cpu", "columns": []string{"time", "max"}, "values": [][]any{{"2026-01-01T00:00:00Z", 3}}}}}}}
	var out strings.Builder
	out.WriteString("some log line\n")
	for i := range influxCheckQueries {
		out.WriteString(printed(t, i, "SELECT max(usage_user) from cpu", good))
	}
	if checked, wrong, ex := checkInfluxAnswers([]byte(out.String()), "t"); checked != influxCheckQueries || wrong != 0 {
		t.Errorf("good answers: checked %d, wrong %d (%v)", checked, wrong, ex)
	}

	bad := []any{
		map[string]any{"results": []any{map[string]any{"statement_id": 0, "error": "boom"}}},
		map[string]any{"error": "parse error"},
		map[string]any{"results": []any{map[string]any{"statement_id": 0}}},
		map[string]any{"results": []any{}},
	}
	for _, b := range bad {
		out.Reset()
		out.WriteString(printed(t, 0, "q", b))
		for i := 1; i < influxCheckQueries; i++ {
			out.WriteString(printed(t, i, "q", good))
		}
		if _, wrong, _ := checkInfluxAnswers([]byte(out.String()), "t"); wrong != 1 {
			t.Errorf("%v: %d wrong, want 1", b, wrong)
		}
	}
	// Too few answers count as wrong.
	if _, wrong, _ := checkInfluxAnswers([]byte(printed(t, 0, "q", good)), "t"); wrong != 1 {
		t.Errorf("one answer of %d: %d wrong, want 1", influxCheckQueries, wrong)
	}
}

func TestInfluxStatsRead(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "r.json")
	body := `{"ResultFormatVersion":"0.1","Totals":{"overallQuantiles":{"all_queries":{"q0":0.5,"q50":1.25,"q99":7.5},
"Influx_last_row_per_host":{"q50":99,"q99":99}},"overallQueryRates":{"all_queries":812.5}}}`
	if err := os.WriteFile(results, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout := "wall clock time: 1.2sec\nRun complete after 900 queries with 2 workers (Overall query rate 812.34 queries/sec):\nall queries :\nmin: 1ms\n"
	var st influxStats
	if err := st.read([]byte(stdout), results); err != nil {
		t.Fatal(err)
	}
	if st.Queries != 900 || st.QPS != 812.34 || st.P50Ms != 1.25 || st.P99Ms != 7.5 {
		t.Errorf("read %+v", st)
	}
	if err := st.read([]byte("no summary"), results); err == nil {
		t.Error("output without the summary line accepted")
	}
	if err := os.WriteFile(results, []byte(`{"Totals":{"overallQuantiles":{}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.read([]byte(stdout), results); err == nil {
		t.Error("results without all_queries accepted")
	}
}

func TestInfluxFigures(t *testing.T) {
	f := influxFigures(map[string]influxStats{
		"lastpoint":     {QPS: 100.4, P50Ms: 2.34567, P99Ms: 9, Queries: 10, Checked: 20, Wrong: 1},
		"cpu-max-all-1": {QPS: 50, P50Ms: 4, P99Ms: 8, Queries: 10, Checked: 20},
	})
	if f.ILastpointQPS != 100 || f.ILastpointP50Ms != 2.3457 || f.IMaxAllP99Ms != 8 || f.InfluxQLQueries != 20 || f.InfluxQLChecked != 40 || f.InfluxQLWrong != 1 {
		t.Errorf("figures %+v", f)
	}
	if !math.IsNaN(float64(f.I111P50Ms)) {
		t.Errorf("a type not run is %v, want NaN", f.I111P50Ms)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"influxql_lastpoint_p50_ms":2.3457`, `"influxql_cpu_max_all_qps":50`, `"influxql_1_1_1_p50_ms":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
}

func TestInfluxSkip(t *testing.T) {
	o := DefaultOptions()
	o.TSBSBin = t.TempDir()
	if s := o.influxSkip(); s != "" {
		t.Errorf("default options skipped: %s", s)
	}
	o.Span = 12 * time.Hour
	if s := o.influxSkip(); !strings.Contains(s, "12-hour") {
		t.Errorf("12 h span: %q", s)
	}
	o.Span, o.Hosts = 24*time.Hour, 4
	if s := o.influxSkip(); !strings.Contains(s, "8 hosts") {
		t.Errorf("4 hosts: %q", s)
	}
	if ok, err := findInfluxTools(o.TSBSBin); ok || err != nil {
		t.Errorf("empty directory: %v %v", ok, err)
	}
}
