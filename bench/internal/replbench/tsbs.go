package replbench

import (
	"fmt"

	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// tsbsTable is the TSBS cpu-only workload as columnar gRPC data: the
// series cpu_<field>{<the host's ten tags>} and, for each, one cycle of the
// field's values as the workload's line protocol carries them (integers in
// [0, 100]). Values repeat every cycle rows while timestamps keep going;
// a cycle is far longer than a WAL segment spans, so the repetition does
// not help the segment's compression.
//
// A tsbsTable is immutable and safe for concurrent use.
type tsbsTable struct {
	hosts      int
	cycle      int
	startMs    int64
	intervalMs int64
	// series[h*10+f] is host h's field f; vals[h*10+f][r] its row r.
	series []*tributaryv1.Series
	vals   [][]uint8
}

// newTSBSTable generates cycle rows of every field of hosts hosts from
// seed, the first row at startMs and one every intervalMs.
func newTSBSTable(hosts, cycle int, startMs, intervalMs int64, seed uint64) (*tsbsTable, error) {
	g, err := workload.NewTSBSCPU(workload.TSBSCPUOptions{Hosts: hosts, Rows: cycle,
		StartNs: startMs * 1e6, IntervalNs: intervalMs * 1e6, Seed: seed})
	if err != nil {
		return nil, err
	}
	t := &tsbsTable{hosts: hosts, cycle: cycle, startMs: startMs, intervalMs: intervalMs}
	for h := range hosts {
		tags := g.HostTags(h)
		for f, field := range workload.TSBSCPUFieldNames {
			s := &tributaryv1.Series{Labels: []*tributaryv1.Label{{Name: workload.MetricName, Value: workload.TSBSCPUMeasurement + "_" + field}}}
			for _, kv := range tags {
				s.Labels = append(s.Labels, &tributaryv1.Label{Name: kv[0], Value: kv[1]})
			}
			vs := g.FieldValues(h, f)
			row := make([]uint8, cycle)
			for r, v := range vs {
				if v < 0 || v > 100 {
					return nil, fmt.Errorf("tsbs host %d field %s row %d: value %d outside [0, 100]", h, field, r, v)
				}
				row[r] = uint8(v)
			}
			t.series = append(t.series, s)
			t.vals = append(t.vals, row)
		}
	}
	return t, nil
}

// numSeries is the number of series (ten per host).
func (t *tsbsTable) numSeries() int { return len(t.series) }

// requests splits the hosts into groups of hostsPerRequest and returns one
// fresh request per group, at row 0.
func (t *tsbsTable) requests(hostsPerRequest, rowsPerRequest int) []*tsbsRequest {
	var out []*tsbsRequest
	for h := 0; h < t.hosts; h += hostsPerRequest {
		first, end := h*workload.TSBSCPUFields, min(h+hostsPerRequest, t.hosts)*workload.TSBSCPUFields
		r := &tsbsRequest{t: t, first: first, rows: rowsPerRequest,
			msg: &tributaryv1.WriteRequest{}, ts: make([]int64, rowsPerRequest)}
		for i := first; i < end; i++ {
			r.msg.Batches = append(r.msg.Batches, &tributaryv1.SeriesBatch{Series: t.series[i], Values: make([]float64, rowsPerRequest)})
		}
		out = append(out, r)
	}
	return out
}

// tsbsRequest is a reusable write of a fixed group of series; next fills it
// with the following rows. Not safe for concurrent use.
type tsbsRequest struct {
	t       *tsbsTable
	first   int // index of the first series
	rows    int // rows per request
	nextRow int64
	msg     *tributaryv1.WriteRequest
	ts      []int64
}

// next fills the request with its next rows and returns it.
func (r *tsbsRequest) next() *tributaryv1.WriteRequest {
	for i := range r.ts {
		r.ts[i] = r.t.startMs + (r.nextRow+int64(i))*r.t.intervalMs
	}
	for k, b := range r.msg.Batches {
		vals := r.t.vals[r.first+k]
		for i := range b.Values {
			b.Values[i] = float64(vals[int((r.nextRow+int64(i))%int64(r.t.cycle))])
		}
		b.TimestampsMs = r.ts
	}
	r.nextRow += int64(r.rows)
	return r.msg
}

// points is the number of points in each request.
func (r *tsbsRequest) points() int { return r.rows * len(r.msg.Batches) }

// lastMs is the newest timestamp of the request most recently filled.
func (r *tsbsRequest) lastMs() int64 { return r.t.startMs + (r.nextRow-1)*r.t.intervalMs }
