package replicator_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/replicator"
	"github.com/tributarydb/tributary/rules"
)

// ruleEdge is an edge node with a rule manager whose fleet rule groups
// come from its Shipper's OnRuleGroups, as `tributary node` wires them.
type ruleEdge struct {
	t    *testing.T
	dir  string
	n    *node.Node
	m    *rules.Manager
	mu   sync.Mutex
	sets []replicator.RuleGroups // every set handed over
}

func openRuleEdge(t *testing.T, dir string) *ruleEdge {
	t.Helper()
	e := &ruleEdge{t: t, dir: dir}
	n, err := node.Open(node.Options{DataDir: dir, NodeID: filepath.Base(dir)})
	if err != nil {
		t.Fatal(err)
	}
	api, err := prom.New(n, &httpapi.Config{}, prom.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rules.New(n, api.Engine(), api.Queryable(), rules.Options{FleetRulesFile: filepath.Join(dir, "fleet-rules.yml")})
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	m.Start()
	e.n, e.m = n, m
	return e
}

func (e *ruleEdge) onRuleGroups(rg replicator.RuleGroups) {
	groups := make([]rules.FleetGroup, 0, len(rg.Groups))
	for _, g := range rg.Groups {
		groups = append(groups, rules.FleetGroup{Name: g.Name, YAML: g.YAML, Selector: g.Selector, Version: g.Version})
	}
	if err := e.m.ApplyFleetRules(rg.Version, groups); err != nil {
		e.t.Error(err)
	}
	// Counted once applied: a test that waits for a set to be handed over
	// then reads the groups in force.
	e.mu.Lock()
	e.sets = append(e.sets, rg)
	e.mu.Unlock()
}

func (e *ruleEdge) handedOver() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sets)
}

// groups lists the names of the fleet groups the manager evaluates.
func (e *ruleEdge) groups() []string {
	var out []string
	for _, g := range e.m.RuleGroups() {
		out = append(out, g.Name())
	}
	slices.Sort(out)
	return out
}

func (e *ruleEdge) close() {
	e.m.Stop()
	if err := e.n.Close(); err != nil {
		e.t.Error(err)
	}
}

const canGroupYAML = `groups:
  - name: can-bus
    interval: 1s
    rules:
      - record: vehicle:coolant_temp:max
        expr: max by (vehicle) (coolant_temp)
`

const everyEdgeGroupYAML = `groups:
  - name: every-edge
    interval: 1s
    rules:
      - record: node:up
        expr: vector(1)
`

// TestShipper_FleetRuleGroupsReachMatchingEdgesAndSurviveRestart runs the
// real intake over a real catalog: a rule group selecting
// site="berlin" reaches the Berlin edge (in its welcome) and not the
// Paris one; a group for every edge set while the streams are open
// reaches both; the Berlin edge, restarted with the coordinator gone,
// evaluates its groups from its data directory.
func TestShipper_FleetRuleGroupsReachMatchingEdgesAndSurviveRestart(t *testing.T) {
	r, _, _, addr := startCatalogIntake(t)
	r.propose(t, catalog.SetRuleGroup{Group: catalog.RuleGroup{Name: "can-bus", Selector: `site="berlin", model=~"pi4.*"`, YAML: canGroupYAML}})

	berlinDir, parisDir := filepath.Join(t.TempDir(), "pi-berlin"), filepath.Join(t.TempDir(), "pi-paris")
	berlin, paris := openRuleEdge(t, berlinDir), openRuleEdge(t, parisDir)
	defer paris.close()
	run := func(e *ruleEdge, id string, ls map[string]string) func() error {
		o := options(t, cursorPath(t), addr)
		o.Labels, o.OnRuleGroups = ls, e.onRuleGroups
		return start(t, newShipper(t, o), openWAL(t, id))
	}
	stopBerlin := run(berlin, "pi-berlin", map[string]string{"site": "berlin", "model": "pi4b"})
	run(paris, "pi-paris", map[string]string{"site": "paris", "model": "pi4b"})

	eventually(t, "both edges handed a set", func() bool { return berlin.handedOver() > 0 && paris.handedOver() > 0 })
	if got := berlin.groups(); !slices.Equal(got, []string{"can-bus"}) {
		t.Fatalf("berlin evaluates %v, want can-bus", got)
	}
	if got := paris.groups(); len(got) != 0 {
		t.Fatalf("paris evaluates %v, want nothing", got)
	}
	// The catalog holds the edges' labels from their hellos.
	if n, _ := r.fsm.Node("pi-berlin"); n.Labels.Get("site") != "berlin" || n.Labels.Get("model") != "pi4b" {
		t.Fatalf("catalog labels of pi-berlin: %v", n.Labels)
	}

	// A change reaches the open streams.
	r.propose(t, catalog.SetRuleGroup{Group: catalog.RuleGroup{Name: "every-edge", YAML: everyEdgeGroupYAML}})
	eventually(t, "the group for every edge on both", func() bool {
		return slices.Equal(berlin.groups(), []string{"can-bus", "every-edge"}) && slices.Equal(paris.groups(), []string{"every-edge"})
	})
	berlinVersion := berlin.m.FleetVersion()

	// The coordinator goes away; the Berlin edge restarts without it.
	if err := stopBerlin(); err != nil {
		t.Fatal(err)
	}
	berlin.close()
	berlin = openRuleEdge(t, berlinDir)
	defer berlin.close()
	if got := berlin.groups(); !slices.Equal(got, []string{"can-bus", "every-edge"}) || berlin.m.FleetVersion() != berlinVersion {
		t.Fatalf("after a restart without coordinator: %v at version %d, want both groups at %d", got, berlin.m.FleetVersion(), berlinVersion)
	}

	// A deletion reaches the edge that still streams.
	r.propose(t, catalog.DeleteRuleGroup{Name: "every-edge"})
	eventually(t, "paris drops the deleted group", func() bool { return len(paris.groups()) == 0 })
}

func TestOptions_LabelsAreCheckedAsTheCatalogChecksThem(t *testing.T) {
	long := make([]byte, 1025)
	for i := range long {
		long[i] = 'v'
	}
	for name, tc := range map[string]struct {
		labels map[string]string
		ok     bool
	}{
		"none":        {nil, true},
		"good":        {map[string]string{"site": "berlin", "model_2": "pi4.b"}, true},
		"digit first": {map[string]string{"1site": "x"}, false},
		"dash first":  {map[string]string{"-site": "x"}, false},
		"empty value": {map[string]string{"site": ""}, false},
		"long value":  {map[string]string{"site": string(long)}, false},
		"bad utf-8":   {map[string]string{"site": "\xff"}, false},
	} {
		o := options(t, cursorPath(t), "127.0.0.1:1")
		o.Labels = tc.labels
		if err := o.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate %v, want ok=%v", name, err, tc.ok)
		}
	}
	o := options(t, cursorPath(t), "127.0.0.1:1")
	o.Labels = map[string]string{}
	for i := range replicator.MaxLabels + 1 {
		o.Labels[fmt.Sprintf("l%d", i)] = "x"
	}
	if err := o.Validate(); err == nil {
		t.Error("33 labels accepted")
	}
}
