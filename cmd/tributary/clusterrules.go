package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/rules"
)

// ruleGroupsSet is the answer of `cluster rules set`: one group per group
// of the file.
type ruleGroupsSet struct{ Groups []*pb.FleetRuleGroup }

// ruleGroupsDeleted is the answer of `cluster rules delete`.
type ruleGroupsDeleted struct{ Names []string }

// ruleGroupShown is the answer of `cluster rules get NAME`: the group
// with its YAML.
type ruleGroupShown struct{ Group *pb.FleetRuleGroup }

// rulesCall is the call of `cluster rules set|get|delete`.
func (a *clusterArgs) rulesCall() (clusterCall, error) {
	if len(a.pos) == 0 {
		return nil, fmt.Errorf("%w: cluster rules: want set, get or delete (tributary cluster -h)", errUsage)
	}
	verb, args := a.pos[0], a.pos[1:]
	switch verb {
	case "set":
		if len(args) != 1 {
			return nil, fmt.Errorf("%w: cluster rules set takes one rule file, got %d", errUsage, len(args))
		}
		// Checked here first, with file, line and column in the errors.
		groups, err := rules.SplitFile(args[0])
		if err != nil {
			return nil, fmt.Errorf("%w: cluster rules set: %v", errUsage, err)
		}
		if len(groups) == 0 {
			return nil, fmt.Errorf("%w: cluster rules set: %s holds no rule group", errUsage, args[0])
		}
		sel := a.selector
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			var out ruleGroupsSet
			for _, g := range groups {
				r, err := cl.SetRuleGroup(ctx, &pb.SetRuleGroupRequest{Group: &pb.FleetRuleGroup{Name: g.Name, Selector: sel, Yaml: g.YAML}})
				if err != nil {
					return nil, fmt.Errorf("group %q (%d of %d set before it): %w", g.Name, len(out.Groups), len(groups), err)
				}
				out.Groups = append(out.Groups, r.GetGroup())
			}
			return out, nil
		}, nil
	case "get":
		if len(args) > 1 {
			return nil, fmt.Errorf("%w: cluster rules get takes at most one group name, got %d", errUsage, len(args))
		}
		edge := a.edge
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			r, err := cl.GetRuleGroups(ctx, &pb.GetRuleGroupsRequest{Edge: edge})
			if err != nil || len(args) == 0 {
				return r, err
			}
			for _, g := range r.GetGroups() {
				if g.GetName() == args[0] {
					return ruleGroupShown{g}, nil
				}
			}
			return nil, fmt.Errorf("no rule group %q", args[0])
		}, nil
	case "delete":
		if len(args) == 0 {
			return nil, fmt.Errorf("%w: cluster rules delete takes the names of the groups to delete", errUsage)
		}
		return func(ctx context.Context, cl pb.ClusterServiceClient) (any, error) {
			var out ruleGroupsDeleted
			for _, name := range args {
				if _, err := cl.DeleteRuleGroup(ctx, &pb.DeleteRuleGroupRequest{Name: name}); err != nil {
					return nil, fmt.Errorf("group %q: %w", name, err)
				}
				out.Names = append(out.Names, name)
			}
			return out, nil
		}, nil
	}
	return nil, fmt.Errorf("%w: cluster rules %q: want set, get or delete", errUsage, verb)
}

// printRuleGroups prints a table of rule groups.
func printRuleGroups(w io.Writer, version uint64, groups []*pb.FleetRuleGroup) error {
	fmt.Fprintf(w, "%s, version %d\n", plural(len(groups), "rule group"), version)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tSELECTOR\tRECORDING\tALERTING\tVERSION")
	for _, g := range groups {
		sel := g.GetSelector()
		if strings.TrimSpace(sel) == "" {
			sel = "(every edge)"
		}
		rec, alert := "?", "?"
		if sum, err := rules.CheckGroup(g.GetName(), g.GetYaml()); err == nil {
			rec, alert = fmt.Sprint(sum.Recording), fmt.Sprint(sum.Alerting)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", g.GetName(), sel, rec, alert, g.GetVersion())
	}
	return tw.Flush()
}

// ruleGroupJSON is a rule group in --format json.
type ruleGroupJSON struct {
	Name     string `json:"name"`
	Selector string `json:"selector"`
	YAML     string `json:"yaml"`
	Version  uint64 `json:"version"`
}

func ruleGroupsJSON(gs []*pb.FleetRuleGroup) []ruleGroupJSON {
	out := make([]ruleGroupJSON, 0, len(gs))
	for _, g := range gs {
		out = append(out, ruleGroupJSON{g.GetName(), g.GetSelector(), g.GetYaml(), g.GetVersion()})
	}
	return out
}
