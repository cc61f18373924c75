package lpbench

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
)

// fakeProcess reports the HWM values it is given, one per read, then fails
// reads as a process that is gone does.
type fakeProcess struct {
	mu     sync.Mutex
	hwms   []int64
	reads  int
	exited chan struct{}
}

func (p *fakeProcess) Usage() (nodeproc.Usage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	if len(p.hwms) == 0 {
		select {
		case <-p.exited:
		default:
			close(p.exited)
		}
		return nodeproc.Usage{}, errors.New("no such process")
	}
	h := p.hwms[0]
	p.hwms = p.hwms[1:]
	return nodeproc.Usage{HWMBytes: h}, nil
}

func (p *fakeProcess) Exited() <-chan struct{} { return p.exited }

func TestWatchHWM_KeepsThePeakUntilTheProcessExits(t *testing.T) {
	p := &fakeProcess{hwms: []int64{10, 50, 40, 70, 20}, exited: make(chan struct{})}
	w := watchHWM(p, time.Millisecond)
	if got := w.Final(); got != 70 {
		t.Errorf("peak %d, want 70", got)
	}
	if p.reads != 6 {
		t.Errorf("%d reads, want every value and the failing one", p.reads)
	}
}
