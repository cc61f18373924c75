package prom

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tributarydb/tributary/model"
)

// parseStaleness reads max_staleness (float seconds or a duration, as
// timeout) as a model.Query.MaxStaleness: 0 asks for the freshest answer
// (model.AlwaysFresh, whatever the coordinator's default), a positive one
// is rounded up to whole milliseconds.
func parseStaleness(s string) (int64, error) {
	d, err := parseDuration(s)
	switch {
	case err != nil:
		return 0, err
	case d < 0:
		return 0, errors.New("must not be negative")
	case d == 0:
		return model.AlwaysFresh, nil
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond), nil
}

// freshness collects the FreshThroughMs of one request's backend answers:
// the request's answer is as fresh as the least fresh of them. Safe for
// concurrent use.
type freshness struct {
	mu  sync.Mutex
	ms  int64
	set bool
}

// add counts one answer's FreshThroughMs (0: no allowance used).
func (f *freshness) add(ms int64) {
	if ms == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.set || ms < f.ms {
		f.ms, f.set = ms, true
	}
}

// through returns the oldest FreshThroughMs added, if any.
func (f *freshness) through() (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ms, f.set
}

func fmtFresh(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// freshInfo is the info line of an answer given with a staleness
// allowance.
func freshInfo(ms int64) string {
	return fmt.Sprintf("PromQL info: data fresh through %s (max_staleness: edges whose newest data the cloud holds within it of the query's end were not asked for it)", fmtFresh(ms))
}
