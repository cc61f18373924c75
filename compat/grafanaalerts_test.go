package compat

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// grafanaRules is the answer of /api/v1/rules as Grafana's unified
// alerting reads it for a data source-managed ruler (its PromRulesResponse,
// PromRuleGroupDTO, PromAlertingRuleDTO and PromRecordingRuleDTO types):
// the fields it uses, with the types it expects.
type grafanaRules struct {
	Status string `json:"status"`
	Data   struct {
		Groups []struct {
			Name           string   `json:"name"`
			File           string   `json:"file"`
			Interval       *float64 `json:"interval"`
			LastEvaluation string   `json:"lastEvaluation"`
			EvaluationTime *float64 `json:"evaluationTime"`
			Rules          []struct {
				Type           string            `json:"type"`
				Name           string            `json:"name"`
				Query          string            `json:"query"`
				Health         string            `json:"health"`
				State          string            `json:"state"`
				Duration       *float64          `json:"duration"`
				Labels         map[string]string `json:"labels"`
				Annotations    map[string]string `json:"annotations"`
				LastEvaluation string            `json:"lastEvaluation"`
				Alerts         []struct {
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
					State       string            `json:"state"`
					ActiveAt    string            `json:"activeAt"`
					Value       string            `json:"value"`
				} `json:"alerts"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"data"`
}

// TestCompat_GrafanaAlertList asks a node with an alerting and a
// recording rule for /api/v1/rules the ways Grafana's alert list and
// rule list do (all rules; alerting rules only) and checks the answer
// has every field Grafana reads, with its type and one of the values it
// knows, and that /api/v1/status/buildinfo (which Grafana asks to tell a
// Prometheus ruler) answers.
func TestCompat_GrafanaAlertList(t *testing.T) {
	requireCompat(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "plant.yml")
	if err := os.WriteFile(file, []byte(`
groups:
  - name: plant
    interval: 1s
    rules:
      - record: plant:up
        expr: vector(1)
      - alert: PlantAlwaysOn
        expr: vector(1) > 0
        labels:
          severity: info
        annotations:
          summary: always on
`), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "--rules", file)
	rules := func(q url.Values) grafanaRules {
		t.Helper()
		st, body := n.get("/api/v1/rules", q)
		if st != http.StatusOK {
			t.Fatalf("/api/v1/rules?%s: %d %s", q.Encode(), st, body)
		}
		var r grafanaRules
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("/api/v1/rules?%s: not what Grafana parses: %v\n%s", q.Encode(), err, body)
		}
		return r
	}
	deadline := time.Now().Add(20 * time.Second)
	var r grafanaRules
	for {
		r = rules(nil)
		if len(r.Data.Groups) == 1 && len(r.Data.Groups[0].Rules) == 2 && r.Data.Groups[0].Rules[1].State == "firing" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no firing alert in /api/v1/rules after 20 s: %+v", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	g := r.Data.Groups[0]
	if r.Status != "success" || g.Name != "plant" || g.File != file || g.Interval == nil || *g.Interval != 1 || g.EvaluationTime == nil {
		t.Fatalf("group: %+v", g)
	}
	if _, err := time.Parse(time.RFC3339Nano, g.LastEvaluation); err != nil {
		t.Errorf("group lastEvaluation %q: %v", g.LastEvaluation, err)
	}
	rec, al := g.Rules[0], g.Rules[1]
	if rec.Type != "recording" || rec.Name != "plant:up" || rec.Query != "vector(1)" || rec.Health != "ok" {
		t.Errorf("recording rule: %+v", rec)
	}
	if al.Type != "alerting" || al.Name != "PlantAlwaysOn" || al.Health != "ok" || al.Duration == nil ||
		al.Labels["severity"] != "info" || al.Annotations["summary"] != "always on" || len(al.Alerts) != 1 {
		t.Fatalf("alerting rule: %+v", al)
	}
	a := al.Alerts[0]
	if a.State != "firing" || a.Labels["alertname"] != "PlantAlwaysOn" || a.Value != "1e+00" {
		t.Errorf("alert: %+v", a)
	}
	if _, err := time.Parse(time.RFC3339Nano, a.ActiveAt); err != nil {
		t.Errorf("alert activeAt %q: %v", a.ActiveAt, err)
	}
	// The alert list panel asks for alerting rules only.
	only := rules(url.Values{"type": {"alert"}})
	if len(only.Data.Groups) != 1 || len(only.Data.Groups[0].Rules) != 1 || only.Data.Groups[0].Rules[0].Type != "alerting" {
		t.Errorf("type=alert: %+v", only)
	}
	st, body := n.get("/api/v1/status/buildinfo", nil)
	var bi struct {
		Status string            `json:"status"`
		Data   map[string]string `json:"data"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &bi) != nil || bi.Status != "success" || bi.Data["version"] == "" {
		t.Errorf("buildinfo: %d %s", st, body)
	}
}
