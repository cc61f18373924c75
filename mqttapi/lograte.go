package mqttapi

import (
	"log/slog"
	"sync"
	"time"
)

// logEvery is how often one kind of problem is logged at most; the lines
// in between are counted and the count is logged with the next one.
const logEvery = 10 * time.Second

// rateLog logs each kind of problem at most once per logEvery, so that a
// publisher sending bad payloads many times a second cannot flood the
// log. Safe for concurrent use.
type rateLog struct {
	log *slog.Logger
	now func() time.Time

	mu         sync.Mutex
	last       map[string]time.Time
	suppressed map[string]int
}

func newRateLog(log *slog.Logger, now func() time.Time) *rateLog {
	return &rateLog{log: log, now: now, last: map[string]time.Time{}, suppressed: map[string]int{}}
}

// warn logs msg with args under kind unless kind was logged less than
// logEvery ago.
func (l *rateLog) warn(kind, msg string, args ...any) {
	l.mu.Lock()
	now := l.now()
	if t, ok := l.last[kind]; ok && now.Sub(t) < logEvery {
		l.suppressed[kind]++
		l.mu.Unlock()
		return
	}
	n := l.suppressed[kind]
	delete(l.suppressed, kind)
	l.last[kind] = now
	if len(l.last) > 1024 { // kinds are few; this only bounds a bug
		clear(l.last)
	}
	l.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed_since_last", n)
	}
	l.log.Warn(msg, args...)
}
