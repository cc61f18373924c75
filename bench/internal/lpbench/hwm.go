package lpbench

import (
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
)

// Peak memory is VmHWM, sampled until the node exits.
//
// NB: not the exited process's rusage ru_maxrss. Go starts a child with
// clone(CLONE_VM|CLONE_VFORK), so until exec the child runs on the
// parent's address space, and the kernel carries that address space's
// high-water mark into the child's ru_maxrss at exec: every node this
// benchmark starts would report at least the benchmark's own peak RSS
// (the ~300 MB of pre-rendered line protocol), whatever the node used.
// VmHWM belongs to the address space the node got at exec, so it is the
// node's own; sampling it every hwmEvery until exit misses at most the
// last moments of the shutdown.

// hwmEvery is how often the watcher reads VmHWM.
const hwmEvery = 10 * time.Millisecond

// process is what the watcher needs of a node process.
type process interface {
	Usage() (nodeproc.Usage, error)
	Exited() <-chan struct{}
}

// hwmWatch follows a process's peak RSS until it exits.
type hwmWatch struct {
	peak atomic.Int64
	done chan struct{}
}

// watchHWM samples p's VmHWM every interval until p exits.
func watchHWM(p process, every time.Duration) *hwmWatch {
	w := &hwmWatch{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			// A read fails once the process is gone; the samples before
			// it hold the peak.
			if u, err := p.Usage(); err == nil && u.HWMBytes > w.peak.Load() {
				w.peak.Store(u.HWMBytes)
			}
			select {
			case <-p.Exited():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// Now is the peak seen so far.
func (w *hwmWatch) Now() int64 { return w.peak.Load() }

// Final waits for the process to have exited and returns its peak.
func (w *hwmWatch) Final() int64 {
	<-w.done
	return w.peak.Load()
}
