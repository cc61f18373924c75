package replbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// coordSpec is how to start one coordinator; restarts reuse it (same data
// directory and ports).
type coordSpec struct {
	Binary                      string
	ID                          string // --id, "c1" …
	RaftID                      int
	DataDir                     string
	Peers                       string // --peers, the same on every member
	Cluster, Intake, GRPC, HTTP string
	LogPath                     string
}

func (s coordSpec) args() []string {
	return []string{"coordinator", "--id", s.ID, "--raft-id", fmt.Sprint(s.RaftID), "--data-dir", s.DataDir,
		"--insecure-cluster", "--peers", s.Peers, "--cluster-listen", s.Cluster, "--intake-listen", s.Intake,
		"--listen", s.GRPC, "--http-listen", s.HTTP}
}

// coordReadyLine is what a coordinator logs once it serves.
const coordReadyLine = `msg="coordinator ready"`

// coordProc is a running coordinator process. Its output is appended to
// LogPath; the last lines are kept for error messages.
//
// Concurrency: methods may be called from any goroutine.
type coordProc struct {
	spec   coordSpec
	cmd    *exec.Cmd
	exited chan struct{}
	mu     sync.Mutex
	tail   []string // REQUIRES: mu held
}

// startCoord starts a coordinator and waits for its ready line.
func startCoord(ctx context.Context, spec coordSpec, timeout time.Duration, logger *slog.Logger) (*coordProc, error) {
	logFile, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open coordinator %s log: %w", spec.ID, err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("pipe for coordinator %s: %w", spec.ID, err)
	}
	p := &coordProc{spec: spec, exited: make(chan struct{})}
	// NB: not CommandContext: the run stops coordinators itself, with the
	// signal it chose.
	p.cmd = exec.Command(spec.Binary, spec.args()...)
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	logger.Info("starting coordinator", "id", spec.ID, "cmd", spec.Binary+" "+strings.Join(spec.args(), " "))
	if err := p.cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logFile.Close()
		return nil, fmt.Errorf("start coordinator %s: %w", spec.ID, err)
	}
	pw.Close() // the child holds its own copy
	ready := make(chan struct{})
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer logFile.Close()
		var once sync.Once
		sc := bufio.NewScanner(io.TeeReader(pr, logFile))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.tail = append(p.tail, line)
			if len(p.tail) > 30 {
				p.tail = p.tail[len(p.tail)-30:]
			}
			p.mu.Unlock()
			if strings.Contains(line, coordReadyLine) {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(logFile, pr) // an over-long line: keep draining the pipe
		pr.Close()
	}()
	go func() {
		_ = p.cmd.Wait()
		<-scanned
		close(p.exited)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ready:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("coordinator %s exited before it was ready (%v); last output:\n%s", spec.ID, p.cmd.ProcessState, p.logTail())
	case <-timer.C:
		p.kill()
		return nil, fmt.Errorf("coordinator %s not ready after %v; last output:\n%s", spec.ID, timeout, p.logTail())
	case <-ctx.Done():
		p.kill()
		return nil, fmt.Errorf("wait for coordinator %s: %w", spec.ID, ctx.Err())
	}
}

func (p *coordProc) logTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return "  | " + strings.Join(p.tail, "\n  | ")
}

// kill SIGKILLs the coordinator, as a crash or a lost site would end it,
// and waits for it to exit.
func (p *coordProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop sends SIGTERM and waits up to timeout, then SIGKILLs.
func (p *coordProc) stop(timeout time.Duration) error {
	select {
	case <-p.exited:
		return fmt.Errorf("coordinator %s had already exited (%v); last output:\n%s", p.spec.ID, p.cmd.ProcessState, p.logTail())
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal coordinator %s: %w", p.spec.ID, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		return nil
	case <-timer.C:
		p.kill()
		return fmt.Errorf("coordinator %s did not exit within %v of SIGTERM; killed it", p.spec.ID, timeout)
	}
}
