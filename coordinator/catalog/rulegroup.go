package catalog

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/tributarydb/tributary/node/labels"
)

// Bounds of the fleet's rule groups (SetRuleGroup).
const (
	// MaxRuleGroups bounds the rule groups the catalog holds.
	MaxRuleGroups = 256
	// MaxRuleGroupNameBytes bounds a rule group's name.
	MaxRuleGroupNameBytes = 256
	// MaxRuleSelectorBytes bounds a rule group's edge selector.
	MaxRuleSelectorBytes = 4 << 10
	// MaxRuleGroupBytes bounds a rule group's YAML text.
	MaxRuleGroupBytes = 64 << 10
	// MaxRuleGroupsBytes bounds the names, selectors and YAML of all the
	// fleet's rule groups together: what one welcome to an edge may carry
	// stays well under gRPC's default 4 MiB message limit.
	MaxRuleGroupsBytes = 1 << 20
)

// ruleGroupBytes is what a group counts towards MaxRuleGroupsBytes.
func ruleGroupBytes(g *RuleGroup) int { return len(g.Name) + len(g.Selector) + len(g.YAML) }

// RuleGroup is one of the fleet's rule groups: a Prometheus rule file
// holding one group (YAML), evaluated by the edges whose labels Selector
// matches. The catalog checks only its bounds and encoding; the
// coordinator that proposes it checks the YAML as `tributary rules check`
// does and parses the selector (package rules/selector), so that what the
// state machine accepts does not depend on a parser's version.
type RuleGroup struct {
	Name     string
	Selector string
	YAML     string
	// Version is the raft index of the SetRuleGroup that set it.
	Version uint64
}

// SetRuleGroup adds a rule group, or replaces the group of the same name
// (Group.Version is ignored and set to the command's index; a group equal
// to the one in force changes nothing, so applying the command twice is
// harmless). More than MaxRuleGroups groups is ErrLimit. Result:
// RuleGroup.
//
// Encoded as kind 16, which coordinators of an earlier version cannot
// decode: propose it only when FeatureReady(FeatureRuleGroups).
type SetRuleGroup struct{ Group RuleGroup }

// DeleteRuleGroup removes the rule group of that name; ErrNotFound when
// there is none. Kind 17, proposed as SetRuleGroup is. Result: nil.
type DeleteRuleGroup struct{ Name string }

// Kind implements Command.
func (SetRuleGroup) Kind() Kind { return KindSetRuleGroup }

// Kind implements Command.
func (DeleteRuleGroup) Kind() Kind { return KindDeleteRuleGroup }

func (c SetRuleGroup) appendBody(b []byte) []byte {
	b = appendString(b, c.Group.Name)
	b = appendString(b, c.Group.Selector)
	return appendString(b, c.Group.YAML)
}

func (c DeleteRuleGroup) appendBody(b []byte) []byte { return appendString(b, c.Name) }

func (d *decoder) setRuleGroup() SetRuleGroup {
	var g RuleGroup
	g.Name = d.string("rule group name", MaxRuleGroupNameBytes)
	g.Selector = d.string("rule group selector", MaxRuleSelectorBytes)
	g.YAML = d.string("rule group yaml", MaxRuleGroupBytes)
	return SetRuleGroup{Group: g}
}

// validRuleGroup checks what the state machine checks of a rule group:
// bounds and UTF-8.
func validRuleGroup(g RuleGroup) error {
	switch {
	case g.Name == "" || len(g.Name) > MaxRuleGroupNameBytes:
		return fmt.Errorf("rule group name is %d bytes, want 1 to %d", len(g.Name), MaxRuleGroupNameBytes)
	case len(g.Selector) > MaxRuleSelectorBytes:
		return fmt.Errorf("rule group %q: selector is %d bytes, limit is %d", g.Name, len(g.Selector), MaxRuleSelectorBytes)
	case g.YAML == "" || len(g.YAML) > MaxRuleGroupBytes:
		return fmt.Errorf("rule group %q: YAML is %d bytes, want 1 to %d", g.Name, len(g.YAML), MaxRuleGroupBytes)
	case !utf8.ValidString(g.Name) || !utf8.ValidString(g.Selector) || !utf8.ValidString(g.YAML):
		return fmt.Errorf("rule group %.64q: name, selector or YAML is not valid UTF-8", g.Name)
	}
	return nil
}

func (s *state) setRuleGroup(index uint64, c SetRuleGroup) (any, error) {
	g := c.Group
	if err := validRuleGroup(g); err != nil {
		return nil, cmdErr(c.Kind(), ErrBadCommand, "%v", err)
	}
	total := ruleGroupBytes(&g)
	for name, o := range s.ruleGroups {
		if name != g.Name {
			total += ruleGroupBytes(o)
		}
	}
	if old := s.ruleGroups[g.Name]; old != nil {
		if old.Selector == g.Selector && old.YAML == g.YAML {
			return *old, nil
		}
	} else if len(s.ruleGroups) >= MaxRuleGroups {
		return nil, cmdErr(c.Kind(), ErrLimit, "rule group %q: the fleet holds %d rule groups, the limit", g.Name, MaxRuleGroups)
	}
	if total > MaxRuleGroupsBytes {
		return nil, cmdErr(c.Kind(), ErrLimit, "rule group %q: the fleet's rule groups would hold %d bytes, limit is %d", g.Name, total, MaxRuleGroupsBytes)
	}
	g.Version = index
	s.ruleGroups[g.Name] = &g
	s.rulesVersion = index
	return g, nil
}

func (s *state) deleteRuleGroup(index uint64, c DeleteRuleGroup) error {
	if s.ruleGroups[c.Name] == nil {
		return cmdErr(c.Kind(), ErrNotFound, "no rule group %.256q", c.Name)
	}
	delete(s.ruleGroups, c.Name)
	s.rulesVersion = index
	return nil
}

// RuleGroups returns the fleet's rule groups sorted by name, and the raft
// index of the last change to them (0: none ever).
func (f *FSM) RuleGroups() ([]RuleGroup, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.sortedRuleGroups(), f.st.rulesVersion
}

func (s *state) sortedRuleGroups() []RuleGroup {
	out := make([]RuleGroup, 0, len(s.ruleGroups))
	for _, name := range sortedKeys(s.ruleGroups) {
		out = append(out, *s.ruleGroups[name])
	}
	return out
}

// EdgeRules is what the catalog says about an edge's rule groups, read
// at one applied index.
type EdgeRules struct {
	// Groups are all the fleet's rule groups, sorted by name (the caller
	// selects by Labels).
	Groups []RuleGroup
	// Labels are the edge's labels.
	Labels labels.Labels
	// RulesVersion is the index of the last change to the rule groups;
	// Applied the catalog's applied index when read.
	RulesVersion, Applied uint64
}

// EdgeRules returns the fleet's rule groups with the labels of edge, at
// one applied index; false when edge is not a registered edge.
func (f *FSM) EdgeRules(edge string) (EdgeRules, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n := f.st.nodes[edge]
	if n == nil || n.Role != RoleEdge {
		return EdgeRules{}, false
	}
	return EdgeRules{Groups: f.st.sortedRuleGroups(), Labels: slices.Clone(n.Labels),
		RulesVersion: f.st.rulesVersion, Applied: f.st.applied}, true
}

// RulesVersion returns the raft index of the last change to the fleet's
// rule groups (0: none ever).
func (f *FSM) RulesVersion() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.rulesVersion
}

// appendRuleGroups appends the rule groups section (snapshot version 6).
func (s *state) appendRuleGroups(b []byte) []byte {
	b = appendUvarint(b, s.rulesVersion)
	return appendList(b, s.sortedRuleGroups(), func(b []byte, g RuleGroup) []byte {
		b = appendString(b, g.Name)
		b = appendString(b, g.Selector)
		b = appendString(b, g.YAML)
		return appendUvarint(b, g.Version)
	})
}

// decodeRuleGroups reads the rule groups section.
func (s *state) decodeRuleGroups(d *decoder) error {
	s.rulesVersion = d.uvarint()
	n := d.count("rule group", 4)
	if d.err == nil && n > MaxRuleGroups {
		return fmt.Errorf("%d rule groups, limit is %d", n, MaxRuleGroups)
	}
	order, total := keyOrder{what: "rule group"}, 0
	for i := 0; i < n && d.err == nil; i++ {
		g := RuleGroup{
			Name:     d.string("rule group name", MaxRuleGroupNameBytes),
			Selector: d.string("rule group selector", MaxRuleSelectorBytes),
			YAML:     d.string("rule group yaml", MaxRuleGroupBytes),
			Version:  d.uvarint(),
		}
		if d.err != nil {
			break
		}
		if err := validRuleGroup(g); err != nil {
			return err
		}
		if err := order.next(g.Name); err != nil {
			return err
		}
		if g.Version == 0 || g.Version > s.rulesVersion {
			return fmt.Errorf("rule group %q: version %d, the rule groups' is %d", g.Name, g.Version, s.rulesVersion)
		}
		if total += ruleGroupBytes(&g); total > MaxRuleGroupsBytes {
			return fmt.Errorf("rule groups hold more than %d bytes", MaxRuleGroupsBytes)
		}
		s.ruleGroups[g.Name] = &g
	}
	if d.err == nil && s.rulesVersion == 0 {
		return fmt.Errorf("a rule groups section with version 0 is written; versions before 6 leave it out")
	}
	if d.err == nil && s.rulesVersion > s.applied {
		return fmt.Errorf("rule groups version %d after applied index %d", s.rulesVersion, s.applied)
	}
	return d.err
}
