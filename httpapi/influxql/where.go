package influxql

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/influxdata/influxql"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

// A condition is split in two: matchers the backend selects series with
// (exact, from the top-level AND of the condition), and the whole
// condition, evaluated again here on each series' tags (or, when it
// names a field, on each row). So a condition the matchers cannot say
// exactly (OR across tags, comparisons of numbers) is still answered
// exactly, only with more series read.

// matchersOf returns the matchers implied by cond: one per top-level
// conjunct that compares a tag with a string or a regular expression,
// or that ORs equalities of one tag. isTag says which identifiers are
// tags.
func matchersOf(cond influxql.Expr, isTag func(*influxql.VarRef) bool) ([]*labels.Matcher, error) {
	var out []*labels.Matcher
	var walk func(e influxql.Expr) error
	walk = func(e influxql.Expr) error {
		switch e := e.(type) {
		case *influxql.ParenExpr:
			return walk(e.Expr)
		case *influxql.BinaryExpr:
			if e.Op == influxql.AND {
				if err := walk(e.LHS); err != nil {
					return err
				}
				return walk(e.RHS)
			}
			m, err := matcherOf(e, isTag)
			if m != nil {
				out = append(out, m)
			}
			return err
		}
		return nil
	}
	if cond == nil {
		return nil, nil
	}
	return out, walk(cond)
}

// matcherOf converts one comparison (or an OR of equalities on one tag)
// into a matcher, or returns nil when it cannot do so exactly.
func matcherOf(e *influxql.BinaryExpr, isTag func(*influxql.VarRef) bool) (*labels.Matcher, error) {
	if e.Op == influxql.OR {
		key, vals, ok := equalities(e, isTag)
		if !ok {
			return nil, nil
		}
		alts := make([]string, len(vals))
		for i, v := range vals {
			alts[i] = regexp.QuoteMeta(v)
		}
		return labels.NewMatcher(labels.MatchRegexp, influx.LabelName(key), strings.Join(alts, "|"))
	}
	ref, ok := e.LHS.(*influxql.VarRef)
	if !ok || !isTag(ref) {
		return nil, nil
	}
	name := influx.LabelName(ref.Val)
	switch rhs := e.RHS.(type) {
	case *influxql.StringLiteral:
		switch e.Op {
		case influxql.EQ:
			return labels.NewMatcher(labels.MatchEqual, name, rhs.Val)
		case influxql.NEQ:
			return labels.NewMatcher(labels.MatchNotEqual, name, rhs.Val)
		}
	case *influxql.RegexLiteral:
		// InfluxQL regular expressions match anywhere in the value;
		// matchers are anchored at both ends.
		re := ".*(?:" + rhs.Val.String() + ").*"
		switch e.Op {
		case influxql.EQREGEX:
			return labels.NewMatcher(labels.MatchRegexp, name, re)
		case influxql.NEQREGEX:
			return labels.NewMatcher(labels.MatchNotRegexp, name, re)
		}
	}
	return nil, nil
}

// equalities reports whether e is an OR of tag = 'string' comparisons on
// one tag, and returns the tag and the strings.
func equalities(e influxql.Expr, isTag func(*influxql.VarRef) bool) (string, []string, bool) {
	switch e := e.(type) {
	case *influxql.ParenExpr:
		return equalities(e.Expr, isTag)
	case *influxql.BinaryExpr:
		if e.Op == influxql.OR {
			k1, v1, ok1 := equalities(e.LHS, isTag)
			k2, v2, ok2 := equalities(e.RHS, isTag)
			if !ok1 || !ok2 || k1 != k2 {
				return "", nil, false
			}
			return k1, append(v1, v2...), true
		}
		ref, ok := e.LHS.(*influxql.VarRef)
		s, ok2 := e.RHS.(*influxql.StringLiteral)
		if e.Op == influxql.EQ && ok && ok2 && isTag(ref) {
			return ref.Val, []string{s.Val}, true
		}
	}
	return "", nil, false
}

// condition is a WHERE clause without its time range, compiled for
// evaluation on a series' tags and, when it names fields, on rows.
type condition struct {
	expr     influxql.Expr
	tagRefs  []string // identifiers evaluated as tags
	onFields bool     // names a field: evaluated per row
}

func newCondition(expr influxql.Expr, isTag func(*influxql.VarRef) bool) (*condition, error) {
	if expr == nil {
		return nil, nil
	}
	c := &condition{expr: expr}
	var err error
	influxql.WalkFunc(expr, func(n influxql.Node) {
		switch n := n.(type) {
		case *influxql.VarRef:
			if strings.EqualFold(n.Val, "time") {
				err = fmt.Errorf("invalid time condition %s: time can only be compared with AND to a time literal, now() or a duration", expr)
				return
			}
			if isTag(n) {
				c.tagRefs = append(c.tagRefs, n.Val)
			} else {
				c.onFields = true
			}
		case *influxql.Call:
			err = fmt.Errorf("invalid condition %s: functions are not allowed in WHERE", expr)
		}
	})
	return c, err
}

// values returns the evaluation map of a series' tags; a tag the series
// does not have is the empty string, as in InfluxDB.
func (c *condition) values(tags labels.Labels, m map[string]any) map[string]any {
	if m == nil {
		m = make(map[string]any, len(c.tagRefs))
	}
	for _, k := range c.tagRefs {
		m[k] = tags.Get(influx.LabelName(k))
	}
	return m
}

// matchSeries reports whether a series with tags passes a condition that
// names no field.
func (c *condition) matchSeries(tags labels.Labels) bool {
	if c == nil || c.onFields {
		return true
	}
	return influxql.EvalBool(c.expr, c.values(tags, nil))
}
