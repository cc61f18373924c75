package compat

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// grafanaRequest is one fixture of testdata/grafana/requests.json.
type grafanaRequest struct {
	Name   string            `json:"name"`
	Method string            `json:"method"`
	Path   string            `json:"path"`
	Params map[string]string `json:"params"`
	Form   map[string]string `json:"form"`
	Check  string            `json:"check"`
}

// grafanaData is what TestCompat_Grafana writes: cpu,host=a|b value=...
// every 10s over 30 minutes.
type grafanaData struct {
	fromMs, toMs int64
	points       map[string]map[int64]float64 // host -> ts -> value
}

func writeGrafanaData(t *testing.T, n *node) grafanaData {
	t.Helper()
	from := time.Now().Add(-31 * time.Minute).Truncate(time.Minute).UnixMilli()
	d := grafanaData{fromMs: from, toMs: from + 30*60_000, points: map[string]map[int64]float64{"a": {}, "b": {}}}
	var b strings.Builder
	for i := int64(0); from+i*10_000 <= d.toMs; i++ {
		ts := from + i*10_000
		va, vb := float64(i%7)+0.5, 100+float64(i%5)
		d.points["a"][ts], d.points["b"][ts] = va, vb
		fmt.Fprintf(&b, "cpu,host=a value=%v %d\ncpu,host=b value=%v %d\n", va, ts, vb, ts)
	}
	n.write("compat", b.String())
	return d
}

// TestCompat_Grafana replays Grafana 11's InfluxQL and PromQL requests
// (testdata/grafana, read from Grafana's source) and checks each answer
// is well-formed and equals what the written data gives.
func TestCompat_Grafana(t *testing.T) {
	requireCompat(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "grafana", "requests.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Requests []grafanaRequest `json:"requests"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	n := startNode(t)
	d := writeGrafanaData(t, n)
	subst := strings.NewReplacer("{{from_ms}}", fmt.Sprint(d.fromMs), "{{to_ms}}", fmt.Sprint(d.toMs),
		"{{from_s}}", fmt.Sprint(d.fromMs/1000), "{{to_s}}", fmt.Sprint(d.toMs/1000))
	for _, r := range fx.Requests {
		t.Run(r.Name, func(t *testing.T) {
			q, form := url.Values{}, url.Values{}
			for k, v := range r.Params {
				q.Set(k, subst.Replace(v))
			}
			for k, v := range r.Form {
				form.Set(k, subst.Replace(v))
			}
			u := "http://" + n.http + r.Path + "?" + q.Encode()
			var st int
			var body []byte
			if r.Method == http.MethodPost {
				st, body = n.do(http.MethodPost, u, "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
			} else {
				st, body = n.do(http.MethodGet, u, "", nil)
			}
			if st != http.StatusOK {
				t.Fatalf("%d %s", st, body)
			}
			if err := checkGrafana(r.Check, body, d); err != nil {
				t.Fatalf("%s: %v\n%.2000s", r.Check, err, body)
			}
		})
	}
}

// influxAnswer is the InfluxDB 1.x /query answer.
type influxAnswer struct {
	Results []struct {
		Error  string `json:"error"`
		Series []struct {
			Name    string            `json:"name"`
			Tags    map[string]string `json:"tags"`
			Columns []string          `json:"columns"`
			Values  [][]any           `json:"values"`
		} `json:"series"`
	} `json:"results"`
}

// promAnswer is the Prometheus HTTP API answer.
type promAnswer struct {
	Status string          `json:"status"`
	Data   json.RawMessage `json:"data"`
}

func checkGrafana(check string, body []byte, d grafanaData) error {
	what, arg, _ := strings.Cut(check, ":")
	if strings.HasPrefix(what, "influx") {
		var a influxAnswer
		if err := json.Unmarshal(body, &a); err != nil || len(a.Results) != 1 || a.Results[0].Error != "" {
			return fmt.Errorf("not a successful InfluxDB answer (%v)", err)
		}
		switch what {
		case "influx_ok":
			return nil
		case "influx_contains":
			if !strings.Contains(fmt.Sprint(a.Results[0].Series), " "+arg+"]") && !strings.Contains(fmt.Sprint(a.Results[0].Series), "["+arg+" ") &&
				!strings.Contains(fmt.Sprint(a.Results[0].Series), "["+arg+"]") {
				return fmt.Errorf("no value %q", arg)
			}
			return nil
		case "influx_mean_by_host", "influx_mean_host_a":
			hosts := map[string]bool{"a": true, "b": what == "influx_mean_by_host"}
			seen := 0
			for _, s := range a.Results[0].Series {
				host := s.Tags["host"]
				if what == "influx_mean_host_a" {
					host = "a"
				}
				if !hosts[host] || s.Name != "cpu" || len(s.Columns) != 2 || s.Columns[0] != "time" || s.Columns[1] != "mean" {
					return fmt.Errorf("series %s %v %v", s.Name, s.Tags, s.Columns)
				}
				seen++
				if err := checkMeans(s.Values, d.points[host], d); err != nil {
					return fmt.Errorf("host %s: %w", host, err)
				}
			}
			if wantSeries := map[bool]int{true: 2, false: 1}[hosts["b"]]; seen != wantSeries {
				return fmt.Errorf("%d series", seen)
			}
			return nil
		}
	}
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil || a.Status != "success" {
		return fmt.Errorf("not a successful Prometheus answer (%v)", err)
	}
	switch what {
	case "prom_contains":
		if !strings.Contains(string(a.Data), `"`+arg+`"`) {
			return fmt.Errorf("no %q", arg)
		}
		return nil
	case "prom_range_by_host", "prom_instant_last":
		return checkProm(what, a.Data, d)
	}
	return fmt.Errorf("unknown check %q", check)
}

// checkMeans compares GROUP BY time(1m) means with the written points:
// every minute of the range with points has its mean, the others null.
func checkMeans(values [][]any, pts map[int64]float64, d grafanaData) error {
	want := map[int64][]float64{}
	for ts, v := range pts {
		if ts >= d.fromMs && ts <= d.toMs {
			b := ts - ts%60_000
			want[b] = append(want[b], v)
		}
	}
	got := 0
	for _, row := range values {
		ts, _ := row[0].(float64)
		vs, ok := want[int64(ts)]
		if row[1] == nil {
			if ok {
				return fmt.Errorf("null at %v, want a mean", int64(ts))
			}
			continue
		}
		var sum float64
		for _, v := range vs {
			sum += v
		}
		if f, _ := row[1].(float64); !ok || math.Abs(f-sum/float64(len(vs))) > 1e-9 {
			return fmt.Errorf("mean at %v = %v, want %v of %v", int64(ts), row[1], sum/float64(len(vs)), vs)
		}
		got++
	}
	if got != len(want) {
		return fmt.Errorf("%d means, want %d", got, len(want))
	}
	return nil
}

// lastAt is the newest point at or before t within Prometheus's default
// lookback of 5 minutes.
func lastAt(pts map[int64]float64, t int64) (float64, bool) {
	for ts := t; ts > t-5*60_000; ts-- {
		if v, ok := pts[ts]; ok {
			return v, true
		}
	}
	return 0, false
}

func checkProm(what string, data json.RawMessage, d grafanaData) error {
	var res struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return err
	}
	if len(res.Result) != 2 {
		return fmt.Errorf("%d series, want 2", len(res.Result))
	}
	for _, r := range res.Result {
		pts := d.points[r.Metric["host"]]
		if pts == nil {
			return fmt.Errorf("series %v", r.Metric)
		}
		if what == "prom_instant_last" {
			want, _ := lastAt(pts, d.toMs)
			if res.ResultType != "vector" || r.Value[1] != fmt.Sprint(want) {
				return fmt.Errorf("%s %v = %v, want %v", res.ResultType, r.Metric, r.Value, want)
			}
			continue
		}
		if res.ResultType != "matrix" || len(r.Values) != int((d.toMs-d.fromMs)/60_000)+1 {
			return fmt.Errorf("%s with %d steps", res.ResultType, len(r.Values))
		}
		for _, v := range r.Values {
			ts, _ := v[0].(float64)
			want, _ := lastAt(pts, int64(ts)*1000)
			if v[1] != fmt.Sprint(want) {
				return fmt.Errorf("host %s at %v = %v, want %v", r.Metric["host"], ts, v[1], want)
			}
		}
	}
	return nil
}
