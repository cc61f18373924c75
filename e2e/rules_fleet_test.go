package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
)

// nodeRuleGroups lists the names of the rule groups a node's
// /api/v1/rules reports, with the file of each.
func nodeRuleGroups(t *testing.T, httpAddr string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, g := range coordinatorRuleGroups(t, httpAddr) {
		out[name] = filepath.Base(g.File)
	}
	return out
}

// waitUntil polls cond every 200 ms and fails the test, naming what it
// waited for, if cond is still false after d.
func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// edgeGroup is a group of a coordinator's /api/v1/rules: its file, edge
// and the health of its first rule.
type edgeGroup struct{ File, Edge, Health string }

// coordinatorRuleGroups lists the rule groups a coordinator's (or a
// node's) /api/v1/rules reports, by name.
func coordinatorRuleGroups(t *testing.T, httpAddr string) map[string]edgeGroup {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			Groups []struct {
				Name  string `json:"name"`
				File  string `json:"file"`
				Edge  string `json:"edge"`
				Rules []struct {
					Health string `json:"health"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := map[string]edgeGroup{}
	for _, g := range body.Data.Groups {
		eg := edgeGroup{File: g.File, Edge: g.Edge}
		if len(g.Rules) > 0 {
			eg.Health = g.Rules[0].Health
		}
		out[g.Name] = eg
	}
	return out
}

// TestRules_FleetGroupReachesLabelledEdgeAndSurvivesRestartOffline sets
// two rule groups with `tributary cluster rules set`: one selecting the
// edge's --edge-label, one selecting another site. The edge evaluates the
// first only; then the coordinator is killed and the edge restarted: it
// evaluates the group again from its data directory, with no coordinator.
func TestRules_FleetGroupReachesLabelledEdgeAndSurvivesRestartOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	dir := t.TempDir()
	berlin, paris := filepath.Join(dir, "berlin.yml"), filepath.Join(dir, "paris.yml")
	for f, body := range map[string]string{
		berlin: "groups:\n  - name: can-bus\n    interval: 1s\n    rules:\n      - record: vehicle:coolant_temp:max\n        expr: max by (vehicle) (coolant_temp)\n",
		paris:  "groups:\n  - name: paris-only\n    interval: 1s\n    rules:\n      - record: paris:up\n        expr: vector(1)\n",
	} {
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := cluster.New(cluster.Options{Bin: bin, Dir: dir, Coordinators: 1,
		EdgeArgs: []string{"--replication-backoff-max", "1s", "--edge-label", "site=berlin", "--edge-label", "model=pi4b"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	cluster.ReportOnFailure(t, 30, c.Processes()...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	edge := c.Edge.HTTP
	for sel, f := range map[string]string{`site="berlin", model=~"pi4.*"`: berlin, `site="paris"`: paris} {
		// Refused (FAILED_PRECONDITION) until the coordinator registered
		// itself with its catalog features, a moment after its start.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out, err := exec.Command(bin, "cluster", "rules", "--addr", c.Coordinators[0].GRPC, "--selector", sel, "set", f).CombinedOutput()
			if err == nil {
				t.Logf("%s", out)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster rules set %s: %v\n%s", f, err, out)
			}
		}
	}
	waitUntil(t, "the edge evaluates the group that selects it", 20*time.Second, func() bool {
		return nodeRuleGroups(t, edge)["can-bus"] == "fleet-rules.yml"
	})
	// recorded: the rule's series holds samples in the last 2 s.
	recorded := func() bool {
		putCoolant(t, edge, 97)
		for _, vs := range promRaw(t, edge, `vehicle:coolant_temp:max[2s]`, time.Now()) {
			if len(vs) > 0 && vs[len(vs)-1][1] == "97" {
				return true
			}
		}
		return false
	}
	waitUntil(t, "the fleet group's series on the edge", 20*time.Second, recorded)
	// The coordinator lists the edge's group, asked of the edge, under
	// <edge>/<file> and with the edge named.
	waitUntil(t, "the coordinator lists the edge's group", 20*time.Second, func() bool {
		g, ok := coordinatorRuleGroups(t, c.Coordinators[0].HTTP)["can-bus"]
		return ok && g.Edge == c.Edge.ID && strings.HasPrefix(g.File, c.Edge.ID+"/") &&
			filepath.Base(g.File) == "fleet-rules.yml" && g.Health == "ok"
	})
	if _, ok := nodeRuleGroups(t, edge)["paris-only"]; ok {
		t.Fatal("the edge evaluates a group selecting another site")
	}
	// The catalog shows the edge's labels.
	out, err := exec.Command(bin, "cluster", "edges", "--addr", c.Coordinators[0].GRPC, "--format", "json").CombinedOutput()
	var edges struct {
		Edges []struct {
			NodeID string            `json:"node_id"`
			Labels map[string]string `json:"labels"`
		} `json:"edges"`
	}
	if err != nil || json.Unmarshal(out, &edges) != nil || len(edges.Edges) != 1 || edges.Edges[0].Labels["site"] != "berlin" || edges.Edges[0].Labels["model"] != "pi4b" {
		t.Fatalf("cluster edges: %v\n%s", err, out)
	}

	// The coordinator goes; the edge restarts without it.
	c.Coordinators[0].Kill()
	if err := c.Edge.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Edge.Start(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	groups := nodeRuleGroups(t, edge)
	if groups["can-bus"] != "fleet-rules.yml" || len(groups) != 1 {
		t.Fatalf("after a restart with no coordinator, the edge evaluates %v, want the fleet's can-bus", groups)
	}
	// Samples of the last 2 s, 4 s after the restart: evaluated since.
	waitUntil(t, "the fleet group evaluated after the restart", 20*time.Second, func() bool {
		return time.Since(restarted) > 4*time.Second && recorded()
	})
	if r := promRaw(t, edge, `paris:up[1m]`, time.Now()); len(r) != 0 {
		t.Fatalf("paris:up recorded on the Berlin edge: %v", r)
	}
}
