package hostilebench

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// rssWatch samples the resident size of processes every 100 ms and keeps
// each one's peak; reset also clears each process's high-water mark
// (writing 5 to /proc/PID/clear_refs), so that VmHWM read at the end is
// the exact peak since, a spike between two samples included.
type rssWatch struct {
	procs []*proc
	stopc chan struct{}
	wg    sync.WaitGroup

	mu   sync.Mutex
	peak []int64 // REQUIRES: mu held
}

func startRSSWatch(procs []*proc) *rssWatch {
	w := &rssWatch{procs: procs, stopc: make(chan struct{}), peak: make([]int64, len(procs))}
	w.sample()
	w.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stopc:
				return
			case <-t.C:
				w.sample()
			}
		}
	})
	return w
}

func (w *rssWatch) sample() {
	for i, p := range w.procs {
		u, err := p.node.Usage()
		if err != nil {
			continue // the process ended; its stop reports why
		}
		w.mu.Lock()
		w.peak[i] = max(w.peak[i], u.RSSBytes)
		w.mu.Unlock()
	}
}

// read returns each process's peak: the larger of the sampled peak and
// VmHWM.
func (w *rssWatch) read() []int64 {
	w.sample()
	out := make([]int64, len(w.procs))
	for i, p := range w.procs {
		w.mu.Lock()
		out[i] = w.peak[i]
		w.mu.Unlock()
		if u, err := p.node.Usage(); err == nil {
			out[i] = max(out[i], u.HWMBytes)
		}
	}
	return out
}

// reset returns the peaks so far and starts new ones.
func (w *rssWatch) reset() []int64 {
	out := w.read()
	for i, p := range w.procs {
		os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.node.PID()), []byte("5"), 0)
		w.mu.Lock()
		w.peak[i] = 0
		w.mu.Unlock()
	}
	w.sample()
	return out
}

// stop ends the sampling and returns the peaks since the last reset.
func (w *rssWatch) stop() []int64 {
	out := w.read()
	close(w.stopc)
	w.wg.Wait()
	return out
}
