package ingest

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/report/reporttest"
	"github.com/tributarydb/tributary/bench/workload"
)

// sampleMeasurement is a run of 60M points in 20 s on a 2-CPU machine.
func sampleMeasurement(t *testing.T) measurement {
	t.Helper()
	o := DefaultOptions()
	o.Commit = "v0.1.0-3-gabcdef"
	gen, err := workload.NewSensor(workload.SensorOptions{Series: 10_000, IntervalMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	return measurement{
		opts:    o,
		gen:     gen,
		reqs:    gen.Requests(100, 100),
		clients: 4,
		stats: load.Stats{
			Points: 60_000_000, Requests: 6000, Elapsed: 20 * time.Second, Latencies: lat,
			FillTime: 300 * time.Millisecond, WaitTime: 76 * time.Second,
		},
		before:    nodeproc.Usage{CPU: 2 * time.Second},
		after:     nodeproc.Usage{CPU: 20 * time.Second, HWMBytes: 100 * mib},
		exit:      nodeproc.Exit{CPU: 23 * time.Second, MaxRSSBytes: 120 * mib, StopDuration: 1500 * time.Millisecond},
		compact:   nodeproc.CompactResult{SSTBytes: 48_000_000, Points: 60_000_000, Elapsed: 4 * time.Second},
		dataBytes: 50_000_000,
		selfCPU:   4 * time.Second,
		machine:   report.Machine{GOOS: "linux", GOARCH: "arm64", NProc: 2},
	}
}

func TestMeasurement_DerivesFigures(t *testing.T) {
	r := sampleMeasurement(t).result()
	checks := []struct {
		name      string
		got, want float64
	}{
		{"points/s", float64(r.PointsPerS), 3_000_000},
		// 23 s at exit − 2 s at load start = 21 s for 60M points.
		{"cpu-s per million points", float64(r.CPUSPerMillionPoints), 0.35},
		{"cpu-s per million points, load window", float64(r.CPUSPerMillionPointsLoad), 0.3},
		{"peak RSS is the larger of VmHWM and ru_maxrss", float64(r.PeakRSSMiB), 120},
		{"peak RSS at load end", float64(r.PeakRSSLoadMiB), 100},
		{"bytes/point", float64(r.BytesPerPoint), 0.8},
		{"p50", float64(r.WriteP50Ms), 50},
		{"p99", float64(r.WriteP99Ms), 99},
		{"node cores", float64(r.NodeCores), 0.9},
		{"generator cores", float64(r.GeneratorCores), 0.2},
		{"machine util", float64(r.MachineCPUUtil), 0.55},
		{"client wait", float64(r.ClientWaitFraction), 0.95},
	}
	for _, c := range checks {
		if diff := c.got - c.want; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.BatchPoints != 10_000 || r.SeriesPerBatch != 100 || r.Series != 10_000 {
		t.Errorf("shape %d/%d/%d", r.BatchPoints, r.SeriesPerBatch, r.Series)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "latency-bound") {
		t.Errorf("notes %q, want one latency-bound note", r.Notes)
	}
}

func TestMeasurement_NotesWhenMachineIsCPUBound(t *testing.T) {
	m := sampleMeasurement(t)
	m.selfCPU = 18 * time.Second // 0.9 cores + node 0.9 = 1.8 of 2
	r := m.result()
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "CPU-bound") {
		t.Errorf("notes %q, want a CPU-bound note", r.Notes)
	}
}

func TestWriteReport_TableThenExactlyOneJSONLine(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteReport(&buf, sampleMeasurement(t).result()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	j := reporttest.LastJSONLine(t, out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for _, l := range lines[:len(lines)-1] {
		if strings.HasPrefix(strings.TrimSpace(l), "{") {
			t.Errorf("JSON-looking line before the last: %q", l)
		}
	}
	for _, k := range []string{"points_per_s", "cpu_s_per_million_points", "peak_rss_mib", "bytes_per_point",
		"points", "series", "duration_s", "write_p50_ms", "write_p99_ms", "commit", "machine"} {
		if _, ok := j[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if m := j["machine"].(map[string]any); m["goarch"] != "arm64" || m["nproc"] != 2.0 {
		t.Errorf("machine %v", m)
	}
	squeezed := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"points/s 3,000,000 ≥ 3,000,000 met",
		"CPU-s per million points 0.350 ≤ 0.30 missed",
		"peak RSS (MiB) 120.0 ≤ 128 met",
		"bytes/point 0.800 ≤ 1.0 met",
		"write latency p99 (ms) 99.00",
		"commit v0.1.0-3-gabcdef",
	} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestWriteReport_ZeroPointsIsNullNotNaN(t *testing.T) {
	m := sampleMeasurement(t)
	m.stats = load.Stats{Elapsed: time.Second}
	m.compact = nodeproc.CompactResult{}
	var buf bytes.Buffer
	if err := WriteReport(&buf, m.result()); err != nil {
		t.Fatal(err)
	}
	j := reporttest.LastJSONLine(t, buf.String())
	if j["cpu_s_per_million_points"] != nil || j["bytes_per_point"] != nil || j["write_p50_ms"] != nil {
		t.Errorf("unmeasurable figures should be null: %v", j)
	}
	if !strings.Contains(buf.String(), "n/a") {
		t.Errorf("table should say n/a:\n%s", buf.String())
	}
}

func TestOptions_Validate(t *testing.T) {
	o := DefaultOptions()
	o.Binary = "bin/tributary"
	if err := o.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	o.Workload, o.BatchPoints, o.Clients = "nope", 10, 0
	err := o.Validate()
	if err == nil {
		t.Fatal("bad options validated")
	}
	for _, want := range []string{"workload", "batch points", "clients"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestNewGenerator_SamplesEndBeforeNow(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, workloadName := range []string{"sensor", "canbus"} {
		o := DefaultOptions()
		o.Workload = workloadName
		gen, err := newGenerator(o, now)
		if err != nil {
			t.Fatal(err)
		}
		// At the ceiling rate for the whole duration, samples stay in the past.
		perSeries := int64(o.Duration.Seconds() * ceilingPointsPerS / float64(gen.NumSeries()))
		if last := gen.StartMs() + perSeries*gen.IntervalMs(); last > now.UnixMilli() {
			t.Errorf("%s: samples reach %d, after now %d", workloadName, last, now.UnixMilli())
		}
		if gen.StartMs()%gen.IntervalMs() != 0 {
			t.Errorf("%s: start %d not aligned to the interval", workloadName, gen.StartMs())
		}
	}
}
