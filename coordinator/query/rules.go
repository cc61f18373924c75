package query

import (
	"context"
	"fmt"
	"slices"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/model"
)

// RuleGroupSource is a Source that lists the rule groups its edge
// evaluates (an *EdgeClient). A Source that is not one (an edge node in
// this process, such as a coordinator's rules edge) evaluates none of its
// own.
type RuleGroupSource interface {
	RuleGroups(ctx context.Context, f model.RuleFilter) ([]model.RuleGroup, error)
}

var (
	_ RuleGroupSource    = (*EdgeClient)(nil)
	_ backend.RuleLister = (*Frontend)(nil)
)

// CoordinatorRulesEdge is the edge id of the rules edge of the
// coordinator coordID: the edge node in the coordinator's process that
// its --rules write into. Its rules are the coordinator's own, which the
// coordinator lists itself; EdgeRuleGroups does not ask it.
func CoordinatorRulesEdge(coordID string) string { return coordID + "-rules" }

// EdgeRuleGroups asks edges (every edge of the catalog when empty, but
// for revoked edges and the coordinators' rules edges) for their rule
// groups under f, at most MaxParallelEdges at once and each within
// EdgeTimeout, and returns the answers sorted by edge. The edges that
// cannot be asked, fail, or are not in the catalog are named in one
// warning each (ctx's, backend.Warn): their rule groups are missing.
func (f *Frontend) EdgeRuleGroups(ctx context.Context, edges []string, rf model.RuleFilter) ([]model.EdgeRuleGroups, error) {
	if err := f.barrier(ctx); err != nil {
		return nil, err
	}
	asked, unknown := f.ruleEdges(edges)
	if len(unknown) > 0 {
		backend.Warn(ctx, fmt.Sprintf("%d edges asked for are not in the catalog (%s): no rule groups listed for them", len(unknown), listIDs(unknown)))
	}
	out, ok, err := askEach(ctx, f, "list rule groups", asked, func(ctx context.Context, src Source) ([]model.RuleGroup, error) {
		rs, isRules := src.(RuleGroupSource)
		if !isRules {
			return nil, nil
		}
		return rs.RuleGroups(ctx, rf)
	})
	if err != nil {
		return nil, err
	}
	warnUnreachable(ctx, failedOf(asked, ok), func(string) string { return "their rule groups are not listed" })
	return mergeRuleGroups(asked, out, ok), nil
}

// mergeRuleGroups is the answers of the edges that answered, in edges'
// order.
func mergeRuleGroups(edges []string, out [][]model.RuleGroup, ok []bool) []model.EdgeRuleGroups {
	list := make([]model.EdgeRuleGroups, 0, len(edges))
	for i, e := range edges {
		if ok[i] {
			list = append(list, model.EdgeRuleGroups{Edge: e, Groups: out[i]})
		}
	}
	return list
}

// ruleEdges returns, sorted, the edges of names that the catalog holds
// (all its edges when names is empty, but for the revoked ones and the
// coordinators' rules edges), and the names it does not hold.
func (f *Frontend) ruleEdges(names []string) (asked, unknown []string) {
	if len(names) > 0 {
		for _, id := range slices.Compact(slices.Sorted(slices.Values(names))) {
			if n, ok := f.o.Catalog.Node(id); ok && n.Role == catalog.RoleEdge {
				asked = append(asked, id)
			} else {
				unknown = append(unknown, id)
			}
		}
		return asked, unknown
	}
	nodes := f.o.Catalog.Nodes()
	coords := map[string]bool{}
	for _, n := range nodes {
		if n.Role != catalog.RoleEdge {
			coords[CoordinatorRulesEdge(n.ID)] = true
		}
	}
	for _, n := range nodes {
		if n.Role == catalog.RoleEdge && !n.Revoked && !coords[n.ID] {
			asked = append(asked, n.ID)
		}
	}
	slices.Sort(asked)
	return asked, nil
}
