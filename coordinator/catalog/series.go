package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tributarydb/tributary/model/aggregate"
	"github.com/tributarydb/tributary/node/labels"
)

func (s *state) registerSeries(c RegisterSeries) (any, error) {
	if s.nodes[c.Edge] == nil {
		return nil, cmdErr(c.Kind(), ErrNotFound, "node %q is not registered", c.Edge)
	}
	res := RegisterSeriesResult{IDs: make([]uint64, len(c.Series))}
	reject := func(i int, reason string) {
		if len(res.Rejected) < maxReported {
			res.Rejected = append(res.Rejected, Rejection{Index: i, Reason: reason})
		}
	}
	owned := s.edgeSeries[c.Edge]
	var key []byte
	for i, in := range c.Series {
		ls, err := labels.New(in, labels.DefaultLimits)
		if err != nil {
			reject(i, err.Error())
			continue
		}
		key = ls.AppendKey(key[:0])
		h := keyHash(key)
		id, ok, taken := s.find(h, key, ls)
		if !ok {
			if uint64(s.series.len()) >= s.config.MaxSeries {
				reject(i, fmt.Sprintf("the fleet holds %d series, the configured maximum", s.series.len()))
				continue
			}
			id = s.addSeries(h, key, ls, taken)
			res.Created++
		}
		owned = insertSorted(owned, id)
		res.IDs[i] = id
	}
	if len(owned) > 0 {
		s.edgeSeries[c.Edge] = owned
	}
	return res, nil
}

// namePostings indexes the values of one label name.
type namePostings struct {
	name string // the interned name
	// vals[value] lists the ids of the series with the label, sorted,
	// never empty.
	vals map[string][]uint64
}

// lookup returns the id of the series with canonical key key and labels
// ls.
func (s *state) lookup(key []byte, ls labels.Labels) (uint64, bool) {
	id, ok, _ := s.find(keyHash(key), key, ls)
	return id, ok
}

// find returns the id of the series with labels ls, canonical key key and
// key hash h; taken says whether h is in byHash.
func (s *state) find(h uint64, key []byte, ls labels.Labels) (id uint64, ok, taken bool) {
	id, taken = s.byHash[h]
	switch {
	case !taken:
		return 0, false, false
	case labels.Equal(s.series.at(id), ls):
		return id, true, true
	case len(s.collided) == 0:
		return 0, false, true
	}
	id, ok = s.collided[string(key)]
	return id, ok, true
}

// addSeries assigns the next id to a new series and indexes it: ls, its
// canonical key key and key hash h, taken as find returned it. It
// replaces the strings of ls by those of the series already in the
// catalog, then stores a copy of ls.
func (s *state) addSeries(h uint64, key []byte, ls labels.Labels, taken bool) uint64 {
	id := uint64(s.series.len()) + 1
	for i, l := range ls {
		np := s.postings[l.Name]
		if np == nil {
			np = &namePostings{name: l.Name, vals: map[string][]uint64{}}
			s.postings[l.Name] = np
		}
		l.Name = np.name
		ids := np.vals[l.Value]
		if len(ids) > 0 {
			// The value as the first series with it holds it.
			l.Value = s.series.at(ids[0]).Get(l.Name)
		}
		ls[i] = l
		// ids grow, so appending keeps the list sorted.
		np.vals[l.Value] = append(ids, id)
	}
	s.series.add(ls)
	s.seriesKeyBytes += keyStringLen(key)
	if taken {
		s.collided[string(key)] = id
	} else {
		s.byHash[h] = id
	}
	return id
}

// insertSorted inserts id into the sorted list ids unless present.
func insertSorted(ids []uint64, id uint64) []uint64 {
	if n := len(ids); n == 0 || ids[n-1] < id {
		return append(ids, id)
	}
	i, found := slices.BinarySearch(ids, id)
	if found {
		return ids
	}
	return slices.Insert(ids, i, id)
}

// ErrNoSelectiveMatcher is returned by Select when every matcher matches
// the empty string (which would select every series).
var ErrNoSelectiveMatcher = errors.New("catalog select: at least one matcher must not match the empty string")

// Select returns the series matching every matcher, in id order, at most
// limit of them (limit <= 0: all). At least one matcher must not match the
// empty string.
func (f *FSM) Select(ms []*labels.Matcher, limit int) ([]SeriesRef, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ids, err := f.st.selectIDs(ms)
	if err != nil {
		return nil, err
	}
	if limit > 0 && len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]SeriesRef, len(ids))
	for i, id := range ids {
		out[i] = SeriesRef{ID: id, Labels: f.st.series.at(id)}
	}
	return out, nil
}

func (s *state) selectIDs(ms []*labels.Matcher) ([]uint64, error) {
	var positive, negative []*labels.Matcher
	for _, m := range ms {
		if m.MatchesEmpty() {
			negative = append(negative, m)
		} else {
			positive = append(positive, m)
		}
	}
	if len(positive) == 0 {
		return nil, ErrNoSelectiveMatcher
	}
	// Equality matchers first, shortest postings first: they are one map
	// lookup each, and the candidates start small (one edge's series, say,
	// not every series of a metric name) so that the longer lists are
	// probed rather than copied. Other matchers (a walk over a label's
	// values each) come after, only while candidates remain.
	var lists [][]uint64
	var rest []*labels.Matcher
	for _, m := range positive {
		if m.Type == labels.MatchEqual {
			lists = append(lists, s.postingsFor(m))
		} else {
			rest = append(rest, m)
		}
	}
	slices.SortStableFunc(lists, func(a, b []uint64) int { return len(a) - len(b) })
	var cand []uint64
	first := true
	narrow := func(ids []uint64) {
		switch {
		case first:
			cand, first = slices.Clone(ids), false
		case len(cand)*16 < len(ids):
			cand = probe(cand, ids)
		default:
			cand = aggregate.Intersect(cand[:0], cand, ids)
		}
	}
	for _, ids := range lists {
		if narrow(ids); len(cand) == 0 {
			return nil, nil
		}
	}
	for _, m := range rest {
		if narrow(s.postingsFor(m)); len(cand) == 0 {
			return nil, nil
		}
	}
	if len(negative) == 0 {
		return cand, nil
	}
	out := cand[:0]
	for _, id := range cand {
		ls := s.series.at(id)
		ok := true
		for _, m := range negative {
			if !m.Matches(ls.Get(m.Name)) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// probe keeps the ids of cand that are in ids (both sorted), searching
// ids for each: for a few candidates against a long postings list.
func probe(cand, ids []uint64) []uint64 {
	out := cand[:0]
	for _, id := range cand {
		i, found := slices.BinarySearch(ids, id)
		if found {
			out = append(out, id)
		}
		ids = ids[i:]
	}
	return out
}

// postingsFor returns the sorted ids of series whose label m.Name has a
// value matching m (m must not match the empty string). The result may be
// an internal list: callers must not modify it.
func (s *state) postingsFor(m *labels.Matcher) []uint64 {
	np := s.postings[m.Name]
	if np == nil {
		return nil
	}
	vals := np.vals
	if m.Type == labels.MatchEqual {
		return vals[m.Value]
	}
	var out []uint64
	for v, ids := range vals {
		if m.Matches(v) {
			out = append(out, ids...)
		}
	}
	// A series has one value per name, so the lists are disjoint.
	slices.Sort(out)
	return out
}

// Lookup returns the id of a series (ls need not be sorted).
func (f *FSM) Lookup(ls labels.Labels) (uint64, bool) {
	ls, err := labels.New(ls, labels.Limits{})
	if err != nil {
		return 0, false
	}
	key := ls.AppendKey(nil)
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.lookup(key, ls)
}

// Series returns the labels of series id.
func (f *FSM) Series(id uint64) (labels.Labels, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if id == 0 || id > uint64(f.st.series.len()) {
		return nil, false
	}
	return f.st.series.at(id), true
}

// SeriesCount returns the number of series in the fleet.
func (f *FSM) SeriesCount() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.series.len()
}

// EdgeSeries returns the sorted ids of the series an edge has registered.
func (f *FSM) EdgeSeries(edge string) []uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return slices.Clone(f.st.edgeSeries[edge])
}

// EdgesOf groups ids by the edges that registered them: for each edge
// holding at least one of ids (sorted by edge), the ids it holds, sorted.
// A query front end uses it to decide which edges and replicas to ask.
func (f *FSM) EdgesOf(ids []uint64) []EdgeSeries {
	want := slices.Clone(ids)
	slices.Sort(want)
	want = slices.Compact(want)
	if len(want) == 0 {
		return nil
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []EdgeSeries
	// NB: one pass over the map, sorting only the edges found: sorting
	// every edge id per query would cost more than the intersections.
	for edge, have := range f.st.edgeSeries {
		if len(have) == 0 || have[0] > want[len(want)-1] || have[len(have)-1] < want[0] {
			continue
		}
		got := aggregate.Intersect(nil, want, have)
		if len(got) > 0 {
			out = append(out, EdgeSeries{Edge: edge, IDs: got})
		}
	}
	slices.SortFunc(out, func(a, b EdgeSeries) int { return strings.Compare(a.Edge, b.Edge) })
	return out
}

// EdgeSeries is a set of series held by one edge.
type EdgeSeries struct {
	Edge string
	IDs  []uint64
}
