package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

const climateRules = `
groups:
  - name: climate
    interval: 1s
    rules:
      - record: room:temperature:avg
        expr: avg by (room) (temperature)
`

// TestRules_NodeServesItsRulesAndReloads wires rules into a node as
// tributary node does: the rule is evaluated into the store, listed by
// /api/v1/rules, and POST /-/reload picks up a new file.
func TestRules_NodeServesItsRulesAndReloads(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "climate.yml"), []byte(climateRules), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "pi-1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	rf := rulesFlags{}
	fs := newFlagSet("test", io.Discard, "")
	rf.register(fs)
	if err := fs.Parse([]string{"--rules", filepath.Join(dir, "*.yml")}); err != nil {
		t.Fatal(err)
	}
	if err := rf.validate(false); err != nil {
		t.Fatal(err)
	}
	sf := serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0",
		prom: prom.Options{MaxSamples: 1_000_000, QueryTimeout: 10 * time.Second, LookbackDelta: 5 * time.Minute, MaxConcurrentQueries: 2}}
	tp, err := telemetry.Setup(context.Background(), telemetry.Config{Role: "node", Instance: "pi-1", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	rr, err := rf.open(n, &sf, "", tp.MeterProvider(), log)
	if err != nil {
		t.Fatal(err)
	}
	fe, err := sf.start(n, testNodeAPI(n, "test").Register, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.stop(time.Second)
	rr.start(log)
	defer rr.stop()
	httpAddr := frontAddr(t, fe, "http")

	b := model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "temperature"}, {Name: "room", Value: "lab"}},
		Ts: []int64{time.Now().UnixMilli()}, Vs: []float64{21.5}}
	if _, err := n.Write(context.Background(), []model.Batch{b}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v := promInstant(t, httpAddr, `room:temperature:avg{room="lab"}`); len(v) == 1 && v[0] == 21.5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recording rule's series never appeared")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := ruleGroups(t, httpAddr); len(got) != 1 || got[0] != "climate" {
		t.Fatalf("groups %v", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "more.yml"), []byte(strings.ReplaceAll(climateRules, "climate", "climate-2")), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+httpAddr+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := ruleGroups(t, httpAddr); resp.StatusCode != http.StatusOK || len(got) != 2 {
		t.Fatalf("after reload: %d, groups %v", resp.StatusCode, got)
	}

	rec := httptest.NewRecorder()
	tp.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		`tributary_rules_evaluations_total{rule_group="` + filepath.Join(dir, "climate.yml") + `;climate"}`,
		"tributary_rules_evaluation_failures_total{",
		"tributary_rules_group_iterations_missed_total{",
		"tributary_rules_group_evaluation_duration_seconds_bucket{",
		"tributary_rules_group_last_duration_seconds{",
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func ruleGroups(t *testing.T, httpAddr string) []string {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Groups []struct{ Name string } `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range body.Data.Groups {
		names = append(names, g.Name)
	}
	return names
}

func TestRulesCheck_ExitStatusAndMessages(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yml")
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(good, []byte(climateRules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("groups:\n  - name: g\n    rules:\n      - alert: Hot\n        expr: temperature >\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"rules", "check", good}, 0, []string{"SUCCESS " + good + ": 1 groups, 1 recording rules, 0 alerting rules"}},
		{[]string{"rules", "check", good, bad}, 1, []string{"FAILED " + bad, bad + ": 5:15: group \"g\", rule 1, \"Hot\"", "1 of 2 rule files are not valid"}},
		{[]string{"rules", "check"}, 2, []string{"no rule file given"}},
		{[]string{"rules"}, 2, []string{"usage: tributary rules check FILE..."}},
	} {
		var out bytes.Buffer
		if code := run(tc.args, &out, &out); code != tc.code {
			t.Errorf("%v: exit %d, want %d: %s", tc.args, code, tc.code, out.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
}

func TestRulesFlags_Refused(t *testing.T) {
	for name, args := range map[string][]string{
		"alertmanager without rules":  {"--alertmanager-url", "http://127.0.0.1:9093"},
		"alertmanager bad scheme":     {"--rules", "x.yml", "--alertmanager-url", "tcp://127.0.0.1:9093"},
		"negative interval":           {"--rules", "x.yml", "--rules-evaluation-interval", "-1s"},
		"basic auth without password": {"--rules", "x.yml", "--alertmanager-url", "https://am:9093", "--alertmanager-basic-auth-user", "pi"},
		"missing token file":          {"--rules", "x.yml", "--alertmanager-url", "https://am:9093", "--alertmanager-bearer-token-file", "/nonexistent/token"},
		"cert without key":            {"--rules", "x.yml", "--alertmanager-url", "https://am:9093", "--alertmanager-cert", "rules.go"},
		"auth without alertmanager":   {"--rules", "x.yml", "--alertmanager-ca", "rules.go"},
	} {
		var rf rulesFlags
		fs := newFlagSet("test", io.Discard, "")
		rf.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := rf.validate(false); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
