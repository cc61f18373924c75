package rules

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// webhook records what Alertmanager forwards to a webhook receiver.
type webhook struct {
	mu       sync.Mutex
	messages []webhookMessage
}

// webhookMessage is the part of Alertmanager's webhook payload the test
// reads.
type webhookMessage struct {
	Status string `json:"status"`
	Alerts []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		StartsAt    time.Time         `json:"startsAt"`
		EndsAt      time.Time         `json:"endsAt"`
	} `json:"alerts"`
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var m webhookMessage
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	w.messages = append(w.messages, m)
	w.mu.Unlock()
}

// status returns the statuses ("firing", "resolved") of the alerts named
// name that were forwarded, in order.
func (w *webhook) status(name string) []webhookMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []webhookMessage
	for _, m := range w.messages {
		for _, a := range m.Alerts {
			if a.Labels["alertname"] == name {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// freePort returns a loopback address nothing listens on (the port was
// free a moment ago).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// startAlertmanager runs Debian's prometheus-alertmanager on addr, routing
// every alert to the webhook at hookURL within a second.
func startAlertmanager(t *testing.T, addr, hookURL string) {
	t.Helper()
	startAlertmanagerWeb(t, addr, hookURL, "", http.DefaultClient, "http")
}

// startAlertmanagerWeb is startAlertmanager with a --web.config.file of
// webConfig (none when empty), checked ready with client over scheme.
func startAlertmanagerWeb(t *testing.T, addr, hookURL, webConfig string, client *http.Client, scheme string) {
	t.Helper()
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Skip("prometheus-alertmanager is not installed (scripts/deps.sh installs it)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
route:
  receiver: hook
  group_by: [alertname, vehicle]
  group_wait: 0s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: %q
        send_resolved: true
`, hookURL), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config.file=" + cfg, "--storage.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--cluster.listen-address=", "--log.level=warn"}
	if webConfig != "" {
		wc := filepath.Join(dir, "web.yml")
		if err := os.WriteFile(wc, []byte(webConfig), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--web.config.file="+wc)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	eventually(t, 20*time.Second, "alertmanager ready", func() bool {
		resp, err := client.Get(scheme + "://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// TestManager_AlertsReachARealAlertmanager runs the rules against
// Debian's Alertmanager, which is started only after the alert fires: the
// alert reaches it through the resend of active alerts, and its
// resolution follows.
func TestManager_AlertsReachARealAlertmanager(t *testing.T) {
	if _, err := exec.LookPath("prometheus-alertmanager"); err != nil {
		t.Skip("prometheus-alertmanager is not installed (scripts/deps.sh installs it)")
	}
	hook := &webhook{}
	hsrv := httptest.NewServer(hook)
	defer hsrv.Close()
	amAddr := freePort(t)

	files := writeFile(t, t.TempDir(), "can.yml", overheatRules)
	e := newEnv(t, t.TempDir(), Options{Files: []string{files}, Alertmanagers: []string{"http://" + amAddr},
		ResendDelay: time.Second, AlertmanagerTimeout: 2 * time.Second})
	e.write(time.Now(), 110, "coolant_temp", "vehicle", "truck-1")
	r := e.alertingRule("CoolantOverheat")
	eventually(t, 15*time.Second, "the alert firing", func() bool { return r.State().String() == "firing" })
	firedAt := r.ActiveAlerts()[0].FiredAt

	startAlertmanager(t, amAddr, hsrv.URL)
	eventually(t, 20*time.Second, "the firing alert forwarded by Alertmanager", func() bool {
		return len(hook.status("CoolantOverheat")) > 0
	})
	first := hook.status("CoolantOverheat")[0]
	if first.Status != "firing" {
		t.Fatalf("first message %+v", first)
	}
	a := first.Alerts[0]
	if a.Labels["vehicle"] != "truck-1" || a.Labels["severity"] != "critical" || a.Annotations["summary"] != "truck-1 coolant at 110 °C" {
		t.Errorf("forwarded alert %+v", a)
	}
	if !a.StartsAt.Equal(firedAt.Truncate(time.Millisecond)) {
		t.Errorf("startsAt %v, want the time it fired %v", a.StartsAt, firedAt)
	}

	e.write(time.Now(), 95, "coolant_temp", "vehicle", "truck-1")
	eventually(t, 20*time.Second, "the resolution forwarded by Alertmanager", func() bool {
		ms := hook.status("CoolantOverheat")
		return ms[len(ms)-1].Status == "resolved"
	})
}
