package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	"github.com/tributarydb/tributary/internal/loopback"
)

// pendingAlert is one alert of a node's /api/v1/alerts.
type pendingAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
}

func nodeAlerts(t *testing.T, httpAddr string) []pendingAlert {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Alerts []pendingAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Data.Alerts
}

// TestRules_PendingAlertKeepsItsForProgressAcrossKill9 runs tributary
// node with an alerting rule whose `for` is long, kills it with SIGKILL
// while the alert is pending, starts it again, and requires the alert to
// have kept the time it had spent pending (restored from
// ALERTS_FOR_STATE in the node's store) instead of starting over.
func TestRules_PendingAlertKeepsItsForProgressAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	dir := t.TempDir()
	ruleFile := filepath.Join(dir, "can.yml")
	if err := os.WriteFile(ruleFile, []byte(`
groups:
  - name: can-bus
    interval: 1s
    rules:
      - alert: CoolantOverheat
        expr: coolant_temp > 105
        for: 10m
`), 0o644); err != nil {
		t.Fatal(err)
	}
	addrs, err := loopback.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	p := &cluster.Process{Name: "edge-1", Bin: bin, LogPath: filepath.Join(dir, "edge-1.log"), Ready: `msg="node ready"`,
		Args: []string{"node", "--data-dir", filepath.Join(dir, "edge-1"), "--node-id", "edge-1",
			"--listen", addrs[0], "--http-listen", addrs[1], "--rules", ruleFile, "--rules-for-grace-period", "1s"}}
	t.Cleanup(p.Kill)
	cluster.ReportOnFailure(t, 20, p)
	if err := p.Start(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	put := fmt.Sprintf(`{"metric":"coolant_temp","timestamp":%d,"value":110,"tags":{"vehicle":"truck-1"}}`, time.Now().UnixMilli())
	resp, err := http.Post("http://"+addrs[1]+"/api/put", "application/json", bytes.NewBufferString(put))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("put: %d", resp.StatusCode)
	}

	var first time.Time
	deadline := time.Now().Add(15 * time.Second)
	for first.IsZero() {
		if as := nodeAlerts(t, addrs[1]); len(as) == 1 && as[0].State == "pending" {
			first = as[0].ActiveAt
		} else if time.Now().After(deadline) {
			t.Fatalf("no pending alert: %+v", as)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(10 * time.Second)
	p.Kill()
	killedAt := time.Now()
	pendingBefore := killedAt.Sub(first)
	time.Sleep(3 * time.Second)
	if err := p.Start(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The state is restored after the group's second evaluation.
	time.Sleep(5 * time.Second)
	as := nodeAlerts(t, addrs[1])
	if len(as) != 1 || as[0].State != "pending" {
		t.Fatalf("alerts after the restart: %+v", as)
	}
	pendingNow := time.Since(as[0].ActiveAt)
	t.Logf("pending %v before the kill, %v after the restart (active since %v, first %v)", pendingBefore, pendingNow, as[0].ActiveAt, first)
	// Kept: about the pending time before the kill (up to an evaluation
	// lost at the kill, second precision) plus the seconds since the
	// restore. Started over, it would be at most the 5s since the restart.
	if pendingNow < pendingBefore-2*time.Second {
		t.Errorf("the alert has been pending %v after the restart, less than the %v it had before the kill: its for progress was lost", pendingNow, pendingBefore)
	}
	if !as[0].ActiveAt.After(first) {
		t.Errorf("active time %v not moved past %v by the time down", as[0].ActiveAt, first)
	}
}
