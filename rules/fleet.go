package rules

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"go.yaml.in/yaml/v3"

	"github.com/tributarydb/tributary/internal/vfs"
)

// FleetGroup is one rule group of the fleet's catalog that selects this
// node (tributary cluster rules set).
type FleetGroup struct {
	// Name is the group's name; YAML a Prometheus rule file holding this
	// one group.
	Name, YAML string
	// Selector is the edge selector that chose the node, for logs.
	Selector string
	// Version is the raft index that set the group.
	Version uint64
}

// fleetHeader starts the fleet rules file; the version follows it.
const fleetHeader = "# tributary fleet rule groups version "

// CheckGroup validates the text of one of the fleet's rule groups as
// CheckFile validates a file: a Prometheus rule file holding exactly one
// group, named name.
func CheckGroup(name, text string) (FileSummary, error) {
	var sum FileSummary
	rgs, errs := rulefmt.Parse([]byte(text), false, model.UTF8Validation)
	if len(errs) > 0 {
		return sum, errors.Join(errs...)
	}
	switch {
	case len(rgs.Groups) != 1:
		return sum, fmt.Errorf("rule group %q: the YAML holds %d groups, want exactly one", name, len(rgs.Groups))
	case rgs.Groups[0].Name != name:
		return sum, fmt.Errorf("rule group %q: the YAML's group is named %q", name, rgs.Groups[0].Name)
	}
	sum.Groups = 1
	for _, r := range rgs.Groups[0].Rules {
		if r.Alert != "" {
			sum.Alerting++
		} else {
			sum.Recording++
		}
	}
	return sum, nil
}

// maxFleetRulesFileBytes bounds the fleet rules file a node reads at
// start: the catalog holds at most 1 MiB of rule groups, which the merged
// file restates with little more.
const maxFleetRulesFileBytes = 4 << 20

// fleetFile builds the fleet rules file of groups at version: the header
// line (with the version), then the body: a comment line and one rule
// file holding every group. A group that does not parse (it passed
// CheckGroup on a coordinator whose parser differs) is left out and
// returned in skipped with why.
func fleetFile(version uint64, groups []FleetGroup) (header, body []byte, skipped []error) {
	var all rulefmt.RuleGroups
	for _, g := range groups {
		rgs, errs := rulefmt.Parse([]byte(g.YAML), false, model.UTF8Validation)
		switch {
		case len(errs) > 0:
			skipped = append(skipped, fmt.Errorf("fleet rule group %q: %w", g.Name, errors.Join(errs...)))
			continue
		case len(rgs.Groups) != 1 || rgs.Groups[0].Name != g.Name:
			skipped = append(skipped, fmt.Errorf("fleet rule group %q: not one group of that name", g.Name))
			continue
		}
		all.Groups = append(all.Groups, rgs.Groups[0])
	}
	y, err := yaml.Marshal(&all)
	if err != nil {
		// rulefmt's types always marshal.
		panic(fmt.Sprintf("BUG: marshal fleet rule groups: %v", err))
	}
	header = fmt.Appendf(nil, "%s%d\n", fleetHeader, version)
	body = append([]byte("# Written by the node from the fleet's catalog (tributary cluster rules); do not edit.\n"), y...)
	return header, body, skipped
}

// readFleetFile returns the version and the body of the fleet rules file
// at path, and false when there is none.
func readFleetFile(path string) (version uint64, body []byte, ok bool, err error) {
	b, err := vfs.ReadFile(vfs.OS{}, path, maxFleetRulesFileBytes)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, false, nil
	}
	if err != nil {
		return 0, nil, false, fmt.Errorf("fleet rules file: %w", err)
	}
	line, rest, found := bytes.Cut(b, []byte("\n"))
	if !found || !bytes.HasPrefix(line, []byte(fleetHeader)) {
		return 0, nil, false, fmt.Errorf("fleet rules file %s: the first line is not %q followed by a version", path, fleetHeader)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(line[len(fleetHeader):])), 10, 64)
	if err != nil {
		return 0, nil, false, fmt.Errorf("fleet rules file %s: version: %w", path, err)
	}
	return v, rest, true, nil
}

// FleetVersion returns the version of the fleet's rule groups in force
// (0: none received).
func (m *Manager) FleetVersion() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fleetVersion
}

// ApplyFleetRules replaces the fleet's rule groups this node evaluates
// with groups, when version is higher than the version in force (else it
// does nothing and returns nil). The groups are written durably to
// Options.FleetRulesFile first, so that the node evaluates them after a
// restart without the coordinators, and then loaded as a reload loads
// the rule files: unchanged groups keep evaluating undisturbed. A group
// that does not parse is left out and logged; the others apply.
func (m *Manager) ApplyFleetRules(version uint64, groups []FleetGroup) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.opts.FleetRulesFile == "":
		return errors.New("apply fleet rules: the rule manager has no fleet rules file")
	case m.stopped:
		return errors.New("apply fleet rules: the rule manager is stopped")
	case version <= m.fleetVersion:
		return nil
	}
	header, body, skipped := fleetFile(version, groups)
	for _, err := range skipped {
		m.opts.Logger.Error("fleet rule group not evaluated", "version", version, "err", err)
	}
	unchanged := m.fleetVersion > 0 && bytes.Equal(body, m.fleetBody)
	// The merged file must load (so that a restart does): two groups of one
	// name, say, would not.
	if _, errs := rulefmt.Parse(body, false, model.UTF8Validation); len(errs) > 0 {
		return fmt.Errorf("apply fleet rules version %d: %w", version, errors.Join(errs...))
	}
	if err := vfs.WriteFileAtomic(vfs.OS{}, m.opts.FleetRulesFile, 0o644, header, body); err != nil {
		return fmt.Errorf("apply fleet rules version %d: %w", version, err)
	}
	m.fleetVersion, m.fleetBody = version, body
	m.fleetGauge.Store(version)
	if unchanged {
		// The same groups under a newer version (a new stream's welcome):
		// nothing to load, and the rule files are not read again behind
		// the operator's back.
		m.opts.Logger.Debug("fleet rule groups unchanged", "version", version)
		return nil
	}
	if err := m.load(); err != nil {
		return fmt.Errorf("apply fleet rules version %d: written, and loaded at the next reload that succeeds: %w", version, err)
	}
	names := make([]string, 0, len(groups))
	for _, g := range groups {
		names = append(names, g.Name)
	}
	m.opts.Logger.Info("fleet rule groups applied", "version", version, "groups", names)
	return nil
}

// SplitFile checks a rule file as CheckFile does and returns each of its
// groups as a rule file of its own (what the fleet's catalog holds per
// group: tributary cluster rules set). Comments are not kept.
func SplitFile(path string) ([]FleetGroup, error) {
	rgs, errs := rulefmt.ParseFile(path, false, model.UTF8Validation)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	out := make([]FleetGroup, 0, len(rgs.Groups))
	for _, g := range rgs.Groups {
		b, err := yaml.Marshal(&rulefmt.RuleGroups{Groups: []rulefmt.RuleGroup{g}})
		if err != nil {
			panic(fmt.Sprintf("BUG: marshal rule group: %v", err))
		}
		out = append(out, FleetGroup{Name: g.Name, YAML: string(b)})
	}
	return out, nil
}
