package prom

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	promrules "github.com/prometheus/prometheus/rules"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
)

// fleetBackend is a node that also lists the rule groups of two edges,
// as a coordinator's front end does, and warns that a third is
// unreachable.
type fleetBackend struct {
	*node.Node
	asked *[]model.RuleFilter
	edges *[][]string
}

func (b fleetBackend) EdgeRuleGroups(ctx context.Context, edges []string, f model.RuleFilter) ([]model.EdgeRuleGroups, error) {
	*b.asked = append(*b.asked, f)
	*b.edges = append(*b.edges, edges)
	backend.Warn(ctx, "1 edge unreachable (pi-3): their rule groups are not listed")
	at := testNow.Add(-5 * time.Second)
	hot := model.Rule{Type: model.RuleAlerting, Name: "CoolantOverheat", Query: "coolant_temp > 105", Health: "ok",
		State: "firing", For: 30 * time.Second, LastEvaluation: at,
		Alerts: []model.RuleAlert{{Labels: map[string]string{"alertname": "CoolantOverheat"}, State: "firing", ActiveAt: at, Value: 107}}}
	rec := model.Rule{Type: model.RuleRecording, Name: "coolant:avg5m", Query: "avg_over_time(coolant_temp[5m])", Health: "ok"}
	return []model.EdgeRuleGroups{
		{Edge: "pi-1", Groups: []model.RuleGroup{{Name: "can", File: "/etc/tributary/can.yml", Interval: 15 * time.Second, Rules: []model.Rule{hot, rec}}}},
		{Edge: "pi-2", Groups: []model.RuleGroup{{Name: "can", File: "/etc/tributary/can.yml", Interval: 15 * time.Second, Rules: []model.Rule{rec}}}},
	}, nil
}

func TestRules_CoordinatorListsTheEdgesGroupsAfterItsOwn(t *testing.T) {
	base := newTestEnv(t, nil, httpapi.Config{}, Options{})
	var asked []model.RuleFilter
	var edges [][]string
	e := newTestEnvFor(t, base.node, fleetBackend{Node: base.node, asked: &asked, edges: &edges}, httpapi.Config{}, Options{})
	expr, err := parser.ParseExpr(`sum(up)`)
	if err != nil {
		t.Fatal(err)
	}
	own := promrules.NewGroup(promrules.GroupOptions{Name: "fleet", File: "fleet.yml", Interval: time.Minute,
		Rules: []promrules.Rule{promrules.NewRecordingRule("fleet:up", expr, labels.EmptyLabels())}, Opts: &promrules.ManagerOptions{}})
	e.api.SetRules(fakeRules{own})

	list := func(query url.Values) ([]map[string]any, []string) {
		t.Helper()
		st, r, raw := e.call(http.MethodGet, "/api/v1/rules", query)
		if st != http.StatusOK {
			t.Fatalf("%s: %d %s", query, st, raw)
		}
		var got struct{ Groups []map[string]any }
		if err := json.Unmarshal(r.Data, &got); err != nil {
			t.Fatal(err)
		}
		return got.Groups, r.Warnings
	}
	groups, warns := list(nil)
	var files, edgeField []string
	for _, g := range groups {
		files = append(files, g["file"].(string))
		ef, _ := g["edge"].(string)
		edgeField = append(edgeField, ef)
	}
	if want := []string{"fleet.yml", "pi-1//etc/tributary/can.yml", "pi-2//etc/tributary/can.yml"}; !slices.Equal(files, want) {
		t.Errorf("files %q, want %q", files, want)
	}
	if want := []string{"", "pi-1", "pi-2"}; !slices.Equal(edgeField, want) {
		t.Errorf("edge fields %q, want %q", edgeField, want)
	}
	if len(warns) != 1 || warns[0] != "1 edge unreachable (pi-3): their rule groups are not listed" {
		t.Errorf("warnings %q", warns)
	}
	// Prometheus's shape: an alerting rule with its alerts, labels and
	// annotations as objects, never null.
	hot := groups[1]["rules"].([]any)[0].(map[string]any)
	if hot["type"] != "alerting" || hot["state"] != "firing" || hot["duration"] != 30.0 || hot["annotations"] == nil || hot["labels"] == nil {
		t.Errorf("alerting rule %v", hot)
	}
	if al := hot["alerts"].([]any); len(al) != 1 || al[0].(map[string]any)["value"] != "1.07e+02" || al[0].(map[string]any)["annotations"] == nil {
		t.Errorf("alerts %v", al)
	}

	// file[] matches the files as listed; the edges are asked without it
	// and with the other filters, and edge[] names the edges to ask.
	q := url.Values{"file[]": {"pi-2//etc/tributary/can.yml"}, "type": {"record"}, "edge[]": {"pi-2", "pi-1"}}
	groups, _ = list(q)
	if len(groups) != 1 || groups[0]["edge"] != "pi-2" {
		t.Errorf("file[] filter: %v", groups)
	}
	last := asked[len(asked)-1]
	if last.Files != nil || last.Type != model.RuleFilterRecord {
		t.Errorf("edges asked with %+v", last)
	}
	if got := edges[len(edges)-1]; !slices.Equal(got, []string{"pi-2", "pi-1"}) {
		t.Errorf("edges to ask %q", got)
	}
}

func TestListRuleGroups_FiltersAsPrometheus(t *testing.T) {
	expr, err := parser.ParseExpr(`up == 0`)
	if err != nil {
		t.Fatal(err)
	}
	alert := promrules.NewAlertingRule("Down", expr, time.Minute, 0, labels.FromStrings("severity", "page"),
		labels.EmptyLabels(), labels.EmptyLabels(), "", true, nil)
	rec := promrules.NewRecordingRule("job:up", expr, labels.EmptyLabels())
	src := fakeRules{
		promrules.NewGroup(promrules.GroupOptions{Name: "a", File: "a.yml", Interval: time.Minute, Rules: []promrules.Rule{alert, rec}, Opts: &promrules.ManagerOptions{}}),
		promrules.NewGroup(promrules.GroupOptions{Name: "b", File: "b.yml", Interval: time.Minute, Rules: []promrules.Rule{rec}, Opts: &promrules.ManagerOptions{}}),
		promrules.NewGroup(promrules.GroupOptions{Name: "empty", File: "b.yml", Interval: time.Minute, Opts: &promrules.ManagerOptions{}}),
	}
	names := func(f model.RuleFilter) []string {
		var out []string
		for _, g := range ListRuleGroups(src, f) {
			for _, r := range g.Rules {
				out = append(out, g.Name+"/"+r.Type+"/"+r.Name)
			}
			if len(g.Rules) == 0 {
				out = append(out, g.Name)
			}
		}
		return out
	}
	for _, c := range []struct {
		f    model.RuleFilter
		want []string
	}{
		{model.RuleFilter{}, []string{"a/alerting/Down", "a/recording/job:up", "b/recording/job:up", "empty"}},
		{model.RuleFilter{Type: model.RuleFilterAlert}, []string{"a/alerting/Down"}},
		{model.RuleFilter{Type: model.RuleFilterRecord, Files: []string{"b.yml"}}, []string{"b/recording/job:up"}},
		{model.RuleFilter{RuleGroups: []string{"empty"}}, []string{"empty"}},
		{model.RuleFilter{RuleNames: []string{"Down"}}, []string{"a/alerting/Down"}},
	} {
		if got := names(c.f); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.f, got, c.want)
		}
	}
	if g := ListRuleGroups(src, model.RuleFilter{Type: model.RuleFilterAlert})[0]; g.Rules[0].Labels["severity"] != "page" || g.Rules[0].For != time.Minute {
		t.Errorf("alerting rule %+v", g.Rules[0])
	}
}
