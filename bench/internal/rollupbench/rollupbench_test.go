package rollupbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRun_SmallLoadAnswersEveryQuery(t *testing.T) {
	res, err := Run(context.Background(), Options{Dir: t.TempDir(), Series: 3, Years: 0.05, Repeats: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 0.05 years of whole days at one point per minute, for 3 series.
	if res.Points == 0 || res.Points%(3*1440) != 0 {
		t.Fatalf("points %d is not whole days of 3 series", res.Points)
	}
	if res.SSTBytes == 0 || res.Q5y1dAvgMs <= 0 || res.Q1hMaxByMinP50Ms <= 0 {
		t.Fatalf("missing figures: %+v", res)
	}
	var buf bytes.Buffer
	if err := Print(&buf, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "max by minute") {
		t.Fatalf("table:\n%s", buf.String())
	}
}

func TestRun_GridCoversTheRangesThatFit(t *testing.T) {
	res, err := Run(context.Background(), Options{Dir: t.TempDir(), Series: 2, Years: 0.09, Repeats: 1, GridRepeats: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 0.09 years is 32 days: only the one-month range fits, at each step.
	if len(res.Grid) != 3 {
		t.Fatalf("grid %+v, want 3 cells", res.Grid)
	}
	wantSource := map[string]string{"30m": "raw", "12h": "rollup_1h", "1d": "rollup_1d"}
	for _, c := range res.Grid {
		if c.Range != "1 month" || c.Source != wantSource[c.Step] || c.ColdMs <= 0 || c.WarmMs <= 0 || c.ColdProcess {
			t.Errorf("cell %+v", c)
		}
	}
	var buf bytes.Buffer
	if err := Print(&buf, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "cold = first query in a freshly opened node") {
		t.Fatalf("table:\n%s", buf.String())
	}
}
