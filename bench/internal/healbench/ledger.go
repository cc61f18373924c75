package healbench

import (
	"fmt"
	"sort"
	"sync"
)

// ledger records what one edge's writer sent: every request writes the
// same points to each of its series — n timestamps startMs, startMs+stepMs,
// ... — and was acknowledged or failed (its points in doubt). Requests
// come in ascending time order and never overlap, so the ledger is a list
// of ranges, not of points: 20 million points cost a few thousand entries.
// It is safe for concurrent use.
type ledger struct {
	series int

	mu   sync.Mutex
	reqs []request
}

// request is one write: n points per series from startMs, stepMs apart.
type request struct {
	startMs, stepMs int64
	n               int
	acked           bool
	offset          int // points per series before this request
}

func (r request) endMs() int64 { return r.startMs + int64(r.n-1)*r.stepMs }

func newLedger(series int) *ledger { return &ledger{series: series} }

// value is the value written to series i at ts: both can be read back
// from it, so a point returned under the wrong series or time is caught.
// Exact in a float64.
func value(series int, ts int64) float64 {
	return float64(ts%1_000_000_000)*1000 + float64(series)
}

// seriesName is the "s" label of series i.
func seriesName(i int) string { return fmt.Sprintf("s%03d", i) }

// record adds a request; its times must come after every earlier one's.
func (l *ledger) record(startMs, stepMs int64, n int, acked bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	off := 0
	if k := len(l.reqs); k > 0 {
		last := l.reqs[k-1]
		if startMs <= last.endMs() {
			return fmt.Errorf("ledger: request at %d overlaps the previous one (ending %d)", startMs, last.endMs())
		}
		off = last.offset + last.n
	}
	l.reqs = append(l.reqs, request{startMs: startMs, stepMs: stepMs, n: n, acked: acked, offset: off})
	return nil
}

// acked counts the acknowledged points, over all series.
func (l *ledger) acked() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, r := range l.reqs {
		if r.acked {
			n += int64(r.n)
		}
	}
	return n * int64(l.series)
}

// span returns the first and last acknowledged timestamps (0, 0: none).
func (l *ledger) span() (first, last int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.reqs {
		if !r.acked {
			continue
		}
		if first == 0 {
			first = r.startMs
		}
		last = r.endMs()
	}
	return first, last
}

// point is one returned sample.
type point struct {
	ts int64
	v  float64
}

// verdict compares an answer with the ledger.
type verdict struct {
	returned, lost, duplicated, phantom, wrongValue, inDoubt int64
	examples                                                 []string
}

func (v verdict) ok() bool { return v.lost+v.duplicated+v.phantom+v.wrongValue == 0 }

func (v *verdict) example(format string, args ...any) {
	if len(v.examples) < 4 {
		v.examples = append(v.examples, fmt.Sprintf(format, args...))
	}
}

func (v verdict) String() string {
	s := fmt.Sprintf("%d returned; lost %d, duplicated %d, phantom %d, wrong value %d, in doubt %d",
		v.returned, v.lost, v.duplicated, v.phantom, v.wrongValue, v.inDoubt)
	if len(v.examples) > 0 {
		s += fmt.Sprintf(" (e.g. %v)", v.examples)
	}
	return s
}

// check compares an answer over [fromMs, toMs] — points by series name —
// with the ledger: every acknowledged point of the window exactly once,
// with its value; points of failed requests may be there or not; anything
// else is phantom.
func (l *ledger) check(ans map[string][]point, fromMs, toMs int64) verdict {
	l.mu.Lock()
	reqs := l.reqs
	l.mu.Unlock()
	var v verdict
	total := 0
	if k := len(reqs); k > 0 {
		total = reqs[k-1].offset + reqs[k-1].n
	}
	names := map[string]int{}
	for i := range l.series {
		names[seriesName(i)] = i
	}
	for name, pts := range ans {
		si, known := names[name]
		seen := make([]bool, total)
		for _, p := range pts {
			v.returned++
			r, idx, on := locate(reqs, p.ts)
			switch {
			case !known || !on || p.ts < fromMs || p.ts > toMs:
				v.phantom++
				v.example("phantom %s@%d", name, p.ts)
			case seen[idx]:
				v.duplicated++
				v.example("duplicate %s@%d", name, p.ts)
			default:
				seen[idx] = true
				if p.v != value(si, p.ts) {
					v.wrongValue++
					v.example("wrong value %s@%d: %v", name, p.ts, p.v)
				} else if !r.acked {
					v.inDoubt++
				}
			}
		}
		if known {
			v.lost += lostIn(reqs, seen, fromMs, toMs)
		}
	}
	for i := range l.series {
		if _, ok := ans[seriesName(i)]; !ok {
			v.lost += lostIn(reqs, make([]bool, total), fromMs, toMs)
		}
	}
	if v.lost > 0 {
		v.example("%d acknowledged points missing", v.lost)
	}
	return v
}

// locate finds the request holding ts on its grid: the request, the
// point's index over all requests, and whether there is one.
func locate(reqs []request, ts int64) (request, int, bool) {
	i := sort.Search(len(reqs), func(i int) bool { return reqs[i].endMs() >= ts })
	if i == len(reqs) {
		return request{}, 0, false
	}
	r := reqs[i]
	if ts < r.startMs || (ts-r.startMs)%r.stepMs != 0 {
		return request{}, 0, false
	}
	return r, r.offset + int((ts-r.startMs)/r.stepMs), true
}

// lostIn counts the acknowledged points in [fromMs, toMs] not seen.
func lostIn(reqs []request, seen []bool, fromMs, toMs int64) int64 {
	var n int64
	for _, r := range reqs {
		if !r.acked || r.endMs() < fromMs || r.startMs > toMs {
			continue
		}
		for k := range r.n {
			ts := r.startMs + int64(k)*r.stepMs
			if ts >= fromMs && ts <= toMs && !seen[r.offset+k] {
				n++
			}
		}
	}
	return n
}
