// Package workload generates the deterministic, seeded write workloads that
// the system benchmarks and the demo send to a node.
//
// A Generator is a fixed set of series plus the process that produces their
// samples: Sensor (smooth readings of many small sensors) and CANBus (the
// 22 channels of a vehicle's CAN bus at 10 Hz, after the Warp 10 Raspberry Pi
// benchmark); TSBSCPU (tsbs.go) renders the TSBS cpu-only workload as
// InfluxDB line protocol instead of gRPC requests. Series are grouped into
// units that advance together — one sensor, or all channels of one vehicle
// — and every unit draws from its own
// random stream seeded by (seed, unit index), so the samples of a series do
// not depend on how the series are split into requests or how many clients
// send them.
//
// Requests are columnar tributaryv1.WriteRequests that carry several
// consecutive points for each of a group of series (for example 100 series ×
// 100 points), so the label bytes of a series are amortised over many points.
// A Request is built once and refilled in place for each window of time, so a
// load generator can send at a high rate without allocating.
//
// Concurrency: a Generator is immutable and safe for concurrent use. A
// Request is not safe for concurrent use; distinct Requests share no mutable
// state and may be filled from different goroutines.
package workload

import (
	"fmt"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// source produces the samples of one unit, a group of series that advance
// together.
type source interface {
	// fill writes the next n samples of the unit's series k to vals[k][:n].
	fill(vals [][]float64, n int)
}

// Generator is a fixed set of series with a regular sampling interval and a
// deterministic sample process. Build one with NewSensor or NewCANBus.
type Generator struct {
	name          string
	startMs       int64
	intervalMs    int64
	seriesPerUnit int
	// series holds every series, unit-major: unit u owns
	// series[u*seriesPerUnit : (u+1)*seriesPerUnit].
	// INVARIANT: never modified after construction; Requests share them.
	series    []*tributaryv1.Series
	newSource func(unit int) source
}

// Name is the workload name ("sensor", "canbus").
func (g *Generator) Name() string { return g.name }

// StartMs is the timestamp of every series' first sample.
func (g *Generator) StartMs() int64 { return g.startMs }

// IntervalMs is the time between two samples of a series.
func (g *Generator) IntervalMs() int64 { return g.intervalMs }

// NumSeries is the number of series.
func (g *Generator) NumSeries() int { return len(g.series) }

// SeriesPerUnit is the number of series that always travel together in one
// request (1 for Sensor, 22 for CANBus).
func (g *Generator) SeriesPerUnit() int { return g.seriesPerUnit }

// Series returns every series of the workload. The messages are shared with
// the requests and must not be modified.
func (g *Generator) Series() []*tributaryv1.Series { return g.series }

// Requests splits the series into consecutive groups of about
// seriesPerRequest series (rounded down to whole units, at least one unit)
// and returns one reusable Request per group, each able to carry up to
// maxPointsPerSeries points per series. Every call starts fresh sample
// streams at StartMs: two calls return identical, independent requests.
func (g *Generator) Requests(seriesPerRequest, maxPointsPerSeries int) []*Request {
	if seriesPerRequest <= 0 || maxPointsPerSeries <= 0 {
		panic(fmt.Sprintf("BUG: workload.Requests(%d, %d): sizes must be positive", seriesPerRequest, maxPointsPerSeries))
	}
	unitsPerRequest := max(1, seriesPerRequest/g.seriesPerUnit)
	numUnits := len(g.series) / g.seriesPerUnit
	var reqs []*Request
	for first := 0; first < numUnits; first += unitsPerRequest {
		last := min(first+unitsPerRequest, numUnits)
		reqs = append(reqs, g.newRequest(first, last, maxPointsPerSeries))
	}
	return reqs
}

func (g *Generator) newRequest(firstUnit, endUnit, maxPoints int) *Request {
	series := g.series[firstUnit*g.seriesPerUnit : endUnit*g.seriesPerUnit]
	r := &Request{
		Msg:           &tributaryv1.WriteRequest{Batches: make([]*tributaryv1.SeriesBatch, len(series))},
		seriesPerUnit: g.seriesPerUnit,
		ts:            make([]int64, maxPoints),
		vals:          make([][]float64, len(series)),
		nextMs:        g.startMs,
		intervalMs:    g.intervalMs,
	}
	for u := firstUnit; u < endUnit; u++ {
		r.sources = append(r.sources, g.newSource(u))
	}
	// One backing array for all values keeps a request's samples contiguous.
	backing := make([]float64, len(series)*maxPoints)
	for i, s := range series {
		r.vals[i] = backing[i*maxPoints : (i+1)*maxPoints : (i+1)*maxPoints]
		r.Msg.Batches[i] = &tributaryv1.SeriesBatch{Series: s}
	}
	return r
}

// Request is a reusable WriteRequest for a fixed group of series. Each call
// to Next overwrites Msg with the next window of consecutive samples.
//
// NB: all batches of Msg share one timestamps slice (every series of a
// workload is sampled at the same instants). Msg stays valid until the next
// call to Next and must not be modified.
type Request struct {
	// Msg is the request to send. It is empty until the first Next.
	Msg *tributaryv1.WriteRequest

	sources       []source
	seriesPerUnit int
	ts            []int64     // capacity = max points per series
	vals          [][]float64 // one per batch, each with that capacity
	nextMs        int64       // timestamp of the next window's first sample
	intervalMs    int64
	points        int // points per series in Msg
}

// Next fills Msg with the next n samples of each of its series, continuing
// where the previous window ended. n must be between 1 and the capacity given
// to Generator.Requests.
func (r *Request) Next(n int) {
	if n <= 0 || n > cap(r.ts) {
		panic(fmt.Sprintf("BUG: workload.Request.Next(%d): capacity is %d", n, cap(r.ts)))
	}
	ts := r.ts[:n]
	for i := range ts {
		ts[i] = r.nextMs + int64(i)*r.intervalMs
	}
	r.nextMs += int64(n) * r.intervalMs
	for i := range r.vals {
		r.vals[i] = r.vals[i][:n]
	}
	for u, src := range r.sources {
		src.fill(r.vals[u*r.seriesPerUnit:(u+1)*r.seriesPerUnit], n)
	}
	for i, b := range r.Msg.Batches {
		b.TimestampsMs = ts
		b.Values = r.vals[i]
	}
	r.points = n
}

// Points is the number of points in Msg.
func (r *Request) Points() int { return r.points * len(r.Msg.Batches) }

// NumSeries is the number of series (batches) in Msg.
func (r *Request) NumSeries() int { return len(r.Msg.Batches) }

// LastMs is the timestamp of the newest sample in Msg (or, before the first
// Next, one interval before the generator's start).
func (r *Request) LastMs() int64 { return r.nextMs - r.intervalMs }

// NextMs is the timestamp the next window will start at.
func (r *Request) NextMs() int64 { return r.nextMs }

// series builds a Series message from name/value pairs.
func series(nv ...string) *tributaryv1.Series {
	s := &tributaryv1.Series{Labels: make([]*tributaryv1.Label, 0, len(nv)/2)}
	for i := 0; i+1 < len(nv); i += 2 {
		s.Labels = append(s.Labels, &tributaryv1.Label{Name: nv[i], Value: nv[i+1]})
	}
	return s
}

// MetricName is the label that carries the metric name.
const MetricName = "__name__"

// Label returns the value of label name in s, or "" when absent.
func Label(s *tributaryv1.Series, name string) string {
	for _, l := range s.GetLabels() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
