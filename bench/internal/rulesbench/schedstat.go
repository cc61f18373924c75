package rulesbench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runqueueWait is the time the threads of process pid have spent runnable
// but waiting for a CPU (the second field of /proc/PID/task/*/schedstat),
// summed over the threads alive now. Where /proc has no schedstat (not
// Linux, or a kernel without schedstats) it is an error.
//
// It tells a slow evaluation that waited for the CPU, which other work of
// the machine held, from one that waited on the disk or a lock.
func runqueueWait(pid int) (time.Duration, error) {
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(paths) == 0 {
		return 0, fmt.Errorf("no schedstat for process %d", pid)
	}
	var total time.Duration
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread has exited
		}
		d, err := parseSchedstat(string(b))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
		total += d
	}
	return total, nil
}

// parseSchedstat reads the run-queue wait, in nanoseconds, of a schedstat
// line: "<on-CPU ns> <waiting ns> <timeslices>".
func parseSchedstat(s string) (time.Duration, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0, fmt.Errorf("schedstat %q: want 3 fields", s)
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("schedstat %q: %w", s, err)
	}
	return time.Duration(n), nil
}
