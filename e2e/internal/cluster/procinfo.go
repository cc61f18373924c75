package cluster

import (
	"fmt"
	"os"

	"github.com/tributarydb/tributary/internal/procstat"
)

// PID is the running process's id (0 when it is not running).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// RSSBytes reads the resident set size of process pid (Linux: VmRSS of
// /proc/PID/status).
func RSSBytes(pid int) (int64, error) { return procstat.RSSBytes(pid) }

// OpenFiles counts the open file descriptors of process pid (Linux).
func OpenFiles(pid int) (int, error) {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("open files of %d: %w", pid, err)
	}
	return len(es), nil
}
