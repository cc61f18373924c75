package lowrate

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/diskio"
	"github.com/tributarydb/tributary/bench/internal/report/reporttest"
)

func TestParseCounter_SumsLabelledSamplesWithOrWithoutTotal(t *testing.T) {
	in := `# HELP tributary_wal_fsyncs_total WAL file and directory fsyncs.
# TYPE tributary_wal_fsyncs_total counter
tributary_wal_fsyncs_total{otel_scope_name="node"} 120
tributary_wal_fsyncs_total{otel_scope_name="other"} 3
tributary_wal_fsyncs_other 99
`
	got, err := parseCounter(strings.NewReader(in), "tributary_wal_fsyncs")
	if err != nil || got != 123 {
		t.Fatalf("parseCounter = %d, %v; want 123", got, err)
	}
	if _, err := parseCounter(strings.NewReader("x 1\n"), "tributary_wal_fsyncs"); err == nil {
		t.Fatal("a missing counter must be an error")
	}
}

func TestResult_RatioToOnePagePerWrite(t *testing.T) {
	o := DefaultOptions()
	// 600 writes in 10 min, 3 MiB written: 1.28 pages a write.
	r := result(o, 10*time.Minute, 600, 4800, diskio.Figures{StorageWrite: 600 * 5243}, 600, nil)
	if float64(r.FloorBytesPerHour) != 3600*4096 || float64(r.RatioToFloor) != 1.28 || float64(r.WALFsyncsPerWrite) != 1 {
		t.Fatalf("floor %v, ratio %v, fsyncs/write %v", r.FloorBytesPerHour, r.RatioToFloor, r.WALFsyncsPerWrite)
	}
	var out bytes.Buffer
	if err := WriteReport(&out, r); err != nil {
		t.Fatal(err)
	}
	last := reporttest.LastJSONLine(t, out.String())
	if last["storage_write_bytes_per_hour"] != float64(600*5243*6) || !strings.Contains(out.String(), "≤ 1.25") {
		t.Fatalf("report:\n%s", out.String())
	}
}
