package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
)

// tlsJSON sends a request to a client listener of the fleet (TLS and the
// token) and decodes the Prometheus API answer's data into out.
func tlsJSON(t *testing.T, cl cluster.Client, method, addr, path string, body []byte, out any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, cl.URL(addr, path), bytes.NewReader(body))
	if err != nil {
		return err
	}
	if cl.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := cl.HTTPClient()
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if out == nil {
		return nil
	}
	var env struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s %s: status %q", method, path, env.Status)
	}
	return json.Unmarshal(env.Data, out)
}

// TestRules_CoordinatorLeaderKill9KeepsForProgressOverTLS runs three
// coordinators with the same --rules over a fleet secured as production
// runs it (mutual TLS everywhere, tokens; each coordinator's rules edge
// ships with its own edge certificate): the leader evaluates a recording
// rule over an edge's data, and the recorded series is seen on a
// follower; an alert goes pending on the leader, the leader is killed
// with SIGKILL, and the new leader lists the alert with the same active
// time (restored from the replicated ALERTS_FOR_STATE, not started over)
// and fires it once `for` has passed since then.
func TestRules_CoordinatorLeaderKill9KeepsForProgressOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	dir := t.TempDir()
	const forDur = 30 * time.Second
	ruleFile := filepath.Join(dir, "fleet.yml")
	if err := os.WriteFile(ruleFile, []byte(fmt.Sprintf(`
groups:
  - name: fleet-can-bus
    interval: 1s
    rules:
      - record: fleet:coolant_temp:max
        expr: max by (vehicle) (coolant_temp)
      - alert: FleetCoolantOverheat
        expr: coolant_temp > 105
        for: %s
`, forDur)), 0o644); err != nil {
		t.Fatal(err)
	}
	pki := cluster.NewPKI(t, t.TempDir())
	c, err := cluster.New(cluster.Options{Bin: bin, Dir: dir, Coordinators: 3, Security: pki,
		EdgeArgs: []string{"--replication-backoff-max", "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, co := range c.Coordinators {
		cert, key := pki.Issue(co.ID + "-rules")
		co.Args = append(co.Args, "--rules", ruleFile, "--rules-edge-cert", cert, "--rules-edge-key", key,
			"--rules-edge-wal-segment-age", "500ms")
	}
	t.Cleanup(c.KillAll)
	cluster.ReportOnFailure(t, 40, c.Processes()...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	put := func(v float64) {
		t.Helper()
		body := fmt.Sprintf(`{"metric":"coolant_temp","timestamp":%d,"value":%g,"tags":{"vehicle":"truck-1"}}`, time.Now().UnixMilli(), v)
		if err := tlsJSON(t, cl, http.MethodPost, c.Edge.HTTP, "/api/put", []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	type alert struct {
		Labels   map[string]string `json:"labels"`
		State    string            `json:"state"`
		ActiveAt time.Time         `json:"activeAt"`
	}
	overheat := func(co *cluster.Coordinator) (alert, bool) {
		var data struct {
			Alerts []alert `json:"alerts"`
		}
		if err := tlsJSON(t, cl, http.MethodGet, co.HTTP, "/api/v1/alerts", nil, &data); err != nil {
			t.Logf("alerts of %s: %v", co.ID, err)
			return alert{}, false
		}
		for _, a := range data.Alerts {
			if a.Labels["alertname"] == "FleetCoolantOverheat" && a.Labels["vehicle"] == "truck-1" {
				return a, true
			}
		}
		return alert{}, false
	}

	ctx := context.Background()
	lead, err := c.Leader(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var follower *cluster.Coordinator
	for _, co := range c.Coordinators {
		if co != lead {
			follower = co
			break
		}
	}
	// The recorded series, read on a follower: the leader's rules edge
	// shipped it over mutual TLS with its own certificate.
	waitUntil(t, "the recorded series on a follower", 60*time.Second, func() bool {
		put(97)
		var data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		}
		q := "/api/v1/query?query=" + url.QueryEscape(`fleet:coolant_temp:max{vehicle="truck-1"}`)
		if err := tlsJSON(t, cl, http.MethodGet, follower.HTTP, q, nil, &data); err != nil {
			t.Logf("query %s: %v", follower.ID, err)
			return false
		}
		return len(data.Result) == 1 && data.Result[0].Value[1] == "97"
	})

	// The alert goes pending on the leader.
	hot, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(hot)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			body := fmt.Sprintf(`{"metric":"coolant_temp","timestamp":%d,"value":110,"tags":{"vehicle":"truck-1"}}`, time.Now().UnixMilli())
			if err := tlsJSON(t, cl, http.MethodPost, c.Edge.HTTP, "/api/put", []byte(body), nil); err != nil {
				t.Errorf("put: %v", err)
				return
			}
		}
	}()
	defer func() { close(stop); <-hot }()
	put(110)
	var pending alert
	waitUntil(t, "the alert pending on the leader", 20*time.Second, func() bool {
		a, ok := overheat(lead)
		if ok && a.State == "pending" {
			pending = a
			return true
		}
		return false
	})
	// Long enough for ALERTS_FOR_STATE to be shipped and acknowledged by a
	// quorum (the rules edge seals every 500 ms), well inside `for`.
	time.Sleep(8 * time.Second)
	lead.Kill()
	killed := time.Now()
	t.Logf("%s killed %v after the alert went pending at %v", lead.ID, killed.Sub(pending.ActiveAt), pending.ActiveAt)

	next, err := c.Leader(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var restored alert
	waitUntil(t, "the alert on the new leader "+next.ID, 30*time.Second, func() bool {
		a, ok := overheat(next)
		restored = a
		return ok && (a.State == "pending" || a.State == "firing")
	})
	if d := restored.ActiveAt.Sub(pending.ActiveAt).Abs(); d > time.Second {
		t.Fatalf("the new leader lists the alert active since %v, the killed leader since %v: its for progress was not kept", restored.ActiveAt, pending.ActiveAt)
	}
	// Firing once `for` has passed since the original active time (an
	// alert started over would fire only `for` after the new leader's
	// first evaluation).
	firesBy := pending.ActiveAt.Add(forDur + 5*time.Second)
	waitUntil(t, "the alert firing on the new leader", time.Until(firesBy)+time.Second, func() bool {
		a, ok := overheat(next)
		return ok && a.State == "firing"
	})
	if time.Now().After(firesBy) {
		t.Fatalf("the alert fired after %v, more than for (%v) after its active time %v", time.Now(), forDur, pending.ActiveAt)
	}
	t.Logf("fired on %s %v after the original active time (for %v); leader killed %v after it", next.ID, time.Since(pending.ActiveAt), forDur, killed.Sub(pending.ActiveAt))
}
