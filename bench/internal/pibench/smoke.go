package pibench

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// SmokeOptions configures the arm64 functional run.
type SmokeOptions struct {
	// Binary is the arm64 static tributary executable; Qemu the user-mode
	// emulator that runs it, on the CPU QemuCPU (the Pi 3's Cortex-A53).
	Binary, Qemu, QemuCPU string
	// Series sensor series of Points points each, Interval apart, ending
	// now.
	Series, Points int
	Interval       time.Duration
	Seed           uint64
	// ResultsDir, when set, receives arm64-smoke.json.
	ResultsDir string
	// WorkDir is the parent of the temporary data directory.
	WorkDir     string
	KeepDataDir bool
	// ReadyTimeout bounds each node start (emulated: slow);
	// CallTimeout each RPC.
	ReadyTimeout, CallTimeout time.Duration
	// Output says where the figures go.
	runopt.Output
}

// DefaultSmokeOptions: 50 series × 600 points (10 minutes at 1 s).
func DefaultSmokeOptions() SmokeOptions {
	return SmokeOptions{Binary: "dist/tributary-linux-arm64", Qemu: "qemu-aarch64-static", QemuCPU: "cortex-a53",
		Series: 50, Points: 600, Interval: time.Second, Seed: 1,
		ReadyTimeout: 3 * time.Minute, CallTimeout: 2 * time.Minute}
}

// SmokeResult is what the functional run checked. It makes no speed
// claim: the node runs emulated.
type SmokeResult struct {
	Binary        string `json:"binary"`
	Machine       string `json:"elf_machine"`
	Emulator      string `json:"emulator"`
	Series        int    `json:"series"`
	PointsWritten int64  `json:"points_written"`
	// Checks are the read-backs: after the write, after kill -9 and a
	// restart (WAL replay), after SIGTERM and a restart (read from
	// RocksDB); each compares every point.
	Checks      []string `json:"checks"`
	Mismatches  int      `json:"mismatches"`
	CleanExit   bool     `json:"clean_exit"`
	Passed      bool     `json:"passed"`
	Commit      string   `json:"commit"`
	HostMachine string   `json:"host"`
}

// Smoke starts the arm64 binary as a node under qemu-user, writes a small
// sensor workload, reads every series back and compares each point; then
// kills it with SIGKILL, restarts it (WAL replay) and compares again, and
// stops it with SIGTERM, restarts it (RocksDB) and compares again. Any
// difference fails the run.
func Smoke(ctx context.Context, o SmokeOptions) (SmokeResult, error) {
	res := SmokeResult{Binary: o.Binary, Emulator: o.Qemu + " (CPU " + o.QemuCPU + ")", Series: o.Series,
		Commit: o.Commit, HostMachine: report.DetectMachine().String()}
	if o.Out == nil || o.Series < 1 || o.Points < 1 || o.Interval < time.Millisecond {
		return res, errors.New("an output writer and positive series, points and interval are required")
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	bin, err := filepath.Abs(o.Binary)
	if err != nil {
		return res, err
	}
	if res.Machine, err = checkArm64(bin); err != nil {
		return res, err
	}
	qemu, err := exec.LookPath(o.Qemu)
	if err != nil {
		return res, fmt.Errorf("%s: %w (install qemu-user-static)", o.Qemu, err)
	}
	dir, err := workdir.Make(o.WorkDir, "tribench-arm64-", o.KeepDataDir, logger)
	if err != nil {
		return res, err
	}
	var runErr error
	defer func() { dir.Finish(runErr) }()
	r := &smokeRun{ctx: ctx, o: o, res: &res}
	runErr = r.run(dir.Path, dir.DataDir, qemu, bin, logger)
	res.Passed = runErr == nil
	fmt.Fprintf(o.Out, "arm64 functional run: %s (%s) under %s\n", res.Binary, res.Machine, res.Emulator)
	fmt.Fprintf(o.Out, "wrote %s points in %d series\n", report.Int(res.PointsWritten), res.Series)
	for _, c := range res.Checks {
		fmt.Fprintf(o.Out, "  %s\n", c)
	}
	fmt.Fprintf(o.Out, "passed: %v (correctness only; the node runs emulated, so no speed figures)\n", res.Passed)
	if err := report.WriteNotesAndJSONLine(o.Out, nil, res); err != nil && runErr == nil {
		runErr = err
	}
	if o.ResultsDir != "" && runErr == nil {
		runErr = writeJSONFile(filepath.Join(o.ResultsDir, "arm64-smoke.json"), res)
	}
	return res, runErr
}

// checkArm64 returns the ELF machine of bin, an error unless arm64.
func checkArm64(bin string) (string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return "", fmt.Errorf("arm64 binary: %w (build it with: RELEASE_TARGETS=arm64 scripts/release.sh build)", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 {
		return f.Machine.String(), fmt.Errorf("%s is a %s binary, not arm64", bin, f.Machine)
	}
	return f.Machine.String(), nil
}

// smokeRun is one functional run: the emulated node, what was written to
// it, and the checks made so far (in res).
type smokeRun struct {
	ctx            context.Context
	o              SmokeOptions
	res            *SmokeResult
	nopts          nodeproc.Options
	node           *nodeproc.Node // nil while stopped
	qc             tributaryv1.QueryServiceClient
	want           map[string]nodeclient.Series
	startMs, endMs int64
}

// run writes the workload and goes through the checks, restarts and
// stops, the first failure ending it; the node is killed if still
// running when it returns.
func (r *smokeRun) run(workPath, dataDir, qemu, bin string, logger *slog.Logger) error {
	o := r.o
	wrapper := filepath.Join(workPath, "tributary-arm64")
	script := fmt.Sprintf("#!/bin/sh\nQEMU_CPU=%s exec %s %s \"$@\"\n", o.QemuCPU, qemu, bin)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return err
	}
	addr, err := nodeproc.FreeLoopbackAddr()
	if err != nil {
		return err
	}
	r.nopts = nodeproc.Options{Binary: wrapper, DataDir: dataDir, ListenAddr: addr, NodeID: "arm64-smoke",
		WALSync: "always", LogPath: filepath.Join(workPath, "node.log"), ReadyTimeout: o.ReadyTimeout, Logger: logger}
	reqs, err := r.workload()
	if err != nil {
		return err
	}
	if err := r.restart(); err != nil {
		return err
	}
	defer func() {
		if r.node != nil {
			r.node.Kill()
		}
	}()
	conn, err := nodeclient.Dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	r.qc = tributaryv1.NewQueryServiceClient(conn)
	if err := r.write(tributaryv1.NewWriteServiceClient(conn), reqs); err != nil {
		return err
	}
	steps := []func() error{
		func() error { return r.check("just written") },
		func() error { r.node.Kill(); r.node = nil; return r.restart() },
		func() error { return r.check("after kill -9 and WAL replay") },
		func() error {
			if err := r.stop(); err != nil {
				return err
			}
			return r.restart()
		},
		func() error { return r.check("after SIGTERM and a restart (RocksDB)") },
		func() error {
			ex, err := r.node.Stop(2 * time.Minute)
			r.node = nil
			r.res.CleanExit = err == nil && ex.Code == 0
			if !r.res.CleanExit {
				return fmt.Errorf("final stop: exit %d, %v", ex.Code, err)
			}
			return nil
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// workload makes the requests to write, Points samples per series ending
// before now, and what a read-back must return.
func (r *smokeRun) workload() ([]*workload.Request, error) {
	o := r.o
	r.startMs = time.Now().Add(-time.Duration(o.Points+1) * o.Interval).UnixMilli()
	r.startMs -= r.startMs % o.Interval.Milliseconds()
	gen, err := workload.NewSensor(workload.SensorOptions{Series: o.Series, StartMs: r.startMs, IntervalMs: o.Interval.Milliseconds(), Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	reqs := gen.Requests(o.Series, o.Points)
	r.want = map[string]nodeclient.Series{}
	for _, req := range reqs {
		req.Next(o.Points)
		for _, b := range req.Msg.Batches {
			r.want[nodeclient.SeriesKey(b.GetSeries().GetLabels())] = nodeclient.Series{Labels: b.GetSeries().GetLabels(),
				TimestampsMs: append([]int64(nil), b.TimestampsMs...), Values: append([]float64(nil), b.Values...)}
		}
	}
	r.endMs = r.startMs + int64(o.Points-1)*o.Interval.Milliseconds()
	return reqs, nil
}

// write sends the requests, each checked for every point accepted.
func (r *smokeRun) write(wc tributaryv1.WriteServiceClient, reqs []*workload.Request) error {
	for _, req := range reqs {
		cctx, cancel := context.WithTimeout(r.ctx, r.o.CallTimeout)
		resp, err := wc.Write(cctx, req.Msg)
		cancel()
		if err == nil {
			err = nodeclient.CheckWrite(resp, req.Points())
		}
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		r.res.PointsWritten += int64(req.Points())
	}
	return nil
}

// check reads every series back and compares each point with what was
// written, recording the check as when.
func (r *smokeRun) check(when string) error {
	cctx, cancel := context.WithTimeout(r.ctx, r.o.CallTimeout)
	defer cancel()
	ans, err := nodeclient.Query(cctx, r.qc, &tributaryv1.QueryRequest{
		Matchers: []*tributaryv1.Matcher{{Type: tributaryv1.Matcher_REGEX, Name: "__name__", Value: ".+"}},
		StartMs:  r.startMs - 3_600_000, EndMs: r.endMs + 3_600_000, Mode: tributaryv1.QueryMode_QUERY_MODE_RAW})
	if err != nil {
		return fmt.Errorf("%s: %w", when, err)
	}
	bad := compareSeries(r.want, ans.Series)
	r.res.Mismatches += bad
	r.res.Checks = append(r.res.Checks, fmt.Sprintf("%s: %d series, %d mismatches", when, len(ans.Series), bad))
	if bad > 0 {
		return fmt.Errorf("%s: %d series differ from what was written", when, bad)
	}
	return nil
}

// restart starts the node (again).
func (r *smokeRun) restart() error {
	n, err := nodeproc.Start(r.ctx, r.nopts)
	r.node = n
	return err
}

// stop stops the node with SIGTERM; it must exit with status 0.
func (r *smokeRun) stop() error {
	ex, err := r.node.Stop(2 * time.Minute)
	r.node = nil
	if err == nil && ex.Code != 0 {
		err = fmt.Errorf("node exited with status %d after SIGTERM", ex.Code)
	}
	return err
}

// compareSeries counts the series of want that got lacks or holds with any
// other point, plus the series got has that want does not.
func compareSeries(want map[string]nodeclient.Series, got []nodeclient.Series) int {
	bad := 0
	seen := map[string]bool{}
	for _, g := range got {
		k := nodeclient.SeriesKey(g.Labels)
		seen[k] = true
		w, ok := want[k]
		if !ok || len(w.TimestampsMs) != len(g.TimestampsMs) || len(g.Values) != len(g.TimestampsMs) {
			bad++
			continue
		}
		for i := range w.TimestampsMs {
			if w.TimestampsMs[i] != g.TimestampsMs[i] || math.Float64bits(w.Values[i]) != math.Float64bits(g.Values[i]) {
				bad++
				break
			}
		}
	}
	for k := range want {
		if !seen[k] {
			bad++
		}
	}
	return bad
}
