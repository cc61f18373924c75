package uplinkbench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report/reporttest"
)

func TestResult_BytesPerPointAndTheDefaultRow(t *testing.T) {
	o := DefaultOptions()
	rows := []Row{
		{LagBudgetS: 5, FleetConfigSet: true, Edges: 4, ShippedSegments: 400, ShippedPoints: 18_000, ShippedBytes: 118_800},
		{LagBudgetS: DefaultLagBudget.Seconds(), Edges: 4, ShippedSegments: 80, ShippedPoints: 19_600, ShippedBytes: 34_300},
		{LagBudgetS: 300, FleetConfigSet: true, Edges: 4, ShippedSegments: 8, ShippedPoints: 19_200, ShippedBytes: 10_560},
	}
	r := result(o, rows)
	if got := float64(r.Rows[0].BytesPerPoint); got != 6.6 {
		t.Fatalf("5 s row: %v bytes/point, want 6.6", got)
	}
	if got := float64(r.BytesPerPointShipped); got != 1.75 {
		t.Fatalf("bytes_per_point_shipped %v, want the default row's 1.75", got)
	}
	if got := float64(r.Rows[2].PointsPerSegment); got != 2400 {
		t.Fatalf("300 s row: %v points/segment, want 2400", got)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "300s") {
		t.Fatalf("notes %q: want one about the 300 s row's few segments", r.Notes)
	}
	var out bytes.Buffer
	if err := WriteReport(&out, r); err != nil {
		t.Fatal(err)
	}
	last := reporttest.LastJSONLine(t, out.String())
	if last["bytes_per_point_shipped"] != 1.75 || !strings.Contains(out.String(), "(default, no fleet config)") || !strings.Contains(out.String(), "met") {
		t.Fatalf("report:\n%s", out.String())
	}
}

func TestOptions_Validate(t *testing.T) {
	o := DefaultOptions()
	o.Binary = "bin/tributary"
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(*Options){
		"a budget under 1s":               func(o *Options) { o.LagBudgets = []time.Duration{500 * time.Millisecond} },
		"a budget the run does not reach": func(o *Options) { o.Duration = time.Minute },
		"no edges":                        func(o *Options) { o.Edges = 0 },
		"no budgets":                      func(o *Options) { o.LagBudgets = nil },
	} {
		b := o
		bad(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
