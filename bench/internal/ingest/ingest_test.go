//go:build linux

package ingest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/bench/internal/fakenode"
	"github.com/tributarydb/tributary/bench/internal/report/reporttest"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The test binary doubles as a fake tributary binary: with fakenode.Env set,
// it serves the fake WriteService as `tributary node` and reports the points
// it accepted as `tributary compact`. The variable names a mode: "ok",
// "lossy" (compact reports half the points) or "die" (the node exits 300ms
// after it starts).
func TestMain(m *testing.M) { fakenode.Main(m, fakeTributary) }

func fakeTributary(mode string, args []string) int {
	a, err := fakenode.ParseArgs(args)
	if err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	countFile := filepath.Join(a.DataDir, "points")
	switch a.Command {
	case "compact":
		b, err := os.ReadFile(countFile)
		if err != nil {
			log.Error("compact", "err", err)
			return 1
		}
		n, _ := strconv.ParseInt(string(b), 10, 64)
		if mode == "lossy" {
			n /= 2
		}
		fmt.Printf("{\"sst_bytes\":%d,\"points\":%d}\n", n*7/10, n)
		return 0
	case "node":
	default:
		return 2
	}
	fw := fakenode.NewWriter()
	srv := grpc.NewServer()
	tributaryv1.RegisterWriteServiceServer(srv, fw)
	if mode == "die" {
		time.AfterFunc(300*time.Millisecond, func() {
			log.Error("simulated crash")
			os.Exit(7)
		})
	}
	if err := fakenode.ServeProcess(srv, a.Listen, log); err != nil {
		log.Error("fake node", "err", err)
		return 1
	}
	points, series, disorder := fw.Stats()
	log.Info("flushed head", "points", points, "series", series)
	if len(disorder) > 0 {
		log.Error("series out of order", "examples", disorder)
		return 1
	}
	if err := os.WriteFile(countFile, []byte(strconv.FormatInt(points, 10)), 0o644); err != nil {
		log.Error("flush", "err", err)
		return 1
	}
	return 0
}

func fakeRunOptions(t *testing.T, mode string) (Options, *bytes.Buffer) {
	var out bytes.Buffer
	o := DefaultOptions()
	o.Binary = os.Args[0]
	o.Env = []string{fakenode.Env + "=" + mode}
	o.Series = 1000
	o.BatchPoints = 5000
	o.PointsPerSeriesPerBatch = 50
	o.Clients = 3
	o.Duration = time.Second
	o.WorkDir = t.TempDir()
	o.Settle = 100 * time.Millisecond
	o.Commit = "test"
	o.Out = &out
	return o, &out
}

func TestRun_AgainstFakeNodeProcess(t *testing.T) {
	tests := []struct {
		workload     string
		wantSeries   int
		wantPerBatch int
		evenRequests bool // every request carries wantPerBatch points
	}{
		{"sensor", 1000, 5000, true},
		{"canbus", 46 * 22, 4 * 22 * 50, false}, // whole vehicles; the last request has 2
	}
	for _, tc := range tests {
		t.Run(tc.workload, func(t *testing.T) {
			o, out := fakeRunOptions(t, "ok")
			o.Workload = tc.workload
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatalf("%v\noutput:\n%s", err, out)
			}
			if res.Series != tc.wantSeries || res.BatchPoints != tc.wantPerBatch {
				t.Errorf("%d series in %d-point requests, want %d in %d", res.Series, res.BatchPoints, tc.wantSeries, tc.wantPerBatch)
			}
			if res.Points == 0 || res.Points != res.CompactPoints || (tc.evenRequests && res.Points != res.Requests*int64(tc.wantPerBatch)) {
				t.Errorf("points %d, compact points %d, requests %d", res.Points, res.CompactPoints, res.Requests)
			}
			if float64(res.BytesPerPoint) != 0.7 {
				t.Errorf("bytes/point %v, want the fake's 0.7", res.BytesPerPoint)
			}
			if float64(res.PeakRSSMiB) <= 0 || float64(res.CPUSPerMillionPoints) <= 0 || float64(res.PointsPerS) <= 0 {
				t.Errorf("unmeasured figures: %+v", res)
			}
			last := reporttest.LastJSONLine(t, out.String())
			if last["points"] != float64(res.Points) || last["commit"] != "test" || last["workload"] != tc.workload {
				t.Errorf("JSON line %v", last)
			}
			for _, k := range []string{"storage_write_bytes_per_point", "disk_at_rest_bytes_per_point", "disk_after_stop_bytes_per_point"} {
				if v, ok := last[k].(float64); !ok || v < 0 {
					t.Errorf("JSON %s = %v, want a measured figure", k, last[k])
				}
			}
			if float64(res.DiskAtRestBytesPerPoint) <= 0 || float64(res.SettleS) != 0.1 {
				t.Errorf("data dir at rest %v bytes/point after %v s: want the directory's blocks counted after the 0.1 s settle", res.DiskAtRestBytesPerPoint, res.SettleS)
			}
			if !strings.Contains(out.String(), "≥ 3,000,000") {
				t.Errorf("table has no points/s target:\n%s", out)
			}
			entries, _ := os.ReadDir(o.WorkDir)
			if len(entries) != 0 {
				t.Errorf("work dir not removed: %v", entries)
			}
			t.Logf("output:\n%s", out)
		})
	}
}

func TestRun_LostPointsFailTheRun(t *testing.T) {
	o, out := fakeRunOptions(t, "lossy")
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "were lost") {
		t.Fatalf("got %v, want a lost-points error", err)
	}
	if !strings.Contains(out.String(), `"compact_points"`) {
		t.Errorf("report not printed before the error:\n%s", out)
	}
	entries, _ := os.ReadDir(o.WorkDir)
	if len(entries) != 1 {
		t.Errorf("a failed run should keep its work dir, found %v", entries)
	}
}

func TestRun_MissingBinary(t *testing.T) {
	o, _ := fakeRunOptions(t, "ok")
	o.Binary = filepath.Join(t.TempDir(), "no-such-tributary")
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "find tributary binary") {
		t.Fatalf("got %v", err)
	}
}

func TestRun_NodeDeathStopsTheLoadAtOnce(t *testing.T) {
	o, _ := fakeRunOptions(t, "die")
	o.Duration = time.Minute
	t0 := time.Now()
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "exited during the load") || !strings.Contains(err.Error(), "simulated crash") {
		t.Fatalf("got %v, want a node-exited error quoting the node's log", err)
	}
	if d := time.Since(t0); d > 15*time.Second {
		t.Errorf("took %v to notice the node died", d)
	}
}
