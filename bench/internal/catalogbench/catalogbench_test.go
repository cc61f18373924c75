package catalogbench

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRun_SmallCatalog(t *testing.T) {
	o := DefaultOptions()
	var out bytes.Buffer
	o.Out, o.Series, o.SeriesPerEdge = &out, []int{2500}, 100
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if r.Series != 2500 || r.Edges != 25 || r.SeriesRegisteredInCheck != 2500 || r.CommandsApplied != 75 {
		t.Fatalf("run %+v", r)
	}
	if r.SnapshotMiB <= 0 || r.SnapshotBytesPerSeries < 10 || r.CatalogBytesPerSeries <= 0 || r.SnapshotRestoreS < 0 {
		t.Fatalf("figures %+v", r)
	}
	if !strings.Contains(out.String(), `"catalog_bytes_per_series"`) || !strings.Contains(out.String(), "2,500") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestRun_RejectsBadOptions(t *testing.T) {
	o := DefaultOptions()
	o.SeriesPerEdge = 0
	if _, err := Run(context.Background(), o); err == nil {
		t.Fatal("ran with 0 series per edge")
	}
}
