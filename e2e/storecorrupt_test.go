package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	"github.com/tributarydb/tributary/internal/loopback"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// storeNode is one standalone node process (no replication) for the store
// scenarios.
type storeNode struct {
	*cluster.Process
	dir, grpc, http string
}

func startStoreNode(t *testing.T, args ...string) *storeNode {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	addrs, err := loopback.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	n := &storeNode{dir: filepath.Join(root, "edge-1"), grpc: addrs[0], http: addrs[1]}
	n.Process = &cluster.Process{Name: "edge-1", Bin: bin, LogPath: filepath.Join(root, "edge-1.log"), Ready: `msg="node ready"`,
		Args: append([]string{"node", "--data-dir", n.dir, "--node-id", "edge-1", "--listen", n.grpc, "--http-listen", n.http}, args...)}
	t.Cleanup(n.Kill)
	cluster.ReportOnFailure(t, 30, n.Process)
	if err := n.Start(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return n
}

// tool runs a tributary client command and returns its exit code and
// output.
func tool(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return code, out.String()
}

func getReadyz(httpAddr string) (int, string) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + httpAddr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// damageDataBlocks flips a byte every 512 bytes of the second quarter of
// an SST file, among its data blocks: the first block (which listing the
// partitions reads) and the index, filter and properties blocks at the end
// stay intact, so the store opens and lists its partitions, and a read of
// the damaged blocks fails its checksum.
func damageDataBlocks(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(b) / 4; i < len(b)/2; i += 512 {
		b[i] ^= 0xFF
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCorrupt_StoreSSTRepairedWithCountedLoss damages the raw chunks of a
// stopped node's store and follows the documented recovery:
//
//   - the node starts (nothing reads the damage at open) and is ready; a
//     write that makes a flush read the damaged blocks (points inside their
//     hour, out of order) must turn /readyz to 503 within 5 s, with the
//     reason, and the gRPC health NOT_SERVING;
//   - writes to existing series go on into the WAL until unflushed data
//     reaches --wal-max-unflushed-bytes or twice --head-max-bytes (with
//     compressed WAL records the head bound comes first), then are
//     refused with UNAVAILABLE
//     (HTTP 503 with Retry-After), naming the reason;
//   - SIGTERM exits cleanly; tributary node repair quarantines the damaged
//     file and reports its time partitions; the node restarts ready;
//   - every point acknowledged after the damage is there (the WAL held
//     them), and the points written before it that are gone are exactly
//     the ones the node counts on /metrics (tributary_node_store_lost_points_total),
//     all inside the reported partitions.
func TestCorrupt_StoreSSTRepairedWithCountedLoss(t *testing.T) {
	n := startStoreNode(t, "--head-chunk-samples", "8", "--ooo-window", "3h", "--wal-max-unflushed-bytes", "1048576", "--wal-segment-bytes", "262144", "--head-max-bytes", "1048576")
	ctx := context.Background()
	hour := time.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	before := hour.Add(30 * time.Minute).UnixMilli()

	// 1. Data written and flushed into table files, then the node stopped.
	w1, err := cluster.NewWriter(cluster.WriterOptions{Addr: n.grpc, StartMs: before})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	// Synchronous writes: a request cut short by stopping a load would be
	// in doubt, and the points the node lost would not all be in the
	// ledger.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		if err := w1.WriteOnce(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	st1 := w1.Stop()
	if st1.Failed > 0 || st1.InDoubt > 0 || st1.Acked == 0 {
		t.Fatalf("load before the damage: %+v", st1)
	}
	if err := n.Stop(15 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code, out := tool(t, "compact", "--data-dir", n.dir); code != 0 {
		t.Fatalf("compact: exit %d: %s", code, out)
	}
	code, out := tool(t, "node", "repair", "--data-dir", n.dir, "--dry-run", "--format", "json")
	if code != 0 {
		t.Fatalf("repair --dry-run of an intact store: exit %d: %s", code, out)
	}
	var dry struct {
		Files []struct {
			Name         string `json:"name"`
			ColumnFamily string `json:"column_family"`
		} `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatalf("repair --dry-run output: %v: %s", err, out)
	}
	var damaged []string
	for _, f := range dry.Files {
		if f.ColumnFamily == "chunks" {
			damageDataBlocks(t, filepath.Join(n.dir, "db", f.Name))
			damaged = append(damaged, f.Name)
		}
	}
	if len(damaged) == 0 {
		t.Fatalf("no chunks table file to damage: %s", out)
	}
	t.Logf("%d points acknowledged, then flushed to table files; damaged %v", st1.Acked, damaged)

	// 2. The node starts on the damaged store and is ready.
	if err := n.Start(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if c, body := getReadyz(n.http); c != 200 {
		t.Fatalf("/readyz before the damage is read: %d %s", c, body)
	}
	w2, err := cluster.NewWriter(cluster.WriterOptions{Addr: n.grpc, Metric: "e2e_after", PointsPerSeries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	w2.Start()

	// 3. Points inside the damaged hour: the flush merges them with the
	// stored chunks and reads the damaged blocks.
	conn, err := grpc.NewClient(n.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	trigger := map[string]map[int64]float64{}
	req := &pb.WriteRequest{}
	for i := range 20 {
		s := cluster.SeriesName(i)
		b := &pb.SeriesBatch{Series: &pb.Series{Labels: []*pb.Label{{Name: "__name__", Value: "e2e_load"}, {Name: cluster.SeriesLabel, Value: s}}}}
		trigger[s] = map[int64]float64{}
		for k := range 10 {
			ts := before - 60_000 + int64(k)
			b.TimestampsMs, b.Values = append(b.TimestampsMs, ts), append(b.Values, cluster.Value(s, ts))
			trigger[s][ts] = cluster.Value(s, ts)
		}
		req.Batches = append(req.Batches, b)
	}
	if _, err := pb.NewWriteServiceClient(conn).Write(ctx, req); err != nil {
		t.Fatalf("write into the damaged hour: %v", err)
	}
	acked := time.Now()
	var readyBody string
	for {
		c, body := getReadyz(n.http)
		if c == http.StatusServiceUnavailable {
			readyBody = body
			break
		}
		if time.Since(acked) > 5*time.Second {
			t.Fatalf("/readyz still %d %q 5 s after a write made the flush read the damaged file", c, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	notReadyAfter := time.Since(acked)
	if !strings.Contains(readyBody, "corruption") || !strings.Contains(readyBody, "tributary node repair") {
		t.Fatalf("/readyz 503 without the reason and the remedy: %q", readyBody)
	}
	hc := healthpb.NewHealthClient(conn)
	if r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("gRPC health of a node whose store is damaged: %v %v", r, err)
	}
	if code, out := tool(t, "status", "--addr", n.grpc, "--node", "--format", "json"); code != 0 || !strings.Contains(out, `"reason": "corruption"`) {
		t.Fatalf("tributary status: exit %d: %s", code, out)
	}

	// 4. Writes go on into the WAL until its bound, then are refused. NB:
	// the other series still flush and the WAL is compressed, so the
	// writer sends 1,000 points a series a request to reach the 1 MiB
	// bound within the minute.
	deadline := time.Now().Add(60 * time.Second)
	for w2.Ledger.InDoubt() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	st2 := w2.Stop()
	if st2.FirstErr == nil {
		t.Fatalf("writes never refused: %+v", st2)
	}
	if msg := st2.FirstErr.Error(); status.Code(st2.FirstErr) != codes.Unavailable || !strings.Contains(msg, "corruption") || !strings.Contains(msg, "bound") {
		t.Fatalf("refusal %v: want UNAVAILABLE naming the corruption and the bound", st2.FirstErr)
	}
	hresp, err := http.Post("http://"+n.http+"/write?db=e2e", "text/plain", strings.NewReader(fmt.Sprintf("e2e_after,series=s000 v=1 %d\n", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	hbody, _ := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusServiceUnavailable || hresp.Header.Get("Retry-After") == "" || !strings.Contains(string(hbody), "corruption") {
		t.Fatalf("line protocol write while refusing: %s Retry-After %q: %s", hresp.Status, hresp.Header.Get("Retry-After"), hbody)
	}
	t.Logf("not ready %v after the write that read the damage; %d points acknowledged into the WAL, then refused: %v",
		notReadyAfter.Round(time.Millisecond), st2.Acked, st2.FirstErr)

	// 5. SIGTERM, repair, restart.
	if err := n.Stop(30 * time.Second); err != nil {
		t.Fatalf("SIGTERM of the node with a damaged store: %v", err)
	}
	code, out = tool(t, "node", "repair", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, "raw samples") || !strings.Contains(out, "quarantine/store-") {
		t.Fatalf("repair: exit %d:\n%s", code, out)
	}
	t.Logf("tributary node repair:\n%s", out)
	restart := time.Now()
	if err := n.Start(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if c, body := getReadyz(n.http); c != 200 {
		t.Fatalf("/readyz after the repair: %d %s", c, body)
	}
	if n.CountInLog("store repair audit") == 0 {
		t.Fatal("the node did not audit the repaired ranges")
	}
	m, err := cluster.Metrics(ctx, n.http, "tributary_node_store_")
	if err != nil {
		t.Fatal(err)
	}
	declared := int(m["tributary_node_store_lost_points_total"])

	// 6. Every point acknowledged after the damage is there; the points
	// from before it that are gone are exactly the declared ones.
	endMs := time.Now().Add(time.Hour).UnixMilli()
	after, err := cluster.Check(ctx, n.grpc, "e2e_after", w2.Ledger, 0, endMs)
	if err != nil {
		t.Fatal(err)
	}
	if !after.OK() {
		t.Fatalf("points acknowledged after the damage: %s", after)
	}
	ans, err := cluster.QueryRaw(ctx, n.grpc, "e2e_load", 0, endMs)
	if err != nil {
		t.Fatal(err)
	}
	old := cluster.Compare(ans, w1.Ledger)
	for s, pts := range trigger {
		for _, p := range ans.Points[s] {
			if v, ok := pts[p.TimestampMs]; ok && v == p.Value {
				delete(pts, p.TimestampMs)
				old.Phantom-- // written by the trigger, not by w1
			}
		}
		if len(pts) > 0 {
			t.Errorf("%d points acknowledged into the damaged hour of %s are missing", len(pts), s)
		}
	}
	if old.Duplicated != 0 || old.Phantom != 0 || old.WrongValue != 0 {
		t.Fatalf("points from before the damage: %s", old)
	}
	lo, hi := hour.Truncate(24*time.Hour).UnixMilli(), hour.Truncate(24*time.Hour).Add(48*time.Hour).UnixMilli()
	for s, ts := range old.LostTimes {
		if ts[0] < lo || ts[len(ts)-1] >= hi {
			t.Fatalf("%s lost points outside the damaged partitions: %d..%d", s, ts[0], ts[len(ts)-1])
		}
	}
	// The points written into the damaged hour after the damage lie before
	// every point the hour's rollup counts, so the audit knows they are new
	// and its count is exact (no "upper_bound=true").
	if n.CountInLog("upper_bound=true") != 0 {
		t.Fatal("the audit flagged its count as an upper bound")
	}
	if old.Lost != declared || declared == 0 {
		t.Fatalf("%d points of %d from before the damage are gone, the node declares %d lost", old.Lost, st1.Acked, declared)
	}
	t.Logf("summary: %d points before the damage, %d lost = %d declared lost (%s); after it %d acknowledged, lost 0; not ready %v after the damage was read; restart after repair %v",
		st1.Acked, old.Lost, declared, damaged, st2.Acked+200, notReadyAfter.Round(time.Millisecond), time.Since(restart).Round(time.Millisecond))
}
