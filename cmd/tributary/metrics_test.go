package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// scrapeNode reads /metrics into sample name{labels} -> value, and checks
// the body parses as the Prometheus text format.
func scrapeNode(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("/metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// TestServe_NodeMetricsMove runs a node with a replicator the way
// "tributary node" wires them, writes over HTTP and gRPC, queries over
// PromQL, OpenTSDB and gRPC, and checks that every node and replication
// metric is on /metrics and that those counting the work moved. It checks
// /healthz and /readyz on the same listener.
func TestServe_NodeMetricsMove(t *testing.T) {
	dir := t.TempDir()
	sf := serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0", limits: httpapi.Limits{MaxPointsPerRequest: 1000}}
	sf.limits = sf.limits.WithDefaults()
	tp, err := sf.telemetry("node", "metrics-test")
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	ship, err := replicator.New(replicator.Options{
		Targets: []string{"127.0.0.1:1"}, Insecure: true, CursorPath: filepath.Join(dir, "cursor"),
		MeterProvider: tp.MeterProvider(),
	})
	if err != nil {
		t.Fatal(err)
	}
	o := node.Options{DataDir: filepath.Join(dir, "node"), MeterProvider: tp.MeterProvider(),
		WALRetention: ship.RetainFrom, WALSegmentAge: 100 * time.Millisecond}
	n, err := node.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	grpcAPI := grpcapi.New(n, grpcapi.Options{MaxPointsPerRequest: sf.limits.MaxPointsPerRequest, Status: nodeStatus(n, "test", nil)})
	extra := func(mux *http.ServeMux, st *httpapi.Stats) {
		mux.Handle("GET /metrics", metricsHandler(tp, grpcAPI, st))
		httpapi.RegisterHealth(mux, nodeReady(n))
	}
	fe, err := sf.start(n, grpcAPI.Register, extra, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer fe.stop(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	shipDone := make(chan error, 1)
	go func() { shipDone <- ship.Run(ctx, n) }()
	defer func() { cancel(); <-shipDone }()
	addr := map[string]string{}
	for i := 0; i+1 < len(fe.addrs); i += 2 {
		addr[fe.addrs[i].(string)] = fe.addrs[i+1].(string)
	}
	base := "http://" + addr["http"]

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz of an open node: %d %q", code, body)
	}

	before := scrapeNode(t, base)

	// Writes: line protocol over HTTP (one point too far in the future),
	// a gRPC write, and a gRPC write over the size limit.
	now := time.Now().Add(-time.Minute).UnixMilli()
	var lp strings.Builder
	for i := range 50 {
		fmt.Fprintf(&lp, "temp,host=h%d v=%d %d\n", i%5, i, now+int64(i)*100)
	}
	fmt.Fprintf(&lp, "temp,host=h0 v=1 %d\n", now+48*3600_000)
	resp, err := http.Post(base+"/api/v2/write?bucket=b&precision=ms", "text/plain", strings.NewReader(lp.String()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cc, err := grpc.NewClient(addr["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	wc := pb.NewWriteServiceClient(cc)
	batch := &pb.SeriesBatch{Series: &pb.Series{Labels: []*pb.Label{{Name: "__name__", Value: "rpm"}, {Name: "car", Value: "1"}}}}
	for i := range 20 {
		batch.TimestampsMs = append(batch.TimestampsMs, now+int64(i)*100)
		batch.Values = append(batch.Values, float64(i))
	}
	if _, err := wc.Write(ctx, &pb.WriteRequest{Batches: []*pb.SeriesBatch{batch}}); err != nil {
		t.Fatalf("gRPC write: %v", err)
	}
	big := &pb.SeriesBatch{Series: batch.Series, TimestampsMs: make([]int64, 1001), Values: make([]float64, 1001)}
	if _, err := wc.Write(ctx, &pb.WriteRequest{Batches: []*pb.SeriesBatch{big}}); err == nil {
		t.Fatal("gRPC write over the points limit was accepted")
	}

	// Queries: PromQL (raw), OpenTSDB (aggregate), gRPC (raw and aggregate).
	qs := url.Values{"query": {"temp"}, "start": {fmt.Sprint(now / 1000)}, "end": {fmt.Sprint(now/1000 + 60)}, "step": {"1"}}
	if code, body := get("/api/v1/query_range?" + qs.Encode()); code != 200 {
		t.Fatalf("PromQL query: %d %s", code, body)
	}
	if code, body := get(fmt.Sprintf("/api/query?start=%d&end=%d&m=avg:10s-avg:temp_v", now-1000, now+60_000)); code != 200 {
		t.Fatalf("OpenTSDB query: %d %s", code, body)
	}
	qc := pb.NewQueryServiceClient(cc)
	for _, req := range []*pb.QueryRequest{
		{Matchers: []*pb.Matcher{{Name: "__name__", Value: "rpm"}}, StartMs: now - 1000, EndMs: now + 60_000, Mode: pb.QueryMode_QUERY_MODE_RAW},
		{Matchers: []*pb.Matcher{{Name: "__name__", Value: "temp"}}, StartMs: now - 1000, EndMs: now + 60_000, Mode: pb.QueryMode_QUERY_MODE_RAW, Aggregate: pb.Aggregate_AGGREGATE_SUM},
	} {
		stream, err := qc.Query(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("gRPC query: %v", err)
			}
		}
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	// Let the WAL seal a segment (WALSegmentAge) for the replicator to see.
	deadline := time.Now().Add(5 * time.Second)
	for ship.Stats().NewestSealed == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}

	after := scrapeNode(t, base)
	exists := []string{
		`tributary_points_rejected_total{reason="too_old"}`,
		"tributary_series", "tributary_head_samples", "tributary_head_chunks", "tributary_head_bytes",
		"tributary_wal_bytes", "tributary_wal_segments",
		"tributary_flush_errors_total", "tributary_rollup_lag_seconds", "tributary_store_flushes_total", "tributary_idle_flushes_total",
		`tributary_store_sst_size_bytes{cf="chunks"}`, "tributary_store_memtable_size_bytes",
		"tributary_store_compaction_pending_bytes", "tributary_store_block_cache_usage_bytes",
		"tributary_store_block_cache_hits_total", "tributary_store_block_cache_misses_total",
		`tributary_store_write_bytes_total{writer="flush"}`, `tributary_store_write_bytes_total{writer="compaction"}`, `tributary_store_write_bytes_total{writer="wal"}`,
		"tributary_replication_connected", "tributary_replication_acked_through_seq",
		"tributary_replication_lag_seconds", "tributary_replication_lag_bytes",
		"tributary_replication_backlog_segments", "tributary_replication_backlog_bytes",
		"tributary_replication_retained_bytes", "tributary_replication_gaps", "tributary_replication_gap_points",
		"tributary_replication_dropped_points", "tributary_replication_backfilled_points_total",
		"tributary_replication_shipped_segments_total", "tributary_replication_shipped_bytes_total",
		"tributary_replication_shipped_points_total", "tributary_replication_shipped_bytes_per_point",
		"tributary_replication_refusals_total", "tributary_replication_sessions_total",
		"tributary_replication_writes_blocked",
		"tributary_replication_reship_requests_total", "tributary_replication_reship_ignored_total",
		"tributary_replication_reship_unavailable_total", `tributary_replication_reship_segments_total{source="wal"}`,
		`tributary_replication_reship_segments_total{source="store"}`, "tributary_replication_reship_bytes_total",
		"tributary_replication_reship_queued",
	}
	for _, name := range exists {
		if _, ok := after[name]; !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	moved := []struct {
		name string
		by   float64 // at least
	}{
		{"tributary_points_accepted_total", 70},
		{`tributary_points_rejected_total{reason="too_far_in_future"}`, 1},
		{"tributary_grpc_requests_too_large_total", 1},
		{`tributary_api_events_total{event="influx_points_rejected"}`, 1},
		{"tributary_wal_fsyncs_total", 1},
		{"tributary_wal_fsync_duration_seconds_count", 1},
		{"tributary_flushes_total", 1},
		{"tributary_flushed_chunks_total", 1},
		{`tributary_query_duration_seconds_count{api="promql",kind="raw"}`, 1},
		{`tributary_query_duration_seconds_count{api="opentsdb",kind="aggregate"}`, 1},
		{`tributary_query_duration_seconds_count{api="grpc",kind="raw"}`, 1},
		{`tributary_query_duration_seconds_count{api="grpc",kind="aggregate"}`, 1},
		{"tributary_series", 6},
		{"tributary_replication_newest_sealed_seq", 1},
	}
	for _, m := range moved {
		a, ok := after[m.name]
		if !ok {
			t.Errorf("/metrics lacks %s", m.name)
			continue
		}
		if d := a - before[m.name]; d < m.by {
			t.Errorf("%s moved by %v (from %v to %v), want at least %v", m.name, d, before[m.name], a, m.by)
		}
	}
	if t.Failed() {
		var names []string
		for k := range after {
			if strings.HasPrefix(k, "tributary_") {
				names = append(names, k)
			}
		}
		t.Logf("tributary metrics on /metrics: %v", names)
	}

	// Closing: /readyz says so while /healthz still answers.
	cancel()
	<-shipDone
	shipDone <- nil
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "closed") {
		t.Fatalf("/readyz of a closed node: %d %q", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz of a closed node: %d", code)
	}
}
