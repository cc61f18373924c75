package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/replicator"
)

// localStack is what tributary local runs, wired the same way in this
// process: a coordinator, an edge node shipping to it, and the client
// APIs (writes to the edge, queries through the coordinator).
type localStack struct {
	c    *coordinator.Coordinator
	n    *node.Node
	edge *edgeSource
	http string // HTTP listener address
}

func startLocalStack(t *testing.T) *localStack {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	root := t.TempDir()
	tp, err := telemetry.Setup(context.Background(), telemetry.Config{Role: "local", Instance: "c1", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cluster := l.Addr().String()
	l.Close()
	edge := &edgeSource{}
	c, err := coordinator.Open(coordinator.Options{NodeID: "c1", RaftID: 1, DataDir: filepath.Join(root, "coordinator"),
		ClusterListen: cluster, IntakeListen: "127.0.0.1:0", Insecure: true, TickInterval: 20 * time.Millisecond,
		Peers: []coordinator.Peer{{RaftID: 1, NodeID: "c1", Addr: cluster}}, Logger: log,
		MeterProvider: tp.MeterProvider(), LocalEdge: edge.source})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	no := node.Options{DataDir: filepath.Join(root, "edge"), NodeID: "e1", WALSegmentBytes: 4096,
		WALSegmentAge: 20 * time.Millisecond, FlushInterval: 10 * time.Millisecond, Logger: log, MeterProvider: tp.MeterProvider()}
	ro := replicator.Options{Targets: []string{c.IntakeAddr()}, Insecure: true, SoftwareVersion: "test",
		CursorPath: filepath.Join(no.DataDir, "replication.cursor"), Logger: log, MeterProvider: tp.MeterProvider(),
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond, PollInterval: 10 * time.Millisecond}
	ship, err := newShipping(&ro, &no)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(no)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	edge.n.Store(n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	ship.start(n, log)
	t.Cleanup(ship.stop)
	lb := &localBackend{edge: n, edgeAPI: testNodeAPI(n, "test"), cloud: c.Backend(), ship: ship}
	sf := serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0"}
	fe, gh, err := serveCoordinator(c, &sf, lb, tp, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gh.Close(); fe.stop(time.Second) })
	s := &localStack{c: c, n: n, edge: edge}
	for i := 0; i+1 < len(fe.addrs); i += 2 {
		if fe.addrs[i] == "http" {
			s.http = fe.addrs[i+1].(string)
		}
	}
	if s.http == "" {
		t.Fatalf("no http listener in %v", fe.addrs)
	}
	return s
}

// get fetches path and returns the status code and body.
func (s *localStack) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.http + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrape is one parse of GET /metrics: value by "name{label=value,...}"
// (labels sorted, as the exporter writes them), histograms as their
// _count.
type scrape map[string]float64

func (s *localStack) scrape(t *testing.T) scrape {
	t.Helper()
	code, body := s.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := scrape{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			var v float64
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				v = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				v = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				v = float64(m.GetHistogram().GetSampleCount())
			default:
				continue
			}
			var ls []string
			for _, lp := range m.GetLabel() {
				if lp.GetName() != "otel_scope_name" && lp.GetName() != "otel_scope_version" && lp.GetName() != "otel_scope_schema_url" {
					ls = append(ls, lp.GetName()+"="+lp.GetValue())
				}
			}
			out[name+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// sum adds the series of a metric whose labels include every one of
// labels ("k=v"); ok is false if there is none.
func (s scrape) sum(name string, labels ...string) (v float64, ok bool) {
	for k, x := range s {
		n, ls, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ls = strings.TrimSuffix(ls, "}")
		have := map[string]bool{}
		for _, l := range strings.Split(ls, ",") {
			have[l] = true
		}
		match := true
		for _, l := range labels {
			match = match && have[l]
		}
		if match {
			v += x
			ok = true
		}
	}
	return v, ok
}

func TestCoordinatorMetrics_ExistAndMoveWithWork(t *testing.T) {
	s := startLocalStack(t)
	before := s.scrape(t)

	// Work: edge writes (HTTP line protocol), shipped to the coordinator,
	// then queries through the fleet front end.
	t0 := s.writeHeld(t)
	rangeQuery := "/api/v1/query_range?" + url.Values{"query": {"temp_value"},
		"start": {fmt.Sprint(t0 / 1000)}, "end": {fmt.Sprint(time.Now().Unix() + 60)}, "step": {"15"}}.Encode()
	for _, path := range []string{rangeQuery, "/api/v1/series?match[]=temp_value", "/api/v1/labels", "/api/v1/label/sensor/values"} {
		if code, body := s.get(t, path); code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, code, body)
		}
	}
	// The edge goes away: its fresh data is missing from the next answer.
	s.edge.n.Store(nil)
	if code, body := s.get(t, rangeQuery); code != http.StatusOK || !strings.Contains(body, "warnings") {
		t.Fatalf("query with the edge unreachable: %d %s", code, body)
	}
	after := s.scrape(t)

	type check struct {
		name   string
		labels []string
		moves  bool // must grow between the two scrapes
	}
	checks := []check{
		{"tributary_raft_term", nil, false},
		{"tributary_raft_leader", nil, false},
		{"tributary_raft_is_leader", nil, false},
		{"tributary_raft_commit_index", nil, true},
		{"tributary_raft_applied_index", nil, true},
		{"tributary_raft_snapshot_index", nil, false},
		{"tributary_raft_log_entries", nil, true},
		{"tributary_raft_voters", nil, false},
		{"tributary_raft_learners", nil, false},
		{"tributary_raft_snapshots_taken_total", nil, false},
		{"tributary_raft_snapshots_restored_total", nil, false},
		{"tributary_raft_messages_dropped_total", nil, false},
		{"tributary_raft_proposals_reproposed_total", nil, false},
		{"tributary_raft_proposal_duration_seconds", []string{"outcome=applied"}, true},
		{"tributary_catalog_series", nil, true},
		// The edge may have registered before the first scrape (a slow
		// machine): these are checked for their value below.
		{"tributary_catalog_nodes", []string{"role=edge"}, false},
		{"tributary_catalog_nodes", []string{"role=coordinator"}, false},
		{"tributary_catalog_members", nil, false},
		{"tributary_catalog_placements", nil, false},
		{"tributary_catalog_held_runs", nil, true},
		{"tributary_catalog_held_segments", nil, true},
		{"tributary_catalog_gaps", []string{"reason=backlog-overflow"}, false},
		{"tributary_catalog_gap_segments", nil, false},
		{"tributary_intake_segments_total", []string{"outcome=stored"}, true},
		{"tributary_intake_segments_total", []string{"outcome=duplicate"}, false},
		{"tributary_intake_received_bytes_total", nil, true},
		{"tributary_intake_refusals_total", []string{"code=unavailable"}, false},
		{"tributary_intake_gaps_total", nil, false},
		{"tributary_intake_streams_total", nil, false},
		{"tributary_intake_streams_open", nil, false},
		{"tributary_intake_heartbeats_total", nil, false},
		{"tributary_replica_segments_total", []string{"outcome=applied"}, true},
		{"tributary_replica_segments_total", []string{"outcome=error"}, false},
		{"tributary_replica_points_total", nil, true},
		{"tributary_replica_points_rejected_total", nil, false},
		{"tributary_replica_series", nil, true},
		{"tributary_tunnel_open", nil, false},
		{"tributary_listener_refusals_total", []string{"listener=cluster", "stage=admission"}, false},
		{"tributary_listener_refusals_total", []string{"listener=intake", "stage=connection"}, false},
		{"tributary_listener_refusals_total", []string{"listener=intake", "stage=handshake"}, false},
		{"tributary_listener_connections_open", []string{"listener=intake"}, false},
		{"tributary_query_fanout_duration_seconds", []string{"api=query", "kind=raw"}, true},
		{"tributary_query_fanout_duration_seconds", []string{"api=series"}, true},
		{"tributary_query_fanout_duration_seconds", []string{"api=label_names"}, true},
		{"tributary_query_fanout_duration_seconds", []string{"api=label_values"}, true},
		{"tributary_query_fanout_legs", []string{"api=query"}, true},
		{"tributary_query_legs_total", []string{"kind=replica", "outcome=ok"}, true},
		{"tributary_query_legs_total", []string{"kind=edge", "outcome=ok"}, true},
		{"tributary_query_partial_total", nil, true},
		{"tributary_query_edge_unreachable_total", nil, true},
		{"tributary_query_hedges_total", nil, false},
	}
	for _, c := range checks {
		a, ok := after.sum(c.name, c.labels...)
		if !ok {
			t.Errorf("%s%v missing from /metrics", c.name, c.labels)
			continue
		}
		b, _ := before.sum(c.name, c.labels...)
		if c.moves && a <= b {
			t.Errorf("%s%v did not move with work: %v, then %v", c.name, c.labels, b, a)
		}
	}
	for k, want := range map[string]float64{"tributary_raft_is_leader": 1, "tributary_raft_leader": 1, "tributary_catalog_members": 1, "tributary_intake_streams_open": 1} {
		if v, _ := after.sum(k); v != want {
			t.Errorf("%s = %v, want %v", k, v, want)
		}
	}
	if v, _ := after.sum("tributary_catalog_nodes", "role=edge"); v != 1 {
		t.Errorf("tributary_catalog_nodes{role=edge} = %v, want 1 (the edge registered)", v)
	}
	if v, _ := after.sum("tributary_catalog_placements"); v != 1 {
		t.Errorf("tributary_catalog_placements = %v, want 1 (the edge placed)", v)
	}
	if v, _ := after.sum("tributary_raft_term"); v < 1 {
		t.Errorf("tributary_raft_term = %v, want at least 1", v)
	}
	if t.Failed() {
		var names []string
		for k := range after {
			if strings.HasPrefix(k, "tributary_raft") || strings.HasPrefix(k, "tributary_catalog") || strings.HasPrefix(k, "tributary_intake") ||
				strings.HasPrefix(k, "tributary_replica_") || strings.HasPrefix(k, "tributary_query") || strings.HasPrefix(k, "tributary_tunnel") || strings.HasPrefix(k, "tributary_listener") {
				names = append(names, k)
			}
		}
		t.Logf("coordinator series scraped:\n%s", strings.Join(names, "\n"))
	}
}

func TestCoordinatorReadyz_ReadyOnceServing(t *testing.T) {
	s := startLocalStack(t)
	if err := s.c.Readiness(); err != nil {
		t.Fatalf("Readiness after WaitReady: %v", err)
	}
	if code, body := s.get(t, "/readyz"); code != http.StatusOK {
		t.Fatalf("GET /readyz: %d %s", code, body)
	}
	if code, _ := s.get(t, "/healthz"); code != http.StatusOK {
		t.Fatalf("GET /healthz: %d", code)
	}
	// Stopping: /readyz says so at once.
	if err := s.c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, body := s.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "coordinator: stopping") {
		t.Fatalf("GET /readyz after Stop: %d %q, want 503 naming the stop", code, body)
	}
}

// writeHeld writes 500 points of 5 series to the edge over HTTP, starting
// ten minutes ago, and waits until the coordinator holds them all; it
// returns the first timestamp (ms).
func (s *localStack) writeHeld(t *testing.T) int64 {
	t.Helper()
	t0 := time.Now().Add(-10 * time.Minute).UnixMilli()
	var lines strings.Builder
	for i := range 500 {
		fmt.Fprintf(&lines, "temp,sensor=s%d value=%d %d\n", i%5, i, t0+int64(i)*1000)
	}
	resp, err := http.Post("http://"+s.http+"/write?db=test&precision=ms", "text/plain", strings.NewReader(lines.String()))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("write: %s %s", resp.Status, msg)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if p, ok := s.c.Catalog().Progress("e1"); ok && len(p.Held) > 0 {
			var points uint64
			for _, h := range p.Held {
				points += h.Points
			}
			if points >= 500 {
				return t0
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the edge's points did not reach the coordinator")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
