package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	"github.com/tributarydb/tributary/internal/loopback"
)

// amWebhook records the alerts a local Alertmanager forwards, with the
// time each message arrived.
type amWebhook struct {
	mu   sync.Mutex
	msgs []amMessage
}

type amMessage struct {
	at     time.Time
	Status string `json:"status"`
	Alerts []struct {
		Labels map[string]string `json:"labels"`
	} `json:"alerts"`
}

func (h *amWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var m amMessage
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.at = time.Now()
	h.mu.Lock()
	h.msgs = append(h.msgs, m)
	h.mu.Unlock()
}

// first returns the arrival of the first message of status, or zero.
func (h *amWebhook) first(status string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if m.Status == status {
			return m.at
		}
	}
	return time.Time{}
}

// startLocalAlertmanager runs Debian's prometheus-alertmanager on a free
// loopback port, forwarding every alert to hook at once; it returns the
// Alertmanager's URL.
func startLocalAlertmanager(t *testing.T, hook string) string {
	t.Helper()
	amBin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Skip("prometheus-alertmanager is not installed (scripts/deps.sh installs it)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "am.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "route:\n  receiver: hook\n  group_wait: 0s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    webhook_configs:\n      - url: %q\n        send_resolved: true\n", hook), 0o644); err != nil {
		t.Fatal(err)
	}
	addrs, err := loopback.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	p := &cluster.Process{Name: "alertmanager", Bin: amBin, LogPath: filepath.Join(dir, "am.log"), Ready: "Listening on",
		Args: []string{"--config.file=" + cfg, "--storage.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addrs[0], "--cluster.listen-address="}}
	t.Cleanup(p.Kill)
	if err := p.Start(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return "http://" + addrs[0]
}

// promRaw evaluates a range selector at t on a Prometheus API and returns
// the raw samples per series.
func promRaw(t *testing.T, httpAddr, q string, at time.Time) map[string][][2]string {
	t.Helper()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	u := "http://" + httpAddr + "/api/v1/query?query=" + url.QueryEscape(q) + "&time=" + strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("%s: %v %s", q, err, body.Error)
	}
	out := map[string][][2]string{}
	for _, r := range body.Data.Result {
		key := fmt.Sprint(r.Metric)
		vals := r.Values
		if vals == nil {
			vals = [][2]any{r.Value}
		}
		for _, v := range vals {
			out[key] = append(out[key], [2]string{fmt.Sprint(v[0]), fmt.Sprint(v[1])})
		}
	}
	return out
}

func putCoolant(t *testing.T, httpAddr string, v float64) {
	t.Helper()
	body := fmt.Sprintf(`{"metric":"coolant_temp","timestamp":%d,"value":%g,"tags":{"vehicle":"truck-1"}}`, time.Now().UnixMilli(), v)
	resp, err := http.Post("http://"+httpAddr+"/api/put", "application/json", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("put: %d", resp.StatusCode)
	}
}

// TestRules_AlertDuringUplinkOutageReachesLocalAlertmanagerAndTheCloud
// cuts an edge's uplink while an alerting rule fires and resolves: the
// Alertmanager on the edge's side gets the alert during the outage, and
// once the link heals the cloud holds the same ALERTS samples as the edge
// (firing and resolved times) and a recording rule's series equal to
// PromQL over the replicated raw data. TRIBUTARY_E2E_RULES_OUTAGE sets
// the outage (default 40s; the coolant is hot for its middle half).
func TestRules_AlertDuringUplinkOutageReachesLocalAlertmanagerAndTheCloud(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	outage := 40 * time.Second
	if s := os.Getenv("TRIBUTARY_E2E_RULES_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 20*time.Second {
			t.Fatalf("TRIBUTARY_E2E_RULES_OUTAGE=%q: want a duration of at least 20s", s)
		}
		outage = d
	}
	hook := &amWebhook{}
	hsrv := httptest.NewServer(hook)
	defer hsrv.Close()
	amURL := startLocalAlertmanager(t, hsrv.URL)

	dir := t.TempDir()
	ruleFile := filepath.Join(dir, "can.yml")
	if err := os.WriteFile(ruleFile, []byte(`
groups:
  - name: can-bus
    interval: 1s
    rules:
      - record: vehicle:coolant_temp:max
        expr: max by (vehicle) (coolant_temp)
      - alert: CoolantOverheat
        expr: coolant_temp > 105
        for: 5s
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var proxy *cluster.FaultProxy
	o := cluster.Options{Bin: bin, Dir: dir, Coordinators: 1,
		EdgeArgs: []string{"--replication-backoff-max", "1s", "--rules", ruleFile, "--alertmanager-url", amURL, "--rules-resend-delay", "1s"},
		EdgeTargets: func(intakes []string) ([]string, error) {
			p, err := cluster.NewFaultProxy("intake-c1", intakes[0])
			if err != nil {
				return nil, err
			}
			proxy = p
			return []string{p.Listen}, nil
		}}
	c, err := cluster.New(o)
	if proxy != nil {
		t.Cleanup(proxy.Close)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	cluster.ReportOnFailure(t, 30, c.Processes()...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	edge, cloud := c.Edge.HTTP, c.Coordinators[0].HTTP
	start := time.Now()
	drive := func(d time.Duration, value func(time.Duration) float64) {
		t0 := time.Now()
		for time.Since(t0) < d {
			putCoolant(t, edge, value(time.Since(t0)))
			time.Sleep(250 * time.Millisecond)
		}
	}
	drive(5*time.Second, func(time.Duration) float64 { return 90 })

	proxy.Cut()
	cutAt := time.Now()
	drive(outage, func(d time.Duration) float64 {
		if d >= outage/4 && d < 3*outage/4 {
			return 110
		}
		return 90
	})
	healAt := time.Now()
	firing, resolved := hook.first("firing"), hook.first("resolved")
	t.Logf("outage %v: local Alertmanager forwarded firing %v and resolved %v after the cut", outage,
		firing.Sub(cutAt).Round(time.Millisecond), resolved.Sub(cutAt).Round(time.Millisecond))
	if firing.IsZero() || firing.After(healAt) || resolved.IsZero() || resolved.After(healAt) {
		t.Fatalf("the local Alertmanager did not get the alert and its resolution during the outage (firing %v, resolved %v, cut %v, heal %v)",
			firing, resolved, cutAt, healAt)
	}
	if err := proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	drive(3*time.Second, func(time.Duration) float64 { return 90 })
	end := time.Now()
	window := fmt.Sprintf("[%ds]", int(end.Sub(start).Seconds())+10)

	// The cloud catches up: its ALERTS samples are the edge's.
	edgeAlerts := promRaw(t, edge, `ALERTS{alertname="CoolantOverheat"}`+window, end)
	if len(edgeAlerts) != 2 {
		t.Fatalf("the edge's ALERTS: %v, want a pending and a firing series", edgeAlerts)
	}
	var cloudAlerts map[string][][2]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		cloudAlerts = promRaw(t, cloud, `ALERTS{alertname="CoolantOverheat"}`+window, end)
		if reflect.DeepEqual(cloudAlerts, edgeAlerts) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cloud's ALERTS after the heal:\n%v\nthe edge's:\n%v", cloudAlerts, edgeAlerts)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for key, s := range cloudAlerts {
		t.Logf("cloud %s: %d samples, %s .. %s", key, len(s), s[0][0], s[len(s)-1][0])
	}

	// The recording rule's series in the cloud equals PromQL over the
	// replicated raw data at each of its samples.
	rec := promRaw(t, cloud, `vehicle:coolant_temp:max`+window, end)
	if len(rec) != 1 {
		t.Fatalf("recorded series in the cloud: %v", rec)
	}
	for _, s := range rec {
		if len(s) < int(outage.Seconds()) {
			t.Errorf("the recorded series has %d samples, fewer than the outage's %v of evaluations", len(s), outage)
		}
		for _, p := range s {
			ts, _ := strconv.ParseFloat(p[0], 64)
			at := time.UnixMilli(int64(ts * 1000))
			want := promRaw(t, cloud, `max by (vehicle) (coolant_temp)`, at)
			if len(want) != 1 {
				t.Fatalf("max by (vehicle) (coolant_temp) at %s: %v", p[0], want)
			}
			for _, w := range want {
				if w[0][1] != p[1] {
					t.Errorf("at %s: recorded %s, PromQL over the replicated data %s", p[0], p[1], w[0][1])
				}
			}
		}
	}

	// Resolved: the fleet's /api/v1/alerts lists no alert.
	resp, err := http.Get("http://" + cloud + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte(`"alerts":[]`)) {
		t.Errorf("the fleet's alerts after the resolution: %s", b)
	}
}
