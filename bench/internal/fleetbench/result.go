package fleetbench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/tributarydb/tributary/bench/internal/benchplot"
	"github.com/tributarydb/tributary/bench/internal/report"
)

// Result is what a run measured, one RunResult per fleet size; its JSON
// form is the benchmark's last line and bench/results/fleet.json.
type Result struct {
	Runs          []RunResult `json:"runs"`
	Coordinators  int         `json:"coordinators"`
	SeriesPerEdge int         `json:"series_per_edge"`
	IntervalS     float64     `json:"interval_s"`
	SealEveryS    float64     `json:"seal_every_s"`
	DurationS     float64     `json:"duration_s"`
	Started       string      `json:"started"`
	Commit        string      `json:"commit"`
	Machine       string      `json:"machine"`
}

// RunResult is one fleet size's figures. NaN figures encode as null.
type RunResult struct {
	Edges  int `json:"edges"`
	Series int `json:"series"`

	// Lag: seal to acknowledged (and cursor saved) on the edge, over the
	// segments sealed in the window; unresolved ones count with their age
	// at the end of the settle wait.
	LagP50S       report.Number `json:"lag_p50_s"`
	LagP99S       report.Number `json:"lag_p99_s"`
	LagMaxS       report.Number `json:"lag_max_s"`
	LagSegments   int           `json:"lag_segments"`
	LagUnresolved int           `json:"lag_unresolved"`

	// Intake: acknowledged in the window, per second; offered: sealed.
	PointsPerS               float64       `json:"points_per_s"`
	SegmentsPerS             float64       `json:"segments_per_s"`
	OfferedPointsPerS        float64       `json:"offered_points_per_s"`
	OfferedSegmentsPerS      float64       `json:"offered_segments_per_s"`
	IntakeStoredSegmentsPerS float64       `json:"intake_stored_segments_per_s"`
	BytesPerPointShipped     report.Number `json:"bytes_per_point_shipped"`

	// Catalog: raft proposals completed per second over all coordinators,
	// raft log entries the leader applied per second, and proposal-to-apply
	// latency (mean; p99 as the upper bound of its histogram bucket).
	ProposalsPerS float64 `json:"proposals_per_s"`
	// ProposalsPerSegment: the raft proposals of every coordinator over
	// the segments their intakes stored, in the window; RecordsPerProposal:
	// the intakes' catalog records over the proposals that carried them.
	ProposalsPerSegment report.Number `json:"proposals_per_segment"`
	RecordsPerProposal  report.Number `json:"intake_records_per_proposal"`
	LeaderAppliedPerS   report.Number `json:"leader_applied_per_s"`
	ApplyMeanMs         report.Number `json:"apply_mean_ms"`
	ApplyP99Ms          report.Number `json:"apply_p99_ms_bucket"`
	CatalogSeries       int64         `json:"catalog_series"`

	// Processes: each coordinator's cores (CPU-s per second of the window),
	// RSS at the window's end and peak RSS; the simulated edges' cores
	// (this process).
	CoordCores      []float64 `json:"coordinator_cores"`
	CoordCoresTotal float64   `json:"coordinator_cores_total"`
	CoordRSSMiB     []float64 `json:"coordinator_rss_mib"`
	CoordPeakRSSMiB []float64 `json:"coordinator_peak_rss_mib"`
	EdgesCores      float64   `json:"edges_process_cores"`

	GapPoints int64      `json:"gap_points"`
	Refusals  int64      `json:"refusals"`
	WarmupS   float64    `json:"warmup_s"`
	WindowS   float64    `json:"window_s"`
	LoadAvg1  [2]float64 `json:"loadavg_1m_start_end"`
}

// Notes are the remarks printed before the JSON line.
func (r Result) Notes() []string {
	var out []string
	for _, x := range r.Runs {
		if x.LagUnresolved > 0 {
			out = append(out, fmt.Sprintf("%d edges: %d segments of the window were not acknowledged by the end of the settle wait; they count with their age then", x.Edges, x.LagUnresolved))
		}
		if x.GapPoints > 0 || x.Refusals > 0 {
			out = append(out, fmt.Sprintf("%d edges: %d points in gaps, %d refusals", x.Edges, x.GapPoints, x.Refusals))
		}
		if x.CatalogSeries != int64(x.Series) {
			out = append(out, fmt.Sprintf("%d edges: the catalog lists %d series, the fleet has %d", x.Edges, x.CatalogSeries, x.Series))
		}
	}
	return out
}

func writeTable(w io.Writer, res Result) error {
	fmt.Fprintf(w, "fleet: %d coordinators, %d series per edge every %v s, a segment every %v s per edge, %v s measured; %s, commit %s\n\n",
		res.Coordinators, res.SeriesPerEdge, res.IntervalS, res.SealEveryS, res.DurationS, res.Machine, res.Commit)
	t := report.Table{Header: []string{"edges", "lag p50", "lag p99", "lag max", "points/s", "segments/s", "proposals/s", "proposals/segment", "records/proposal", "applied/s", "apply mean / p99≤", "coord cores", "coord RSS MiB", "edges cores", "load avg"}}
	for _, x := range res.Runs {
		rss := make([]string, len(x.CoordRSSMiB))
		for i, v := range x.CoordRSSMiB {
			rss[i] = report.Whole(v)
		}
		t.Add(report.Int(int64(x.Edges)),
			secs(float64(x.LagP50S)), secs(float64(x.LagP99S)), secs(float64(x.LagMaxS)),
			report.Whole(x.PointsPerS), report.Float(x.SegmentsPerS, 1),
			report.Float(x.ProposalsPerS, 1), x.ProposalsPerSegment.Text(3), x.RecordsPerProposal.Text(1),
			x.LeaderAppliedPerS.Text(1),
			x.ApplyMeanMs.Text(1)+" / "+x.ApplyP99Ms.Text(0)+" ms",
			report.Float(x.CoordCoresTotal, 2), strings.Join(rss, "/"), report.Float(x.EdgesCores, 2),
			report.Float(x.LoadAvg1[0], 1)+"→"+report.Float(x.LoadAvg1[1], 1))
	}
	if err := t.Write(w); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}

func secs(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return report.Float(x, 2) + " s"
}

// writeFiles writes fleet.json and the plots fleet-lag.png and
// fleet-intake.png into dir.
func writeFiles(dir string, res Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("results dir: %w", err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "fleet.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	var n, p50, p99, pts, segs, props []float64
	for _, x := range res.Runs {
		n = append(n, float64(x.Edges))
		p50 = append(p50, float64(x.LagP50S))
		p99 = append(p99, float64(x.LagP99S))
		pts = append(pts, x.PointsPerS)
		segs = append(segs, x.SegmentsPerS)
		props = append(props, x.ProposalsPerS)
	}
	if err := benchplot.Save(filepath.Join(dir, "fleet-lag.png"), benchplot.Chart{
		Title: "Replication lag vs fleet size (3 coordinators)", XLabel: "simulated edges", YLabel: "seal → ack (s)",
		LogX: true, Series: []benchplot.Series{{Name: "p50", X: n, Y: p50}, {Name: "p99", X: n, Y: p99}},
	}); err != nil {
		return err
	}
	return benchplot.Save(filepath.Join(dir, "fleet-intake.png"), benchplot.Chart{
		Title: "Cloud intake vs fleet size (3 coordinators)", XLabel: "simulated edges", YLabel: "per second",
		LogX: true, LogY: true, Series: []benchplot.Series{{Name: "points/s", X: n, Y: pts},
			{Name: "segments/s", X: n, Y: segs}, {Name: "raft proposals/s", X: n, Y: props}},
	})
}
