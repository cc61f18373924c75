// Package procstat reads the resident memory of running processes from
// Linux's /proc, and watches the peaks of a few processes over a window:
// what the end-to-end tests and the benchmarks report of the servers they
// start. Elsewhere than Linux every read fails.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RSSBytes reads the resident set size of process pid (VmRSS of
// /proc/PID/status).
func RSSBytes(pid int) (int64, error) {
	n, err := StatusBytes(pid, "VmRSS")
	if err != nil {
		return 0, fmt.Errorf("resident size of %d: %w", pid, err)
	}
	return n, nil
}

// StatusBytes reads a field of /proc/PID/status given in kB ("VmRSS",
// "VmHWM") and returns it in bytes.
func StatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusBytes(string(b), field)
}

// parseStatusBytes finds field in the text of /proc/PID/status.
func parseStatusBytes(status, field string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("odd line %q", line)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb << 10, err
	}
	return 0, fmt.Errorf("no %s line", field)
}

// Target is a process to watch.
type Target struct {
	Name string
	PID  int
}

// RSSPeak is one process's figures over a window.
type RSSPeak struct {
	Name string
	// Sampled is the largest VmRSS sampled in the window; HWM the
	// kernel's VmHWM when read (0 when it could not be reset and read).
	Sampled, HWM int64
	Err          error // the first failed sample, if any
}

// Peak is the larger of the sampled peak and the high-water mark.
func (p RSSPeak) Peak() int64 { return max(p.Sampled, p.HWM) }

// RSSWatch samples the resident set size (VmRSS) of processes every
// interval and keeps each one's largest. Reset also clears the kernel's
// high-water mark of each process (writing 5 to /proc/PID/clear_refs), so
// that VmHWM read at the end is the exact peak since the reset, including
// a spike shorter than the sampling interval.
//
// Its methods are safe for concurrent use.
type RSSWatch struct {
	ts   []Target
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	peak   []int64 // REQUIRES: mu held; since the last Reset
	errors []error // REQUIRES: mu held; the first sampling error of each
}

// WatchRSS starts sampling ts every interval until Stop.
func WatchRSS(interval time.Duration, ts ...Target) *RSSWatch {
	w := &RSSWatch{ts: ts, stop: make(chan struct{}), peak: make([]int64, len(ts)), errors: make([]error, len(ts))}
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
	return w
}

func (w *RSSWatch) sample() {
	for i, t := range w.ts {
		rss, err := RSSBytes(t.PID)
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

// Reset returns the peaks so far and starts new ones: the sampled peaks
// from the current size, the high-water marks cleared.
func (w *RSSWatch) Reset() []RSSPeak {
	out := w.read()
	for i, t := range w.ts {
		// NB: where clear_refs cannot be written, VmHWM stays the peak of
		// the process's life; the sampled peak still restarts.
		_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", t.PID), []byte("5"), 0)
		w.mu.Lock()
		w.peak[i] = 0
		w.mu.Unlock()
	}
	w.sample()
	return out
}

func (w *RSSWatch) read() []RSSPeak {
	w.sample()
	out := make([]RSSPeak, len(w.ts))
	for i, t := range w.ts {
		hwm, _ := StatusBytes(t.PID, "VmHWM")
		w.mu.Lock()
		out[i] = RSSPeak{Name: t.Name, Sampled: w.peak[i], HWM: hwm, Err: w.errors[i]}
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
