package edgebench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := summarize(ds, 2*time.Second)
	if l.Ops != 1000 || l.OpsPerS != 500 || l.P50Ms != 500 || l.P90Ms != 900 || l.P99Ms != 990 || l.P999Ms != 999 || l.MaxMs != 1000 || l.AvgMs != 500.5 {
		t.Fatalf("summary %+v", l)
	}
	if got := summarize(nil, time.Second); got.Ops != 0 {
		t.Fatalf("empty: %+v", got)
	}
}

func TestValidate_BadInput(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultIoTDBOptions()
	o.Binary, o.Out = self, &bytes.Buffer{}
	if err := o.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	o.Clients = []int{0, 10}
	o.OutOfOrderRatio = 2
	err = o.validate()
	for _, want := range []string{"client count 0", "client count 10", "out-of-order ratio"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
	ts := DefaultTSBSOptions()
	ts.Binary, ts.Out, ts.Span = self, &bytes.Buffer{}, time.Hour
	if err := ts.validate(); err == nil || !strings.Contains(err.Error(), "12 hours") {
		t.Errorf("short span: %v", err)
	}
	cb := DefaultCANBusOptions()
	cb.Out, cb.Profile, cb.Binary = &bytes.Buffer{}, "medium", "/nonexistent/tributary"
	if err := cb.validate(); err == nil || !strings.Contains(err.Error(), "find tributary binary") || !strings.Contains(err.Error(), "profile") {
		t.Errorf("canbus: %v", err)
	}
}

func TestRenderCANBus_SameSamplesBothModes(t *testing.T) {
	o := DefaultCANBusOptions()
	o.Vehicles, o.Minutes, o.Clients, o.PointsPerRequest = 3, 1, 2, 220
	single, err := renderCANBus(o, false, 1_700_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	multi, err := renderCANBus(o, true, 1_700_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	count := func(bs [][]lpBody) (lines, points int64, text string) {
		var sb strings.Builder
		for _, c := range bs {
			for _, b := range c {
				lines += b.lines
				points += b.points
				sb.Write(b.body)
			}
		}
		return lines, points, sb.String()
	}
	sl, sp, st := count(single)
	ml, mp, mt := count(multi)
	want := int64(3 * 22 * 600)
	if sp != want || mp != want || sl != want || ml != want/22 {
		t.Fatalf("single %d lines %d points, multi %d lines %d points; want %d points", sl, sp, ml, mp, want)
	}
	if got := strings.Count(st, "\n"); int64(got) != sl {
		t.Fatalf("single: %d newlines for %d lines", got, sl)
	}
	first := strings.SplitN(mt, "\n", 2)[0]
	if !strings.HasPrefix(first, "can,vehicle=car-01 speed=") || strings.Count(first, "=") != 23 {
		t.Fatalf("multi-field row: %q", first)
	}
}

// TestWorkloads_AgainstNode runs every workload briefly against a real
// node when TRIBUTARY_BINARY names one (make bench does).
func TestWorkloads_AgainstNode(t *testing.T) {
	bin := os.Getenv("TRIBUTARY_BINARY")
	if bin == "" {
		var err error
		if bin, err = nodeproc.FindBinary("tributary"); err != nil {
			t.Skip("no tributary binary (set TRIBUTARY_BINARY or run make build)")
		}
	}
	ctx := context.Background()
	dir := t.TempDir()
	common := func(out *bytes.Buffer) Common {
		c := defaultCommon()
		c.Binary, c.ResultsDir, c.WorkDir, c.WALSync, c.Out = bin, dir, t.TempDir(), "always", out
		return c
	}
	var out bytes.Buffer
	iot := DefaultIoTDBOptions()
	iot.Common, iot.Clients, iot.Duration = common(&out), []int{1, 2}, 700*time.Millisecond
	res, err := RunIoTDB(ctx, iot)
	if err != nil {
		t.Fatalf("iotdb: %v\n%s", err, out.String())
	}
	if len(res.Runs) != 4 || res.Runs[0].Points == 0 || res.Runs[3].Ops[opLatest].Ops == 0 {
		t.Fatalf("iotdb runs: %+v", res.Runs)
	}
	if res.Runs[3].OutOfOrderWrites == 0 {
		t.Fatalf("no out-of-order writes: %+v", res.Runs[3])
	}
	lastLine(t, &out)

	ts := DefaultTSBSOptions()
	ts.Common, ts.Hosts, ts.Queries, ts.Warmup = common(&out), 8, 20, 2
	tr, err := RunTSBS(ctx, ts)
	if err != nil {
		t.Fatalf("tsbs: %v\n%s", err, out.String())
	}
	if tr.Points != 8*10*int64(13*360) || tr.CheckedAnswers != 5*22 {
		t.Fatalf("tsbs: %d points, %d checked", tr.Points, tr.CheckedAnswers)
	}
	lastLine(t, &out)

	cb := DefaultCANBusOptions()
	cb.Common, cb.Vehicles, cb.Minutes = common(&out), 2, 1
	cr, err := RunCANBus(ctx, cb)
	if err != nil {
		t.Fatalf("canbus: %v\n%s", err, out.String())
	}
	if len(cr.Modes) != 2 || cr.Modes[1].Points != 2*22*600 {
		t.Fatalf("canbus: %+v", cr.Modes)
	}
	lastLine(t, &out)
	for _, f := range []string{"iotdb-short.json", "iotdb-short-throughput.png", "iotdb-short-latency.png",
		"tsbs-cpu-short.json", "tsbs-cpu-short-latency.png", "canbus-short.json", "canbus-short-latency.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// lastLine requires the output to end with a JSON record and resets it.
func lastLine(t *testing.T, out *bytes.Buffer) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var r Record
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil || r.Workload == "" || r.Machine.NProc == 0 {
		t.Fatalf("last line is not a record (%v): %s", err, lines[len(lines)-1])
	}
	out.Reset()
}
