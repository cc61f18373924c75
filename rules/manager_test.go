package rules

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	promrules "github.com/prometheus/prometheus/rules"
	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The PromQL engine's and the HTTP client's pools outlive a test.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("github.com/tributarydb/tributary/node.(*Node).flushLoop"),
	)
}

const overheatRules = `
groups:
  - name: can-bus
    interval: 1s
    rules:
      - record: vehicle:coolant_temp:max
        expr: max by (vehicle) (coolant_temp)
      - alert: CoolantOverheat
        expr: coolant_temp > 105
        for: 4s
        labels:
          severity: critical
        annotations:
          summary: "{{ $labels.vehicle }} coolant at {{ $value }} °C"
`

func TestManager_RecordingRuleWritesIntoStore(t *testing.T) {
	dir := t.TempDir()
	files := writeFile(t, t.TempDir(), "can.yml", overheatRules)
	start := time.Now()
	e := newEnv(t, dir, Options{Files: []string{files}})
	e.write(start, 91.5, "coolant_temp", "vehicle", "truck-1", "sensor", "a")
	e.write(start, 97.25, "coolant_temp", "vehicle", "truck-1", "sensor", "b")
	e.write(start, 80, "coolant_temp", "vehicle", "truck-2", "sensor", "a")

	eventually(t, 10*time.Second, "two evaluations of the recording rule in the store", func() bool {
		got := e.samples(start, "vehicle:coolant_temp:max", "vehicle", "truck-1")
		s, ok := got[`vehicle:coolant_temp:max{vehicle="truck-1"}`]
		return ok && len(s.Ts) >= 2
	})
	got := e.samples(start, "vehicle:coolant_temp:max")
	if len(got) != 2 {
		t.Fatalf("recorded series: %v", got)
	}
	for key, want := range map[string]float64{
		`vehicle:coolant_temp:max{vehicle="truck-1"}`: 97.25,
		`vehicle:coolant_temp:max{vehicle="truck-2"}`: 80,
	} {
		s := got[key]
		for i, v := range s.Vs {
			if v != want {
				t.Errorf("%s at %d = %v, want %v", key, s.Ts[i], v, want)
			}
			// Evaluations are aligned to the group's interval.
			if s.Ts[i]%1000 != 0 && s.Ts[i] < start.UnixMilli() {
				t.Errorf("%s: sample at %d, not an evaluation slot after the start", key, s.Ts[i])
			}
		}
	}
	// Healthy, and evaluated.
	g := e.m.RuleGroups()[0]
	for _, r := range g.Rules() {
		if r.Health() != "ok" || r.LastError() != nil {
			t.Errorf("rule %s: health %s, error %v", r.Name(), r.Health(), r.LastError())
		}
	}
}

func TestManager_AlertFiresAndIsWrittenAsALERTS(t *testing.T) {
	files := writeFile(t, t.TempDir(), "can.yml", overheatRules)
	e := newEnv(t, t.TempDir(), Options{Files: []string{files}})
	start := time.Now()
	e.write(start, 110, "coolant_temp", "vehicle", "truck-1")
	e.write(start, 90, "coolant_temp", "vehicle", "truck-2")

	r := e.alertingRule("CoolantOverheat")
	eventually(t, 15*time.Second, "the alert firing", func() bool { return r.State().String() == "firing" })
	alerts := r.ActiveAlerts()
	if len(alerts) != 1 {
		t.Fatalf("active alerts: %d, want 1 (truck-1 only)", len(alerts))
	}
	a := alerts[0]
	if a.Labels.Get("vehicle") != "truck-1" || a.Labels.Get("severity") != "critical" {
		t.Errorf("alert labels %v", a.Labels)
	}
	if got, want := a.Annotations.Get("summary"), "truck-1 coolant at 110 °C"; got != want {
		t.Errorf("summary %q, want %q (template)", got, want)
	}
	if held := a.FiredAt.Sub(a.ActiveAt); held < 4*time.Second {
		t.Errorf("fired %v after becoming active, before its for (4s)", held)
	}

	// The state is in the store: ALERTS pending then firing, and
	// ALERTS_FOR_STATE holding the active time (both written from the
	// third evaluation on, once the group has looked for state to restore).
	pending := e.samples(start, "ALERTS", "alertname", "CoolantOverheat", "alertstate", "pending")
	firing := e.samples(start, "ALERTS", "alertname", "CoolantOverheat", "alertstate", "firing")
	if len(pending) != 1 || len(firing) != 1 {
		t.Fatalf("ALERTS series: pending %v, firing %v", pending, firing)
	}
	for key, s := range firing {
		if !strings.Contains(key, `vehicle="truck-1"`) || !strings.Contains(key, `severity="critical"`) {
			t.Errorf("firing series %s", key)
		}
		if s.Vs[0] != 1 {
			t.Errorf("ALERTS value %v", s.Vs[0])
		}
	}
	fs := e.samples(start, "ALERTS_FOR_STATE", "alertname", "CoolantOverheat")
	if len(fs) != 1 {
		t.Fatalf("ALERTS_FOR_STATE: %v", fs)
	}
	for _, s := range fs {
		if got := s.Vs[len(s.Vs)-1]; got != float64(a.ActiveAt.Unix()) {
			t.Errorf("ALERTS_FOR_STATE = %v, want the active time %d", got, a.ActiveAt.Unix())
		}
	}

	// Resolution: the series ends with a staleness marker and the alert
	// is no longer active.
	e.write(time.Now(), 95, "coolant_temp", "vehicle", "truck-1")
	eventually(t, 10*time.Second, "the alert resolved", func() bool { return len(r.ActiveAlerts()) == 0 })
	eventually(t, 5*time.Second, "a staleness marker ending ALERTS", func() bool {
		for _, s := range e.samples(start, "ALERTS", "alertstate", "firing") {
			if math.IsNaN(s.Vs[len(s.Vs)-1]) {
				return true
			}
		}
		return false
	})
}

func TestManager_ForStateRestoredAfterRestart(t *testing.T) {
	files := writeFile(t, t.TempDir(), "slow.yml", `
groups:
  - name: slow
    interval: 1s
    rules:
      - alert: StillHot
        expr: coolant_temp > 105
        for: 1h
`)
	dir := t.TempDir()
	opts := Options{Files: []string{files}, ForGracePeriod: time.Second}
	e := newEnv(t, dir, opts)
	e.write(time.Now(), 110, "coolant_temp", "vehicle", "truck-1")
	r := e.alertingRule("StillHot")
	eventually(t, 10*time.Second, "the alert pending", func() bool { return r.State().String() == "pending" })
	active := r.ActiveAlerts()[0].ActiveAt
	time.Sleep(5 * time.Second) // pending for about 5s
	e.m.Stop()
	e.m = nil
	stoppedAt := time.Now()
	e.close()
	time.Sleep(3 * time.Second) // down for about 3s

	e2 := newEnv(t, dir, opts)
	r2 := e2.alertingRule("StillHot")
	eventually(t, 10*time.Second, "the for state restored", func() bool { return r2.Restored() })
	restoredAt := time.Now()
	alerts := r2.ActiveAlerts()
	if len(alerts) != 1 {
		t.Fatalf("active alerts after restart: %d", len(alerts))
	}
	// Restored, the alert keeps the pending time it had before the stop
	// (the time down is not counted): its active time moves forward by the
	// time down. Without the restore it would be the first evaluation after
	// the start, about 2s before restoredAt.
	pendingBefore := stoppedAt.Sub(active)
	pendingNow := restoredAt.Sub(alerts[0].ActiveAt)
	down := 3 * time.Second
	if pendingNow < pendingBefore-2*time.Second || pendingNow > pendingBefore+3*time.Second {
		t.Errorf("pending %v after the restart, want about the %v before it (restored active time %v, first %v, down %v)",
			pendingNow, pendingBefore, alerts[0].ActiveAt, active, down)
	}
	if !alerts[0].ActiveAt.After(active) {
		t.Errorf("restored active time %v not moved past the first %v by the time down", alerts[0].ActiveAt, active)
	}
}

func TestManager_ReloadKeepsRulesWhenAFileIsBroken(t *testing.T) {
	rulesDir := t.TempDir()
	writeFile(t, rulesDir, "a.yml", overheatRules)
	e := newEnv(t, t.TempDir(), Options{Files: []string{rulesDir + "/*.yml"}})
	if n := len(e.m.RuleGroups()); n != 1 {
		t.Fatalf("groups %d", n)
	}
	writeFile(t, rulesDir, "b.yml", `
groups:
  - name: climate
    rules:
      - record: room:temperature:avg
        expr: avg by (room) (temperature)
`)
	if err := e.m.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := len(e.m.RuleGroups()); n != 2 {
		t.Fatalf("groups after adding a file: %d", n)
	}
	if g := e.m.RuleGroups()[1]; g.Interval() != DefaultEvaluationInterval {
		t.Errorf("group without an interval evaluates every %v, want the default %v", g.Interval(), DefaultEvaluationInterval)
	}
	writeFile(t, rulesDir, "c.yml", "groups:\n  - name: bad\n    rules:\n      - record: x\n        expr: sum(\n")
	err := e.m.Reload()
	if err == nil || !strings.Contains(err.Error(), "c.yml") {
		t.Fatalf("reload with a broken file: %v", err)
	}
	if n := len(e.m.RuleGroups()); n != 2 {
		t.Fatalf("groups after a failed reload: %d, want the 2 in force", n)
	}
	if got := e.m.LoadedFiles(); len(got) != 2 {
		t.Errorf("files in force %v", got)
	}
}

func TestNew_RefusesBrokenFilesAndOptions(t *testing.T) {
	n, api := openNode(t, t.TempDir())
	defer n.Close()
	bad := writeFile(t, t.TempDir(), "bad.yml", "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: up ==\n")
	for name, o := range map[string]Options{
		"broken file":           {Files: []string{bad}},
		"bad glob":              {Files: []string{"[x"}},
		"negative interval":     {EvaluationInterval: -time.Second},
		"alertmanager scheme":   {Alertmanagers: []string{"ftp://localhost:9093"}},
		"alertmanager no host":  {Alertmanagers: []string{"http://"}},
		"alertmanager password": {Alertmanagers: []string{"http://u:p@localhost:9093"}},
	} {
		if m, err := New(n, api.Engine(), api.Queryable(), o); err == nil {
			m.Stop()
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestManager_KeepFiringFor(t *testing.T) {
	files := writeFile(t, t.TempDir(), "keep.yml", `
groups:
  - name: keep
    interval: 1s
    rules:
      - alert: Flapping
        expr: coolant_temp > 105
        keep_firing_for: 4s
`)
	e := newEnv(t, t.TempDir(), Options{Files: []string{files}})
	e.write(time.Now(), 110, "coolant_temp", "vehicle", "truck-1")
	r := e.alertingRule("Flapping")
	eventually(t, 10*time.Second, "the alert firing", func() bool { return r.State().String() == "firing" })
	e.write(time.Now(), 90, "coolant_temp", "vehicle", "truck-1")
	coolAt := time.Now()
	eventually(t, 5*time.Second, "the alert kept firing", func() bool {
		as := r.ActiveAlerts()
		return len(as) == 1 && !as[0].KeepFiringSince.IsZero()
	})
	if as := r.ActiveAlerts(); as[0].State.String() != "firing" {
		t.Fatalf("kept alert in state %s", as[0].State)
	}
	eventually(t, 10*time.Second, "the alert resolved after keep_firing_for", func() bool { return len(r.ActiveAlerts()) == 0 })
	if held := time.Since(coolAt); held < 4*time.Second {
		t.Errorf("resolved %v after the condition ended, before keep_firing_for (4s)", held)
	}
}

// ruleWrites wraps a node and records the metric names of every write of
// rule samples (names with a colon), failing them while fail is set.
type ruleWrites struct {
	backend.Backend
	mu     sync.Mutex
	writes [][]string
	fail   bool
}

func (w *ruleWrites) Write(ctx context.Context, batches []model.Batch) (model.WriteResult, error) {
	var names []string
	for _, b := range batches {
		if n := nlabels.Labels(b.Labels).Get("__name__"); strings.Contains(n, ":") {
			names = append(names, n)
		}
	}
	w.mu.Lock()
	fail := w.fail && len(names) > 0
	if len(names) > 0 {
		slices.Sort(names)
		w.writes = append(w.writes, slices.Compact(names))
	}
	w.mu.Unlock()
	if fail {
		return model.WriteResult{}, errors.New("disk on fire")
	}
	return w.Backend.Write(ctx, batches)
}

func (w *ruleWrites) snapshot() [][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

const independentRules = `
groups:
  - name: independent
    interval: 1s
    rules:
      - record: x:sum
        expr: sum(x)
      - record: x:max
        expr: max(x)
      - record: x:min
        expr: min(x)
  - name: chained
    interval: 1s
    rules:
      - record: y:sum
        expr: sum(y)
      - record: y:sum:double
        expr: y:sum * 2
`

// The samples of a group whose rules read none of each other's results
// are one write per evaluation; a group with a chain keeps one write per
// rule, each before the next rule runs; a failed group write makes every
// rule of the group unhealthy.
func TestManager_IndependentRulesShareOneWrite(t *testing.T) {
	n, api := openNode(t, t.TempDir())
	defer n.Close()
	w := &ruleWrites{Backend: n}
	m, err := New(w, api.Engine(), api.Queryable(), Options{Files: []string{writeFile(t, t.TempDir(), "r.yml", independentRules)}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	e := &env{t: t, n: n, api: api}
	now := time.Now()
	for i, v := range []float64{3, 5, 8} {
		e.write(now, v, "x", "i", fmt.Sprint(i))
		e.write(now, v, "y", "i", fmt.Sprint(i))
	}
	m.Start()
	eventually(t, 15*time.Second, "three evaluations of each group", func() bool {
		var xs, ys int
		for _, names := range w.snapshot() {
			if slices.Contains(names, "x:sum") {
				xs++
			}
			if slices.Contains(names, "y:sum:double") {
				ys++
			}
		}
		return xs >= 3 && ys >= 3
	})
	for _, names := range w.snapshot() {
		switch {
		case slices.Contains(names, "x:sum") || slices.Contains(names, "x:max") || slices.Contains(names, "x:min"):
			if !slices.Equal(names, []string{"x:max", "x:min", "x:sum"}) {
				t.Errorf("a write of the independent group holds %v, want all three rules' samples", names)
			}
		case len(names) != 1:
			t.Errorf("a write of the chained group holds %v, want one rule's", names)
		}
	}
	sums := e.samples(now, "y:sum")[`y:sum{}`]
	doubles := e.samples(now, "y:sum:double")[`y:sum:double{}`]
	if len(sums.Ts) < 3 || len(doubles.Ts) < 3 {
		t.Fatalf("y:sum %v, y:sum:double %v", sums, doubles)
	}
	for i := range min(len(sums.Ts), len(doubles.Ts)) {
		if doubles.Ts[i] != sums.Ts[i] || doubles.Vs[i] != 2*sums.Vs[i] {
			t.Errorf("evaluation %d: y:sum:double %v at %d, y:sum %v at %d", i, doubles.Vs[i], doubles.Ts[i], sums.Vs[i], sums.Ts[i])
		}
	}

	w.mu.Lock()
	w.fail = true
	w.mu.Unlock()
	var indep *promrules.Group
	for _, g := range m.RuleGroups() {
		if g.Name() == "independent" {
			indep = g
		}
	}
	eventually(t, 10*time.Second, "the independent group's rules unhealthy after a failed write", func() bool {
		for _, r := range indep.Rules() {
			if r.Health() != promrules.HealthBad || r.LastError() == nil || !strings.Contains(r.LastError().Error(), "disk on fire") {
				return false
			}
		}
		return true
	})
}

// TestManager_ExactForRestoreKeepsTheStoredActiveTime restarts a manager
// with ExactForRestore, as a coordinator taking over the rules does: the
// alert keeps the active time its ALERTS_FOR_STATE series stored, though
// its `for` is under the grace period (which would start it over) and
// time passed with no evaluation (which would move it forward).
func TestManager_ExactForRestoreKeepsTheStoredActiveTime(t *testing.T) {
	files := writeFile(t, t.TempDir(), "slow.yml", `
groups:
  - name: slow
    interval: 500ms
    rules:
      - alert: StillHot
        expr: coolant_temp > 105
        for: 5m
`)
	dir := t.TempDir()
	opts := Options{Files: []string{files}, ExactForRestore: true} // grace period: 10m
	e := newEnv(t, dir, opts)
	e.write(time.Now(), 110, "coolant_temp", "vehicle", "truck-1")
	r := e.alertingRule("StillHot")
	eventually(t, 10*time.Second, "the alert pending", func() bool { return r.State().String() == "pending" })
	active := r.ActiveAlerts()[0].ActiveAt
	eventually(t, 10*time.Second, "ALERTS_FOR_STATE written", func() bool {
		return len(e.samples(active.Add(-time.Minute), "ALERTS_FOR_STATE")) == 1
	})
	e.m.Stop()
	e.m = nil
	e.close()
	time.Sleep(2 * time.Second) // nothing evaluates for about 2s

	e2 := newEnv(t, dir, opts)
	r2 := e2.alertingRule("StillHot")
	eventually(t, 10*time.Second, "the stored active time restored", func() bool {
		alerts := r2.ActiveAlerts()
		return r2.Restored() && len(alerts) == 1 && alerts[0].ActiveAt.Unix() == active.Unix()
	})
	// And written back as it is.
	eventually(t, 10*time.Second, "ALERTS_FOR_STATE continued", func() bool {
		for _, s := range e2.samples(time.Now().Add(-time.Second), "ALERTS_FOR_STATE") {
			return len(s.Vs) > 0 && int64(s.Vs[len(s.Vs)-1]) == active.Unix()
		}
		return false
	})
}
