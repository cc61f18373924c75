// Package nodeproc runs the tributary binary as a child process for the
// system benchmarks: it starts `tributary node`, waits for its ready line
// (and times it), measures the node process alone (CPU time and resident
// memory from /proc while it runs, rusage once it has exited), stops it with
// SIGTERM or kills it with SIGKILL to simulate a crash, and runs
// `tributary compact` on the stopped node's data directory. The command
// lines of a fleet's coordinators and replicating edges are laid out once
// here too (Coordinator, ReplicatingEdge).
//
// The node's stdout and stderr are appended to a log file; the last lines are
// kept in memory so that a failure can show them.
//
// Concurrency: a Node's methods may be called from any goroutine.
package nodeproc

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tributarydb/tributary/internal/loopback"
)

// Options says how to start a node.
type Options struct {
	// Binary is the tributary executable.
	Binary string
	// Wrap, when set, is a command that runs the binary with its arguments
	// in the same process (it execs it), such as ["taskset", "-c", "1"]
	// to keep the node on one CPU; the process started and measured is
	// then the node itself.
	Wrap []string
	// Command is the subcommand to run; "" means "node". Another server
	// ("coordinator") takes the same --data-dir and --listen flags; its other
	// flags go in ExtraArgs.
	Command string
	// DataDir is passed as --data-dir.
	DataDir string
	// ListenAddr is passed as --listen (host:port).
	ListenAddr string
	// NodeID is passed as --node-id when set.
	NodeID string
	// WALSync is passed as --wal-sync when set ("always", "interval:1s").
	WALSync string
	// LogLevel is passed as --log-level when set.
	LogLevel string
	// ExtraArgs are appended to the node's command line.
	ExtraArgs []string
	// Env is added to the inherited environment.
	Env []string
	// LogPath receives the node's stdout and stderr (appended).
	LogPath string
	// ReadyTimeout bounds the wait for the ready line. Default 60s.
	ReadyTimeout time.Duration
	// Logger reports progress; nil discards.
	Logger *slog.Logger
}

// Validate checks that the options can start a node.
func (o Options) Validate() error {
	var errs []error
	if o.Binary == "" {
		errs = append(errs, errors.New("binary is required"))
	}
	if o.DataDir == "" {
		errs = append(errs, errors.New("data dir is required"))
	}
	if _, _, err := net.SplitHostPort(o.ListenAddr); err != nil {
		errs = append(errs, fmt.Errorf("listen address %q: %w", o.ListenAddr, err))
	}
	if o.LogPath == "" {
		errs = append(errs, errors.New("log path is required"))
	}
	return errors.Join(errs...)
}

// Args is the node's command line after the binary.
func (o Options) Args() []string {
	args := []string{cmp.Or(o.Command, "node"), "--data-dir", o.DataDir, "--listen", o.ListenAddr}
	if o.NodeID != "" {
		args = append(args, "--node-id", o.NodeID)
	}
	if o.WALSync != "" {
		args = append(args, "--wal-sync", o.WALSync)
	}
	if o.LogLevel != "" {
		args = append(args, "--log-level", o.LogLevel)
	}
	return append(args, o.ExtraArgs...)
}

// readyLine matches the line a node prints once it serves. \b keeps words
// such as "already" from matching.
var readyLine = regexp.MustCompile(`(?i)\bready\b`)

// Node is a running node process.
type Node struct {
	cmd    *exec.Cmd
	log    *lineLog
	ready  chan struct{}
	exited chan struct{} // closed once Wait returned; then waitErr is set
	// waitErr is what cmd.Wait returned. REQUIRES: exited closed.
	waitErr error
	// readyAfter is the time from just before the process was started to
	// the moment its ready line was read. REQUIRES: ready closed.
	readyAfter time.Duration
	logger     *slog.Logger
}

// Start starts the node and returns once it has printed its ready line. It
// fails if the node exits first, or ctx ends, or ReadyTimeout passes; then no
// process is left behind.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	logFile, err := os.OpenFile(opts.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open node log: %w", err)
	}
	n := &Node{
		ready:  make(chan struct{}),
		exited: make(chan struct{}),
		logger: logger,
	}
	var (
		readyOnce sync.Once
		started   time.Time // set before the process starts, so before any line
	)
	n.log = newLineLog(logFile, 40, func(line string) {
		if readyLine.MatchString(line) {
			readyOnce.Do(func() {
				n.readyAfter = time.Since(started)
				close(n.ready)
			})
		}
	})
	// NB: not exec.CommandContext: cancelling ctx must stop the node with
	// SIGTERM through Stop, not SIGKILL it behind our back.
	argv := append(append(slices.Clone(opts.Wrap), opts.Binary), opts.Args()...)
	n.cmd = exec.Command(argv[0], argv[1:]...)
	n.cmd.Env = append(os.Environ(), opts.Env...)
	n.cmd.Stdout = n.log // the same writer: exec serialises the two streams
	n.cmd.Stderr = n.log
	n.cmd.SysProcAttr = sysProcAttr()
	// If the node hands its pipes to a child that outlives it, do not hang.
	n.cmd.WaitDelay = 5 * time.Second
	logger.Info("starting node", "cmd", strings.Join(argv, " "), "log", opts.LogPath)
	started = time.Now()
	if err := n.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start node %s: %w", opts.Binary, err)
	}
	go func() {
		n.waitErr = n.cmd.Wait()
		n.log.close()
		close(n.exited)
	}()

	timer := time.NewTimer(opts.ReadyTimeout)
	defer timer.Stop()
	select {
	case <-n.ready:
		logger.Info("node ready", "pid", n.PID(), "after", n.readyAfter.Round(time.Millisecond))
		return n, nil
	case <-n.exited:
		return nil, fmt.Errorf("node exited before it was ready (%v); last output:\n%s", n.waitErr, n.LogTail())
	case <-timer.C:
		n.kill()
		return nil, fmt.Errorf("node not ready after %v; last output:\n%s", opts.ReadyTimeout, n.LogTail())
	case <-ctx.Done():
		n.kill()
		return nil, fmt.Errorf("wait for node ready: %w", ctx.Err())
	}
}

// PID is the node's process id.
func (n *Node) PID() int { return n.cmd.Process.Pid }

// ReadyAfter is the time from the start of the process to the moment its
// ready line was read.
func (n *Node) ReadyAfter() time.Duration { return n.readyAfter }

// Exited is closed when the node process has exited.
func (n *Node) Exited() <-chan struct{} { return n.exited }

// LogTail returns the node's last lines of output.
func (n *Node) LogTail() string { return n.log.tail() }

// Usage reads the node's resource use so far from /proc.
func (n *Node) Usage() (Usage, error) { return readUsage(n.PID()) }

// Usage is a process's resource use so far, read from /proc.
type Usage struct {
	// CPU is user plus system time (utime + stime of /proc/PID/stat).
	CPU time.Duration
	// HWMBytes is the peak resident set size so far (VmHWM).
	HWMBytes int64
	// RSSBytes is the current resident set size (VmRSS).
	RSSBytes int64
}

// Exit describes how a node process ended.
type Exit struct {
	// Code is the exit status, or -1 when killed by a signal.
	Code int
	// CPU is the process's whole-life user plus system CPU time.
	CPU time.Duration
	// MaxRSSBytes is the peak resident set size over the process's life
	// (rusage ru_maxrss), or 0 where the platform does not report it.
	MaxRSSBytes int64
	// StopDuration is how long the node took to exit after SIGTERM.
	StopDuration time.Duration
}

// Stop sends SIGTERM and waits up to timeout for the node to exit, then
// SIGKILLs it. It returns an error unless the node exited with status 0 in
// time, but Exit is filled in either way.
func (n *Node) Stop(timeout time.Duration) (Exit, error) {
	t0 := time.Now()
	select {
	case <-n.exited:
		return n.exit(0), fmt.Errorf("node had already exited (%v); last output:\n%s", n.waitErr, n.LogTail())
	default:
	}
	n.logger.Info("stopping node (SIGTERM)", "pid", n.PID())
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return Exit{}, fmt.Errorf("signal node: %w", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-n.exited:
	case <-timer.C:
		n.kill()
		return n.exit(time.Since(t0)), fmt.Errorf("node did not exit within %v of SIGTERM; killed it; last output:\n%s", timeout, n.LogTail())
	}
	e := n.exit(time.Since(t0))
	if n.waitErr != nil {
		return e, fmt.Errorf("node exit after SIGTERM: %v; last output:\n%s", n.waitErr, n.LogTail())
	}
	n.logger.Info("node stopped", "after", e.StopDuration.Round(time.Millisecond))
	return e, nil
}

// Kill SIGKILLs the node, as a crash or `kill -9` would end it, and waits
// for it to exit. It returns an error if the node had already exited.
func (n *Node) Kill() (Exit, error) {
	select {
	case <-n.exited:
		return n.exit(0), fmt.Errorf("node had already exited (%v); last output:\n%s", n.waitErr, n.LogTail())
	default:
	}
	n.logger.Info("killing node (SIGKILL)", "pid", n.PID())
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return Exit{}, fmt.Errorf("kill node: %w", err)
	}
	<-n.exited
	return n.exit(0), nil
}

// kill SIGKILLs the node and waits for it; for failure paths.
func (n *Node) kill() {
	_ = n.cmd.Process.Kill()
	<-n.exited
}

// exit summarises the finished process. REQUIRES: exited closed.
func (n *Node) exit(stop time.Duration) Exit {
	ps := n.cmd.ProcessState
	return Exit{
		Code:         ps.ExitCode(),
		CPU:          ps.UserTime() + ps.SystemTime(),
		MaxRSSBytes:  maxRSSBytes(ps),
		StopDuration: stop,
	}
}

// CompactResult is what `tributary compact` reports.
type CompactResult struct {
	SSTBytes int64
	Points   int64
	Elapsed  time.Duration
}

// Compact runs `binary compact --data-dir dataDir` (the node must be
// stopped) and parses the JSON line {"sst_bytes":N,"points":N} it prints as
// its last line on stdout. Its stderr goes to logw.
func Compact(ctx context.Context, binary, dataDir string, env []string, logw io.Writer) (CompactResult, error) {
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "compact", "--data-dir", dataDir)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = &stdout
	cmd.Stderr = logw
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return CompactResult{}, fmt.Errorf("run %s compact: %w", binary, err)
	}
	res, err := ParseCompactOutput(stdout.Bytes())
	res.Elapsed = time.Since(t0)
	return res, err
}

// ParseCompactOutput reads the compact command's last non-empty stdout line.
func ParseCompactOutput(stdout []byte) (CompactResult, error) {
	lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	var out struct {
		SSTBytes *int64 `json:"sst_bytes"`
		Points   *int64 `json:"points"`
	}
	if err := json.Unmarshal([]byte(last), &out); err != nil {
		return CompactResult{}, fmt.Errorf("parse compact output %q: %w", last, err)
	}
	if out.SSTBytes == nil || out.Points == nil {
		return CompactResult{}, fmt.Errorf("parse compact output %q: want both sst_bytes and points", last)
	}
	return CompactResult{SSTBytes: *out.SSTBytes, Points: *out.Points}, nil
}

// FindBinary looks the tributary executable up as a shell would (a bare
// name in PATH, anything else as a path) and returns its absolute path.
func FindBinary(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil {
		path, err = filepath.Abs(path)
	}
	if err != nil {
		return "", fmt.Errorf("find tributary binary %q: %w", name, err)
	}
	return path, nil
}

// FreeLoopbackAddr returns a 127.0.0.1 address with a port that was free a
// moment ago. Another process could take it before the node binds it; the
// node then fails to start and says so.
func FreeLoopbackAddr() (string, error) {
	addrs, err := loopback.FreePorts(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// lineLog is an io.Writer that copies a process's output to a file, keeps
// its last lines, and calls onLine for each complete line.
type lineLog struct {
	mu      sync.Mutex
	file    *os.File
	partial []byte
	last    []string // ring of the last len(last) lines
	next    int
	onLine  func(string)
}

func newLineLog(f *os.File, keep int, onLine func(string)) *lineLog {
	return &lineLog{file: f, last: make([]string, keep), onLine: onLine}
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// NB: a failing log file must not block or kill the node's pipe; the
	// lines are still scanned and kept.
	_, _ = l.file.Write(p)
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.addLocked(string(bytes.TrimRight(l.partial[:i], "\r")))
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

// addLocked records one line. REQUIRES: mu held.
func (l *lineLog) addLocked(line string) {
	l.last[l.next%len(l.last)] = line
	l.next++
	l.onLine(line)
}

func (l *lineLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.addLocked(string(l.partial))
		l.partial = nil
	}
	_ = l.file.Close()
}

func (l *lineLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sb strings.Builder
	start := max(0, l.next-len(l.last))
	for i := start; i < l.next; i++ {
		sb.WriteString("  | " + l.last[i%len(l.last)] + "\n")
	}
	if l.next == 0 {
		sb.WriteString("  | (no output)\n")
	}
	return sb.String()
}

// Restartable is a server process that a benchmark starts, kills and
// stops again and again with the same command line, as a fleet's
// coordinators and edges are.
//
// Concurrency: its methods may be called from any goroutine.
type Restartable struct {
	// Name names the process in errors ("c1", "edge-03").
	Name string
	// Opts is its command line and how it is started.
	Opts Options

	mu   sync.Mutex
	node *Node // nil while stopped
}

// Current is the running process, or nil while it is stopped.
func (p *Restartable) Current() *Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.node
}

// Running says whether the process runs (was started and not since
// killed or stopped).
func (p *Restartable) Running() bool { return p.Current() != nil }

// Start starts the process (see Start) and returns once it is ready.
func (p *Restartable) Start(ctx context.Context) error {
	n, err := Start(ctx, p.Opts)
	if err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.mu.Lock()
	p.node = n
	p.mu.Unlock()
	return nil
}

// Kill SIGKILLs the process, if it runs, and waits for it to exit.
func (p *Restartable) Kill() error {
	return p.end(func(n *Node) (Exit, error) { return n.Kill() }, "kill")
}

// Stop SIGTERMs the process, if it runs, and waits up to timeout for it
// to exit (see Node.Stop).
func (p *Restartable) Stop(timeout time.Duration) error {
	return p.end(func(n *Node) (Exit, error) { return n.Stop(timeout) }, "stop")
}

// end ends the running process with how and marks it stopped.
func (p *Restartable) end(how func(*Node) (Exit, error), what string) error {
	n := p.Current()
	if n == nil {
		return nil
	}
	_, err := how(n)
	p.mu.Lock()
	p.node = nil
	p.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, p.Name, err)
	}
	return nil
}
