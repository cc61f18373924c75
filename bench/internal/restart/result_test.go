package restart

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/report/reporttest"
	"github.com/tributarydb/tributary/bench/workload"
)

// sampleMeasurement is a 256 MiB WAL of 26.8M points replayed in 4.2 s with
// the big head and 7.9 s with the default flags, on a quiet 2-CPU machine.
func sampleMeasurement(t *testing.T) measurement {
	t.Helper()
	o := DefaultOptions()
	o.Commit = "v0.1.0-3-gabcdef"
	gen, err := workload.NewSensor(workload.SensorOptions{Series: 10_000, IntervalMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return measurement{
		opts:              o,
		gen:               gen,
		clients:           4,
		stats:             load.Stats{Points: 26_800_000, Requests: 2680, Elapsed: 7 * time.Second},
		headSamplesAtKill: 26_800_000,
		wal:               walSize{Bytes: 268_800_000, Segments: 65},
		bigHead: restartFigures{Ready: 4200 * time.Millisecond, CPU: 4 * time.Second, PeakRSSBytes: 812 * mib, OtherCores: 0.02,
			Opened: nodeOpened{ReplayedPoints: 26_800_000, Took: 4100 * time.Millisecond}, OpenedOK: true},
		dflt: restartFigures{Ready: 7900 * time.Millisecond, CPU: 9 * time.Second, PeakRSSBytes: 95 * mib, OtherCores: 0.05,
			Opened: nodeOpened{ReplayedPoints: 26_800_000, Took: 7800 * time.Millisecond}, OpenedOK: true},
		verify:  verification{Points: 26_800_000, Series: 10_000, Elapsed: 12 * time.Second},
		machine: report.Machine{GOOS: "linux", GOARCH: "arm64", NProc: 2},
	}
}

func TestResult_Figures(t *testing.T) {
	r := sampleMeasurement(t).result()
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"wal MiB", float64(r.WALMiB), 256.3},
		{"wal points", float64(r.WALPoints), 26_800_000},
		{"wal bytes per point", float64(r.WALBytesPerPt), 10.03},
		{"worst ready is b", float64(r.RestartReadyS), 7.9},
		{"ready a", float64(r.RestartReadyBigHeadS), 4.2},
		{"ready b", float64(r.RestartReadyDefaultS), 7.9},
		{"rss a", float64(r.RestartPeakRSSMiBBigHead), 812},
		{"rss b", float64(r.RestartPeakRSSMiBDefault), 95},
		{"node open a", float64(r.NodeOpenSBigHead), 4.1},
		{"load points/s", float64(r.LoadPointsPerS), 3_828_571},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if math.Abs(tc.got-tc.want) > 1e-9 {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
	if len(r.Notes) != 0 {
		t.Errorf("notes for a clean run: %q", r.Notes)
	}
}

func TestResult_Notes(t *testing.T) {
	tests := []struct {
		name string
		edit func(*measurement)
		want string // "" = no notes
	}{
		{"clean run", func(*measurement) {}, ""},
		{"lost points", func(m *measurement) {
			m.verify.Points -= 100
			m.verify.NumProblems = 1
		}, "LOST POINTS: 1 series differ"},
		{"head flushed during the load", func(m *measurement) { m.headSamplesAtKill = 1_000_000 }, "some were flushed to RocksDB"},
		{"head unknown is no note", func(m *measurement) { m.headSamplesAtKill = -1 }, ""},
		{"replay count differs", func(m *measurement) { m.bigHead.Opened.ReplayedPoints = 5 }, "restart a replayed 5 points"},
		{"contended machine", func(m *measurement) { m.dflt.OtherCores = 0.9 }, "(other processes and kernel threads) used 0.90 cores during restart b (of 2)"},
		{"short restarts are not judged", func(m *measurement) {
			m.dflt.OtherCores = 0.9
			m.dflt.Ready = 300 * time.Millisecond
		}, ""},
		{"unknown contention is no note", func(m *measurement) { m.bigHead.OtherCores = math.NaN() }, ""},
		{"another WAL size", func(m *measurement) { m.opts.WALBytes = 64 << 20 }, "the target is set for a 32 MiB WAL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := sampleMeasurement(t)
			tc.edit(&m)
			notes := m.result().Notes
			joined := strings.Join(notes, "\n")
			if tc.want == "" && len(notes) != 0 || tc.want != "" && !strings.Contains(joined, tc.want) {
				t.Errorf("notes %q, want %q", notes, tc.want)
			}
		})
	}
}

func TestWriteReport_TableThenJSONLine(t *testing.T) {
	m := sampleMeasurement(t)
	m.dflt.Ready = 12 * time.Second // b misses the target
	m.bigHead.OpenedOK = false      // a's log had no replay figures
	m.bigHead.OtherCores = math.NaN()
	r := m.result()
	var out bytes.Buffer
	if err := WriteReport(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	// Column widths depend on the figures; compare with runs of spaces
	// collapsed.
	squeezed := strings.Join(strings.Fields(text), " ")
	for _, want := range []string{
		"crash with a 32 MiB WAL",
		"WAL (MiB) 256.3",
		"points in WAL 26,800,000",
		"a. big head: ready after restart (s) 4.20 ≤ 10 met",
		"b. default flags: ready after restart (s) 12.00 ≤ 10 missed",
		"worst ready after restart (s) 12.00 ≤ 10 missed",
		"a. big head: peak RSS (MiB) 812.0",
		"--head-max-bytes 8589934592 --head-chunk-samples 65536; the node logged no replay figures",
		"the rest of the machine's CPU unknown",
		"the node replayed 26,800,000 points and opened in 7.80 s",
		"answered 26,800,000 of 26,800,000 acknowledged points in 10,000 series",
	} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	got := reporttest.LastJSONLine(t, text)
	want := map[string]any{
		"wal_mib":                       256.3,
		"wal_points":                    26_800_000.0,
		"restart_ready_s":               12.0,
		"restart_ready_big_head_s":      4.2,
		"restart_ready_default_s":       12.0,
		"restart_peak_rss_mib_big_head": 812.0,
		"restart_peak_rss_mib_default":  95.0,
		"node_open_s_big_head":          nil, // not logged: null, not 0
		"replayed_points_big_head":      -1.0,
		"restart_other_cores_big_head":  nil,
		"commit":                        "v0.1.0-3-gabcdef",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if m, ok := got["machine"].(map[string]any); !ok || m["nproc"] != 2.0 {
		t.Errorf("machine = %v", got["machine"])
	}
	if ns, ok := got["notes"].([]any); !ok || len(ns) != 0 {
		t.Errorf("notes = %v, want []", got["notes"])
	}
	if tg, ok := got["targets"].(map[string]any); !ok || tg["restart_ready_s"] != 10.0 {
		t.Errorf("targets = %v", got["targets"])
	}
}
