package fleetbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
)

func TestEdgeSource_SealsVerifiableSegmentsInSequence(t *testing.T) {
	s := newEdgeSource("fleet-0001", 3)
	at := time.UnixMilli(1_700_000_005_000)
	info1, err := s.Seal(1_700_000_000_000, 1_700_000_005_000, 1000, at)
	if err != nil {
		t.Fatal(err)
	}
	info2, err := s.Seal(1_700_000_005_000, 1_700_000_010_500, 1000, at)
	if err != nil {
		t.Fatal(err)
	}
	if info1.Seq != 1 || info1.PrevSeq != 0 || info2.Seq != 2 || info2.PrevSeq != 1 {
		t.Fatalf("seqs %d/%d then %d/%d, want 1/0 then 2/1", info1.Seq, info1.PrevSeq, info2.Seq, info2.PrevSeq)
	}
	// (…00, …05] at 1 s is 5 samples a series; (…05, …10.5] is 5 more.
	if info1.Points != 15 || info2.Points != 15 {
		t.Fatalf("points %d and %d, want 15 each", info1.Points, info2.Points)
	}
	segs := s.WALSegments()
	if len(segs) != 3 || !segs[0].Sealed || !segs[1].Sealed || segs[2].Sealed || segs[2].Seq != 3 {
		t.Fatalf("segments %+v: want two sealed, then the open seq 3", segs)
	}
	file, info, err := s.ReadWALSegment(2)
	if err != nil {
		t.Fatal(err)
	}
	var points int64
	series := map[string]int{}
	var dec record.Decoder
	got, err := wal.VerifySegment("2", file, func(r wal.Record) error {
		keys := map[uint64]string{}
		return dec.Decode(r.Data, func(id uint64, key []byte) error {
			keys[id] = string(key)
			return nil
		}, func(id uint64, ts []int64, vs []float64) error {
			series[keys[id]] += len(ts)
			points += int64(len(ts))
			if ts[0] != 1_700_000_006_000 || ts[len(ts)-1] != 1_700_000_010_000 {
				t.Errorf("series %d runs %d..%d", id, ts[0], ts[len(ts)-1])
			}
			return nil
		})
	})
	if err != nil {
		t.Fatalf("segment does not verify: %v", err)
	}
	if got.NodeID != "fleet-0001" || got.Seq != 2 || got.PrevSeq != 1 || got.CRC != info.CRC || points != 15 || len(series) != 3 {
		t.Fatalf("verified %+v, %d points in %d series", got, points, len(series))
	}

	s.Release(2)
	if _, _, err := s.ReadWALSegment(1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("released segment read: %v, want not exist", err)
	}
	if s.Kept() != 1 {
		t.Fatalf("kept %d, want 1", s.Kept())
	}
	if _, err := s.Seal(1_700_000_010_000, 1_700_000_010_500, 1000, at); err == nil {
		t.Fatal("a seal without a sample time is not an error")
	}
}

const sampleMetrics = `# TYPE tributary_raft_proposal_duration_seconds histogram
tributary_raft_proposal_duration_seconds_bucket{outcome="applied",le="0.005"} 50
tributary_raft_proposal_duration_seconds_bucket{outcome="applied",le="0.01"} 90
tributary_raft_proposal_duration_seconds_bucket{outcome="applied",le="0.05"} 100
tributary_raft_proposal_duration_seconds_bucket{outcome="applied",le="+Inf"} 100
tributary_raft_proposal_duration_seconds_sum{outcome="applied"} 0.5
tributary_raft_proposal_duration_seconds_count{outcome="applied"} 100
# TYPE tributary_intake_segments_total counter
tributary_intake_segments_total{outcome="stored"} 40
tributary_intake_segments_total{outcome="duplicate"} 2
# TYPE tributary_raft_is_leader gauge
tributary_raft_is_leader 1
`

func TestMetrics_SumsAndHistograms(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(sampleMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.sum(metricIntakeSegs, "outcome", "stored"); got != 40 {
		t.Errorf("stored segments %v, want 40", got)
	}
	if got := m.sum(metricIntakeSegs); got != 42 {
		t.Errorf("all segments %v, want 42", got)
	}
	if got := m.sum("absent"); !math.IsNaN(got) {
		t.Errorf("absent metric sums to %v, want NaN", got)
	}
	h := m.histogram(metricProposal)
	if h.Count != 100 || h.mean() != 0.005 {
		t.Fatalf("histogram %+v", h)
	}
	for q, want := range map[float64]float64{0.5: 0.005, 0.9: 0.01, 0.99: 0.05} {
		if got := h.quantile(q); got != want {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
	d := h.sub(hist{Count: 50, Sum: 0.1, Bounds: []float64{0.005, 0.01, 0.05}, Cum: []float64{50, 50, 50}})
	if d.Count != 50 || d.quantile(0.5) != 0.01 || merge(hist{}, d).Count != 50 || merge(d, d).Count != 100 {
		t.Errorf("delta %+v", d)
	}
	if !math.IsNaN((hist{}).quantile(0.5)) {
		t.Error("empty histogram has a quantile")
	}
	if _, err := parseMetrics(strings.NewReader("bad line {\n")); err == nil {
		t.Error("a bad metrics page parses")
	}
}

func TestPercentile_NearestRank(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for q, want := range map[float64]float64{0.5: 5, 0.99: 10, 1: 10, 0: 1} {
		if got := percentile(xs, q); got != want {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
	if !math.IsNaN(percentile(nil, 0.5)) {
		t.Error("percentile of nothing is a number")
	}
}

func TestOptions_Validate(t *testing.T) {
	o := DefaultOptions()
	o.Binary, o.Out = "bin/tributary", &bytes.Buffer{}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	bad := o
	bad.Edges = []int{10, 0}
	bad.SealEvery = time.Millisecond
	bad.Coordinators = 0
	err := bad.Validate()
	for _, want := range []string{"fleet size", "seal period", "coordinators"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

func TestWriteFiles_JSONAndPlots(t *testing.T) {
	dir := t.TempDir()
	res := Result{Coordinators: 3, Runs: []RunResult{
		{Edges: 10, LagP50S: 0.1, LagP99S: 0.3, PointsPerS: 80, SegmentsPerS: 2, ProposalsPerS: 2.5},
		{Edges: 100, LagP50S: 0.2, LagP99S: 0.5, PointsPerS: 800, SegmentsPerS: 20, ProposalsPerS: 20},
	}}
	if err := writeFiles(dir, res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dir + "/fleet.json")
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != 2 || back.Runs[1].Edges != 100 {
		t.Fatalf("fleet.json: %v, %+v", err, back)
	}
	for _, p := range []string{"fleet-lag.png", "fleet-intake.png"} {
		b, err := os.ReadFile(dir + "/" + p)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: %v, not a PNG", p, err)
		}
	}
	var out bytes.Buffer
	if err := writeTable(&out, res); err != nil || !strings.Contains(out.String(), "100") {
		t.Errorf("table: %v\n%s", err, out.String())
	}
}

// TestRun_RealCoordinators runs a tiny fleet against the binary named by
// TRIBUTARY_BINARY (skipped without it).
func TestRun_RealCoordinators(t *testing.T) {
	bin := os.Getenv("TRIBUTARY_BINARY")
	if bin == "" {
		t.Skip("TRIBUTARY_BINARY not set")
	}
	o := DefaultOptions()
	var out bytes.Buffer
	o.Binary, o.Out, o.Edges, o.Duration, o.SealEvery, o.Interval = bin, &out, []int{3}, 2*time.Second, 500*time.Millisecond, 100*time.Millisecond
	o.WorkDir = t.TempDir()
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	r := res.Runs[0]
	if r.LagSegments == 0 || r.LagUnresolved != 0 || r.PointsPerS <= 0 || r.CatalogSeries != 24 || r.ProposalsPerS <= 0 ||
		!(r.ProposalsPerSegment > 0) || !(r.RecordsPerProposal >= 1) {
		t.Fatalf("figures %+v", r)
	}
}
