package aggregate

import (
	"math"
	"slices"
	"strings"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// GroupKey identifies the group of a series: its value of each label of
// by, in the order of by (a missing label is the empty value). Series
// with equal keys aggregate together; keys sort as their groups are
// answered.
func GroupKey(ls labels.Labels, by []string) string {
	var b strings.Builder
	for _, name := range by {
		b.WriteString(name)
		b.WriteByte(0)
		b.WriteString(ls.Get(name))
		b.WriteByte(0)
	}
	return b.String()
}

// GroupOptions say how Groups aggregates across series.
type GroupOptions struct {
	// By are the group-by label names (in any order, duplicates allowed);
	// none: all series form one group.
	By []string
	// Func folds the values of a group at one timestamp. REQUIRED (not
	// rollup.FuncNone).
	Func rollup.Func
	// SkipNaN leaves NaN values out of the fold; a cell that receives
	// nothing else is NaN in the answer.
	SkipNaN bool
	// Dist, when set, folds with a distribution function instead of Func:
	// every value of a cell is kept until Result.
	Dist *Dist
}

// Groups aggregates series across: the values the series of one group
// (GroupKey) have at one timestamp fold into one value, and every
// (group, timestamp) with a value, even a skipped NaN, is a cell of the
// answer. Timestamps are not aligned or interpolated: series aggregate
// where their timestamps (bucket starts, when downsampled) coincide.
type Groups struct {
	o      GroupOptions
	groups map[string]*group
	cells  int
}

type group struct {
	lset labels.Labels
	byT  map[int64]*rollup.Agg
	vals map[int64][]float64 // with GroupOptions.Dist: the values of each cell
}

// NewGroups returns an empty Groups.
func NewGroups(o GroupOptions) *Groups {
	o.By = slices.Compact(slices.Sorted(slices.Values(o.By)))
	return &Groups{o: o, groups: map[string]*group{}}
}

// Key is the group key of ls (GroupKey over the sorted group-by names).
func (g *Groups) Key(ls labels.Labels) string { return GroupKey(ls, g.o.By) }

// Add folds one series' samples into its group and returns how many new
// (group, timestamp) cells that made. Series are folded in the order they
// are added, so first and last across series depend on it: backends add
// them in label order.
func (g *Groups) Add(ls labels.Labels, ts []int64, vs []float64) (added int) {
	key := g.Key(ls)
	gr := g.groups[key]
	if gr == nil {
		var pairs []labels.Label
		for _, name := range g.o.By {
			if v := ls.Get(name); v != "" {
				pairs = append(pairs, labels.Label{Name: name, Value: v})
			}
		}
		// By is sorted and unique, so pairs are a label set.
		gr = &group{lset: labels.Labels(pairs), byT: map[int64]*rollup.Agg{}, vals: map[int64][]float64{}}
		g.groups[key] = gr
	}
	for i, t := range ts {
		a := gr.byT[t]
		if a == nil {
			a = &rollup.Agg{}
			gr.byT[t] = a
			added++
		}
		if g.o.SkipNaN && math.IsNaN(vs[i]) {
			continue
		}
		a.Add(t, vs[i])
		if g.o.Dist != nil {
			gr.vals[t] = append(gr.vals[t], vs[i])
		}
	}
	g.cells += added
	return added
}

// Cells is the number of (group, timestamp) cells held.
func (g *Groups) Cells() int { return g.cells }

// Group is one group of an answer.
type Group struct {
	Key string
	// Labels are the group-by labels of the group's series (those with a
	// value).
	Labels labels.Labels
	Ts     []int64 // sorted
	Vs     []float64
}

// Result returns the groups sorted by key.
func (g *Groups) Result() []Group {
	keys := make([]string, 0, len(g.groups))
	for k := range g.groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]Group, 0, len(keys))
	for _, k := range keys {
		gr := g.groups[k]
		res := Group{Key: k, Labels: gr.lset, Ts: make([]int64, 0, len(gr.byT)), Vs: make([]float64, 0, len(gr.byT))}
		for t := range gr.byT {
			res.Ts = append(res.Ts, t)
		}
		slices.Sort(res.Ts)
		for _, t := range res.Ts {
			v := math.NaN()
			if a := gr.byT[t]; a.Count > 0 {
				if g.o.Dist != nil {
					v = g.o.Dist.Value(gr.vals[t])
				} else {
					v = a.Value(g.o.Func)
				}
			}
			res.Vs = append(res.Vs, v)
		}
		out = append(out, res)
	}
	return out
}
