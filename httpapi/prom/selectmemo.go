package prom

import (
	"strconv"
	"strings"
	"sync"

	pmodel "github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// Reads shared by the evaluations of one request.
//
// A query that groups by __name__ and fails with "same labelset" is
// evaluated a second time, rewritten (see keepname.go). The rewrite only
// wraps aggregations in label_replace: every selector, and so every Select
// with its hints, is the same as in the first evaluation. The request's
// selectMemo keeps each Select's answer from the first evaluation and the
// second one reuses it instead of reading the store again: the answer is
// the one a second read of unchanged data would give, and more consistent
// when data arrives in between (both evaluations see the same samples).
// The reused answer is charged to the query's sample limit again, so the
// limit applies exactly as with two reads.
//
// Only requests whose query names __name__ (those keepGroupedNames may
// rewrite) keep a memo; it lives until the answer is sent.

// selectMemo holds the Select answers of one request, by selectKey.
type selectMemo struct {
	mu sync.Mutex
	m  map[string]memoSet
}

// memoSet is one Select's answer: its series (never modified after the
// Select returned, except sorted in place, which is idempotent), the
// samples they hold and the backend's warnings.
type memoSet struct {
	list     []series
	samples  int
	warnings []string
}

// newSelectMemo returns a memo for a request evaluating qs, or nil when
// qs cannot be evaluated twice.
func newSelectMemo(qs string) *selectMemo {
	if !strings.Contains(qs, pmodel.MetricNameLabel) {
		return nil
	}
	return &selectMemo{}
}

// selectKey identifies a Select by everything that decides its answer:
// the range, the hints plan reads, whether the statement allows
// downsampling and the fold by groups, and the matchers.
func selectKey(downsample bool, fold *groupFold, start, end int64, h *storage.SelectHints, ms []*labels.Matcher) string {
	var b strings.Builder
	b.WriteString(strconv.FormatBool(downsample))
	if fold != nil {
		b.WriteString(strconv.FormatBool(fold.max))
		for _, g := range fold.by {
			b.WriteByte(1)
			b.WriteString(g)
		}
	}
	for _, x := range []int64{start, end} {
		b.WriteByte(0)
		b.WriteString(strconv.FormatInt(x, 10))
	}
	if h != nil {
		for _, x := range []int64{h.Start, h.End, h.Step, h.Range} {
			b.WriteByte(0)
			b.WriteString(strconv.FormatInt(x, 10))
		}
		b.WriteByte(0)
		b.WriteString(h.Func)
	}
	for _, m := range ms {
		b.WriteByte(0)
		b.WriteString(m.String())
	}
	return b.String()
}

func (m *selectMemo) get(key string) (memoSet, bool) {
	if m == nil {
		return memoSet{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[key]
	return s, ok
}

func (m *selectMemo) put(key string, s memoSet) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]memoSet{}
	}
	m.m[key] = s
}
