package cluster

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RSSWatch samples the resident set size (VmRSS) of processes every
// interval and keeps each one's largest. Reset also clears the kernel's
// high-water mark of each process (writing 5 to /proc/PID/clear_refs), so
// that VmHWM read at the end is the exact peak since the reset, including
// a spike shorter than the sampling interval.
//
// Its methods are safe for concurrent use.
type RSSWatch struct {
	ps   []*Process
	pids []int
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	peak   []int64 // REQUIRES: mu held; since the last Reset
	errors []error // REQUIRES: mu held; the first sampling error of each
}

// WatchRSS starts sampling ps, which must be running.
func WatchRSS(interval time.Duration, ps ...*Process) (*RSSWatch, error) {
	w := &RSSWatch{ps: ps, stop: make(chan struct{}), peak: make([]int64, len(ps)), errors: make([]error, len(ps))}
	for _, p := range ps {
		pid := p.PID()
		if pid == 0 {
			return nil, fmt.Errorf("watch resident size: %s is not running", p.Name)
		}
		w.pids = append(w.pids, pid)
	}
	w.sample()
	w.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.sample()
			}
		}
	})
	return w, nil
}

func (w *RSSWatch) sample() {
	for i, pid := range w.pids {
		rss, err := RSSBytes(pid)
		w.mu.Lock()
		if err != nil {
			if w.errors[i] == nil {
				w.errors[i] = err
			}
		} else {
			w.peak[i] = max(w.peak[i], rss)
		}
		w.mu.Unlock()
	}
}

// RSSPeak is one process's figures.
type RSSPeak struct {
	Name string
	// Sampled is the largest VmRSS sampled since the last Reset; HWM the
	// kernel's VmHWM when read (0 when it could not be reset and read).
	Sampled, HWM int64
	Err          error // the first failed sample, if any
}

// Peak is the larger of the sampled peak and the high-water mark.
func (p RSSPeak) Peak() int64 { return max(p.Sampled, p.HWM) }

// Reset returns the peaks so far and starts new ones: the sampled peaks
// from the current size, the high-water marks cleared.
func (w *RSSWatch) Reset() []RSSPeak {
	out := w.read()
	for i, pid := range w.pids {
		os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
		w.mu.Lock()
		w.peak[i] = 0
		w.mu.Unlock()
	}
	w.sample()
	return out
}

func (w *RSSWatch) read() []RSSPeak {
	w.sample()
	out := make([]RSSPeak, len(w.ps))
	for i, pid := range w.pids {
		hwm, _ := statusBytes(pid, "VmHWM:")
		w.mu.Lock()
		out[i] = RSSPeak{Name: w.ps[i].Name, Sampled: w.peak[i], HWM: hwm, Err: w.errors[i]}
		w.mu.Unlock()
	}
	return out
}

// Stop ends the sampling and returns the peaks since the last Reset.
func (w *RSSWatch) Stop() []RSSPeak {
	out := w.read()
	close(w.stop)
	w.wg.Wait()
	return out
}

// statusBytes reads a "kB" field of /proc/PID/status.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("odd line %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s line", field)
}
