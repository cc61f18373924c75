package cluster

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCompare_CountsLostDuplicatedPhantomAndWrongValues(t *testing.T) {
	l := NewLedger()
	ts := []int64{10, 11, 12, 13}
	vs := func(s string, ts []int64) []float64 {
		out := make([]float64, len(ts))
		for i, t := range ts {
			out[i] = Value(s, t)
		}
		return out
	}
	l.Ack("a", ts, vs("a", ts))
	l.Ack("b", ts[:2], vs("b", ts[:2]))
	l.Doubt("b", []int64{20}, vs("b", []int64{20}))
	tests := []struct {
		name string
		ans  map[string][]Sample
		want CheckResult
	}{
		{"exact", map[string][]Sample{
			"a": {{10, Value("a", 10)}, {11, Value("a", 11)}, {12, Value("a", 12)}, {13, Value("a", 13)}},
			"b": {{10, Value("b", 10)}, {11, Value("b", 11)}},
		}, CheckResult{Series: 2, Returned: 6}},
		{"in doubt is allowed", map[string][]Sample{
			"a": {{10, Value("a", 10)}, {11, Value("a", 11)}, {12, Value("a", 12)}, {13, Value("a", 13)}},
			"b": {{10, Value("b", 10)}, {11, Value("b", 11)}, {20, Value("b", 20)}},
		}, CheckResult{Series: 2, Returned: 7, InDoubt: 1}},
		{"lost", map[string][]Sample{
			"a": {{10, Value("a", 10)}, {13, Value("a", 13)}},
		}, CheckResult{Series: 1, Returned: 2, Lost: 4}},
		{"duplicated", map[string][]Sample{
			"a": {{10, Value("a", 10)}, {11, Value("a", 11)}, {11, Value("a", 11)}, {12, Value("a", 12)}, {13, Value("a", 13)}},
			"b": {{10, Value("b", 10)}, {11, Value("b", 11)}},
		}, CheckResult{Series: 2, Returned: 7, Duplicated: 1}},
		{"phantom and wrong series", map[string][]Sample{
			"a": {{10, Value("a", 10)}, {11, Value("a", 11)}, {12, Value("a", 12)}, {13, Value("a", 13)}, {14, Value("a", 14)}},
			"b": {{10, Value("b", 10)}, {11, Value("a", 11)}},
			"c": {{10, Value("c", 10)}},
		}, CheckResult{Series: 3, Returned: 8, Phantom: 2, WrongValue: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(RawAnswer{Points: tc.ans}, l)
			got.Examples = nil
			if got.Series != tc.want.Series || got.Returned != tc.want.Returned || got.Lost != tc.want.Lost ||
				got.Duplicated != tc.want.Duplicated || got.Phantom != tc.want.Phantom ||
				got.WrongValue != tc.want.WrongValue || got.InDoubt != tc.want.InDoubt {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			if got.OK() != (tc.want.Lost+tc.want.Duplicated+tc.want.Phantom+tc.want.WrongValue == 0) {
				t.Fatalf("OK() = %v for %v", got.OK(), got)
			}
		})
	}
}

func TestValue_DiffersAcrossSeriesAndTimestamps(t *testing.T) {
	seen := map[float64]string{}
	for i := range 50 {
		for ts := int64(1_700_000_000_000); ts < 1_700_000_000_050; ts++ {
			v := Value(SeriesName(i), ts)
			if v != float64(int64(v)) || v >= 1<<53 {
				t.Fatalf("Value(%s, %d) = %v: not an exact integer below 2^53", SeriesName(i), ts, v)
			}
			key := SeriesName(i) + "@" + time.UnixMilli(ts).String()
			if prev, dup := seen[v]; dup {
				t.Fatalf("Value collides for %s and %s", prev, key)
			}
			seen[v] = key
		}
	}
}

func TestProcess_StartWaitsForTheReadyLineAndKillStopsIt(t *testing.T) {
	dir := t.TempDir()
	p := &Process{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", "echo starting; sleep 0.2; echo 'msg=\"ready\"'; exec sleep 60"},
		LogPath: filepath.Join(dir, "sh.log"), Ready: `msg="ready"`}
	if err := p.Start(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !p.Running() {
		t.Fatal("not running after a successful start")
	}
	p.Kill()
	if p.Running() {
		t.Fatal("running after Kill")
	}
	// A restart must wait for a ready line of its own, not the old one.
	p.Args = []string{"-c", "echo again; exit 3"}
	err := p.Start(10 * time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited before") || !strings.Contains(err.Error(), "again") {
		t.Fatalf("restart of a process that exits: %v, want an error quoting its log", err)
	}
	if n := p.CountInLog("=== e2e: start"); n != 2 {
		t.Fatalf("%d start markers in the log, want 2", n)
	}
}

func TestProcess_StopIsCleanOnSIGTERM(t *testing.T) {
	p := &Process{Name: "sh", Bin: "/bin/sh", Args: []string{"-c", "trap 'exit 0' TERM; echo ready; while :; do sleep 0.05; done"},
		LogPath: filepath.Join(t.TempDir(), "sh.log"), Ready: "ready"}
	if err := p.Start(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

func TestOptions_ValidateNamesEveryBadField(t *testing.T) {
	_, err := New(Options{Coordinators: -1})
	if err == nil {
		t.Fatal("no error for empty options")
	}
	for _, want := range []string{"Bin", "Dir", "Coordinators"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := NewWriter(WriterOptions{}); err == nil || !strings.Contains(err.Error(), "Addr") {
		t.Errorf("NewWriter without an address: %v", err)
	}
}

func TestNew_LaysOutDistinctPortsAndPeers(t *testing.T) {
	c, err := New(Options{Bin: "tributary", Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, co := range c.Coordinators {
		for _, a := range []string{co.Cluster, co.Intake, co.GRPC, co.HTTP} {
			if seen[a] {
				t.Fatalf("address %s used twice", a)
			}
			seen[a] = true
		}
		if !strings.Contains(strings.Join(co.Args, " "), "--peers 1=c1@") {
			t.Fatalf("%s: no --peers in %q", co.ID, co.Args)
		}
	}
	if len(c.Processes()) != 4 {
		t.Fatalf("%d processes, want 4", len(c.Processes()))
	}
}

func TestParseMetrics_ReadsSamplesWithThePrefix(t *testing.T) {
	got, err := parseMetrics("# HELP x y\n# TYPE tributary_replication_connected gauge\ntributary_replication_connected 1\nother 2\ntributary_replication_lag_seconds{a=\"b c\"} 0.5\n", "tributary_replication_")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["tributary_replication_connected"] != 1 || got[`tributary_replication_lag_seconds{a="b c"}`] != 0.5 {
		t.Fatalf("got %v", got)
	}
	if _, err := parseMetrics("tributary_replication_x notanumber\n", "tributary_"); err == nil {
		t.Fatal("no error for a bad value")
	}
}
