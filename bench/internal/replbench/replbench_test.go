package replbench

import (
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/internal/promtext"

	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile_NearestRank(t *testing.T) {
	ds := func(secs ...int) []time.Duration {
		out := make([]time.Duration, len(secs))
		for i, s := range secs {
			out[i] = time.Duration(s) * time.Second
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		q    float64
		want float64
	}{
		{"one", ds(7), 0.99, 7},
		{"median of four is the second", ds(4, 1, 3, 2), 0.5, 2},
		{"p99 of 100 is the 99th", ds(seq(100)...), 0.99, 99},
		{"p99 of 10 is the max", ds(seq(10)...), 0.99, 10},
		{"max", ds(3, 9, 1), 1, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.in, tt.q); got != tt.want {
				t.Errorf("percentile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
	if got := percentile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("percentile of nothing = %v, want NaN", got)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = n - i // descending: percentile must sort
	}
	return out
}

func TestLagTracker_ResolvesWhenAckedThroughReachesTheSegment(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var l lagTracker
	l.record(at(0), 5)
	l.record(at(100), 5)
	l.record(at(200), 6)
	l.observe(at(300), 4) // nothing held yet
	if got := l.pendingCount(); got != 3 {
		t.Fatalf("pending after acked_through 4 = %d, want 3", got)
	}
	l.observe(at(1000), 5) // the two batches in segment 5
	if got := l.pendingCount(); got != 1 {
		t.Fatalf("pending after acked_through 5 = %d, want 1", got)
	}
	l.record(at(2500), 6)  // acked after the next poll: must not resolve at it
	l.observe(at(2000), 7) // resolves the batch of 200 ms only
	if got := l.pendingCount(); got != 1 {
		t.Fatalf("pending after acked_through 7 = %d, want 1 (the batch acked after the poll)", got)
	}
	lags, unresolved := l.result(at(4500))
	if unresolved != 1 {
		t.Errorf("unresolved = %d, want 1", unresolved)
	}
	want := []time.Duration{1000 * time.Millisecond, 900 * time.Millisecond, 1800 * time.Millisecond, 2000 * time.Millisecond}
	if len(lags) != len(want) {
		t.Fatalf("lags = %v, want %v", lags, want)
	}
	for i := range want {
		if lags[i] != want[i] {
			t.Errorf("lag %d = %v, want %v (all: %v)", i, lags[i], want[i], lags)
		}
	}
}

const edgeMetrics = `# HELP tributary_points_accepted_total Points stored and acknowledged.
# TYPE tributary_points_accepted_total counter
tributary_points_accepted_total 123
tributary_points_rejected_total{reason="too_old"} 4
tributary_api_events_total{event="a b"} 2 1700000000000
tributary_replication_connected 1
tributary_replication_acked_through_seq 17
tributary_replication_newest_sealed_seq 18
tributary_replication_backlog_segments 1
tributary_replication_backlog_bytes 4194304
tributary_replication_gap_points 0
tributary_replication_shipped_segments_total 16
tributary_replication_shipped_bytes_total 5.5e+06
tributary_replication_shipped_points_total 4000000
tributary_replication_refusals_total 0
`

func TestParseMetrics_ReadsSamplesWithAndWithoutLabels(t *testing.T) {
	m, err := promtext.Parse(strings.NewReader(edgeMetrics))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"tributary_points_accepted_total":                   123,
		`tributary_points_rejected_total{reason="too_old"}`: 4,
		`tributary_api_events_total{event="a b"}`:           2,
		"tributary_replication_shipped_bytes_total":         5.5e6,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	s, err := sampleFrom(time.Unix(5, 0), m)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Connected || s.AckedThrough != 17 || s.BacklogSegments != 1 || s.ShippedPoints != 4_000_000 || s.ShippedBytes != 5_500_000 {
		t.Errorf("sample = %+v", s)
	}
}

func TestParseMetrics_BadLinesAreErrorsNamingTheLine(t *testing.T) {
	for name, in := range map[string]string{
		"no value":      "# c\nfoo\n",
		"bad value":     "foo 1\nbar x\n",
		"open labels":   "foo} 1\nbar{a=\"b\" 1\n",
		"extra columns": "foo 1 2 3\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := promtext.Parse(strings.NewReader(in))
			if err == nil || !strings.Contains(err.Error(), "metrics line") {
				t.Errorf("err = %v, want a metrics line error", err)
			}
		})
	}
}

func TestSampleFrom_EdgeWithoutReplicationIsAnError(t *testing.T) {
	m, err := promtext.Parse(strings.NewReader("tributary_points_accepted_total 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sampleFrom(time.Now(), m); err == nil || !strings.Contains(err.Error(), metricConnected) {
		t.Errorf("err = %v, want one naming %s", err, metricConnected)
	}
}

func TestComputeDrain(t *testing.T) {
	t0 := time.Unix(1000, 0)
	poll := func(s int, backlog, shipped int64) sample {
		return sample{At: t0.Add(time.Duration(s) * time.Second), BacklogSegments: backlog, ShippedPoints: shipped}
	}
	back := t0.Add(10 * time.Second)
	polls := []sample{
		poll(0, 0, 100),
		poll(9, 40, 100), // the outage's backlog
		poll(10, 41, 100),
		poll(12, 42, 100), // reconnecting
		poll(14, 30, 1100),
		poll(16, 5, 2100),
		poll(18, 1, 2600), // drained (at most one segment)
		poll(20, 0, 2700),
	}
	d := computeDrain(polls, back, 1)
	if !d.Drained || d.BacklogSegments != 40 || d.Points != 2500 || d.Seconds != 6 || d.ReconnectS != 4 {
		t.Fatalf("drain = %+v, want drained, backlog 40, 2500 points in 6 s, reconnect 4 s", d)
	}
	if math.Abs(d.PointsPerS-2500.0/6) > 1e-9 {
		t.Errorf("rate = %v", d.PointsPerS)
	}

	notDrained := computeDrain(polls[:6], back, 1)
	if notDrained.Drained || notDrained.Points != 2000 || notDrained.Seconds != 4 {
		t.Errorf("cut short: %+v, want not drained, 2000 points in 4 s", notDrained)
	}
	never := computeDrain(polls[:4], back, 1)
	if never.Drained || !math.IsNaN(never.PointsPerS) || !math.IsNaN(never.ReconnectS) {
		t.Errorf("never resumed: %+v, want NaN rate and reconnect", never)
	}
}

func TestTSBSTable_RequestsContinueInTimeAndWrapValues(t *testing.T) {
	const cycle = 7
	tb, err := newTSBSTable(3, cycle, 1_000_000, 10_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	if tb.numSeries() != 30 {
		t.Fatalf("series = %d, want 30", tb.numSeries())
	}
	reqs := tb.requests(2, 5) // hosts 0-1 and host 2
	if len(reqs) != 2 || len(reqs[0].msg.Batches) != 20 || len(reqs[1].msg.Batches) != 10 || reqs[0].points() != 100 {
		t.Fatalf("requests: %d, batches %d/%d", len(reqs), len(reqs[0].msg.Batches), len(reqs[1].msg.Batches))
	}
	r := reqs[1]
	first := r.next()
	name := first.Batches[0].Series.Labels[0]
	if name.Name != "__name__" || name.Value != "cpu_usage_user" {
		t.Errorf("first label = %v, want __name__=cpu_usage_user", name)
	}
	v0 := append([]float64(nil), first.Batches[3].Values...)
	second := r.next()
	if got := second.Batches[0].TimestampsMs[0]; got != 1_000_000+5*10_000 {
		t.Errorf("second request starts at %d, want %d", got, 1_000_000+5*10_000)
	}
	if r.lastMs() != 1_000_000+9*10_000 {
		t.Errorf("lastMs = %d", r.lastMs())
	}
	// Row 7 is row 0 again (the cycle), row 8 row 1.
	if second.Batches[3].Values[2] != v0[0] || second.Batches[3].Values[3] != v0[1] {
		t.Errorf("values do not wrap at the cycle: first %v, second %v", v0, second.Batches[3].Values)
	}
	for _, b := range second.Batches {
		for _, v := range b.Values {
			if v < 0 || v > 100 || v != math.Trunc(v) {
				t.Fatalf("value %v is not an integer in [0, 100]", v)
			}
		}
	}
}

func TestOptions_Validate(t *testing.T) {
	o := DefaultOptions()
	o.Binary, o.Out = "bin/tributary", &bytes.Buffer{}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := o
	bad.Coordinators, bad.PointsPerS, bad.Clients, bad.Binary = 0, 0, 1000, ""
	err := bad.Validate()
	for _, want := range []string{"coordinators", "rate", "clients", "binary"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to mention %s", err, want)
		}
	}
	tooFewHosts := o
	tooFewHosts.Hosts = 40
	if err := tooFewHosts.Validate(); err == nil || !strings.Contains(err.Error(), "raise --hosts") {
		t.Errorf("40 hosts at 200,000 points/s: err = %v, want the data span refused", err)
	}
	if got := o.budgetBytes(); got < 1<<30 {
		t.Errorf("default budget %d is under 1 GiB", got)
	}
}

func TestWriteReport_EndsWithOneJSONLineWithTheIssueFigures(t *testing.T) {
	res := Result{TargetPointsPerS: 200_000, PointsPerSHeld: 150_000, OffPointsPerSHeld: 199_000,
		LagP50S: 1, LagP99S: 2, LagMaxS: 3, BytesPerPointShipped: 1.3, DrainRatio: report0(), EdgeCPUOverheadPct: 4,
		DrainPointsPerS: report0(), ReconnectS: report0(), EdgeCPUSPerMPointsOn: 1, EdgeCPUSPerMPointsOff: 1,
		OutagePointsPerSHeld: report0(), DrainLivePointsPerSHeld: report0(), Coordinators: 1}
	res.finish()
	if res.Valid {
		t.Fatal("a lag phase at 75% of the target rate must be invalid")
	}
	var buf bytes.Buffer
	if err := WriteReport(&buf, res); err != nil {
		t.Fatal(err)
	}
	out := strings.TrimRight(buf.String(), "\n")
	if !strings.Contains(out, "INVALID") {
		t.Errorf("report does not say INVALID:\n%s", out)
	}
	last := out[strings.LastIndexByte(out, '\n')+1:]
	var m map[string]any
	if err := json.Unmarshal([]byte(last), &m); err != nil {
		t.Fatalf("last line %q: %v", last, err)
	}
	for _, k := range []string{"lag_p50_s", "lag_p99_s", "bytes_per_point_shipped", "drain_ratio", "edge_cpu_overhead_pct",
		"points_per_s_held", "outage_s", "coordinators", "valid"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON line lacks %s", k)
		}
	}
	if m["drain_ratio"] != nil || m["valid"] != false {
		t.Errorf("drain_ratio = %v (want null, not measured), valid = %v", m["drain_ratio"], m["valid"])
	}
}

// report0 is a figure that was not measured.
func report0() report.Number { return report.Number(math.NaN()) }
