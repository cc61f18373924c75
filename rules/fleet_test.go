package rules

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// sumGauge adds up the data points of the gauge name.
func sumGauge(t *testing.T, reader *sdkmetric.ManualReader, name string) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[float64]); ok && m.Name == name {
				for _, p := range g.DataPoints {
					total += p.Value
				}
			}
		}
	}
	return total
}

const fleetCanGroup = `groups:
  - name: can-bus
    interval: 1s
    rules:
      - record: vehicle:coolant_temp:max
        expr: max by (vehicle) (coolant_temp)
`

const fleetClimateGroup = `groups:
  - name: climate
    interval: 1s
    rules:
      - record: building:temperature:avg
        expr: avg by (building) (temperature)
`

// groupNames lists the (file, name) of the groups in force.
func groupNames(m *Manager) []string {
	var out []string
	for _, g := range m.RuleGroups() {
		out = append(out, filepath.Base(g.File())+";"+g.Name())
	}
	return out
}

func TestCheckGroup(t *testing.T) {
	if sum, err := CheckGroup("can-bus", fleetCanGroup); err != nil || sum.Recording != 1 {
		t.Fatalf("valid group: %+v %v", sum, err)
	}
	for name, tc := range map[string]struct{ name, text, want string }{
		"other name":   {"can", fleetCanGroup, `named "can-bus"`},
		"two groups":   {"can-bus", fleetCanGroup + strings.TrimPrefix(fleetClimateGroup, "groups:\n"), "2 groups"},
		"bad expr":     {"g", "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: sum(\n", "parse"},
		"bad field":    {"g", "groups:\n  - name: g\n    bogus: 1\n    rules: []\n", "bogus"},
		"not yaml":     {"g", "{{{", "yaml"},
		"no group":     {"g", "groups: []\n", "0 groups"},
		"bad for":      {"g", "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n        for: soon\n", "soon"},
		"bad template": {"g", "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up\n        annotations:\n          s: '{{ $value '\n", "template"},
	} {
		if _, err := CheckGroup(tc.name, tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

// TestManager_FleetRulesPersistAndApplyOnlyNewer: fleet groups evaluate
// beside a local file's group of the same name, are kept in the fleet
// rules file, an older version is ignored, and a restarted manager
// evaluates them again without being sent them.
func TestManager_FleetRulesPersistAndApplyOnlyNewer(t *testing.T) {
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet-rules.yml")
	local := writeFile(t, t.TempDir(), "local.yml", fleetCanGroup)
	reader := sdkmetric.NewManualReader()
	e := newEnv(t, dir, Options{Files: []string{local}, FleetRulesFile: fleetFile,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if got := groupNames(e.m); len(got) != 1 || e.m.FleetVersion() != 0 {
		t.Fatalf("before: %v, version %d", got, e.m.FleetVersion())
	}
	if err := e.m.ApplyFleetRules(7, []FleetGroup{{Name: "can-bus", YAML: fleetCanGroup}, {Name: "climate", YAML: fleetClimateGroup}}); err != nil {
		t.Fatal(err)
	}
	want := "fleet-rules.yml;can-bus,fleet-rules.yml;climate,local.yml;can-bus"
	if got := strings.Join(groupNames(e.m), ","); got != want {
		t.Fatalf("groups %s, want %s", got, want)
	}
	// An older or equal version changes nothing.
	if err := e.m.ApplyFleetRules(7, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.m.ApplyFleetRules(3, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(groupNames(e.m), ","); got != want || e.m.FleetVersion() != 7 {
		t.Fatalf("after older versions: %s, version %d", got, e.m.FleetVersion())
	}
	// The fleet's groups are evaluated: the climate group's series.
	start := time.Now()
	e.write(start, 21, "temperature", "building", "hq", "room", "a")
	eventually(t, 10*time.Second, "the fleet group's recording rule in the store", func() bool {
		_, ok := e.samples(start, "building:temperature:avg")[`building:temperature:avg{building="hq"}`]
		return ok
	})
	// A group that is gone from a newer set stops.
	if err := e.m.ApplyFleetRules(9, []FleetGroup{{Name: "climate", YAML: fleetClimateGroup}}); err != nil {
		t.Fatal(err)
	}
	want = "fleet-rules.yml;climate,local.yml;can-bus"
	if got := strings.Join(groupNames(e.m), ","); got != want {
		t.Fatalf("after version 9: %s, want %s", got, want)
	}
	if v := sumGauge(t, reader, "tributary.rules.fleet.version"); v != 9 {
		t.Errorf("fleet version metric %v, want 9", v)
	}
	e.close()

	// A restart: the groups and the version come from the file.
	e = newEnv(t, dir, Options{Files: []string{local}, FleetRulesFile: fleetFile})
	if got := strings.Join(groupNames(e.m), ","); got != want || e.m.FleetVersion() != 9 {
		t.Fatalf("after restart: %s, version %d", got, e.m.FleetVersion())
	}
	if err := e.m.ApplyFleetRules(8, nil); err != nil || e.m.FleetVersion() != 9 {
		t.Fatalf("an older version after the restart: %v, version %d", err, e.m.FleetVersion())
	}
}

// TestManager_FleetRulesBadGroupIsLeftOut: a group that does not parse is
// left out; the others apply.
func TestManager_FleetRulesBadGroupIsLeftOut(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, dir, Options{FleetRulesFile: filepath.Join(dir, "fleet-rules.yml")})
	err := e.m.ApplyFleetRules(4, []FleetGroup{{Name: "broken", YAML: "groups: [{name: broken, rules: [{record: r, expr: 'sum('}]}]"},
		{Name: "climate", YAML: fleetClimateGroup}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(groupNames(e.m), ","); got != "fleet-rules.yml;climate" {
		t.Fatalf("groups %s", got)
	}
}

// TestManager_FleetRulesFileDamagedIsSkipped: a fleet file without its
// header does not stop the start; it is not evaluated, and the next set
// from the coordinators replaces it.
func TestManager_FleetRulesFileDamagedIsSkipped(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "fleet-rules.yml")
	if err := os.WriteFile(f, []byte(fleetCanGroup), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, dir, Options{FleetRulesFile: f})
	if got := groupNames(e.m); len(got) != 0 || e.m.FleetVersion() != 0 {
		t.Fatalf("groups %v, version %d", got, e.m.FleetVersion())
	}
	if err := e.m.ApplyFleetRules(1, []FleetGroup{{Name: "climate", YAML: fleetClimateGroup}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(groupNames(e.m), ","); got != "fleet-rules.yml;climate" {
		t.Fatalf("groups %s", got)
	}
}

// TestSplitFile: each group of a file becomes a rule file of its own that
// CheckGroup accepts and that means the same.
func TestSplitFile(t *testing.T) {
	p := writeFile(t, t.TempDir(), "two.yml", fleetCanGroup+strings.TrimPrefix(fleetClimateGroup, "groups:\n"))
	gs, err := SplitFile(p)
	if err != nil || len(gs) != 2 || gs[0].Name != "can-bus" || gs[1].Name != "climate" {
		t.Fatalf("split %+v %v", gs, err)
	}
	for _, g := range gs {
		if sum, err := CheckGroup(g.Name, g.YAML); err != nil || sum.Recording != 1 {
			t.Errorf("group %s: %+v %v\n%s", g.Name, sum, err, g.YAML)
		}
	}
	if !strings.Contains(gs[1].YAML, "avg by (building) (temperature)") || !strings.Contains(gs[0].YAML, "interval: 1s") {
		t.Errorf("split YAML lost something:\n%s\n%s", gs[0].YAML, gs[1].YAML)
	}
	bad := writeFile(t, t.TempDir(), "bad.yml", "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: sum(\n")
	if _, err := SplitFile(bad); err == nil || !strings.Contains(err.Error(), "bad.yml") {
		t.Errorf("split of an invalid file: %v", err)
	}
}

// TestManager_FleetRulesUnchangedDoNotReloadTheFiles: the same groups
// under a newer version (a new stream's welcome) are not loaded again, so
// a rule file edited on disk is not read behind the operator's back;
// changed groups load the files too.
func TestManager_FleetRulesUnchangedDoNotReloadTheFiles(t *testing.T) {
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet-rules.yml")
	local := writeFile(t, t.TempDir(), "local.yml", fleetCanGroup)
	e := newEnv(t, dir, Options{Files: []string{local}, FleetRulesFile: fleetFile})
	climate := []FleetGroup{{Name: "climate", YAML: fleetClimateGroup}}
	if err := e.m.ApplyFleetRules(5, climate); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(local, []byte("groups:\n  - name: broken\n    rules:\n      - record: r\n        expr: sum(\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.m.ApplyFleetRules(6, climate); err != nil {
		t.Fatalf("the same groups again read the edited rule file: %v", err)
	}
	if v := e.m.FleetVersion(); v != 6 {
		t.Fatalf("version %d, want 6", v)
	}
	if v, _, _, err := readFleetFile(fleetFile); err != nil || v != 6 {
		t.Fatalf("file version %d %v, want 6", v, err)
	}
	err := e.m.ApplyFleetRules(7, append(climate, FleetGroup{Name: "can-bus", YAML: fleetCanGroup}))
	if err == nil || !strings.Contains(err.Error(), "local.yml") {
		t.Fatalf("changed groups with a broken rule file: %v", err)
	}
	// The rules in force stay; the new set is kept for the next reload.
	if got := strings.Join(groupNames(e.m), ","); got != "fleet-rules.yml;climate,local.yml;can-bus" || e.m.FleetVersion() != 7 {
		t.Fatalf("groups %s, version %d", got, e.m.FleetVersion())
	}
	if err := os.WriteFile(local, []byte(fleetClimateGroup), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(groupNames(e.m), ","); got != "fleet-rules.yml;can-bus,fleet-rules.yml;climate,local.yml;climate" {
		t.Fatalf("after the reload: %s", got)
	}
}
