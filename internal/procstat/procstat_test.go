package procstat

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStatusBytes(t *testing.T) {
	status := "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t3\nOdd:\t12\n"
	for _, c := range []struct {
		field string
		want  int64
		ok    bool
	}{
		{"VmRSS", 1024 << 10, true},
		{"VmHWM", 2048 << 10, true},
		{"VmSwap", 0, false},
		{"Odd", 0, false},
	} {
		got, err := parseStatusBytes(status, c.field)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("%s: %d, %v; want %d, ok %v", c.field, got, err, c.want, c.ok)
		}
	}
}

func TestWatchRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	w := WatchRSS(time.Millisecond, Target{Name: "self", PID: os.Getpid()}, Target{Name: "none", PID: -1})
	ballast := make([]byte, 32<<20)
	for i := range ballast {
		ballast[i] = 1
	}
	time.Sleep(20 * time.Millisecond)
	ps := w.Stop()
	if ps[0].Name != "self" || ps[0].Sampled < 32<<20 || ps[0].Err != nil || ps[0].Peak() < ps[0].Sampled {
		t.Errorf("self: %+v, want a peak of at least the 32 MiB ballast", ps[0])
	}
	if ps[1].Err == nil || ps[1].Peak() != 0 {
		t.Errorf("no process: %+v, want an error and no peak", ps[1])
	}
	runtime.KeepAlive(ballast)
}
