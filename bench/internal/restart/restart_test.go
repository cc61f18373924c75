//go:build linux

package restart

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/bench/internal/fakenode"
	"github.com/tributarydb/tributary/bench/internal/report/reporttest"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The test binary doubles as a fake tributary binary: with fakenode.Env set,
// it serves as `tributary node` over a naive text WAL in DATA_DIR/wal/*.seg,
// which it replays when it starts. The variable names a mode: "ok", or
// "lossy" (the replay drops the last record of every segment). With
// FAKE_STARTS set, it appends its command line to that file.
const fakeStartsEnv = "FAKE_STARTS"

func TestMain(m *testing.M) { fakenode.Main(m, fakeTributary) }

func fakeTributary(mode string, args []string) int {
	a, err := fakenode.ParseArgs(args, "head-max-bytes", "head-chunk-samples")
	if err != nil || a.Command != "node" {
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if path := os.Getenv(fakeStartsEnv); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			_, err = fmt.Fprintln(f, strings.Join(args, " "))
			f.Close()
		}
		if err != nil {
			log.Error("record command line", "err", err)
			return 1
		}
	}
	t0 := time.Now()
	wal, err := openFakeWAL(filepath.Join(a.DataDir, "wal"), 32<<10)
	if err != nil {
		log.Error("open wal", "err", err)
		return 1
	}
	head := newFakeHead()
	replayed, err := wal.replay(head, mode == "lossy")
	if err != nil {
		log.Error("replay wal", "err", err)
		return 1
	}
	log.Info("node opened", "data_dir", a.DataDir, "replayed_points", replayed, "took", time.Since(t0).Round(time.Millisecond))
	srv := grpc.NewServer()
	tributaryv1.RegisterWriteServiceServer(srv, newFakeWriter(wal, head))
	tributaryv1.RegisterQueryServiceServer(srv, head)
	if err := fakenode.ServeProcess(srv, a.Listen, log); err != nil {
		log.Error("fake node", "err", err)
		return 1
	}
	return 0
}

func fakeRunOptions(t *testing.T, mode string) (Options, *bytes.Buffer, string) {
	t.Helper()
	var out bytes.Buffer
	starts := filepath.Join(t.TempDir(), "starts")
	o := DefaultOptions()
	o.Binary = os.Args[0]
	o.Env = []string{fakenode.Env + "=" + mode, fakeStartsEnv + "=" + starts}
	o.WALBytes = 256 << 10
	o.Series = 200
	o.BatchPoints = 1000
	o.PointsPerSeriesPerBatch = 20
	o.Clients = 3
	o.MaxLoad = time.Minute
	o.ReadyTimeout = 20 * time.Second
	o.WorkDir = t.TempDir()
	o.Commit = "test"
	o.Out = &out
	o.Now = func() time.Time { return time.Date(2026, 3, 4, 10, 30, 0, 0, time.UTC) }
	return o, &out, starts
}

func TestRun_AgainstFakeNodeProcess(t *testing.T) {
	o, out, starts := fakeRunOptions(t, "ok")
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out)
	}
	if res.WALBytes < o.WALBytes || res.WALSegments < 2 {
		t.Errorf("WAL %d bytes in %d segments, want at least %d bytes in several (and no state file or quarantine)", res.WALBytes, res.WALSegments, o.WALBytes)
	}
	if res.WALPoints == 0 || res.VerifiedPoints != res.WALPoints || res.VerifiedSeries != 200 || res.VerifyProblemSeries != 0 {
		t.Errorf("acknowledged %d points, verified %d in %d series with %d problems", res.WALPoints, res.VerifiedPoints, res.VerifiedSeries, res.VerifyProblemSeries)
	}
	if res.HeadSamplesKill != res.WALPoints || res.ReplayedPointsBigHead != res.WALPoints || res.ReplayedPointsDefault != res.WALPoints {
		t.Errorf("head %d, replayed %d and %d, want all %d", res.HeadSamplesKill, res.ReplayedPointsBigHead, res.ReplayedPointsDefault, res.WALPoints)
	}
	a, b := float64(res.RestartReadyBigHeadS), float64(res.RestartReadyDefaultS)
	if a <= 0 || b <= 0 || float64(res.RestartReadyS) != max(a, b) {
		t.Errorf("ready a %v b %v worst %v", a, b, res.RestartReadyS)
	}
	if res.RestartPeakRSSMiBBigHead <= 0 || res.RestartPeakRSSMiBDefault <= 0 {
		t.Errorf("peak RSS a %v b %v", res.RestartPeakRSSMiBBigHead, res.RestartPeakRSSMiBDefault)
	}

	last := reporttest.LastJSONLine(t, out.String())
	for _, k := range []string{"wal_mib", "wal_points", "restart_ready_s", "restart_ready_big_head_s", "restart_ready_default_s",
		"restart_peak_rss_mib_big_head", "restart_peak_rss_mib_default", "commit", "machine"} {
		if _, ok := last[k]; !ok {
			t.Errorf("JSON line lacks %q: %v", k, last)
		}
	}
	if last["wal_points"] != float64(res.WALPoints) || last["commit"] != "test" {
		t.Errorf("JSON line %v", last)
	}
	if !strings.Contains(out.String(), "≤ 10") {
		t.Errorf("table has no target:\n%s", out)
	}

	// The load and restart a with the big head, restart b without.
	b2, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	cmds := strings.Split(strings.TrimSpace(string(b2)), "\n")
	if len(cmds) != 3 {
		t.Fatalf("node started %d times, want 3:\n%s", len(cmds), b2)
	}
	for i, cmd := range cmds {
		bigHead := strings.Contains(cmd, "--head-max-bytes 8589934592 --head-chunk-samples 65536")
		if bigHead != (i < 2) || strings.Contains(cmd, "--head-") != bigHead || !strings.Contains(cmd, "--wal-sync always") {
			t.Errorf("start %d: %s", i+1, cmd)
		}
	}
	if entries, _ := os.ReadDir(o.WorkDir); len(entries) != 0 {
		t.Errorf("work dir not removed: %v", entries)
	}
	t.Logf("output:\n%s", out)
}

func TestRun_LostPointsFailTheRun(t *testing.T) {
	o, out, _ := fakeRunOptions(t, "lossy")
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "were lost") || !strings.Contains(err.Error(), "acknowledged points") {
		t.Fatalf("got %v, want a lost-points error", err)
	}
	if !strings.Contains(out.String(), "LOST POINTS") || !strings.Contains(out.String(), `"verify_problem_series"`) {
		t.Errorf("report not printed before the error:\n%s", out)
	}
	if entries, _ := os.ReadDir(o.WorkDir); len(entries) != 1 {
		t.Errorf("a failed run should keep its work dir, found %v", entries)
	}
}

func TestRun_HourRunningOutBeforeTheTargetFails(t *testing.T) {
	o, _, _ := fakeRunOptions(t, "ok")
	o.Series = 2
	o.BatchPoints = 40
	o.WALBytes = 4 << 20
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "hour of samples ran out") || !strings.Contains(err.Error(), "7,200 points") {
		t.Fatalf("got %v, want an hour-ran-out error after 2 × 3,600 points", err)
	}
}

func TestRun_MissingBinary(t *testing.T) {
	o, _, _ := fakeRunOptions(t, "ok")
	o.Binary = filepath.Join(t.TempDir(), "no-such-tributary")
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "find tributary binary") {
		t.Fatalf("got %v", err)
	}
}
