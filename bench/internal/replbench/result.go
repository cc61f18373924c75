package replbench

import (
	"fmt"
	"io"
	"math"

	"github.com/tributarydb/tributary/bench/internal/report"
)

// The targets.
var (
	targetLagP99S       = report.Target{Value: 5, AtMost: true}
	targetBytesPerPoint = report.Target{Value: 2.5, AtMost: true}
	targetDrainRatio    = report.Target{Value: 4}
	minHeldFraction     = 0.9 // of the target rate, for a valid run
)

// Result is what a run measured; its JSON form is the benchmark's last
// line. NaN figures (not measured) encode as null.
type Result struct {
	// The five figures of the issue.
	LagP50S              report.Number `json:"lag_p50_s"`
	LagP99S              report.Number `json:"lag_p99_s"`
	BytesPerPointShipped report.Number `json:"bytes_per_point_shipped"`
	DrainRatio           report.Number `json:"drain_ratio"`
	EdgeCPUOverheadPct   report.Number `json:"edge_cpu_overhead_pct"`

	// PointsPerSHeld is the rate the lag phase held; Valid is false when it,
	// the replication-off run or the outage and drain phases fell below 90%
	// of TargetPointsPerS.
	PointsPerSHeld   float64 `json:"points_per_s_held"`
	TargetPointsPerS float64 `json:"target_points_per_s"`
	Valid            bool    `json:"valid"`
	OutageS          float64 `json:"outage_s"`
	Coordinators     int     `json:"coordinators"`

	LagMaxS       report.Number `json:"lag_max_s"`
	LagBatches    int           `json:"lag_batches"`
	LagUnresolved int           `json:"lag_unresolved"`
	LagPoints     int64         `json:"lag_points"`
	SettleS       float64       `json:"settle_s"`

	ShippedPoints   int64 `json:"shipped_points"`
	ShippedBytes    int64 `json:"shipped_bytes"`
	ShippedSegments int64 `json:"shipped_segments"`
	GapPoints       int64 `json:"gap_points"`
	Refusals        int64 `json:"refusals"`

	DrainRan                bool          `json:"drain_ran"`
	Drained                 bool          `json:"drained"`
	DrainPointsPerS         report.Number `json:"drain_points_per_s"`
	DrainS                  float64       `json:"drain_s"`
	DrainPoints             int64         `json:"drain_points"`
	ReconnectS              report.Number `json:"reconnect_s"`
	BacklogSegmentsAtReturn int64         `json:"backlog_segments_at_return"`
	BacklogBytesAtReturn    int64         `json:"backlog_bytes_at_return"`
	OutagePointsPerSHeld    report.Number `json:"outage_points_per_s_held"`
	DrainLivePointsPerSHeld report.Number `json:"drain_live_points_per_s_held"`

	EdgeCPUSPerMPointsOn  report.Number `json:"edge_cpu_s_per_million_points_on"`
	EdgeCPUSPerMPointsOff report.Number `json:"edge_cpu_s_per_million_points_off"`
	OffPointsPerSHeld     float64       `json:"off_points_per_s_held"`

	Workload         string   `json:"workload"`
	Transport        string   `json:"transport"`
	Hosts            int      `json:"hosts"`
	Series           int      `json:"series"`
	PointsPerRequest int      `json:"points_per_request"`
	Clients          int      `json:"clients"`
	WALSync          string   `json:"wal_sync"`
	DurationS        float64  `json:"duration_s"`
	Commit           string   `json:"commit"`
	Machine          string   `json:"machine"`
	Notes            []string `json:"notes"`
}

// finish decides validity and adds the notes that follow from the figures.
func (r *Result) finish() {
	low := func(name string, rate float64) bool {
		if math.IsNaN(rate) || rate < minHeldFraction*r.TargetPointsPerS {
			r.Notes = append(r.Notes, fmt.Sprintf("INVALID: the %s held %.0f points/s, under %.0f%% of the %.0f target", name, rate, minHeldFraction*100, r.TargetPointsPerS))
			return true
		}
		return false
	}
	bad := low("lag phase", r.PointsPerSHeld)
	bad = low("replication-off run", r.OffPointsPerSHeld) || bad
	if r.DrainRan {
		bad = low("load during the outage", float64(r.OutagePointsPerSHeld)) || bad
		bad = low("load during the drain", float64(r.DrainLivePointsPerSHeld)) || bad
	}
	r.Valid = !bad
	if r.GapPoints > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d points were released as gaps instead of shipped (disk budget)", r.GapPoints))
	}
	if r.Refusals > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("the cloud refused %d segments or gaps", r.Refusals))
	}
	if !r.DrainRan {
		r.Notes = append(r.Notes, "no outage (--outage 0): drain_ratio not measured")
	}
	if r.Notes == nil {
		r.Notes = []string{}
	}
}

// WriteReport prints the table and the JSON line.
func WriteReport(w io.Writer, r Result) error {
	validity := "valid"
	if !r.Valid {
		validity = "INVALID"
	}
	fmt.Fprintf(w, "tribench replication: %s, %s, %s series, %d coordinator(s), target %s points/s, lag phase %.0f s, outage %.0f s (%s)\n",
		r.Workload, r.Transport, report.Int(int64(r.Series)), r.Coordinators, report.Whole(r.TargetPointsPerS), r.DurationS, r.OutageS, validity)
	fmt.Fprintf(w, "machine: %s  commit: %s\n\n", r.Machine, r.Commit)
	f2 := report.Decimals(2)
	verdict := func(t report.Target, x report.Number) string {
		if math.IsNaN(float64(x)) {
			return "not measured"
		}
		v := t.Verdict(float64(x))
		if !r.Valid {
			v += " (invalid run)"
		}
		return v
	}
	t := report.Table{Header: []string{"figure", "measured", "target", "met?"}, RightAlign: []bool{false, true, true, false}}
	t.Add("points/s held (lag phase)", report.Whole(r.PointsPerSHeld), "≥ "+report.Whole(minHeldFraction*r.TargetPointsPerS), validity)
	t.Add("replication lag p50 (s)", f2(float64(r.LagP50S)), "", "")
	t.Add("replication lag p99 (s)", f2(float64(r.LagP99S)), targetLagP99S.Format(f2), verdict(targetLagP99S, r.LagP99S))
	t.Add("replication lag max (s)", f2(float64(r.LagMaxS)), "", "")
	t.Add("bytes shipped per point", f2(float64(r.BytesPerPointShipped)), targetBytesPerPoint.Format(f2), verdict(targetBytesPerPoint, r.BytesPerPointShipped))
	t.Add("drain rate (points/s)", report.Whole(float64(r.DrainPointsPerS)), "", "")
	t.Add("drain ratio (drain / live rate)", f2(float64(r.DrainRatio)), targetDrainRatio.Format(f2), verdict(targetDrainRatio, r.DrainRatio))
	t.Add("edge CPU-s per M points, replication on", r.EdgeCPUSPerMPointsOn.Text(3), "", "")
	t.Add("edge CPU-s per M points, replication off", r.EdgeCPUSPerMPointsOff.Text(3), "", "")
	t.Add("edge CPU overhead of replication (%)", r.EdgeCPUOverheadPct.Text(1), "(reported)", "")
	if err := t.Write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	kv := [][2]string{
		{"lag batches (unresolved)", fmt.Sprintf("%d (%d)", r.LagBatches, r.LagUnresolved)},
		{"shipped", fmt.Sprintf("%s points, %s bytes, %d segments", report.Int(r.ShippedPoints), report.Int(r.ShippedBytes), r.ShippedSegments)},
		{"replication-off run held", report.Whole(r.OffPointsPerSHeld) + " points/s"},
	}
	if r.DrainRan {
		kv = append(kv,
			[2]string{"load during outage / drain", report.Whole(float64(r.OutagePointsPerSHeld)) + " / " + report.Whole(float64(r.DrainLivePointsPerSHeld)) + " points/s"},
			[2]string{"backlog at return", fmt.Sprintf("%d segments, %s bytes", r.BacklogSegmentsAtReturn, report.Int(r.BacklogBytesAtReturn))},
			[2]string{"reconnect after return", r.ReconnectS.Text(1) + " s"},
			[2]string{"drain window", fmt.Sprintf("%.1f s, %s points, drained: %v", r.DrainS, report.Int(r.DrainPoints), r.Drained)})
	}
	if err := report.KeyValues(w, kv); err != nil {
		return err
	}
	return report.WriteNotesAndJSONLine(w, r.Notes, r)
}
