package coordinator

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/rules"
	"github.com/tributarydb/tributary/rules/selector"
)

// The ClusterService calls on the fleet's rule groups (the catalog's
// SetRuleGroup and DeleteRuleGroup). The group's YAML is checked here, as
// `tributary rules check` checks a file, and the selector parsed: the
// catalog checks only bounds, so that its decisions do not depend on a
// parser's version.

// SetRuleGroup proposes catalog.SetRuleGroup once the group is valid and
// every member applies rule-group commands.
func (s *adminServer) SetRuleGroup(ctx context.Context, req *pb.SetRuleGroupRequest) (*pb.SetRuleGroupResponse, error) {
	g := req.GetGroup()
	what := fmt.Sprintf("set rule group %.256q", g.GetName())
	switch {
	case g == nil:
		return nil, status.Error(codes.InvalidArgument, "set rule group: group is required")
	case g.GetName() == "":
		return nil, status.Error(codes.InvalidArgument, "set rule group: the group has no name")
	case len(g.GetYaml()) > catalog.MaxRuleGroupBytes:
		return nil, status.Errorf(codes.InvalidArgument, "%s: the YAML is %d bytes, limit is %d", what, len(g.GetYaml()), catalog.MaxRuleGroupBytes)
	case len(g.GetSelector()) > catalog.MaxRuleSelectorBytes:
		return nil, status.Errorf(codes.InvalidArgument, "%s: the selector is %d bytes, limit is %d", what, len(g.GetSelector()), catalog.MaxRuleSelectorBytes)
	}
	if _, err := selector.Parse(g.GetSelector()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	}
	if _, err := rules.CheckGroup(g.GetName(), g.GetYaml()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	}
	if !s.c.fsm.FeatureReady(catalog.FeatureRuleGroups) {
		return nil, status.Errorf(codes.FailedPrecondition, "%s: not every raft member is a registered coordinator that applies rule groups (a member just started registers within seconds: retry; one of an earlier version must be upgraded first)", what)
	}
	res, err := s.propose(ctx, what, catalog.SetRuleGroup{Group: catalog.RuleGroup{Name: g.GetName(), Selector: g.GetSelector(), YAML: g.GetYaml()}})
	if err != nil {
		return nil, err
	}
	applied, _ := res.(catalog.RuleGroup)
	s.c.log.Info("fleet rule group set", "group", applied.Name, "selector", applied.Selector, "version", applied.Version)
	return &pb.SetRuleGroupResponse{Group: ruleGroupProto(applied)}, nil
}

// GetRuleGroups lists the fleet's rule groups, or those selecting one edge.
func (s *adminServer) GetRuleGroups(ctx context.Context, req *pb.GetRuleGroupsRequest) (*pb.GetRuleGroupsResponse, error) {
	if err := s.barrier(ctx, "list rule groups"); err != nil {
		return nil, err
	}
	groups, version := s.c.fsm.RuleGroups()
	resp := &pb.GetRuleGroupsResponse{Version: version}
	if e := req.GetEdge(); e != "" {
		er, ok := s.c.fsm.EdgeRules(e)
		if !ok {
			return nil, status.Errorf(codes.NotFound, "list rule groups: no edge %q is registered in the catalog", e)
		}
		groups = slices.DeleteFunc(er.Groups, func(g catalog.RuleGroup) bool {
			sel, err := selector.Parse(g.Selector)
			return err != nil || !sel.Matches(er.Labels)
		})
		resp.Version = er.RulesVersion
	}
	for _, g := range groups {
		resp.Groups = append(resp.Groups, ruleGroupProto(g))
	}
	return resp, nil
}

// DeleteRuleGroup proposes catalog.DeleteRuleGroup.
func (s *adminServer) DeleteRuleGroup(ctx context.Context, req *pb.DeleteRuleGroupRequest) (*pb.DeleteRuleGroupResponse, error) {
	what := fmt.Sprintf("delete rule group %.256q", req.GetName())
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "delete rule group: name is required")
	}
	if !s.c.fsm.FeatureReady(catalog.FeatureRuleGroups) {
		return nil, status.Errorf(codes.FailedPrecondition, "%s: not every raft member is a registered coordinator that applies rule groups (a member just started registers within seconds: retry; one of an earlier version must be upgraded first)", what)
	}
	if _, err := s.propose(ctx, what, catalog.DeleteRuleGroup{Name: req.GetName()}); err != nil {
		return nil, err
	}
	s.c.log.Info("fleet rule group deleted", "group", req.GetName())
	return &pb.DeleteRuleGroupResponse{}, nil
}

func ruleGroupProto(g catalog.RuleGroup) *pb.FleetRuleGroup {
	return &pb.FleetRuleGroup{Name: g.Name, Selector: g.Selector, Yaml: g.YAML, Version: g.Version}
}

// labelMap is a node's labels as a map (nil for none).
func labelMap(ls labels.Labels) map[string]string {
	if len(ls) == 0 {
		return nil
	}
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	return m
}
