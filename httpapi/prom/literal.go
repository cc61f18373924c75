package prom

import (
	"regexp/syntax"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/strutil"
)

// Regular-expression matchers that match one literal string.
//
// Grafana's and TSBS's queries select with regular expressions that match
// exactly one string: `hostname=~"host_3"`, `__name__=~"cpu_(usage_user)"`.
// The engine parses every query string anew, and its parser compiles each
// regular expression of a matcher (labels.NewFastRegexMatcher), which for
// a small query costs more than the rest of the parse. Before a query
// string goes to the engine, rewriteLiteralRegexps turns such matchers into
// the equality matchers that select the same series: `=~"host_3"` becomes
// `= "host_3"` and `!~"x"` becomes `!="x"`.
//
// The rewrite keeps every byte offset of the query: the operator keeps its
// two bytes (`=~` becomes `= `) and the new string is padded with spaces
// to the old one's length, so the position ranges in the engine's
// annotations and errors point at the same text of the original query,
// which is what the answer quotes. A matcher is rewritten only when its
// regular expression, anchored and with `.` matching a newline as the
// engine compiles it, is a literal without case folding: a concatenation
// of literal runes and groups of them (an empty expression is the empty
// string). Everything else is left as it is.
//
// Equality and a one-literal regular expression select the same series,
// so answers are the same, with two exceptions that the rewrite avoids:
// absent and absent_over_time build their answer's labels from the
// equality matchers of their selector, and info reads the matchers of its
// selector. A query naming any of these functions (or a label of that
// name) is not rewritten. If the rewritten query fails to parse, the
// original one is parsed instead, so that its error is the one returned.

// literalFuncs are the identifiers whose presence stops the rewrite.
var literalFuncs = map[string]bool{"absent": true, "absent_over_time": true, "info": true}

// literalCache remembers, per quoted regular expression token, the
// equality token that replaces it ("" when there is none). It is safe for
// concurrent use and bounded (cleared when full).
type literalCache struct {
	tokens memo[string]
	// queries maps a query string to its rewrite (itself when nothing is
	// rewritten): dashboards and benchmarks send the same strings again
	// and again, and lexing one costs more than a map lookup.
	queries memo[string]
}

const (
	maxCachedLiterals   = 1024
	maxCachedQueries    = 1024
	maxCachedQueryBytes = 2048
)

// replacement returns the double-quoted token, not longer than tok, of the
// one string that the regular expression in the string token tok
// matches, or "" when it matches more (or tok does not unquote).
func (c *literalCache) replacement(tok string) string {
	return c.tokens.get(tok, maxCachedLiterals, literalReplacement)
}

func literalReplacement(tok string) string {
	v, err := strutil.Unquote(tok)
	if err != nil {
		return ""
	}
	// As labels.NewFastRegexMatcher compiles it (the anchors add nothing
	// here: a literal matches only itself once anchored).
	re, err := syntax.Parse("(?s:"+v+")", syntax.Perl)
	if err != nil {
		return ""
	}
	var b strings.Builder
	if !appendLiteral(&b, re) {
		return ""
	}
	q := strconv.Quote(b.String())
	if len(q) > len(tok) {
		return ""
	}
	return q
}

// appendLiteral appends the one string re matches to b and reports
// whether re matches exactly one string.
func appendLiteral(b *strings.Builder, re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return false
		}
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
		return true
	case syntax.OpCapture:
		return appendLiteral(b, re.Sub[0])
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if !appendLiteral(b, s) {
				return false
			}
		}
		return true
	}
	return false
}

// rewriteLiteralRegexps returns qs with its one-literal regular-expression
// matchers turned into equality matchers (see above), or qs itself when
// there is nothing to rewrite or the query must not be rewritten.
func (c *literalCache) rewriteLiteralRegexps(qs string) string {
	if !strings.Contains(qs, "~") {
		return qs
	}
	return c.queries.get(qs, maxCachedQueries, c.rewrite)
}

// rewrite is rewriteLiteralRegexps without the cache of query strings.
func (c *literalCache) rewrite(qs string) string {
	var out []byte
	l := parser.Lex(qs)
	var prev, it parser.Item
	for {
		l.NextItem(&it)
		switch it.Typ {
		case parser.EOF:
			if out == nil {
				return qs
			}
			return string(out)
		case parser.ERROR:
			return qs
		case parser.COMMENT:
			continue
		case parser.IDENTIFIER, parser.METRIC_IDENTIFIER:
			if literalFuncs[it.Val] {
				return qs
			}
		case parser.STRING:
			if prev.Typ != parser.EQL_REGEX && prev.Typ != parser.NEQ_REGEX {
				break
			}
			r := c.replacement(it.Val)
			if r == "" {
				break
			}
			if out == nil {
				out = []byte(qs)
			}
			op, pos := byte(' '), int(prev.Pos)
			if prev.Typ == parser.NEQ_REGEX {
				op = '='
			}
			out[pos+1] = op
			s := out[int(it.Pos) : int(it.Pos)+len(it.Val)]
			n := copy(s, r)
			for i := n; i < len(s); i++ {
				s[i] = ' '
			}
		}
		prev = it
	}
}
