package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is one binary run as a child process, restartable with the same
// command line; its output (stdout and stderr) is appended to one log file.
type Process struct {
	Name    string   // for messages, e.g. "c1" or "edge-1"
	Bin     string   // path of the binary
	Args    []string // command line after the binary
	LogPath string
	Ready   string // a string of the log line that says the process is ready

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	err    error         // cmd's exit status, valid after exited
	starts int
}

// Start starts the process and waits up to timeout for its ready line
// (written after this start, not an earlier one). A process that exits or
// stays silent is an error that quotes the end of its log.
func (p *Process) Start(timeout time.Duration) error {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: already running", p.Name)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: open log: %w", p.Name, err)
	}
	p.starts++
	fmt.Fprintf(logf, "=== e2e: start %d of %s: %s %s\n", p.starts, p.Name, p.Bin, strings.Join(p.Args, " "))
	// The ready line is looked for after the marker, which quotes the
	// command line (it may contain the ready string).
	off, err := logf.Seek(0, io.SeekEnd)
	if err != nil {
		logf.Close()
		p.mu.Unlock()
		return fmt.Errorf("start %s: seek log: %w", p.Name, err)
	}
	cmd := exec.Command(p.Bin, p.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		p.mu.Unlock()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(exited)
	}()
	return p.waitReady(off, exited, timeout)
}

func (p *Process) waitReady(off int64, exited chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if p.logContains(off, p.Ready) {
			return nil
		}
		select {
		case <-exited:
			p.mu.Lock()
			err := p.err
			p.cmd = nil
			p.mu.Unlock()
			return fmt.Errorf("start %s: exited before %q (%v); log ends:\n%s", p.Name, p.Ready, err, p.LogTail(20))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("start %s: no %q within %v; log ends:\n%s", p.Name, p.Ready, timeout, p.LogTail(20))
		}
	}
}

func (p *Process) logContains(off int64, s string) bool {
	b, err := os.ReadFile(p.LogPath)
	if err != nil || int64(len(b)) < off {
		return false
	}
	return bytes.Contains(b[off:], []byte(s))
}

// Running reports whether the process was started and has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to exit. Killing a process
// that is not running does nothing.
func (p *Process) Kill() {
	p.signalAndWait(syscall.SIGKILL, 0)
}

// Stop sends SIGTERM and waits up to grace for a clean exit, then kills.
// It returns the exit error of a process that did not stop cleanly.
func (p *Process) Stop(grace time.Duration) error {
	return p.signalAndWait(syscall.SIGTERM, grace)
}

func (p *Process) signalAndWait(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(sig)
	if sig != syscall.SIGKILL {
		select {
		case <-exited:
		case <-time.After(grace):
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("stop %s: not stopped %v after %v: killed", p.Name, grace, sig)
		}
	}
	<-exited
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if sig == syscall.SIGKILL {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stop %s: %w", p.Name, err)
	}
	return nil
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 2*n {
			lines = append(lines[:0], lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// CountInLog counts the log lines that contain s (over every start).
func (p *Process) CountInLog(s string) int {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte(s))
}

// ReportOnFailure registers a cleanup that prints the last lines of each
// process's log when t has failed.
func ReportOnFailure(t testing.TB, lines int, ps ...*Process) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range ps {
			t.Logf("--- last %d lines of %s (%s):\n%s", lines, p.Name, p.LogPath, p.LogTail(lines))
		}
	})
}

var errNoLeader = errors.New("no raft leader known")
