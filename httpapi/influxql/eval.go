package influxql

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/influxdata/influxql"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/model/aggregate"
)

// outSeries is one series of a SELECT answer before rendering.
type outSeries struct {
	name string
	tags map[string]string // the GROUP BY tags; nil without
	key  string            // for ordering
	rows [][]any           // [0] is the time in ns (int64)
}

// group is the input series that make one output series.
type group struct {
	tags   map[string]string
	key    string
	series []*inSeries
}

// groupSeries groups the series of one measurement by the plan's
// dimensions, in the order of their tag values.
func (p *plan) groupSeries(list []*inSeries) []*group {
	byKey := map[string]*group{}
	var out []*group
	for _, in := range list {
		var tags map[string]string
		var kb strings.Builder
		if len(p.dims) > 0 {
			tags = make(map[string]string, len(p.dims))
			for _, d := range p.dims {
				v := in.tags.Get(labelName(d))
				tags[d] = v
				kb.WriteString(v)
				kb.WriteByte(0)
			}
		}
		k := kb.String()
		g := byKey[k]
		if g == nil {
			g = &group{tags: tags, key: k}
			byKey[k] = g
			out = append(out, g)
		}
		g.series = append(g.series, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// evaluate computes the answer of the plan for the series of one
// measurement.
// partials says the series hold partial aggregates (fetchPartials).
func (ex *executor) evaluate(p *plan, name string, list []*inSeries, partials bool) ([]*outSeries, error) {
	var out []*outSeries
	for _, g := range p.groupSeries(list) {
		var rows [][]any
		var err error
		if p.aggregate {
			rows, err = ex.aggregateRows(p, g, partials)
		} else {
			rows, err = ex.rawRows(p, g)
		}
		if err != nil {
			return nil, err
		}
		if p.desc {
			for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
				rows[i], rows[j] = rows[j], rows[i]
			}
		}
		rows = page(rows, p.stmt.Offset, p.stmt.Limit)
		if len(rows) == 0 {
			continue
		}
		out = append(out, &outSeries{name: name, tags: g.tags, key: g.key, rows: rows})
	}
	return out, nil
}

// rowValues is the values of one row of one series: its tags and the
// fields that have a point at the row's time.
type rowValues struct {
	p      *plan
	in     *inSeries
	fields map[string]any
}

// Value implements influxql.Valuer for conditions and field expressions.
func (r *rowValues) Value(key string) (any, bool) {
	if v, ok := r.fields[influx.FieldName(key)]; ok {
		return v, true
	}
	// A tag the series does not have compares as the empty string.
	return r.in.tags.Get(labelName(key)), true
}

// column returns the value a selected identifier shows in a row: a
// field's value or a tag's, nil when the row has none.
func (r *rowValues) column(ref *influxql.VarRef) any {
	if ref.Type == influxql.Tag {
		if v := r.in.tags.Get(labelName(ref.Val)); v != "" {
			return v
		}
		return nil
	}
	return r.fields[influx.FieldName(ref.Val)]
}

// seriesRows walks the rows of one series: every time at which one of
// the fields read has a point, in time order.
func (p *plan) seriesRows(in *inSeries, fn func(t int64, vals map[string]any) error) error {
	idx := make(map[string]int, len(in.cols))
	for {
		t := int64(math.MaxInt64)
		found := false
		for f, c := range in.cols {
			if i := idx[f]; i < len(c.ts) && c.ts[i] <= t {
				t, found = c.ts[i], true
			}
		}
		if !found {
			return nil
		}
		vals := make(map[string]any, len(in.cols))
		for f, c := range in.cols {
			if i := idx[f]; i < len(c.ts) && c.ts[i] == t {
				vals[f] = c.vs[i]
				idx[f] = i + 1
			}
		}
		if err := fn(t, vals); err != nil {
			return err
		}
	}
}

// rawRows answers a query without functions: one row per series and
// time at which a selected field has a point, rows of the group merged
// in time order.
func (ex *executor) rawRows(p *plan, g *group) ([][]any, error) {
	var rows [][]any
	for _, in := range g.series {
		err := p.seriesRows(in, func(t int64, vals map[string]any) error {
			rv := &rowValues{p: p, in: in, fields: vals}
			if p.cond != nil && p.cond.onFields && !evalBool(p.cond.expr, rv) {
				return nil
			}
			shown := false
			for f := range vals {
				shown = shown || p.selected[f]
			}
			if !shown {
				return nil
			}
			if err := ex.account(len(p.stmt.Fields)); err != nil {
				return err
			}
			row := make([]any, 1, 1+len(p.stmt.Fields))
			row[0] = t
			for _, f := range p.stmt.Fields {
				row = append(row, cell(evalExpr(f.Expr, rv, nil)))
			}
			rows = append(rows, row)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i][0].(int64) < rows[j][0].(int64) })
	return rows, nil
}

// evalBool evaluates a condition on a row.
func evalBool(e influxql.Expr, v influxql.Valuer) bool {
	ev := influxql.ValuerEval{Valuer: v}
	return ev.EvalBool(e)
}

// cell normalises a computed value for the answer.
func cell(v any) any {
	switch x := v.(type) {
	case float64, string, bool, nil:
		return x
	case int64:
		return float64(x)
	}
	return nil
}

// evalExpr evaluates a field expression on a row: identifiers from the
// row, calls from calls (nil outside aggregates), arithmetic on numbers;
// any missing operand makes the result nil.
func evalExpr(e influxql.Expr, rv *rowValues, calls map[*influxql.Call]any) any {
	switch e := e.(type) {
	case *influxql.Call:
		return calls[e]
	case *influxql.VarRef:
		if rv == nil {
			return nil
		}
		return rv.column(e)
	case *influxql.ParenExpr:
		return evalExpr(e.Expr, rv, calls)
	case *influxql.NumberLiteral:
		return e.Val
	case *influxql.IntegerLiteral:
		return float64(e.Val)
	case *influxql.StringLiteral:
		return e.Val
	case *influxql.BinaryExpr:
		l, lok := evalExpr(e.LHS, rv, calls).(float64)
		r, rok := evalExpr(e.RHS, rv, calls).(float64)
		if !lok || !rok {
			return nil
		}
		return arith(e.Op, l, r)
	}
	return nil
}

// arith applies an arithmetic operator; division by zero is 0, as in
// InfluxDB.
func arith(op influxql.Token, l, r float64) any {
	switch op {
	case influxql.ADD:
		return l + r
	case influxql.SUB:
		return l - r
	case influxql.MUL:
		return l * r
	case influxql.DIV:
		if r == 0 {
			return float64(0)
		}
		return l / r
	case influxql.MOD:
		return math.Mod(l, r)
	}
	return nil
}

// bucketOf returns the bucket of time t.
func (p *plan) bucketOf(t int64) int64 {
	if p.interval == 0 {
		return 0
	}
	return aggregate.BucketStart(t, p.interval, p.offset)
}

// callResult is a function's value in one bucket.
type callResult struct {
	v  float64
	t  int64 // time of the selected point
	ok bool
}

// aggregateRows answers a query with functions for one group.
func (ex *executor) aggregateRows(p *plan, g *group, partials bool) ([][]any, error) {
	results := make([]map[int64]callResult, len(p.calls))
	buckets := map[int64]bool{}
	for i, c := range p.calls {
		var err error
		if partials {
			results[i] = p.mergePartials(c, g)
		} else if results[i], err = ex.reduceRaw(p, c, g); err != nil {
			return nil, err
		}
		for b := range results[i] {
			buckets[b] = true
		}
	}
	if len(buckets) == 0 {
		return nil, nil
	}
	grid, err := ex.bucketGrid(p, buckets)
	if err != nil {
		return nil, err
	}
	filled := make([][]any, len(p.calls))
	for i, c := range p.calls {
		filled[i] = p.fill(c, grid, results[i])
	}
	rows := make([][]any, 0, len(grid))
	for k, b := range grid {
		vals := make(map[*influxql.Call]any, len(p.calls))
		anyValue := false
		for i, c := range p.calls {
			vals[c] = filled[i][k]
			anyValue = anyValue || results[i][b].ok
		}
		if !anyValue && (p.stmt.Fill == influxql.NoFill || p.interval == 0) {
			continue
		}
		row := make([]any, 1, 1+len(p.stmt.Fields))
		row[0] = p.rowTime(b, results)
		for _, f := range p.stmt.Fields {
			row = append(row, cell(evalExpr(f.Expr, nil, vals)))
		}
		rows = append(rows, row)
	}
	return rows, ex.account(len(rows) * len(p.stmt.Fields))
}

// rowTime is the time of an aggregate row: the bucket start, the start
// of the range without GROUP BY time() (0 when it is open), or the time
// of the selected point.
func (p *plan) rowTime(b int64, results []map[int64]callResult) int64 {
	switch {
	case p.selectorTime:
		return results[0][b].t
	case p.interval > 0:
		return b
	case p.openStart:
		return 0
	}
	return p.start
}

// bucketGrid lists the buckets of the rows: every bucket of the range
// when empty buckets are filled, else those holding a point.
func (ex *executor) bucketGrid(p *plan, present map[int64]bool) ([]int64, error) {
	if p.interval == 0 || p.stmt.Fill == influxql.NoFill {
		out := make([]int64, 0, len(present))
		for b := range present {
			out = append(out, b)
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out, nil
	}
	first, last := p.bucketOf(p.start), p.bucketOf(p.end)
	n := (last-first)/p.interval + 1
	if n > model.MaxBuckets {
		return nil, fmt.Errorf("max-select-buckets limit exceeded: (%d/%d); use a larger GROUP BY time() interval or a shorter range", n, model.MaxBuckets)
	}
	if err := ex.account(int(n)); err != nil {
		return nil, err
	}
	out := make([]int64, 0, n)
	for b := first; b <= last; b += p.interval {
		out = append(out, b)
	}
	return out, nil
}

// mergePartials merges the partial aggregates of the group's series per
// bucket and computes c from them.
func (p *plan) mergePartials(c *influxql.Call, g *group) map[int64]callResult {
	field := influx.FieldName(c.Args[0].(*influxql.VarRef).Val)
	merged := map[int64]*partial{}
	for _, in := range g.series {
		col := in.cols[field]
		if col == nil {
			continue
		}
		for i, t := range col.ts {
			b := p.bucketOf(t)
			m := merged[b]
			if m == nil {
				m = &partial{}
				merged[b] = m
			}
			m.merge(&col.parts[i])
		}
	}
	out := make(map[int64]callResult, len(merged))
	for b, m := range merged {
		if v, ok := m.value(c.Name); ok {
			out[b] = callResult{v: v, ok: true}
		}
	}
	return out
}

// reduceRaw computes c per bucket from the raw points of the group's
// series (those of rows passing a condition on fields).
func (ex *executor) reduceRaw(p *plan, c *influxql.Call, g *group) (map[int64]callResult, error) {
	field := influx.FieldName(c.Args[0].(*influxql.VarRef).Val)
	var pts []tpoint
	for _, in := range g.series {
		if p.cond != nil && p.cond.onFields {
			err := p.seriesRows(in, func(t int64, vals map[string]any) error {
				v, ok := vals[field].(float64)
				if ok && evalBool(p.cond.expr, &rowValues{p: p, in: in, fields: vals}) {
					pts = append(pts, tpoint{t, v})
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			continue
		}
		if col := in.cols[field]; col != nil {
			for i, t := range col.ts {
				pts = append(pts, tpoint{t, col.vs[i]})
			}
		}
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].t < pts[j].t })
	var arg float64
	if len(c.Args) == 2 {
		switch a := c.Args[1].(type) {
		case *influxql.IntegerLiteral:
			arg = float64(a.Val)
		case *influxql.NumberLiteral:
			arg = a.Val
		}
	}
	out := map[int64]callResult{}
	for lo := 0; lo < len(pts); {
		b := p.bucketOf(pts[lo].t)
		hi := lo + 1
		for hi < len(pts) && p.bucketOf(pts[hi].t) == b {
			hi++
		}
		if v, t, ok := reduce(c.Name, arg, pts[lo:hi]); ok {
			out[b] = callResult{v: v, t: t, ok: true}
		}
		lo = hi
	}
	return out, nil
}

// fill returns the values of c over grid with empty buckets filled as
// the statement says (count fills null with 0, as InfluxDB does).
func (p *plan) fill(c *influxql.Call, grid []int64, res map[int64]callResult) []any {
	out := make([]any, len(grid))
	mode := p.stmt.Fill
	fillValue := p.stmt.FillValue
	if mode == influxql.NullFill && c.Name == "count" && p.interval > 0 {
		mode, fillValue = influxql.NumberFill, float64(0)
	}
	for i, b := range grid {
		if r := res[b]; r.ok {
			out[i] = r.v
			continue
		}
		if p.interval == 0 {
			continue
		}
		switch mode {
		case influxql.NumberFill:
			out[i] = toFloat(fillValue)
		case influxql.PreviousFill:
			if i > 0 {
				out[i] = out[i-1]
			}
		}
	}
	if mode == influxql.LinearFill {
		linearFill(grid, out, res)
	}
	return out
}

func toFloat(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case float64:
		return x
	case uint64:
		return float64(x)
	}
	return nil
}

// linearFill interpolates each empty bucket between the nearest buckets
// before and after it that hold a value.
func linearFill(grid []int64, out []any, res map[int64]callResult) {
	prev := -1
	for i := range grid {
		if !res[grid[i]].ok {
			continue
		}
		if prev >= 0 && i-prev > 1 {
			x1, y1 := float64(grid[prev]), out[prev].(float64)
			x2, y2 := float64(grid[i]), out[i].(float64)
			for k := prev + 1; k < i; k++ {
				out[k] = y1 + (y2-y1)*(float64(grid[k])-x1)/(x2-x1)
			}
		}
		prev = i
	}
}
