package replica

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// Query answers q over the data of the listed edges only (empty list: error), calling emit per series in label order with __edge__ removed and the series' edge named. When q.Aggregate is set the aggregation runs across the listed edges' series and edge is "".
//
// "Label order" is the order of the labels without __edge__, and among
// series with the same labels the order of their edges, so that answers of
// several coordinators can be merged by labels. Without aggregation the
// answer is therefore collected before the first emit (it is bounded by
// q.LimitSeries and the engine's query limits). Errors caused by the
// request wrap model.ErrBadQuery; matchers and GroupBy must not name
// EdgeLabel (the edges are chosen by the list). q.LimitSeries bounds the
// series of all listed edges together.
func (s *Store) Query(ctx context.Context, edges []string, q model.Query, emit func(edge string, s model.Series) error) (model.QueryInfo, error) {
	m, err := edgeMatcher(edges)
	if err != nil {
		return model.QueryInfo{}, err
	}
	for _, x := range q.Matchers {
		if x != nil && x.Name == EdgeLabel {
			return model.QueryInfo{}, fmt.Errorf("%w: matcher on the reserved label %s; list the edges instead", model.ErrBadQuery, EdgeLabel)
		}
	}
	if slices.Contains(q.GroupBy, EdgeLabel) {
		return model.QueryInfo{}, fmt.Errorf("%w: group by the reserved label %s", model.ErrBadQuery, EdgeLabel)
	}
	// The caller's slices are not modified.
	q.Matchers = append(slices.Clip(q.Matchers), m)
	q.GroupBy = slices.Clone(q.GroupBy)
	if q.Aggregate != rollup.FuncNone {
		// Groups are built from the GroupBy labels only, so the edge label
		// never reaches an answer; strip anyway, as a guard.
		return s.eng.Query(ctx, q, func(x model.Series) error {
			x.Labels, _ = stripEdge(x.Labels)
			return emit("", x)
		})
	}
	type item struct {
		edge string
		s    model.Series
	}
	var all []item
	info, err := s.eng.Query(ctx, q, func(x model.Series) error {
		ls, edge := stripEdge(x.Labels)
		x.Labels = ls
		all = append(all, item{edge, x})
		return nil
	})
	if err != nil {
		return info, err
	}
	slices.SortFunc(all, func(a, b item) int {
		if c := labels.Compare(a.s.Labels, b.s.Labels); c != 0 {
			return c
		}
		return strings.Compare(a.edge, b.edge)
	})
	for _, it := range all {
		if err := ctx.Err(); err != nil {
			return info, err
		}
		if err := emit(it.edge, it.s); err != nil {
			return info, err
		}
	}
	return info, nil
}

// edgeMatcher selects the series of the listed edges.
func edgeMatcher(edges []string) (*labels.Matcher, error) {
	if len(edges) == 0 {
		return nil, fmt.Errorf("%w: no edges listed", model.ErrBadQuery)
	}
	for _, e := range edges {
		if e == "" {
			return nil, fmt.Errorf("%w: empty edge id in the edge list", model.ErrBadQuery)
		}
	}
	if len(edges) == 1 {
		return labels.NewMatcher(labels.MatchEqual, EdgeLabel, edges[0])
	}
	quoted := make([]string, len(edges))
	for i, e := range edges {
		quoted[i] = regexp.QuoteMeta(e)
	}
	return labels.NewMatcher(labels.MatchRegexp, EdgeLabel, strings.Join(quoted, "|"))
}

// stripEdge returns ls without EdgeLabel (a new slice when it was there)
// and the label's value.
func stripEdge(ls labels.Labels) (labels.Labels, string) {
	for i, l := range ls {
		if l.Name == EdgeLabel {
			out := make(labels.Labels, 0, len(ls)-1)
			out = append(out, ls[:i]...)
			return append(out, ls[i+1:]...), l.Value
		}
	}
	return ls, ""
}
