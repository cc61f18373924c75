package compat

import (
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// python3 is Debian's interpreter, which has python3-influxdb (another
// python3 on PATH, e.g. a pyenv one, may not).
const python3 = "/usr/bin/python3"

type pyCall struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
	Code   any             `json:"code"`
}

// TestCompat_PythonInfluxDB writes with Debian's python3-influxdb
// (InfluxDBClient.write_points), reads back with query() and calls every
// management method the client offers: each is answered, or refused with
// an InfluxQL error the client reports (never a bare 404).
func TestCompat_PythonInfluxDB(t *testing.T) {
	requireCompat(t, python3)
	n := startNode(t)
	host, port, _ := strings.Cut(n.http, ":")
	now := time.Now().Truncate(time.Second).UnixMilli()
	out, err := exec.Command(python3, filepath.Join("testdata", "influxdb_client.py"), host, port, fmt.Sprint(now)).CombinedOutput()
	if err != nil {
		t.Fatalf("influxdb_client.py: %v\n%s", err, out)
	}
	calls := map[string]pyCall{}
	if err := json.Unmarshal(out, &calls); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
	// Writing, querying and listing must work.
	for _, name := range []string{"ping", "create_database", "switch_database", "write_points", "query", "query_raw",
		"get_list_database", "get_list_measurements", "get_list_series", "get_list_retention_policies"} {
		if c, ok := calls[name]; !ok || !c.OK {
			t.Errorf("%s failed: %+v", name, c)
		}
	}
	// The rest are answered or clearly refused.
	names := make([]string, 0, len(calls))
	for name := range calls {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := calls[name]
		t.Logf("%-28s ok=%-5v %s", name, c.OK, firstLine(c.Error))
		if !c.OK && (fmt.Sprint(c.Code) == "404" || strings.Contains(c.Error, "404 page not found") || c.Error == "") {
			t.Errorf("%s: not clearly refused: %s", name, c.Error)
		}
	}
	checkPythonQuery(t, calls["query"].Result)
	if !strings.Contains(string(calls["get_list_measurements"].Result), `"cpu"`) {
		t.Errorf("get_list_measurements: %s", calls["get_list_measurements"].Result)
	}
	if !strings.Contains(string(calls["get_list_series"].Result), "cpu,host=a") {
		t.Errorf("get_list_series: %s", calls["get_list_series"].Result)
	}
	if !strings.Contains(string(calls["get_list_database"].Result), `"compat"`) {
		t.Errorf("get_list_database: %s", calls["get_list_database"].Result)
	}
	// The string field was skipped, the boolean stored as 1.
	up := n.promSamples(`cpu_up{host="a"}`, "1h")
	if len(up) != 1 {
		t.Fatalf("cpu_up: %v", up)
	}
	for _, s := range up {
		if len(s) != 6 {
			t.Errorf("cpu_up has %d points, want 6", len(s))
		}
		for _, v := range s {
			if v != 1 {
				t.Errorf("cpu_up = %v, want 1", v)
			}
		}
	}
}

// checkPythonQuery checks the raw answer of the mean query: one series per
// host, the mean of what was written (10..15 and 20..25).
func checkPythonQuery(t *testing.T, raw json.RawMessage) {
	t.Helper()
	var ans struct {
		Series []struct {
			Name    string            `json:"name"`
			Tags    map[string]string `json:"tags"`
			Columns []string          `json:"columns"`
			Values  [][]any           `json:"values"`
		} `json:"series"`
	}
	if err := json.Unmarshal(raw, &ans); err != nil {
		t.Fatalf("query result: %v: %s", err, raw)
	}
	want := map[string]float64{"a": 12.5, "b": 22.5}
	if len(ans.Series) != 2 {
		t.Fatalf("query: %d series, want 2: %s", len(ans.Series), raw)
	}
	for _, s := range ans.Series {
		if s.Name != "cpu" || len(s.Values) != 1 || len(s.Columns) != 2 || s.Columns[1] != "mean" {
			t.Fatalf("query series %+v", s)
		}
		if v, _ := s.Values[0][1].(float64); math.Abs(v-want[s.Tags["host"]]) > 1e-9 {
			t.Errorf("mean of host %s = %v, want %v", s.Tags["host"], s.Values[0][1], want[s.Tags["host"]])
		}
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
