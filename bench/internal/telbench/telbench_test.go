package telbench

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/ingest"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/internal/telemetry"
)

func TestRun_RotatesModesAndReportsMedians(t *testing.T) {
	var order []Mode
	// Off runs at 1000 points/s (one outlier), metrics at 990, traced at 950.
	speed := map[Mode][]float64{ModeOff: {1000, 1000, 700}, ModeMetrics: {990, 990, 990}, ModeOn: {950, 950, 950}}
	fake := func(ctx context.Context, o ingest.Options) (ingest.Result, error) {
		mode := ModeMetrics
		switch {
		case slices.Contains(o.NodeArgs, "--metrics=false"):
			mode = ModeOff
		case slices.Contains(o.NodeArgs, "--otlp-endpoint"):
			mode = ModeOn
			i := slices.Index(o.NodeArgs, "--otlp-endpoint")
			p, err := telemetry.Setup(ctx, telemetry.Config{Flags: telemetry.Flags{OTLPEndpoint: o.NodeArgs[i+1], OTLPInsecure: true,
				OTLPInterval: time.Hour, Traces: true}})
			if err != nil {
				return ingest.Result{}, err
			}
			_, span := p.TracerProvider().Tracer("fake").Start(ctx, "write")
			span.End()
			if err := p.Shutdown(ctx); err != nil {
				return ingest.Result{}, err
			}
		}
		if !slices.Contains(o.NodeArgs, "--keep-me") {
			t.Errorf("mode %s lost the caller's node args: %q", mode, o.NodeArgs)
		}
		n := 0
		for _, m := range order {
			if m == mode {
				n++
			}
		}
		order = append(order, mode)
		pps := speed[mode][n]
		return ingest.Result{PointsPerS: report.Number(pps), CPUSPerMillionPoints: report.Number(1e3 / pps), PeakRSSMiB: 100}, nil
	}
	o := ingest.DefaultOptions()
	o.Binary = "tributary"
	o.NodeArgs = []string{"--keep-me"}
	var out bytes.Buffer
	res, err := Run(context.Background(), Options{Ingest: o, Rounds: 3, Output: runopt.Output{Out: &out, Commit: "test"}, run: fake})
	if err != nil {
		t.Fatal(err)
	}
	want := []Mode{ModeOff, ModeMetrics, ModeOn, ModeMetrics, ModeOn, ModeOff, ModeOn, ModeOff, ModeMetrics}
	if !slices.Equal(order, want) {
		t.Errorf("run order %v, want %v", order, want)
	}
	if res.PointsPerSOff != 1000 || res.PointsPerSMetrics != 990 || res.PointsPerSOn != 950 {
		t.Errorf("medians %v %v %v", res.PointsPerSOff, res.PointsPerSMetrics, res.PointsPerSOn)
	}
	// CPU per point is 1e3/pps: +1.01 % and +5.26 %.
	if res.CPUOverheadMetricsPct != 1.01 || res.CPUOverheadPct != 5.26 || res.MetCPU {
		t.Errorf("CPU added %v %v met_cpu=%v; want 1.01, 5.26, missed", res.CPUOverheadMetricsPct, res.CPUOverheadPct, res.MetCPU)
	}
	if res.OverheadMetricsPct != 1 || res.OverheadPct != 5 || res.Met {
		t.Errorf("overheads %v %v met=%v; want 1, 5, missed", res.OverheadMetricsPct, res.OverheadPct, res.Met)
	}
	// Per round: off 1000/1000/700 against metrics 990 (1, 1, -41.43 %)
	// and traced 950 (5, 5, -35.71 %).
	if res.OverheadMetricsPairedPct != 1 || res.OverheadPairedPct != 5 {
		t.Errorf("paired overheads %v %v; want 1, 5", res.OverheadMetricsPairedPct, res.OverheadPairedPct)
	}
	if res.SpansExported != 3 || res.SpreadOffPct != 30 {
		t.Errorf("spans %d, spread %v", res.SpansExported, res.SpreadOffPct)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var js map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &js); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out.String())
	}
	for _, k := range []string{"ingest_points_per_s_off", "ingest_points_per_s_on", "overhead_pct", "overhead_metrics_pct", "runs"} {
		if _, ok := js[k]; !ok {
			t.Errorf("JSON line lacks %q", k)
		}
	}
	if !strings.Contains(out.String(), "missed") {
		t.Errorf("table lacks the verdict:\n%s", out.String())
	}
}

func TestRun_FailsWithoutExportedSpans(t *testing.T) {
	fake := func(context.Context, ingest.Options) (ingest.Result, error) {
		return ingest.Result{PointsPerS: 1, CPUSPerMillionPoints: 1}, nil
	}
	o := ingest.DefaultOptions()
	o.Binary = "tributary"
	if _, err := Run(context.Background(), Options{Ingest: o, Rounds: 1, Output: runopt.Output{Out: &bytes.Buffer{}}, run: fake}); err == nil {
		t.Fatal("a traced mode that exported nothing passed")
	}
}
