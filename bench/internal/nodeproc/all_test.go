package nodeproc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestConcurrently_RunsEveryIndexAtOnceAndJoinsErrorsInOrder(t *testing.T) {
	const n = 4
	var running atomic.Int32
	release := make(chan struct{})
	go func() {
		for running.Load() < n {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	err := Concurrently(n, func(i int) error {
		running.Add(1)
		<-release // only once all n run at the same time: a sequential run would hang here
		if i%2 == 1 {
			return fmt.Errorf("f(%d)", i)
		}
		return nil
	})
	if err == nil || err.Error() != "f(1)\nf(3)" {
		t.Fatalf("joined errors: %v", err)
	}
	if Concurrently(0, func(int) error { return errors.New("called") }) != nil {
		t.Error("n = 0 called f")
	}
}

type fakeProc struct{ stopped time.Duration }

func (p *fakeProc) Stop(timeout time.Duration) error { p.stopped = timeout; return nil }

func TestStopAll_StopsEveryProcessWithTheTimeout(t *testing.T) {
	ps := []*fakeProc{{}, {}, {}}
	if err := StopAll(time.Minute, ps); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		if p.stopped != time.Minute {
			t.Errorf("process %d stopped with %v", i, p.stopped)
		}
	}
}
