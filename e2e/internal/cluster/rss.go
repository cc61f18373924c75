package cluster

import (
	"fmt"
	"time"

	"github.com/tributarydb/tributary/internal/procstat"
)

// RSSWatch samples the resident size of processes and keeps their peaks
// (see procstat.RSSWatch).
type RSSWatch = procstat.RSSWatch

// RSSPeak is one process's figures (see procstat.RSSPeak).
type RSSPeak = procstat.RSSPeak

// WatchRSS starts sampling ps, which must be running, every interval.
func WatchRSS(interval time.Duration, ps ...*Process) (*RSSWatch, error) {
	ts := make([]procstat.Target, len(ps))
	for i, p := range ps {
		pid := p.PID()
		if pid == 0 {
			return nil, fmt.Errorf("watch resident size: %s is not running", p.Name)
		}
		ts[i] = procstat.Target{Name: p.Name, PID: pid}
	}
	return procstat.WatchRSS(interval, ts...), nil
}
