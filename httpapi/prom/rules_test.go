package prom

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	promrules "github.com/prometheus/prometheus/rules"

	"github.com/tributarydb/tributary/httpapi"
)

func TestAlertsFromSeries_ListsPendingAndFiringWithTheirActiveTime(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	at := testNow.Add(-10 * time.Second).UnixMilli()
	stale := math.Float64frombits(value.StaleNaN)
	ts := func(v float64, kv ...string) prompb.TimeSeries {
		var ls []prompb.Label
		for i := 0; i+1 < len(kv); i += 2 {
			ls = append(ls, prompb.Label{Name: kv[i], Value: kv[i+1]})
		}
		return prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Timestamp: at - 1000, Value: 1}, {Timestamp: at, Value: v}}}
	}
	activeSince := float64(testNow.Add(-5 * time.Minute).Unix())
	e.write(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		ts(1, "__name__", "ALERTS", "alertname", "CoolantOverheat", "alertstate", "firing", "edge", "pi-7", "vehicle", "truck-1"),
		ts(activeSince, "__name__", "ALERTS_FOR_STATE", "alertname", "CoolantOverheat", "edge", "pi-7", "vehicle", "truck-1"),
		ts(1, "__name__", "ALERTS", "alertname", "RoomTooWarm", "alertstate", "pending", "edge", "pi-9", "room", "lab"),
		// Resolved: ends with a staleness marker.
		ts(stale, "__name__", "ALERTS", "alertname", "CoolantOverheat", "alertstate", "firing", "edge", "pi-8", "vehicle", "truck-2"),
	}})

	// Without rules or the series view, no alerts.
	if _, r, _ := e.call(http.MethodGet, "/api/v1/alerts", nil); string(r.Data) != `{"alerts":[]}` {
		t.Fatalf("alerts without a source: %s", r.Data)
	}
	e.api.ServeAlertsFromSeries()
	st, r, raw := e.call(http.MethodGet, "/api/v1/alerts", nil)
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, raw)
	}
	var got struct{ Alerts []alertJSON }
	if err := json.Unmarshal(r.Data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Alerts) != 2 {
		t.Fatalf("alerts %s", r.Data)
	}
	byName := map[string]alertJSON{}
	for _, a := range got.Alerts {
		byName[a.Labels["alertname"]] = a
	}
	hot, warm := byName["CoolantOverheat"], byName["RoomTooWarm"]
	if hot.State != "firing" || hot.Labels["edge"] != "pi-7" || hot.Labels["alertstate"] != "" || hot.Labels["__name__"] != "" ||
		hot.ActiveAt == nil || !hot.ActiveAt.Equal(testNow.Add(-5*time.Minute)) || hot.Value != "NaN" {
		t.Errorf("firing alert %+v", hot)
	}
	if warm.State != "pending" || warm.Labels["room"] != "lab" || warm.ActiveAt != nil {
		t.Errorf("pending alert without ALERTS_FOR_STATE %+v", warm)
	}
}

// fakeRules is a RuleSource of fixed groups.
type fakeRules []*promrules.Group

func (f fakeRules) RuleGroups() []*promrules.Group { return f }
func (f fakeRules) Reload() error                  { return nil }

func TestAlerts_RulesWithSeriesAlertsListsEachAlertOnce(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	at := testNow.Add(-10 * time.Second).UnixMilli()
	e.write(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		// The rule's own alert, also replicated, and another edge's.
		{Labels: []prompb.Label{{Name: "__name__", Value: "ALERTS"}, {Name: "alertname", Value: "Hot"}, {Name: "alertstate", Value: "pending"}, {Name: "dev", Value: "pump"}},
			Samples: []prompb.Sample{{Timestamp: at, Value: 1}}},
		{Labels: []prompb.Label{{Name: "__name__", Value: "ALERTS"}, {Name: "alertname", Value: "CoolantOverheat"}, {Name: "alertstate", Value: "firing"}, {Name: "edge", Value: "pi-7"}},
			Samples: []prompb.Sample{{Timestamp: at, Value: 1}}},
	}})
	expr, err := parser.ParseExpr(`temp > 100`)
	if err != nil {
		t.Fatal(err)
	}
	rule := promrules.NewAlertingRule("Hot", expr, time.Minute, 0, labels.EmptyLabels(),
		labels.FromStrings("summary", "pump is hot"), labels.EmptyLabels(), "", true, nil)
	query := func(context.Context, string, time.Time) (promql.Vector, error) {
		return promql.Vector{{Metric: labels.FromStrings("__name__", "temp", "dev", "pump"), F: 150, T: testNow.UnixMilli()}}, nil
	}
	if _, err := rule.Eval(context.Background(), 0, testNow, query, nil, 0); err != nil {
		t.Fatal(err)
	}
	g := promrules.NewGroup(promrules.GroupOptions{Name: "fleet", File: "fleet.yml", Interval: time.Second,
		Rules: []promrules.Rule{rule}, Opts: &promrules.ManagerOptions{}})
	e.api.SetRulesWithSeriesAlerts(fakeRules{g})
	st, r, raw := e.call(http.MethodGet, "/api/v1/alerts", nil)
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, raw)
	}
	var got struct{ Alerts []alertJSON }
	if err := json.Unmarshal(r.Data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Alerts) != 2 {
		t.Fatalf("alerts %s", r.Data)
	}
	if a := got.Alerts[0]; a.Labels["alertname"] != "Hot" || a.Annotations["summary"] != "pump is hot" || a.Value == "NaN" {
		t.Errorf("the rule's alert, first and with its annotations: %+v", a)
	}
	if a := got.Alerts[1]; a.Labels["alertname"] != "CoolantOverheat" || a.State != "firing" {
		t.Errorf("the fleet's alert: %+v", a)
	}
}
