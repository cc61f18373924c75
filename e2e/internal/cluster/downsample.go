package cluster

import (
	"context"
	"fmt"

	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Buckets are a downsampled answer: per SeriesLabel value, bucket start
// → value; and the answer's warnings and source.
type Buckets struct {
	Values   map[string]map[int64]float64
	Warnings []string
	Source   string
}

// add adds a run of per-bucket counts of series name.
func (b Buckets) add(name string, ts []int64, vs []float64) error {
	for i, t := range ts {
		if b.Values[name] == nil {
			b.Values[name] = map[int64]float64{}
		}
		b.Values[name][t] += vs[i]
	}
	return nil
}

// QueryCounts asks the QueryService at addr for the number of points of
// each series of metric per bucket of stepMs in [startMs, endMs] (a
// downsample with count, which a step of an hour or a day answers from
// rollups).
func QueryCounts(ctx context.Context, addr, metric string, startMs, endMs, stepMs int64) (Buckets, error) {
	out := Buckets{Values: map[string]map[int64]float64{}}
	info, err := frontQuery(ctx, Client{}, addr, "count query", &pb.QueryRequest{
		Matchers: []*pb.Matcher{{Type: pb.Matcher_EQUAL, Name: "__name__", Value: metric}},
		StartMs:  startMs, EndMs: endMs, Mode: pb.QueryMode_QUERY_MODE_DOWNSAMPLE, StepMs: stepMs,
		Downsample: pb.Aggregate_AGGREGATE_COUNT,
	}, out.add)
	out.Warnings, out.Source = info.Warnings, info.Source
	return out, err
}

// ReplicaCounts asks one coordinator's replica store alone
// (ReplicaService/Query on its cluster listener) for the number of
// points of each series of metric of edge per bucket of stepMs.
func ReplicaCounts(ctx context.Context, clusterAddr, edge, metric string, startMs, endMs, stepMs int64) (Buckets, error) {
	out := Buckets{Values: map[string]map[int64]float64{}}
	info, err := replicaQuery(ctx, clusterAddr, "replica count query", "", &clusterv1.QueryRequest{
		Edges:    []string{edge},
		Matchers: []*clusterv1.Matcher{{Type: clusterv1.MatchType_MATCH_TYPE_EQUAL, Name: "__name__", Value: metric}},
		StartMs:  startMs, EndMs: endMs, Mode: clusterv1.QueryMode_QUERY_MODE_DOWNSAMPLE, StepMs: stepMs,
		Downsample: clusterv1.Func_FUNC_COUNT,
	}, out.add)
	out.Warnings, out.Source = info.Warnings, info.Source
	return out, err
}

// Counts is the naive oracle of QueryCounts: the acknowledged points of
// each series per bucket of stepMs (aligned to multiples of stepMs since
// the epoch) in [startMs, endMs].
func (l *Ledger) Counts(startMs, endMs, stepMs int64) map[string]map[int64]float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]map[int64]float64{}
	for s, m := range l.acked {
		for t := range m {
			if t < startMs || t > endMs {
				continue
			}
			b := t - t%stepMs
			if t < 0 && t%stepMs != 0 {
				b -= stepMs
			}
			if out[s] == nil {
				out[s] = map[int64]float64{}
			}
			out[s][b]++
		}
	}
	return out
}

// DiffCounts lists the buckets where got differs from want (at most max
// of them, and how many there are).
func DiffCounts(got, want map[string]map[int64]float64, max int) (diffs []string, n int) {
	seen := map[string]bool{}
	for s, wm := range want {
		seen[s] = true
		for b, w := range wm {
			if g := got[s][b]; g != w {
				n++
				if len(diffs) < max {
					diffs = append(diffs, fmt.Sprintf("%s@%d: %v, want %v", s, b, g, w))
				}
			}
		}
		for b, g := range got[s] {
			if _, ok := wm[b]; !ok {
				n++
				if len(diffs) < max {
					diffs = append(diffs, fmt.Sprintf("%s@%d: %v, want none", s, b, g))
				}
			}
		}
	}
	for s, gm := range got {
		if !seen[s] {
			n += len(gm)
			if len(diffs) < max {
				diffs = append(diffs, fmt.Sprintf("series %s: %d buckets, want none", s, len(gm)))
			}
		}
	}
	return diffs, n
}
