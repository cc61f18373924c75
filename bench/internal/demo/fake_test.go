package demo

import (
	"context"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/bench/internal/fakenode"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// fakeNode is a deliberately naive in-memory node: it stores every point
// and answers queries by scanning, following the semantics written in the
// proto comments. It streams each series in chunks of chunkPoints to
// exercise answers that continue a series over several messages.
type fakeNode struct {
	tributaryv1.UnimplementedWriteServiceServer
	tributaryv1.UnimplementedQueryServiceServer

	chunkPoints int
	// rejectAll makes every write reject its whole first batch.
	rejectAll bool
	// avgIsSum breaks AVG on purpose.
	avgIsSum bool

	mu     sync.Mutex
	series map[string]*fakeSeries
}

type fakeSeries struct {
	labels []*tributaryv1.Label
	points map[int64]float64
}

func newFakeNode() *fakeNode {
	return &fakeNode{chunkPoints: 50, series: map[string]*fakeSeries{}}
}

func sortedLabels(ls []*tributaryv1.Label) []*tributaryv1.Label {
	out := slices.Clone(ls)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func key(ls []*tributaryv1.Label) string {
	var sb strings.Builder
	for _, l := range sortedLabels(ls) {
		sb.WriteString(l.Name + "\x00" + l.Value + "\x00")
	}
	return sb.String()
}

func labelValue(ls []*tributaryv1.Label, name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

func (f *fakeNode) Write(_ context.Context, req *tributaryv1.WriteRequest) (*tributaryv1.WriteResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &tributaryv1.WriteResponse{}
	for bi, b := range req.Batches {
		if f.rejectAll && bi == 0 {
			resp.Rejected += int64(len(b.TimestampsMs))
			resp.Rejections = append(resp.Rejections, &tributaryv1.Rejection{
				BatchIndex: 0, PointIndex: -1, Reason: tributaryv1.RejectReason_REJECT_REASON_TOO_OLD,
				Message: "older than the out-of-order window", Points: int64(len(b.TimestampsMs)),
			})
			continue
		}
		k := key(b.Series.Labels)
		s := f.series[k]
		if s == nil {
			s = &fakeSeries{labels: sortedLabels(b.Series.Labels), points: map[int64]float64{}}
			f.series[k] = s
		}
		for i, ts := range b.TimestampsMs {
			s.points[ts] = b.Values[i]
		}
		resp.Accepted += int64(len(b.TimestampsMs))
	}
	return resp, nil
}

func (f *fakeNode) match(ms []*tributaryv1.Matcher) ([]*fakeSeries, error) {
	var out []*fakeSeries
	keys := make([]string, 0, len(f.series))
	for k := range f.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
next:
	for _, k := range keys {
		s := f.series[k]
		for _, m := range ms {
			v := labelValue(s.labels, m.Name)
			var ok bool
			switch m.Type {
			case tributaryv1.Matcher_EQUAL:
				ok = v == m.Value
			case tributaryv1.Matcher_NOT_EQUAL:
				ok = v != m.Value
			case tributaryv1.Matcher_REGEX, tributaryv1.Matcher_NOT_REGEX:
				re, err := regexp.Compile("^(?:" + m.Value + ")$")
				if err != nil {
					return nil, status.Error(codes.InvalidArgument, err.Error())
				}
				ok = re.MatchString(v) == (m.Type == tributaryv1.Matcher_REGEX)
			}
			if !ok {
				continue next
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func (f *fakeNode) aggregate(fn tributaryv1.Aggregate, xs []float64) float64 {
	switch fn {
	case tributaryv1.Aggregate_AGGREGATE_SUM:
		return sum(xs)
	case tributaryv1.Aggregate_AGGREGATE_AVG:
		if f.avgIsSum {
			return sum(xs)
		}
		return sum(xs) / float64(len(xs))
	case tributaryv1.Aggregate_AGGREGATE_MIN:
		return slices.Min(xs)
	case tributaryv1.Aggregate_AGGREGATE_MAX:
		return slices.Max(xs)
	case tributaryv1.Aggregate_AGGREGATE_COUNT:
		return float64(len(xs))
	case tributaryv1.Aggregate_AGGREGATE_FIRST:
		return xs[0]
	case tributaryv1.Aggregate_AGGREGATE_LAST:
		return xs[len(xs)-1]
	}
	panic("BUG: aggregate " + fn.String())
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}

// out is one answer series before streaming.
type out struct {
	labels []*tributaryv1.Label
	ts     []int64
	vals   []float64
}

func (f *fakeNode) Query(req *tributaryv1.QueryRequest, stream grpc.ServerStreamingServer[tributaryv1.QueryResponse]) error {
	f.mu.Lock()
	matched, err := f.match(req.Matchers)
	var answers []out
	if err == nil {
		answers, err = f.answer(req, matched)
	}
	f.mu.Unlock()
	if err != nil {
		return err
	}
	first := true
	for i, a := range answers {
		for from := 0; from < len(a.ts) || from == 0; from += f.chunkPoints {
			to := min(from+f.chunkPoints, len(a.ts))
			msg := &tributaryv1.QueryResponse{
				Series: &tributaryv1.Series{Labels: a.labels}, SeriesIndex: int64(i),
				TimestampsMs: a.ts[from:to], Values: a.vals[from:to],
			}
			if first {
				msg.Source, first = "raw", false
			}
			if err := stream.Send(msg); err != nil {
				return err
			}
			if to == len(a.ts) {
				break
			}
		}
	}
	return nil
}

func (f *fakeNode) answer(req *tributaryv1.QueryRequest, matched []*fakeSeries) ([]out, error) {
	inRange := func(s *fakeSeries) ([]int64, []float64) {
		var ts []int64
		for t := range s.points {
			if t >= req.StartMs && t <= req.EndMs {
				ts = append(ts, t)
			}
		}
		slices.Sort(ts)
		vals := make([]float64, len(ts))
		for i, t := range ts {
			vals[i] = s.points[t]
		}
		return ts, vals
	}
	mode := req.Mode
	if mode == tributaryv1.QueryMode_QUERY_MODE_UNSPECIFIED {
		mode = tributaryv1.QueryMode_QUERY_MODE_RAW
		if req.StepMs > 0 {
			mode = tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE
		}
	}
	var answers []out
	switch mode {
	case tributaryv1.QueryMode_QUERY_MODE_RAW:
		for _, s := range matched {
			ts, vals := inRange(s)
			if len(ts) > 0 {
				answers = append(answers, out{s.labels, ts, vals})
			}
		}
		return answers, nil
	case tributaryv1.QueryMode_QUERY_MODE_LAST_POINT:
		for _, s := range matched {
			best, found := int64(0), false
			for t := range s.points {
				if t <= req.EndMs && (req.StartMs == 0 || t >= req.StartMs) && (!found || t > best) {
					best, found = t, true
				}
			}
			if found {
				answers = append(answers, out{s.labels, []int64{best}, []float64{s.points[best]}})
			}
		}
		return answers, nil
	}
	if req.StepMs <= 0 {
		return nil, status.Error(codes.InvalidArgument, "downsample needs step_ms")
	}
	// Per series: bucket start → downsampled value.
	type bucketed struct {
		labels  []*tributaryv1.Label
		buckets map[int64]float64
	}
	var per []bucketed
	for _, s := range matched {
		ts, vals := inRange(s)
		groups := map[int64][]float64{}
		for i, t := range ts {
			b := t - t%req.StepMs
			groups[b] = append(groups[b], vals[i])
		}
		bs := map[int64]float64{}
		for b, xs := range groups {
			bs[b] = f.aggregate(req.Downsample, xs)
		}
		if len(bs) > 0 {
			per = append(per, bucketed{s.labels, bs})
		}
	}
	emit := func(labels []*tributaryv1.Label, buckets map[int64]float64) {
		ts := slices.Sorted(func(yield func(int64) bool) {
			for b := range buckets {
				if !yield(b) {
					return
				}
			}
		})
		vals := make([]float64, len(ts))
		for i, b := range ts {
			vals[i] = buckets[b]
		}
		answers = append(answers, out{labels, ts, vals})
	}
	if req.Aggregate == tributaryv1.Aggregate_AGGREGATE_UNSPECIFIED {
		for _, p := range per {
			emit(p.labels, p.buckets)
		}
		return answers, nil
	}
	type group struct {
		labels []*tributaryv1.Label
		values map[int64][]float64
	}
	groups := map[string]*group{}
	var order []string
	for _, p := range per {
		var gl []*tributaryv1.Label
		for _, name := range req.GroupBy {
			gl = append(gl, &tributaryv1.Label{Name: name, Value: labelValue(p.labels, name)})
		}
		k := key(gl)
		g := groups[k]
		if g == nil {
			g = &group{labels: gl, values: map[int64][]float64{}}
			groups[k] = g
			order = append(order, k)
		}
		for b, v := range p.buckets {
			g.values[b] = append(g.values[b], v)
		}
	}
	for _, k := range order {
		g := groups[k]
		bs := map[int64]float64{}
		for b, xs := range g.values {
			bs[b] = f.aggregate(req.Aggregate, xs)
		}
		emit(g.labels, bs)
	}
	return answers, nil
}

func (f *fakeNode) Series(_ context.Context, req *tributaryv1.SeriesRequest) (*tributaryv1.SeriesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	matched, err := f.match(req.Matchers)
	if err != nil {
		return nil, err
	}
	resp := &tributaryv1.SeriesResponse{}
	for _, s := range matched {
		resp.Series = append(resp.Series, &tributaryv1.Series{Labels: s.labels})
	}
	return resp, nil
}

func (f *fakeNode) Status(context.Context, *tributaryv1.StatusRequest) (*tributaryv1.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &tributaryv1.StatusResponse{NodeId: "fake", Version: "test", Series: int64(len(f.series))}, nil
}

// serveFake runs f on a loopback port until the test ends.
func serveFake(t *testing.T, f *fakeNode) string {
	t.Helper()
	return fakenode.ServeServices(t, func(s grpc.ServiceRegistrar) {
		tributaryv1.RegisterWriteServiceServer(s, f)
		tributaryv1.RegisterQueryServiceServer(s, f)
	})
}
