package influxql

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/influxdata/influxql"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

// plan is a SELECT statement checked and reduced to what evaluating it
// needs.
type plan struct {
	stmt    *influxql.SelectStatement // fields rewritten (wildcards expanded, types set)
	db      string
	columns []string
	// calls are the function calls of the fields, in order of appearance.
	calls     []*influxql.Call
	aggregate bool
	// fields are the fields to read: selected (shown) or only named by
	// the condition.
	fields   []string
	selected map[string]bool
	cond     *condition
	matchers []*labels.Matcher // tag matchers implied by the condition
	// start and end bound the points read, in ns, both inclusive;
	// openStart and openEnd say the statement has no lower, no upper
	// bound.
	start, end         int64
	openStart, openEnd bool
	interval, offset   int64 // GROUP BY time(interval, offset), ns; 0: none
	dims               []string
	desc               bool
	// selectorTime: the answer's time is the time of the point the one
	// selector of the statement selected.
	selectorTime bool
	// isTag says whether an identifier is a tag.
	isTag func(*influxql.VarRef) bool
}

// bounds is a time range a subquery inherits from its outer query.
type bounds struct {
	start, end int64
	set        bool
}

// newPlan checks s (already rewritten) and derives its plan.
func (ex *executor) newPlan(s *influxql.SelectStatement, db string, outer bounds, isTag func(*influxql.VarRef) bool) (*plan, error) {
	p := &plan{stmt: s, db: db, isTag: isTag, selected: map[string]bool{}}
	if err := p.checkFields(); err != nil {
		return nil, err
	}
	p.columns = s.ColumnNames()
	if err := p.groupBy(); err != nil {
		return nil, err
	}
	if err := p.where(ex.now, outer); err != nil {
		return nil, err
	}
	p.desc = !s.TimeAscending()
	if len(p.calls) == 1 && p.interval == 0 && selectorFuncs[p.calls[0].Name] {
		_, bare := s.Fields[0].Expr.(*influxql.Call)
		p.selectorTime = bare && len(s.Fields) == 1
	}
	return p, nil
}

// checkFields finds the calls and fields of the selected expressions and
// refuses what is not supported.
func (p *plan) checkFields() error {
	var raw bool
	seen := map[string]bool{}
	var err error
	addField := func(name string) {
		name = influx.FieldName(name)
		p.selected[name] = true
		if !seen[name] {
			seen[name] = true
			p.fields = append(p.fields, name)
		}
	}
	for _, f := range p.stmt.Fields {
		influxql.WalkFunc(f.Expr, func(n influxql.Node) {
			if err != nil {
				return
			}
			switch n := n.(type) {
			case *influxql.Call:
				err = p.checkCall(n, addField)
			case *influxql.VarRef:
				raw = raw || !p.insideCall(f.Expr, n)
				if n.Type != influxql.Tag && !p.insideCall(f.Expr, n) {
					addField(n.Val)
				}
			case *influxql.Distinct:
				err = errors.New("distinct is not supported by Tributary's InfluxQL API")
			case *influxql.Wildcard, *influxql.RegexLiteral:
				err = fmt.Errorf("cannot use %s here", n)
			}
		})
		if err != nil {
			return err
		}
	}
	switch {
	case raw && p.aggregate:
		return errors.New("mixing aggregate and non-aggregate queries is not supported")
	case len(p.fields) == 0:
		return errors.New("statement must have at least one field in select clause")
	}
	return nil
}

// insideCall reports whether ref is an argument of a call in e.
func (p *plan) insideCall(e influxql.Expr, ref *influxql.VarRef) bool {
	inside := false
	influxql.WalkFunc(e, func(n influxql.Node) {
		if c, ok := n.(*influxql.Call); ok {
			for _, a := range c.Args {
				if a == influxql.Expr(ref) {
					inside = true
				}
			}
		}
	})
	return inside
}

// checkCall checks one function call: a supported function of one field
// (percentile with a number as well).
func (p *plan) checkCall(c *influxql.Call, addField func(string)) error {
	if !aggregateFuncs[c.Name] {
		return fmt.Errorf("function %s() is not supported by Tributary's InfluxQL API (supported: count, sum, mean, median, min, max, first, last, spread, stddev, percentile)", c.Name)
	}
	want := 1
	if c.Name == "percentile" {
		want = 2
	}
	if len(c.Args) != want {
		return fmt.Errorf("invalid number of arguments for %s, expected %d, got %d", c.Name, want, len(c.Args))
	}
	ref, ok := c.Args[0].(*influxql.VarRef)
	if !ok {
		return fmt.Errorf("expected field argument in %s()", c.Name)
	}
	if ref.Type == influxql.Tag {
		return fmt.Errorf("%s() cannot be applied to tag %q", c.Name, ref.Val)
	}
	if want == 2 {
		switch c.Args[1].(type) {
		case *influxql.IntegerLiteral, *influxql.NumberLiteral:
		default:
			return fmt.Errorf("expected float argument in percentile()")
		}
	}
	addField(ref.Val)
	p.calls = append(p.calls, c)
	p.aggregate = true
	return nil
}

// groupBy reads GROUP BY: time(interval[, offset]) and tags.
func (p *plan) groupBy() error {
	s := p.stmt
	iv, err := s.GroupByInterval()
	if err != nil {
		return err
	}
	off, err := s.GroupByOffset()
	if err != nil {
		return err
	}
	if iv > 0 && !p.aggregate {
		return errors.New("GROUP BY requires at least one aggregate function")
	}
	p.interval, p.offset = int64(iv), int64(off)
	if p.interval < 0 {
		return fmt.Errorf("GROUP BY time interval must be positive, not %s", iv)
	}
	for _, d := range s.Dimensions {
		switch e := d.Expr.(type) {
		case *influxql.Call:
			if e.Name != "time" {
				return fmt.Errorf("only time() calls allowed in dimensions, not %s", e)
			}
		case *influxql.VarRef:
			if !strings.EqualFold(e.Val, "time") {
				p.dims = append(p.dims, e.Val)
			}
		default:
			return fmt.Errorf("only time and tag dimensions allowed, not %s", e)
		}
	}
	sort.Strings(p.dims)
	if p.stmt.Location != nil && p.stmt.Location != time.UTC {
		return fmt.Errorf("tz(%q) is not supported: Tributary answers in UTC", p.stmt.Location)
	}
	return nil
}

// where splits the condition into the time range, the tag matchers and
// the rest.
func (p *plan) where(now time.Time, outer bounds) error {
	expr, tr, err := influxql.ConditionExpr(p.stmt.Condition, &influxql.NowValuer{Now: now})
	if err != nil {
		return err
	}
	if p.cond, err = newCondition(expr, p.isTag); err != nil {
		return err
	}
	if p.matchers, err = matchersOf(expr, p.isTag); err != nil {
		return fmt.Errorf("invalid condition %s: %v", expr, err)
	}
	for _, f := range p.condFields() {
		if !p.selected[f] && !contains(p.fields, f) {
			p.fields = append(p.fields, f)
		}
	}
	p.start, p.end = tr.MinTimeNano(), tr.MaxTimeNano()
	p.openStart, p.openEnd = tr.Min.IsZero(), tr.Max.IsZero()
	if tr.Max.IsZero() && p.interval > 0 {
		p.end = now.UnixNano() // as InfluxDB: GROUP BY time() ends now
	}
	if outer.set {
		p.start, p.end = max(p.start, outer.start), min(p.end, outer.end)
		p.openStart = p.openStart && outer.start == influxql.MinTime
		p.openEnd = p.openEnd && outer.end == influxql.MaxTime
	}
	if p.interval > 0 && p.openStart {
		return errors.New("GROUP BY time() needs a lower time bound in WHERE (e.g. time > now() - 1h)")
	}
	return nil
}

// condFields lists the fields the condition names.
func (p *plan) condFields() []string {
	if p.cond == nil || !p.cond.onFields {
		return nil
	}
	var out []string
	influxql.WalkFunc(p.cond.expr, func(n influxql.Node) {
		if r, ok := n.(*influxql.VarRef); ok && !p.isTag(r) {
			out = append(out, influx.FieldName(r.Val))
		}
	})
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// pushdown reports whether the plan's aggregates can be computed by the
// backend per series and bucket and merged here exactly: functions
// count, sum, mean, min, max and spread, no condition on fields, no
// selector time, and buckets whole milliseconds.
func (p *plan) pushdown() bool {
	if !p.aggregate || p.selectorTime || (p.cond != nil && p.cond.onFields) {
		return false
	}
	for _, c := range p.calls {
		if pushdownNeeds[c.Name] == nil {
			return false
		}
	}
	const ms = int64(time.Millisecond)
	return p.interval%ms == 0 && p.offset%ms == 0
}

// lastPoint reports whether the plan is a raw query for the newest row
// of each series (ORDER BY time DESC LIMIT 1), which the backend answers
// from each series' last point: the newest row of a group is at the
// largest last-point time of its series' fields, and holds the fields
// whose last point is at that time.
func (p *plan) lastPoint() bool {
	return !p.aggregate && p.desc && p.stmt.Limit == 1 && p.stmt.Offset == 0 && (p.cond == nil || !p.cond.onFields)
}

// labelName is the label a tag reference reads.
func labelName(ref string) string { return influx.LabelName(ref) }
