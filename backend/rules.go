package backend

import (
	"context"

	"github.com/tributarydb/tributary/model"
)

// RuleLister is implemented by a backend that can list the rule groups
// evaluated by the nodes behind it: a coordinator's query front end asks
// the edges. The Prometheus API's /api/v1/rules lists them after the
// process's own groups.
type RuleLister interface {
	// EdgeRuleGroups asks the edges named (all the fleet's edges when
	// edges is empty) for their rule groups under f. An edge that cannot
	// be asked is named in ctx's warnings (Warn); the others' answers are
	// returned, sorted by edge.
	EdgeRuleGroups(ctx context.Context, edges []string, f model.RuleFilter) ([]model.EdgeRuleGroups, error)
}
