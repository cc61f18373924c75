package grpcapi

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/model"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// RuleGroupsFunc lists the rule groups a node evaluates under a filter
// (the RuleGroups call).
type RuleGroupsFunc func(ctx context.Context, f model.RuleFilter) ([]model.RuleGroup, error)

// SetRuleGroups makes the RuleGroups call answer from list; nil (the
// default) answers no groups: the node evaluates no rules. Safe to call
// while serving.
func (s *QueryServer) SetRuleGroups(list RuleGroupsFunc) {
	if list == nil {
		s.rules.Store(nil)
		return
	}
	s.rules.Store(&list)
}

// RuleGroups lists the node's rule groups under the request's filter.
func (s *QueryServer) RuleGroups(ctx context.Context, req *pb.RuleGroupsRequest) (*pb.RuleGroupsResponse, error) {
	f, err := RuleFilterFromProto(req)
	if err != nil {
		return nil, err
	}
	resp := &pb.RuleGroupsResponse{}
	list := s.rules.Load()
	if list == nil {
		return resp, nil
	}
	groups, err := (*list)(ctx, f)
	if err != nil {
		return nil, queryError(err)
	}
	resp.Groups = RuleGroupsToProto(groups)
	return resp, nil
}

// RuleFilterToProto is f as a request.
func RuleFilterToProto(f model.RuleFilter) *pb.RuleGroupsRequest {
	return &pb.RuleGroupsRequest{Type: f.Type, RuleNames: f.RuleNames, RuleGroups: f.RuleGroups, Files: f.Files,
		ExcludeAlerts: f.ExcludeAlerts}
}

// RuleFilterFromProto is the filter of req; an unknown type is
// INVALID_ARGUMENT.
func RuleFilterFromProto(req *pb.RuleGroupsRequest) (model.RuleFilter, error) {
	f := model.RuleFilter{Type: req.GetType(), RuleNames: req.GetRuleNames(), RuleGroups: req.GetRuleGroups(),
		Files: req.GetFiles(), ExcludeAlerts: req.GetExcludeAlerts()}
	switch f.Type {
	case "", model.RuleFilterAlert, model.RuleFilterRecord:
		return f, nil
	}
	return f, status.Errorf(codes.InvalidArgument, "rule type must be %q or %q, not %q", model.RuleFilterAlert, model.RuleFilterRecord, f.Type)
}

// RuleGroupsToProto is groups on the wire.
func RuleGroupsToProto(groups []model.RuleGroup) []*pb.RuleGroup {
	out := make([]*pb.RuleGroup, len(groups))
	for i, g := range groups {
		pg := &pb.RuleGroup{Name: g.Name, File: g.File, IntervalSeconds: g.Interval.Seconds(), Limit: int64(g.Limit),
			EvaluationSeconds: g.EvaluationTime.Seconds(), LastEvaluationUnixNano: unixNano(g.LastEvaluation),
			Rules: make([]*pb.Rule, len(g.Rules))}
		for j, r := range g.Rules {
			pr := &pb.Rule{Type: r.Type, Name: r.Name, Query: r.Query, Labels: r.Labels, Health: r.Health,
				LastError: r.LastError, EvaluationSeconds: r.EvaluationTime.Seconds(),
				LastEvaluationUnixNano: unixNano(r.LastEvaluation), Annotations: r.Annotations, State: r.State,
				DurationSeconds: r.For.Seconds(), KeepFiringForSeconds: r.KeepFiringFor.Seconds()}
			for _, a := range r.Alerts {
				pr.Alerts = append(pr.Alerts, &pb.RuleAlert{Labels: a.Labels, Annotations: a.Annotations, State: a.State,
					ActiveAtUnixNano: unixNano(a.ActiveAt), KeepFiringSinceUnixNano: unixNano(a.KeepFiringSince), Value: a.Value})
			}
			pg.Rules[j] = pr
		}
		out[i] = pg
	}
	return out
}

// RuleGroupsFromProto is the groups of a RuleGroups answer.
func RuleGroupsFromProto(groups []*pb.RuleGroup) []model.RuleGroup {
	out := make([]model.RuleGroup, len(groups))
	for i, pg := range groups {
		g := model.RuleGroup{Name: pg.GetName(), File: pg.GetFile(), Interval: seconds(pg.GetIntervalSeconds()),
			Limit: int(pg.GetLimit()), EvaluationTime: seconds(pg.GetEvaluationSeconds()),
			LastEvaluation: fromUnixNano(pg.GetLastEvaluationUnixNano()), Rules: make([]model.Rule, len(pg.GetRules()))}
		for j, pr := range pg.GetRules() {
			r := model.Rule{Type: pr.GetType(), Name: pr.GetName(), Query: pr.GetQuery(), Labels: pr.GetLabels(),
				Health: pr.GetHealth(), LastError: pr.GetLastError(), EvaluationTime: seconds(pr.GetEvaluationSeconds()),
				LastEvaluation: fromUnixNano(pr.GetLastEvaluationUnixNano()), Annotations: pr.GetAnnotations(),
				State: pr.GetState(), For: seconds(pr.GetDurationSeconds()), KeepFiringFor: seconds(pr.GetKeepFiringForSeconds())}
			for _, pa := range pr.GetAlerts() {
				r.Alerts = append(r.Alerts, model.RuleAlert{Labels: pa.GetLabels(), Annotations: pa.GetAnnotations(),
					State: pa.GetState(), ActiveAt: fromUnixNano(pa.GetActiveAtUnixNano()),
					KeepFiringSince: fromUnixNano(pa.GetKeepFiringSinceUnixNano()), Value: pa.GetValue()})
			}
			g.Rules[j] = r
		}
		out[i] = g
	}
	return out
}

// unixNano is t in Unix nanoseconds; 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNano is unixNano's inverse, in UTC.
func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
