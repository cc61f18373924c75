// Package selector parses and matches edge selectors: which edges of the
// fleet a rule group of the catalog is evaluated on, by the edges' labels
// (tributary node --edge-label).
//
// A selector is a list of PromQL label matchers separated by commas, with
// or without the braces of a PromQL selector and without a metric name:
//
//	site="berlin", model=~"pi4.*"
//	{site!="lab"}
//
// An edge matches when every matcher matches the value of its label of
// that name (the empty string for a label the edge does not have, as in
// PromQL: `site!="lab"` matches an edge without a site label). The empty
// selector matches every edge. The parser is the PromQL parser's, so
// regular expressions are fully anchored RE2.
//
// Selectors are values: safe for concurrent use once parsed.
package selector

import (
	"fmt"
	"strings"

	"github.com/prometheus/common/model"
	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tributarydb/tributary/node/labels"
)

// Selector is a parsed edge selector; the zero value matches every edge.
type Selector struct {
	matchers []*promlabels.Matcher
}

// Parse parses an edge selector (see the package documentation).
func Parse(s string) (Selector, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
		t = strings.TrimSpace(t[1 : len(t)-1])
	}
	if t == "" {
		return Selector{}, nil
	}
	ms, err := parser.ParseMetricSelector("{" + t + "}")
	if err != nil {
		return Selector{}, fmt.Errorf("edge selector %.128q: %w", s, err)
	}
	for _, m := range ms {
		if m.Name == model.MetricNameLabel {
			return Selector{}, fmt.Errorf("edge selector %.128q: edges have no metric name (%s)", s, m)
		}
	}
	return Selector{matchers: ms}, nil
}

// Matches reports whether an edge with labels ls is selected.
func (s Selector) Matches(ls labels.Labels) bool {
	for _, m := range s.matchers {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}

// String returns the selector in PromQL form, "{}" for every edge.
func (s Selector) String() string {
	parts := make([]string, len(s.matchers))
	for i, m := range s.matchers {
		parts[i] = m.String()
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
