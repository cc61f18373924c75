package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/replicator"
)

const edgeRulesYAML = `
groups:
  - name: can
    interval: 100ms
    rules:
      - alert: CoolantOverheat
        expr: coolant_temp > 105
        for: 30s
        labels:
          severity: page
        annotations:
          summary: "coolant at {{ $value }}"
      - record: coolant:max
        expr: max(coolant_temp)
`

// startRulesEdge starts edge id shipping to the coordinator at intake,
// with the rules of file (none when ""), its QueryService on a local port
// advertised to the coordinators, and writing coolant_temp = 110 every
// 100 ms until the test ends. With dead, it advertises an address where
// nothing listens.
func startRulesEdge(t *testing.T, id, intake, file string, dead bool) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if dead {
		lis.Close()
	}
	dir := t.TempDir()
	s, err := replicator.New(replicator.Options{Targets: []string{intake}, Insecure: true, SoftwareVersion: "test",
		QueryAddr: addr, CursorPath: filepath.Join(dir, "replication.cursor"), BackoffInitial: 10 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: filepath.Join(dir, "node"), NodeID: id,
		WALSegmentAge: 50 * time.Millisecond, WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var stops []func()
	if !dead {
		var rf rulesFlags
		fs := newFlagSet("test", io.Discard, "")
		rf.register(fs)
		if err := fs.Parse([]string{"--rules", file}); err != nil {
			t.Fatal(err)
		}
		sf := serveFlags{prom: prom.Options{MaxSamples: 1_000_000, QueryTimeout: 10 * time.Second,
			LookbackDelta: 5 * time.Minute, MaxConcurrentQueries: 4}}
		rr, err := rf.open(n, &sf, "", nil, log)
		if err != nil {
			t.Fatal(err)
		}
		api := grpcapi.New(n, grpcapi.Options{})
		rr.serveGroups(api.QueryServer)
		g := grpc.NewServer()
		api.Register(g)
		wg.Go(func() { g.Serve(lis) })
		rr.start(log)
		stops = append(stops, func() { rr.stop() }, g.Stop)
	}
	wg.Go(func() { s.Run(ctx, n) })
	wg.Go(func() {
		writeEvery100ms(ctx, n, labels.FromStrings(labels.MetricName, "coolant_temp", "engine", "1"), 110)
	})
	t.Cleanup(func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
		wg.Wait()
		n.Close()
	})
}

// rulesAnswer is the part of /api/v1/rules the test reads.
type rulesAnswer struct {
	Status string
	Data   struct {
		Groups []struct {
			Name, File, Edge string
			LastEvaluation   time.Time
			Rules            []struct {
				Type, Name, Health, State string
				Alerts                    []struct {
					Labels map[string]string
					State  string
				}
			}
		}
	}
	Warnings []string
}

// TestCoordinatorRules_ListsTheEdgesGroupsAndNamesTheUnreachable runs a
// coordinator with --rules, an edge with rules reachable at its advertised
// address and one whose address is dead: the coordinator's /api/v1/rules
// lists its own group, then the edge's as <edge>/<file> with its rules'
// health and the pending alert, and names the dead edge in a warning.
func TestCoordinatorRules_ListsTheEdgesGroupsAndNamesTheUnreachable(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	coordFile := filepath.Join(dir, "fleet.yml")
	edgeFile := filepath.Join(dir, "can.yml")
	for f, y := range map[string]string{coordFile: fleetRulesYAML, edgeFile: edgeRulesYAML} {
		if err := os.WriteFile(f, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addr := ruleTestFreeAddrs(t, 1)[0]
	peers := []coordinator.Peer{{RaftID: 1, NodeID: "coord-1", Addr: addr}}
	var rf rulesFlags
	fs := newFlagSet("test", io.Discard, "")
	rf.register(fs)
	if err := fs.Parse([]string{"--rules", coordFile}); err != nil {
		t.Fatal(err)
	}
	var edge edgeSource
	cdir := t.TempDir()
	c, err := coordinator.Open(coordinator.Options{NodeID: "coord-1", RaftID: 1, DataDir: cdir,
		ClusterListen: addr, IntakeListen: "127.0.0.1:0", Peers: peers, Insecure: true,
		TickInterval: 50 * time.Millisecond, LocalEdge: edge.source, Logger: log,
		EdgeDialOptions: []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}})
	if err != nil {
		t.Fatal(err)
	}
	sf := serveFlags{prom: prom.Options{MaxSamples: 1_000_000, QueryTimeout: 10 * time.Second,
		LookbackDelta: 5 * time.Minute, MaxConcurrentQueries: 4}}
	r, err := openCoordinatorRules(c, &rf, &sf, coordinatorRulesOptions{dataDir: cdir, local: &edge,
		sealAge: 100 * time.Millisecond, log: log})
	if err != nil {
		t.Fatal(err)
	}
	m := &ruleMember{c: c, r: r}
	t.Cleanup(func() { m.stop(t) })
	r.start()
	mux := http.NewServeMux()
	if err := registerHTTP(mux, c.Backend(), &httpapi.Config{}, sf.prom, sf.rules, sf.alertsFromSeries, sf.rulesWithSeriesAlerts); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	startRulesEdge(t, "pi-1", c.IntakeAddr(), edgeFile, false)
	startRulesEdge(t, "pi-dead", c.IntakeAddr(), "", true)

	var last rulesAnswer
	var raw []byte
	listed := func() bool {
		resp, err := http.Get(srv.URL + "/api/v1/rules")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ = io.ReadAll(resp.Body)
		last = rulesAnswer{}
		if err := json.Unmarshal(raw, &last); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		g := last.Data.Groups
		return len(g) == 2 && len(last.Warnings) == 1 && len(g[1].Rules) == 2 && g[1].Rules[0].State == "pending" &&
			g[1].Rules[1].Health == "ok"
	}
	deadline := time.Now().Add(30 * time.Second)
	for !listed() {
		if time.Now().After(deadline) {
			t.Fatalf("the coordinator never listed both groups, the pending alert and the warning: %s", raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	own, pi := last.Data.Groups[0], last.Data.Groups[1]
	if own.Name != "fleet" || own.File != coordFile || own.Edge != "" {
		t.Errorf("the coordinator's own group first: %+v", own)
	}
	if pi.Name != "can" || pi.File != "pi-1/"+edgeFile || pi.Edge != "pi-1" || pi.LastEvaluation.IsZero() {
		t.Errorf("the edge's group: %+v", pi)
	}
	hot := pi.Rules[0]
	if hot.Type != "alerting" || hot.Name != "CoolantOverheat" || len(hot.Alerts) != 1 || hot.Alerts[0].Labels["severity"] != "page" {
		t.Errorf("the edge's alerting rule: %+v", hot)
	}
	if w := last.Warnings[0]; !strings.HasPrefix(w, "1 edge unreachable (pi-dead)") {
		t.Errorf("warning %q, want it to name pi-dead (and not the coordinator's rules edge)", w)
	}

	// edge[] asks only the edges named: no warning for pi-dead.
	resp, err := http.Get(srv.URL + "/api/v1/rules?edge[]=pi-1&type=record")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var only rulesAnswer
	if err := json.NewDecoder(resp.Body).Decode(&only); err != nil {
		t.Fatal(err)
	}
	g := only.Data.Groups
	if len(only.Warnings) != 0 || len(g) != 2 || len(g[1].Rules) != 1 || g[1].Rules[0].Type != "recording" {
		t.Errorf("edge[]=pi-1&type=record: %s", fmt.Sprint(only))
	}
}
