package replbench

import (
	"math"
	"time"
)

// drainStats is how the backlog left by an outage drained.
type drainStats struct {
	// BacklogSegments, BacklogBytes: the backlog when the coordinators came
	// back (the last poll before).
	BacklogSegments int64
	BacklogBytes    int64
	// ReconnectS is the time from the coordinators' return to the first
	// poll that saw shipping resume (the edge's backoff plus the poll).
	ReconnectS float64
	// Seconds and Points: the drain window, from the last poll before
	// shipping resumed to the first poll with the backlog at or under the
	// threshold, and the points the cloud acknowledged in it.
	Seconds float64
	Points  int64
	// PointsPerS is Points / Seconds: NaN when nothing was shipped.
	PointsPerS float64
	// Drained is false when the backlog was still over the threshold at the
	// last poll: the rate is then that of the part that drained.
	Drained bool
}

// computeDrain finds the drain window in polls (in time order) for
// coordinators that came back at back: it starts at the last poll before
// shipped_points_total first grew after back, and ends at the first later
// poll whose backlog is at most threshold segments (what steady shipping
// leaves in flight).
func computeDrain(polls []sample, back time.Time, threshold int64) drainStats {
	d := drainStats{PointsPerS: math.NaN(), ReconnectS: math.NaN()}
	first := -1 // first poll at or after back
	for i, s := range polls {
		if !s.At.Before(back) {
			first = i
			break
		}
		d.BacklogSegments, d.BacklogBytes = s.BacklogSegments, s.BacklogBytes
	}
	if first < 0 {
		return d
	}
	base := first
	if first > 0 {
		base = first - 1
	}
	start := -1
	for i := first; i < len(polls); i++ {
		if polls[i].ShippedPoints > polls[base].ShippedPoints {
			start = i - 1
			d.ReconnectS = polls[i].At.Sub(back).Seconds()
			break
		}
	}
	if start < 0 {
		return d
	}
	end := len(polls) - 1
	for i := start + 1; i < len(polls); i++ {
		if polls[i].BacklogSegments <= threshold {
			end, d.Drained = i, true
			break
		}
	}
	d.Seconds = polls[end].At.Sub(polls[start].At).Seconds()
	d.Points = polls[end].ShippedPoints - polls[start].ShippedPoints
	if d.Seconds > 0 {
		d.PointsPerS = float64(d.Points) / d.Seconds
	}
	return d
}
