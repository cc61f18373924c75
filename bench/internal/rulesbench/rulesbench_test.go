package rulesbench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/workload"
	"github.com/tributarydb/tributary/rules"
)

// Every live series is read by exactly one rule, and the file is valid.
func TestPlan_EverySeriesReadOnceAndTheFileChecks(t *testing.T) {
	plan, err := NewPlan(1_000, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := workload.NewSensor(workload.SensorOptions{Series: 10_000, IntervalMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	reads := make(map[string]int)
	devMatch := regexp.MustCompile(`^avg by \(device\) \(avg_over_time\((\w+)\{edge="live",device=~"([^"]+)"\}\[1m\]\)\)$`)
	for i := range plan.Rules {
		m := devMatch.FindStringSubmatch(plan.Expr(i))
		if m == nil {
			t.Fatalf("rule %d: expression %s", i, plan.Expr(i))
		}
		for _, d := range strings.Split(m[2], "|") {
			reads[m[1]+"/"+d]++
		}
	}
	perRule := map[int]int{}
	for _, s := range gen.Series() {
		key := workload.Label(s, "__name__") + "/" + workload.Label(s, "device")
		if reads[key] != 1 {
			t.Fatalf("series %s read by %d rules, want 1", key, reads[key])
		}
	}
	for i := range plan.Rules {
		perRule[len(plan.RuleDevices(i))]++
	}
	if len(perRule) != 1 || perRule[5] != 1_000 { // 1,250 devices in 250 blocks
		t.Errorf("devices per rule: %v, want 5 for every rule", perRule)
	}
	if plan.OutputSeries() != 5_000 {
		t.Errorf("output series %d, want 5,000", plan.OutputSeries())
	}
	path := filepath.Join(t.TempDir(), "bench.yml")
	if err := os.WriteFile(path, []byte(plan.File(15*time.Second)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rules.CheckFiles(path); err != nil {
		t.Fatal(err)
	}
}

func TestNewPlan_RejectsLayoutsThatDoNotFit(t *testing.T) {
	for _, c := range [][2]int{{999, 10_000}, {1_000, 9_999}, {0, 8}, {8, 8}} {
		if _, err := NewPlan(c[0], c[1]); err == nil {
			t.Errorf("NewPlan(%d, %d) accepted", c[0], c[1])
		}
	}
	if _, err := NewPlan(4, 8); err != nil {
		t.Error(err)
	}
}

func TestIngestLoss(t *testing.T) {
	offRate, onRate, wall, offCPU, onCPU, cpu := ingestLoss([]phase{
		{kind: phaseFeed, rules: false, points: 1000, elapsed: time.Second, cpu: time.Second},
		{kind: phaseFeed, rules: true, points: 900, elapsed: time.Second, cpu: time.Second},
		{kind: phaseFeed, rules: true, points: 1800, elapsed: 2 * time.Second, cpu: time.Second},
		{kind: phaseFeed, rules: false, points: 3000, elapsed: 3 * time.Second, cpu: 3 * time.Second},
		{kind: phaseLive, rules: true, points: 0, elapsed: time.Second, cpu: time.Second},
	})
	if offRate != 1000 || onRate != 900 || math.Abs(wall-10) > 1e-9 {
		t.Errorf("wall: off %v on %v loss %v, want 1000, 900, 10", offRate, onRate, wall)
	}
	// With rules, 2,700 points in 2 CPU-seconds: more per CPU-second than
	// without (the node got less CPU, not less done with it).
	if offCPU != 1000 || onCPU != 1350 || math.Abs(cpu+35) > 1e-9 {
		t.Errorf("per CPU: off %v on %v loss %v, want 1000, 1350, -35", offCPU, onCPU, cpu)
	}
	if _, _, wall, _, _, _ := ingestLoss([]phase{{kind: phaseFeed, points: 1, elapsed: time.Second}}); !math.IsNaN(wall) {
		t.Errorf("loss without a phase with rules: %v, want NaN", wall)
	}
	_, _, _, _, _, cpu = ingestLoss([]phase{{kind: phaseFeed, points: 1, elapsed: time.Second, cpu: -1}, {kind: phaseFeed, rules: true, points: 1, elapsed: time.Second, cpu: time.Second}})
	if !math.IsNaN(cpu) {
		t.Errorf("loss per CPU without the CPU of a phase: %v, want NaN", cpu)
	}
}

func TestWriteReport_EndsWithTheJSONLine(t *testing.T) {
	o := DefaultOptions()
	m := &measurement{phases: []phase{
		{kind: phaseFeed, rules: false, points: 100, elapsed: time.Second, cpu: time.Second},
		{kind: phaseFeed, rules: true, points: 95, elapsed: time.Second, cpu: time.Second, evals: []time.Duration{4 * time.Second}},
		{kind: phaseLive, rules: true, elapsed: 10 * time.Second, cpu: 2 * time.Second,
			evals: []time.Duration{300 * time.Millisecond, 2 * time.Second, 500 * time.Millisecond}},
	}}
	r := m.result(o)
	var buf bytes.Buffer
	if err := WriteReport(&buf, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if got["rule_eval_p99_s"] != 2.0 || got["ingest_loss_pct"] != 5.0 || got["evaluations"] != 3.0 ||
		got["rule_eval_under_ingest_p99_s"] != 4.0 || got["live_phase_node_cpu_pct"] != 20.0 {
		t.Errorf("JSON %v", got)
	}
	if !strings.Contains(buf.String(), "missed") {
		t.Errorf("a 2 s p99 should miss the target:\n%s", buf.String())
	}
}

func TestOptions_Validate(t *testing.T) {
	o := DefaultOptions()
	o.Binary = "tributary"
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.Phase = 20 * time.Second
	o.Rules = 3
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "phase") || !strings.Contains(err.Error(), "multiple of 4") {
		t.Errorf("error %v, want the phase and the rules named", err)
	}
}

func TestSchedstat(t *testing.T) {
	if d, err := parseSchedstat("123 4567 89\n"); err != nil || d != 4567 {
		t.Errorf("parseSchedstat: %v, %v; want 4567ns", d, err)
	}
	for _, bad := range []string{"", "12", "12 x 3"} {
		if _, err := parseSchedstat(bad); err == nil {
			t.Errorf("parseSchedstat(%q) accepted", bad)
		}
	}
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no schedstat here")
	}
	w0, err := runqueueWait(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	w1, err := runqueueWait(os.Getpid())
	if err != nil || w1 < 0 || w0 < 0 {
		t.Errorf("run-queue wait %v then %v, %v", w0, w1, err)
	}
	if _, err := runqueueWait(1 << 30); err == nil {
		t.Error("a process that does not exist has a run-queue wait")
	}
}
