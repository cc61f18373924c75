package prom

import (
	"fmt"
	"slices"
	"strings"

	pmodel "github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// Aggregations grouped by __name__.
//
// With delayed name removal (Prometheus 3's engine option, on unless
// Options.DisableDelayedNameRemoval), a function such as max_over_time
// marks its result to lose __name__ at the end of evaluation instead of at
// once, so `max by (__name__) (max_over_time({__name__=~"a|b"}[1h]))`
// computes one group per metric. The engine still removes the name from
// each group's result at the end, and two groups then collide: "vector
// cannot contain metrics with the same labelset". Prometheus itself
// answers that error (its own tests call it an accidental side effect).
//
// When, and only when, a query fails that way, it is evaluated once more
// with every aggregation grouped by __name__ wrapped in
// label_replace(agg, "__name__", "$1", "__name__", "(.+)"), which tells the
// engine to keep the name the query grouped by. Every query Prometheus
// answers is answered exactly as Prometheus answers it; the queries it
// refuses this way are answered one series per metric, with an info note.

// sameLabelsetError is the engine's message for colliding results.
const sameLabelsetError = "same labelset"

// errKeptName is the info note added to an answer evaluated with
// keepGroupedNames.
var errKeptName = fmt.Errorf("%w: __name__ kept in the result of an aggregation by __name__ (Prometheus would refuse this query: vector cannot contain metrics with the same labelset)", annotations.PromQLInfo)

// keepGroupedNames returns qs with every aggregation grouped by __name__
// wrapped so that its result keeps the name, and whether there was one.
func keepGroupedNames(qs string) (string, bool) {
	expr, err := parser.ParseExpr(qs)
	if err != nil {
		return "", false
	}
	out, changed := keepNames(expr)
	if !changed {
		return "", false
	}
	return out.String(), true
}

// keptNameCache remembers keepGroupedNames by query string: a dashboard
// whose query the engine refuses sends it again and again, and each
// rewrite parses and prints the query. It is safe for concurrent use and
// bounded (cleared when full); long queries are not kept.
type keptNameCache struct {
	kept memo[keptName]
}

type keptName struct {
	qs string
	ok bool
}

// keepGroupedNames is the package function keepGroupedNames, cached.
func (c *keptNameCache) keepGroupedNames(qs string) (string, bool) {
	k := c.kept.get(qs, maxCachedQueries, func(qs string) keptName {
		var k keptName
		k.qs, k.ok = keepGroupedNames(qs)
		return k
	})
	return k.qs, k.ok
}

// keepNames rewrites e bottom-up (see keepGroupedNames).
func keepNames(e parser.Expr) (parser.Expr, bool) {
	changed := false
	sub := func(x parser.Expr) parser.Expr {
		if x == nil {
			return nil
		}
		y, c := keepNames(x)
		changed = changed || c
		return y
	}
	switch n := e.(type) {
	case *parser.AggregateExpr:
		n.Expr, n.Param = sub(n.Expr), sub(n.Param)
		if !n.Without && slices.Contains(n.Grouping, pmodel.MetricNameLabel) {
			return labelReplaceName(n), true
		}
	case *parser.BinaryExpr:
		n.LHS, n.RHS = sub(n.LHS), sub(n.RHS)
	case *parser.Call:
		for i := range n.Args {
			n.Args[i] = sub(n.Args[i])
		}
	case *parser.ParenExpr:
		n.Expr = sub(n.Expr)
	case *parser.SubqueryExpr:
		n.Expr = sub(n.Expr)
	case *parser.UnaryExpr:
		n.Expr = sub(n.Expr)
	}
	return e, changed
}

// labelReplaceName is label_replace(e, "__name__", "$1", "__name__", "(.+)").
func labelReplaceName(e parser.Expr) parser.Expr {
	str := func(s string) parser.Expr { return &parser.StringLiteral{Val: s} }
	return &parser.Call{
		Func: parser.Functions["label_replace"],
		Args: parser.Expressions{e, str(pmodel.MetricNameLabel), str("$1"), str(pmodel.MetricNameLabel), str("(.+)")},
	}
}

// isSameLabelset reports whether err is the engine's collision error.
func isSameLabelset(err error) bool {
	return err != nil && strings.Contains(err.Error(), sameLabelsetError)
}
