package hostilebench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/internal/hostile"
)

func TestQuantileMs_NearestRankWithinTheWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var lat []latency
	for i := range 100 {
		lat = append(lat, latency{at: t0.Add(time.Duration(i) * time.Second), took: time.Duration(i+1) * time.Millisecond})
	}
	lat = append(lat, latency{at: t0.Add(-time.Second), took: time.Hour}) // before the window
	if got := quantileMs(lat, 0.99, t0, t0.Add(100*time.Second)); got != 99 {
		t.Errorf("p99 = %v ms, want 99", got)
	}
	if got := quantileMs(lat, 1, t0, t0.Add(10*time.Second)); got != 10 {
		t.Errorf("max of the first 10 s = %v ms, want 10", got)
	}
	if got := quantileMs(lat, 0.5, t0.Add(time.Hour), t0.Add(2*time.Hour)); !math.IsNaN(got) {
		t.Errorf("an empty window = %v, want NaN", got)
	}
}

func TestOptions_ValidateNamesBadFields(t *testing.T) {
	o := Options{Sizes: hostile.Sizes{Writes: -1, Hold: time.Second}}.WithDefaults()
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "--binary is required") || !strings.Contains(err.Error(), "must not be negative") {
		t.Errorf("Validate() = %v, want the missing binary and the negative size named", err)
	}
	o = Options{Procs: runopt.Procs{Binary: "tributary"}}.WithDefaults()
	if err := o.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if o.Sizes != hostile.DefaultSizes() || o.Interval != 50*time.Millisecond || o.Series*o.PointsPerSeries != 200 {
		t.Errorf("defaults %+v, want the scenario's sizes and 4,000 points/s", o)
	}
}

func TestWrite_EndsWithTheJSONLineLeadingWithTheIssuesFigures(t *testing.T) {
	var buf bytes.Buffer
	r := Result{RSSGrowthMiB: 12.5, LegitWriteP99Ms: 8, Refused: 10470, Bench: "hostile",
		Attacks:   []AttackResult{{Attack: "unauthenticated 64 MB write", Target: "edge-1 grpc", Refused: 100}},
		Processes: []ProcessResult{{Name: "edge-1", QuietPeakMiB: 50, AttackPeakMiB: 62.5, GrowthMiB: 12.5}}}
	if err := write(&buf, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, `{"rss_growth_mib":12.5,"legit_write_p99_ms":8,"refused":10470,"accepted_hostile":0,`) {
		t.Errorf("last line %q does not lead with the four figures", last)
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(last), &back); err != nil {
		t.Errorf("last line is not JSON: %v", err)
	}
	if !strings.Contains(buf.String(), "edge-1 grpc") || !strings.Contains(buf.String(), "62.5") {
		t.Errorf("the tables lack the attack or the process:\n%s", buf.String())
	}
}
