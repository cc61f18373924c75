package replicator

import (
	"maps"
	"slices"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// EdgeConfig is the part of the fleet configuration an edge applies, as
// the coordinators send it: in the welcome of every stream and on the
// stream when it changes (tributary.v1.EdgeConfig).
type EdgeConfig struct {
	// Version is the raft index of the change that set the configuration;
	// higher is newer.
	Version uint64
	// Retention per tier (raw samples, hourly and daily rollups).
	RetentionRaw, Retention1h, Retention1d time.Duration
	// RollupHourly and RollupDaily say which rollup tiers to compute.
	RollupHourly, RollupDaily bool
	// RateLimitPointsPerSec bounds ingest (0: unlimited);
	// RateLimitBurstPoints is the token-bucket burst (0: one second of the
	// rate).
	RateLimitPointsPerSec, RateLimitBurstPoints uint64
	// LagBudget is the seal policy's segment age: how long a point may
	// wait on the edge before its segment is sealed and shipped (0: the
	// coordinators predate it; keep the node's own). MinSegmentPoints
	// holds an old segment with fewer points for more, up to four times
	// the lag budget (0: none).
	LagBudget        time.Duration
	MinSegmentPoints uint64
}

func edgeConfigFromProto(c *pb.EdgeConfig) EdgeConfig {
	return EdgeConfig{
		Version:               c.GetVersion(),
		RetentionRaw:          time.Duration(c.GetRetentionRawMs()) * time.Millisecond,
		Retention1h:           time.Duration(c.GetRetention_1HMs()) * time.Millisecond,
		Retention1d:           time.Duration(c.GetRetention_1DMs()) * time.Millisecond,
		RollupHourly:          c.GetRollupHourly(),
		RollupDaily:           c.GetRollupDaily(),
		RateLimitPointsPerSec: c.GetRateLimitPointsPerSec(),
		RateLimitBurstPoints:  c.GetRateLimitBurstPoints(),
		LagBudget:             time.Duration(c.GetLagBudgetMs()) * time.Millisecond,
		MinSegmentPoints:      c.GetMinSegmentPoints(),
	}
}

// onConfig hands a configuration from the cloud to Options.OnConfig when
// its version is higher than the last one handed over. Version 0 (the
// catalog's defaults, never set by an operator) is not handed over: the
// node keeps its own settings until an operator sets the fleet's.
//
// REQUIRES: called from the loop goroutine.
func (l *loop) onConfig(c *pb.EdgeConfig) {
	if c == nil || c.GetVersion() <= l.configVersion {
		return
	}
	l.configVersion = c.GetVersion()
	cfg := edgeConfigFromProto(c)
	l.log.Info("fleet config received", "version", cfg.Version, "retention_raw", cfg.RetentionRaw,
		"retention_1h", cfg.Retention1h, "retention_1d", cfg.Retention1d,
		"rate_limit_points_per_sec", cfg.RateLimitPointsPerSec, "rate_limit_burst_points", cfg.RateLimitBurstPoints,
		"lag_budget", cfg.LagBudget, "min_segment_points", cfg.MinSegmentPoints)
	if l.o.OnConfig != nil {
		l.o.OnConfig(cfg)
	}
}

// RuleGroups is the set of the fleet's rule groups that select the edge,
// as the coordinators send it (tributary.v1.EdgeRuleGroups): the whole
// set, which replaces the one before.
type RuleGroups struct {
	// Version is the catalog's applied raft index when the set was taken;
	// higher is newer.
	Version uint64
	Groups  []RuleGroup
}

// RuleGroup is one rule group of the fleet.
type RuleGroup struct {
	// Name is the group's name; YAML a Prometheus rule file holding this
	// one group; Selector the edge selector that chose the edge.
	Name, YAML, Selector string
	// Version is the raft index that set the group.
	Version uint64
}

// onRuleGroups hands a set of rule groups from the cloud to
// Options.OnRuleGroups when its version is higher than the last one
// handed over. Version 0 (no rule group ever set) is not handed over.
//
// REQUIRES: called from the loop goroutine.
func (l *loop) onRuleGroups(rg *pb.EdgeRuleGroups) {
	if rg == nil || rg.GetVersion() <= l.ruleGroupsVersion {
		return
	}
	l.ruleGroupsVersion = rg.GetVersion()
	out := RuleGroups{Version: rg.GetVersion(), Groups: make([]RuleGroup, 0, len(rg.GetGroups()))}
	names := make([]string, 0, len(rg.GetGroups()))
	for _, g := range rg.GetGroups() {
		out.Groups = append(out.Groups, RuleGroup{Name: g.GetName(), YAML: g.GetYaml(), Selector: g.GetSelector(), Version: g.GetVersion()})
		names = append(names, g.GetName())
	}
	l.log.Info("fleet rule groups received", "version", out.Version, "groups", names)
	if l.o.OnRuleGroups != nil {
		l.o.OnRuleGroups(out)
	}
}

// helloLabels is Options.Labels as the hello carries them, sorted by
// name.
func helloLabels(m map[string]string) []*pb.Label {
	out := make([]*pb.Label, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, &pb.Label{Name: k, Value: m[k]})
	}
	return out
}
