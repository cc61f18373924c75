package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v2"
)

// grafanaDir holds the dashboards and the alert rules.
const grafanaDir = "../../deploy/grafana"

// dashboard is the part of Grafana's dashboard JSON the check reads.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int               `json:"id"`
	Type       string            `json:"type"`
	Title      string            `json:"title"`
	GridPos    map[string]int    `json:"gridPos"`
	Datasource map[string]string `json:"datasource"`
	Targets    []struct {
		RefID      string            `json:"refId"`
		Expr       string            `json:"expr"`
		Datasource map[string]string `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // rows
}

// grafanaVars replaces Grafana's variables with values PromQL parses.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"${datasource}", "prometheus", "$job", ".*", "$instance", ".*")

// promqlNames returns the metric names an expression selects, or an
// error if it does not parse.
func promqlNames(expr string) ([]string, error) {
	e, err := parser.ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// exposedNames parses a /metrics body into the series names a Prometheus
// server stores from it (histograms as _bucket, _sum and _count).
func exposedNames(t *testing.T, body string) map[string]bool {
	t.Helper()
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]bool{}
	for name, f := range fams {
		if len(f.GetMetric()) == 0 {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

// ruleFile is a Prometheus rule file.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// loadRules reads alerts.yaml strictly (an unknown field is an error) and
// checks every rule: a unique alert name, a severity, a summary, a valid
// for duration and annotation templates that parse.
func loadRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(grafanaDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.UnmarshalStrict(b, &rf); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	// The functions Prometheus offers annotation templates, for parsing.
	funcs := template.FuncMap{}
	for _, f := range []string{"humanize", "humanizeDuration", "humanizeBytes", "humanizePercentage", "query", "first", "value", "label"} {
		funcs[f] = func(...any) string { return "" }
	}
	names := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("alerts.yaml: group %q without a name or rules", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" || names[r.Alert] || r.Expr == "" {
				t.Errorf("alerts.yaml: rule %q: a unique alert name and an expr are needed", r.Alert)
			}
			names[r.Alert] = true
			if !slices.Contains([]string{"info", "warning", "critical"}, r.Labels["severity"]) || r.Annotations["summary"] == "" {
				t.Errorf("alerts.yaml: %s: severity %q, summary %q", r.Alert, r.Labels["severity"], r.Annotations["summary"])
			}
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("alerts.yaml: %s: for: %v", r.Alert, err)
				}
			}
			for k, a := range r.Annotations {
				if _, err := template.New(k).Funcs(funcs).Parse("{{$labels := .Labels}}{{$value := .Value}}" + a); err != nil {
					t.Errorf("alerts.yaml: %s: annotation %s: %v", r.Alert, k, err)
				}
			}
		}
	}
	return rf
}

// loadDashboards reads every dashboard and checks its shape: a
// Prometheus datasource variable, panels with positions, and targets that
// use it.
func loadDashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(grafanaDir, "*.json"))
	if err != nil || len(files) < 3 {
		t.Fatalf("dashboards: %v %v", files, err)
	}
	out := map[string]dashboard{}
	uids := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" || d.Title == "" || uids[d.UID] {
			t.Errorf("%s: uid %q title %q (uids must be set and unique)", f, d.UID, d.Title)
		}
		uids[d.UID] = true
		hasDS := slices.ContainsFunc(d.Templating.List, func(v struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		}) bool {
			return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
		})
		if !hasDS {
			t.Errorf("%s: no Prometheus datasource variable", f)
		}
		var panels []panel
		for _, p := range d.Panels {
			panels = append(panels, p)
			panels = append(panels, p.Panels...)
		}
		ids := map[int]bool{}
		targets := 0
		for _, p := range panels {
			if p.Type == "" || p.Title == "" || p.GridPos["w"] <= 0 || p.GridPos["h"] <= 0 || p.GridPos["x"]+p.GridPos["w"] > 24 || ids[p.ID] {
				t.Errorf("%s: panel %d %q: type, title, unique id and a grid position within 24 columns are needed (%v)", f, p.ID, p.Title, p.GridPos)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				continue
			}
			if p.Datasource["uid"] != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("%s: panel %q: datasource %v, %d targets; want the datasource variable and a query", f, p.Title, p.Datasource, len(p.Targets))
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] || tg.Datasource["uid"] != "${datasource}" {
					t.Errorf("%s: panel %q: target %q: expr, unique refId and the datasource variable are needed", f, p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
				targets++
			}
		}
		if targets == 0 {
			t.Errorf("%s: no queries", f)
		}
		out[filepath.Base(f)] = d
	}
	return out
}

// TestDashboards_QueryMetricsThatExist runs tributary local's stack, does
// work (writes, shipping, fleet-wide queries), scrapes /metrics and checks
// that every metric the dashboards and the alert rules select is there.
func TestDashboards_QueryMetricsThatExist(t *testing.T) {
	boards := loadDashboards(t)
	rules := loadRules(t)

	// Every expression, with where it comes from.
	type use struct{ where, expr string }
	var uses []use
	for file, d := range boards {
		var panels []panel
		for _, p := range d.Panels {
			panels = append(panels, p)
			panels = append(panels, p.Panels...)
		}
		for _, p := range panels {
			for _, tg := range p.Targets {
				uses = append(uses, use{fmt.Sprintf("%s panel %q %s", file, p.Title, tg.RefID), tg.Expr})
			}
		}
		for _, v := range d.Templating.List {
			if q, ok := v.Query.(map[string]any); ok {
				// label_values(METRIC{...}, label): the selector is the first argument.
				s, _ := q["query"].(string)
				if sel, ok := strings.CutPrefix(s, "label_values("); ok {
					if i := strings.LastIndex(sel, ","); i > 0 {
						uses = append(uses, use{fmt.Sprintf("%s variable %s", file, v.Name), sel[:i]})
					}
				}
			}
		}
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			uses = append(uses, use{"alerts.yaml " + r.Alert, r.Expr})
			alerts++
		}
	}
	if alerts < 8 {
		t.Fatalf("%d alert rules", alerts)
	}

	s := startLocalStack(t)
	doWork(t, s)
	code, body := s.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	have := exposedNames(t, body)
	used := map[string]bool{}
	for _, u := range uses {
		names, err := promqlNames(u.expr)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", u.where, u.expr, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric", u.where, u.expr)
		}
		for _, n := range names {
			used[n] = true
			if !have[n] {
				t.Errorf("%s: %s is not on /metrics", u.where, n)
			}
		}
	}
	if len(used) < 60 {
		t.Errorf("only %d distinct metrics used", len(used))
	}
}

// doWork writes to the edge of a local stack, waits until the coordinator
// holds the points, and runs fleet-wide queries, so that histograms and
// per-outcome counters have series.
func doWork(t *testing.T, s *localStack) {
	t.Helper()
	t0 := s.writeHeld(t)
	q := "/api/v1/query_range?" + url.Values{"query": {"temp_value"},
		"start": {fmt.Sprint(t0 / 1000)}, "end": {fmt.Sprint(time.Now().Unix() + 60)}, "step": {"15"}}.Encode()
	if code, body := s.get(t, q); code != http.StatusOK {
		t.Fatalf("query: %d %s", code, body)
	}
	if code, body := s.get(t, "/api/v1/query?query=count(temp_value)"); code != http.StatusOK {
		t.Fatalf("query: %d %s", code, body)
	}
}

func TestPromqlNames(t *testing.T) {
	names, err := promqlNames(`sum by (le) (rate(a_bucket{job=~"$job"}[$__rate_interval])) / on() group_left b + {__name__="c"}`)
	if err != nil || !slices.Equal(names, []string{"a_bucket", "b", "c"}) {
		t.Fatalf("%v %v", names, err)
	}
	if _, err := promqlNames(`rate(a[5m]`); err == nil {
		t.Fatal("a broken expression parsed")
	}
}
