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
// The engine also reuses the Select of a range query that evalDirect
// (direct.go) read and then left to the engine; that first Select was not
// charged to the engine's evaluation, so the limit applies as with one read.
//
// Only requests whose query names __name__ (those keepGroupedNames may
// rewrite) and range queries keep a memo; it lives until the answer is sent.

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
	b := make([]byte, 0, 128)
	b = strconv.AppendBool(b, downsample)
	if fold != nil {
		b = strconv.AppendBool(b, fold.max)
		for _, g := range fold.by {
			b = append(b, 1)
			b = append(b, g...)
		}
	}
	for _, x := range []int64{start, end} {
		b = append(b, 0)
		b = strconv.AppendInt(b, x, 10)
	}
	if h != nil {
		for _, x := range []int64{h.Start, h.End, h.Step, h.Range} {
			b = append(b, 0)
			b = strconv.AppendInt(b, x, 10)
		}
		b = append(b, 0)
		b = append(b, h.Func...)
	}
	for _, m := range ms {
		// Both quoted: a name may hold any character.
		b = append(b, 0)
		b = strconv.AppendQuote(b, m.Name)
		b = append(b, m.Type.String()...)
		b = strconv.AppendQuote(b, m.Value)
	}
	return string(b)
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
