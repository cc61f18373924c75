//go:build linux

package nodeproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/fakenode"
)

// The test binary doubles as a fake tributary binary: with fakenode.Env set
// it behaves as `tributary node` or `tributary compact` in the mode the
// variable names.
func TestMain(m *testing.M) { fakenode.Main(m, fakeTributary) }

func fakeTributary(mode string, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: tributary node|compact")
		return 2
	}
	a, err := fakenode.ParseArgs(args)
	if err != nil {
		return 2
	}
	switch a.Command {
	case "compact":
		fmt.Fprintln(os.Stderr, "level=INFO msg=compacting")
		fmt.Println(`{"note":"progress"}`)
		fmt.Println(`{"sst_bytes":1234,"points":99}`)
		return 0
	case "node":
	default:
		return 2
	}
	_ = os.WriteFile(filepath.Join(a.DataDir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	fmt.Fprintln(os.Stderr, `level=INFO msg="WAL already open elsewhere? no"`)
	switch mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "level=ERROR msg=\"fatal: cannot open data dir\"")
		return 3
	case "silent":
		time.Sleep(time.Hour)
		return 0
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if mode == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
	}
	// Something to measure: 64 MiB resident and some CPU time.
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = byte(i)
	}
	for {
		// CPU time, not wall time: the machine may be busy with other tests.
		cpu, err := SelfCPU()
		if err != nil || cpu >= 300*time.Millisecond {
			break
		}
	}
	fmt.Fprintf(os.Stderr, "level=INFO msg=\"node ready\" listen=%s\n", a.Listen)
	<-term
	runtime.KeepAlive(ballast)
	_ = os.WriteFile(filepath.Join(a.DataDir, "stopped"), nil, 0o644)
	return 0
}

func fakeOptions(t *testing.T, mode string) Options {
	t.Helper()
	dir := t.TempDir()
	return Options{
		Binary:       os.Args[0],
		DataDir:      dir,
		ListenAddr:   "127.0.0.1:1",
		WALSync:      "always",
		Env:          []string{fakenode.Env + "=" + mode},
		LogPath:      filepath.Join(dir, "node.log"),
		ReadyTimeout: 20 * time.Second,
	}
}

func TestNode_StartWaitsForReadyAndStopMeasures(t *testing.T) {
	opts := fakeOptions(t, "ok")
	n, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	u, err := n.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU < 250*time.Millisecond {
		t.Errorf("node CPU %v, want at least the fake's 300ms busy loop", u.CPU)
	}
	if u.HWMBytes < 64<<20 || u.RSSBytes < 64<<20 {
		t.Errorf("VmHWM %d VmRSS %d, want at least the fake's 64 MiB", u.HWMBytes, u.RSSBytes)
	}
	e, err := n.Stop(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if e.Code != 0 || e.CPU < u.CPU || e.MaxRSSBytes < 64<<20 {
		t.Errorf("exit %+v, want code 0, CPU ≥ %v, max RSS ≥ 64 MiB", e, u.CPU)
	}
	if _, err := os.Stat(filepath.Join(opts.DataDir, "stopped")); err != nil {
		t.Errorf("node did not see SIGTERM: %v", err)
	}
	log, err := os.ReadFile(opts.LogPath)
	if err != nil || !strings.Contains(string(log), "node ready") {
		t.Errorf("node log %q, %v; want the node's output", log, err)
	}
	if !strings.Contains(n.LogTail(), "node ready") {
		t.Errorf("log tail %q", n.LogTail())
	}
}

// A wrapper that execs the binary (env here, taskset in use) starts the
// node itself: its pid is the node's, which sees SIGTERM.
func TestNode_WrapExecsTheBinary(t *testing.T) {
	opts := fakeOptions(t, "ok")
	opts.Wrap = []string{"env", "TRIBUTARY_WRAPPED=1"}
	n, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", n.PID()))
	if err == nil && strings.TrimSpace(string(comm)) == "env" {
		t.Errorf("the process measured is the wrapper")
	}
	if _, err := n.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(opts.DataDir, "stopped")); err != nil {
		t.Errorf("node did not see SIGTERM: %v", err)
	}
}

func TestNode_ExitBeforeReadyIsAnErrorWithOutput(t *testing.T) {
	_, err := Start(context.Background(), fakeOptions(t, "crash"))
	if err == nil || !strings.Contains(err.Error(), "fatal: cannot open data dir") {
		t.Fatalf("got %v, want an error quoting the node's last output", err)
	}
}

func TestNode_NotReadyInTimeIsKilled(t *testing.T) {
	opts := fakeOptions(t, "silent")
	opts.ReadyTimeout = 500 * time.Millisecond
	_, err := Start(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Fatalf("got %v, want a not-ready error", err)
	}
	requireGone(t, opts.DataDir)
}

func TestNode_ContextCancelWhileWaitingKillsNode(t *testing.T) {
	opts := fakeOptions(t, "silent")
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := Start(ctx, opts); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
	requireGone(t, opts.DataDir)
}

func TestNode_StopKillsNodeThatIgnoresSIGTERM(t *testing.T) {
	opts := fakeOptions(t, "stubborn")
	n, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Stop(300 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not exit") {
		t.Fatalf("got %v, want a did-not-exit error", err)
	}
	requireGone(t, opts.DataDir)
}

func requireGone(t *testing.T, dataDir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "pid"))
	if err != nil {
		t.Fatalf("fake node wrote no pid: %v", err)
	}
	pid, _ := strconv.Atoi(string(b))
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("node process %d still exists (kill -0: %v)", pid, err)
	}
}

func TestCompact_ReadsLastJSONLine(t *testing.T) {
	var stderr strings.Builder
	res, err := Compact(context.Background(), os.Args[0], t.TempDir(), []string{fakenode.Env + "=ok"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if res.SSTBytes != 1234 || res.Points != 99 {
		t.Errorf("got %+v", res)
	}
	if !strings.Contains(stderr.String(), "compacting") {
		t.Errorf("stderr %q", stderr.String())
	}
}

func TestFindBinary_AbsolutePathOrNamedError(t *testing.T) {
	path, err := FindBinary(os.Args[0])
	if err != nil || !filepath.IsAbs(path) {
		t.Errorf("got %q, %v; want an absolute path", path, err)
	}
	if _, err := FindBinary(filepath.Join(t.TempDir(), "no-such-tributary")); err == nil || !strings.Contains(err.Error(), "find tributary binary") {
		t.Errorf("got %v, want a find-tributary-binary error", err)
	}
}

func TestParseCompactOutput(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    CompactResult
		wantErr bool
	}{
		{"one line", `{"sst_bytes":10,"points":20}`, CompactResult{SSTBytes: 10, Points: 20}, false},
		{"last line wins, trailing newline", "starting\n{\"sst_bytes\":1,\"points\":2}\n\n", CompactResult{SSTBytes: 1, Points: 2}, false},
		{"zero is a value", `{"sst_bytes":0,"points":0}`, CompactResult{}, false},
		{"missing points", `{"sst_bytes":10}`, CompactResult{}, true},
		{"not json", "done", CompactResult{}, true},
		{"empty", "", CompactResult{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCompactOutput([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseStatCPU_CommandWithSpacesAndParens(t *testing.T) {
	// Fields after the command: state ppid pgrp session tty tpgid flags
	// minflt cminflt majflt cmajflt utime stime ...
	stat := []byte("4242 (tri bench) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1000 1 1")
	got, err := parseStatCPU(stat, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3*time.Second {
		t.Errorf("got %v, want 3s (300 ticks at 100 Hz)", got)
	}
	if _, err := parseStatCPU([]byte("garbage"), 100); err == nil {
		t.Error("no error for a stat without a command name")
	}
}

func TestStatusKB(t *testing.T) {
	status := []byte("Name:\ttributary\nVmPeak:\t  200000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\n")
	if n, err := statusKB(status, "VmHWM"); err != nil || n != 51200 {
		t.Errorf("VmHWM = %d, %v", n, err)
	}
	if _, err := statusKB(status, "VmSwap"); err == nil {
		t.Error("no error for a missing key")
	}
}

func TestClockTicks_Plausible(t *testing.T) {
	if clockTicks < 1 || clockTicks > 10000 {
		t.Errorf("clock ticks %d", clockTicks)
	}
}

func TestOptions_ArgsAndValidate(t *testing.T) {
	o := Options{Binary: "bin/tributary", DataDir: "/d", ListenAddr: "127.0.0.1:7070", NodeID: "n1", WALSync: "always", LogLevel: "info", LogPath: "/l"}
	want := "node --data-dir /d --listen 127.0.0.1:7070 --node-id n1 --wal-sync always --log-level info"
	if got := strings.Join(o.Args(), " "); got != want {
		t.Errorf("args %q, want %q", got, want)
	}
	if err := o.Validate(); err != nil {
		t.Error(err)
	}
	if err := (Options{ListenAddr: "nope"}).Validate(); err == nil {
		t.Error("empty options validated")
	}
}

func TestParseMachineCPU(t *testing.T) {
	tests := []struct {
		name      string
		stat      string
		wantBusy  time.Duration
		wantTotal time.Duration
		wantErr   bool
	}{
		// user nice system idle iowait irq softirq steal guest guest_nice
		{"full line", "cpu  100 10 50 800 20 5 5 10 30 0\ncpu0 1 2 3 4\n", 1800 * time.Millisecond, 10 * time.Second, false},
		{"old kernel, four fields", "cpu 100 0 100 800\n", 2 * time.Second, 10 * time.Second, false},
		{"not the cpu line", "cpu0 1 2 3 4 5\n", 0, 0, true},
		{"garbage", "cpu a b c d\n", 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			busy, total, err := parseMachineCPU([]byte(tc.stat), 100)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if busy != tc.wantBusy || total != tc.wantTotal {
				t.Errorf("busy %v total %v, want %v and %v", busy, total, tc.wantBusy, tc.wantTotal)
			}
		})
	}
	if busy, total, err := MachineCPU(); err != nil || total <= 0 || busy > total {
		t.Errorf("this machine: busy %v total %v, %v", busy, total, err)
	}
}

func TestNode_KillEndsItAtOnceAndReadyIsTimed(t *testing.T) {
	opts := fakeOptions(t, "stubborn") // ignores SIGTERM; SIGKILL cannot be ignored
	t0 := time.Now()
	n, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if d := n.ReadyAfter(); d <= 0 || d > time.Since(t0) {
		t.Errorf("ready after %v, want between 0 and %v", d, time.Since(t0))
	}
	e, err := n.Kill()
	if err != nil {
		t.Fatal(err)
	}
	if e.Code != -1 || e.MaxRSSBytes < 64<<20 {
		t.Errorf("exit %+v, want code -1 (killed by a signal) and the fake's 64 MiB", e)
	}
	requireGone(t, opts.DataDir)
	if _, err := n.Kill(); err == nil || !strings.Contains(err.Error(), "already exited") {
		t.Errorf("second kill: got %v, want an already-exited error", err)
	}
}
