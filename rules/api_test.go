package rules

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// get answers the data of a Prometheus API envelope.
func get(t *testing.T, url string, data any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Status != "success" {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(env.Data, data); err != nil {
		t.Fatal(err)
	}
}

func TestAPI_RulesAndAlertsAnswerFromTheManager(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	files := writeFile(t, t.TempDir(), "can.yml", overheatRules)
	e := newEnv(t, t.TempDir(), Options{Files: []string{files},
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	mux := http.NewServeMux()
	e.api.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	e.write(time.Now(), 110, "coolant_temp", "vehicle", "truck-1")
	r := e.alertingRule("CoolantOverheat")
	eventually(t, 15*time.Second, "the alert firing", func() bool { return r.State().String() == "firing" })

	var rules struct {
		Groups []struct {
			Name, File     string
			Interval       float64
			LastEvaluation time.Time
			Rules          []struct {
				Name, Query, Type, Health, State string
				Duration                         float64
				Labels, Annotations              map[string]string
				Alerts                           []struct {
					Labels   map[string]string
					State    string
					ActiveAt time.Time
					Value    string
				}
				LastEvaluation time.Time
			}
		}
	}
	get(t, srv.URL+"/api/v1/rules", &rules)
	if len(rules.Groups) != 1 || rules.Groups[0].Name != "can-bus" || rules.Groups[0].File != files ||
		rules.Groups[0].Interval != 1 || rules.Groups[0].LastEvaluation.IsZero() {
		t.Fatalf("groups %+v", rules.Groups)
	}
	rs := rules.Groups[0].Rules
	if len(rs) != 2 || rs[0].Type != "recording" || rs[0].Name != "vehicle:coolant_temp:max" || rs[0].Health != "ok" ||
		rs[0].Query != "max by (vehicle) (coolant_temp)" {
		t.Fatalf("recording rule %+v", rs)
	}
	al := rs[1]
	if al.Type != "alerting" || al.State != "firing" || al.Duration != 4 || al.Labels["severity"] != "critical" ||
		al.Health != "ok" || len(al.Alerts) != 1 || al.Alerts[0].State != "firing" || al.Alerts[0].Value != "1.1e+02" ||
		al.Alerts[0].Labels["vehicle"] != "truck-1" || al.Alerts[0].ActiveAt.IsZero() {
		t.Fatalf("alerting rule %+v", al)
	}

	get(t, srv.URL+"/api/v1/rules?type=record", &rules)
	if len(rules.Groups) != 1 || len(rules.Groups[0].Rules) != 1 || rules.Groups[0].Rules[0].Type != "recording" {
		t.Errorf("type=record: %+v", rules.Groups)
	}
	get(t, srv.URL+"/api/v1/rules?rule_group[]=other", &rules)
	if len(rules.Groups) != 0 {
		t.Errorf("rule_group[]=other: %+v", rules.Groups)
	}

	var alerts struct {
		Alerts []struct {
			Labels, Annotations map[string]string
			State               string
			Value               string
		}
	}
	get(t, srv.URL+"/api/v1/alerts", &alerts)
	if len(alerts.Alerts) != 1 || alerts.Alerts[0].State != "firing" || alerts.Alerts[0].Annotations["summary"] != "truck-1 coolant at 110 °C" {
		t.Fatalf("alerts %+v", alerts)
	}

	// The configuration the status API shows names the rule files.
	var cfg struct{ YAML string }
	get(t, srv.URL+"/api/v1/status/config", &cfg)
	if !strings.Contains(cfg.YAML, "rule_files:\n  - \""+files+"\"") || !strings.Contains(cfg.YAML, "evaluation_interval: 1s") {
		t.Errorf("status/config with rules:\n%s", cfg.YAML)
	}

	resp, err := http.Post(srv.URL+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("reload: %d", resp.StatusCode)
	}
	writeFile(t, strings.TrimSuffix(files, "/can.yml"), "can.yml", "groups: [{name: x, rules: [{record: y, expr: 'rate('}]}]")
	resp, err = http.Post(srv.URL+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "can.yml") {
		t.Errorf("reload of a broken file: %d %s", resp.StatusCode, body)
	}

	checkMetrics(t, reader)
}

// checkMetrics requires the evaluations to be counted and timed.
func checkMetrics(t *testing.T, reader *sdkmetric.ManualReader) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					found[m.Name] += p.Value
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					found[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					found[m.Name] += float64(p.Count)
				}
			}
		}
	}
	for _, name := range []string{"tributary.rules.evaluations", "tributary.rules.group.iterations",
		"tributary.rules.group.evaluation_duration", "tributary.rules.group.rules"} {
		if found[name] <= 0 {
			t.Errorf("metric %s = %v, want > 0 (all: %v)", name, found[name], found)
		}
	}
	if _, ok := found["tributary.rules.group.iterations_missed"]; !ok {
		t.Errorf("no tributary.rules.group.iterations_missed (all: %v)", found)
	}
}
