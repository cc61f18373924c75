package model

import (
	"slices"
	"time"
)

// The rule types of Rule.Type, as Prometheus's /api/v1/rules names them.
const (
	RuleAlerting  = "alerting"
	RuleRecording = "recording"
)

// RuleGroup is a group of rules as a node's rules API lists it: the
// group's name and file, its interval and limit, when its last evaluation
// began and how long it took, and its rules. A zero time means never.
type RuleGroup struct {
	Name, File     string
	Interval       time.Duration
	Limit          int
	EvaluationTime time.Duration
	LastEvaluation time.Time
	Rules          []Rule
}

// Rule is an alerting or a recording rule (Type) with its health ("ok",
// "err" or "unknown") and last error. Annotations, State ("inactive",
// "pending" or "firing"), For, KeepFiringFor and Alerts are those of an
// alerting rule.
type Rule struct {
	Type, Name, Query string
	Labels            map[string]string
	Health, LastError string
	EvaluationTime    time.Duration
	LastEvaluation    time.Time

	Annotations   map[string]string
	State         string
	For           time.Duration
	KeepFiringFor time.Duration
	Alerts        []RuleAlert
}

// RuleAlert is an active alert of an alerting rule: pending or firing.
// Zero times are unset.
type RuleAlert struct {
	Labels, Annotations       map[string]string
	State                     string
	ActiveAt, KeepFiringSince time.Time
	Value                     float64
}

// RuleFilter selects rule groups and rules as the query parameters of
// Prometheus's /api/v1/rules do. The zero value selects every group and
// rule with its alerts.
type RuleFilter struct {
	// Type is "alert" or "record" to keep only alerting or recording
	// rules; "": both.
	Type string
	// RuleNames, RuleGroups and Files keep the rules with one of these
	// names, in groups with one of these names and files; empty: any.
	RuleNames, RuleGroups, Files []string
	// ExcludeAlerts leaves out the alerting rules' active alerts.
	ExcludeAlerts bool
}

// The values of RuleFilter.Type.
const (
	RuleFilterAlert  = "alert"
	RuleFilterRecord = "record"
)

// KeepsGroup reports whether f selects a group named name in file.
func (f RuleFilter) KeepsGroup(name, file string) bool {
	return anyOf(f.RuleGroups, name) && anyOf(f.Files, file)
}

// KeepsRule reports whether f selects a rule of type typ named name.
func (f RuleFilter) KeepsRule(typ, name string) bool {
	switch {
	case f.Type == RuleFilterAlert && typ != RuleAlerting, f.Type == RuleFilterRecord && typ != RuleRecording:
		return false
	}
	return anyOf(f.RuleNames, name)
}

// FiltersRules reports whether f may leave a group without rules; such a
// group is then left out (Prometheus omits it), while a group that had no
// rules to begin with is listed when f selects rules by group only.
func (f RuleFilter) FiltersRules() bool { return f.Type != "" || len(f.RuleNames) > 0 }

func anyOf(list []string, s string) bool { return len(list) == 0 || slices.Contains(list, s) }

// EdgeRuleGroups are the rule groups an edge node evaluates, as a
// coordinator lists them.
type EdgeRuleGroups struct {
	Edge   string
	Groups []RuleGroup
}
