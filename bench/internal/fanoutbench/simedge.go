package fanoutbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// Labels of the simulated edges' series: none is shared with the process
// edges' sensor workload, so that the phases before do not see them.
const (
	simMetric   = "fleet_sim_temp"
	simEdgeName = "sim_edge"
	simProbe    = "probe"
	simNewName  = "fleet_sim_new" // series created for the visibility figure
)

// simEdge is an edge simulated in the benchmark's process: the real
// replicator (a replicator.Shipper, as a node runs it) announcing the
// edge's series to the coordinators, and a QueryService on its own
// loopback port answering from generated points, so that a coordinator
// asks it for its fresh tail exactly as it would a node. It ships no
// segments: the cloud holds none of its data, and the edge answers every
// query for its series itself.
//
// An unreachable edge announces like the others (its stream goes out, as
// from behind NAT) but its query address accepts connections and never
// answers: a coordinator that asks it waits for its edge timeout.
type simEdge struct {
	id        string
	reachable bool
	o         *Options
	firstMs   int64 // time of the first point of every series

	mu     sync.Mutex
	series []labels.Labels // in creation order
	calls  atomic.Int64    // Query requests received

	shipper *replicator.Shipper
	stop    context.CancelFunc
	done    chan error
	lis     net.Listener
	g       *grpc.Server
	held    []net.Conn // unreachable: accepted, never answered
}

// simSource is what the Shipper reads of a simulated edge.
type simSource struct{ e *simEdge }

func (s simSource) NodeID() string                 { return s.e.id }
func (s simSource) WALSegments() []wal.SegmentInfo { return nil }
func (s simSource) WALReplayFrom() uint64          { return 1 }
func (s simSource) ReadWALSegment(seq uint64) ([]byte, wal.SegmentInfo, error) {
	return nil, wal.SegmentInfo{}, fmt.Errorf("simulated edge %s has no segment %d: %w", s.e.id, seq, os.ErrNotExist)
}
func (s simSource) ExportRange(context.Context, int64, int64, func(labels.Labels, []int64, []float64) error) error {
	return nil
}

// CreatedSeries implements replicator.SeriesSource: ids are positions in
// e.series, from 1.
func (s simSource) CreatedSeries(from uint64, limit int) ([]labels.Labels, uint64) {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	from = max(from, 1)
	if from > uint64(len(s.e.series)) {
		return nil, from
	}
	out := slices.Clone(s.e.series[from-1 : min(uint64(len(s.e.series)), from-1+uint64(limit))])
	return out, from + uint64(len(out))
}

var _ replicator.SeriesSource = simSource{}

// newSimEdge makes edge id with n probe series.
func newSimEdge(o *Options, id string, n int, reachable bool) *simEdge {
	e := &simEdge{id: id, reachable: reachable, o: o, firstMs: time.Now().Add(-o.History - 2*time.Minute).UnixMilli()}
	for i := range n {
		e.series = append(e.series, labels.FromStrings("__name__", simMetric, simEdgeName, id, simProbe, fmt.Sprintf("p%d", i)))
	}
	return e
}

// create adds a series to the edge, as a node does on its first write.
func (e *simEdge) create(ls labels.Labels) {
	e.mu.Lock()
	e.series = append(e.series, ls)
	e.mu.Unlock()
}

// start opens the query port and runs the Shipper towards intakes.
func (e *simEdge) start(dir string, intakes []string, logger *slog.Logger) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("simulated edge %s: listen: %w", e.id, err)
	}
	e.lis = lis
	if e.reachable {
		e.g = grpc.NewServer()
		tributaryv1.RegisterQueryServiceServer(e.g, simQuery{e: e})
		go func() { _ = e.g.Serve(lis) }()
	} else {
		go e.blackhole()
	}
	// Every edge lists the intakes from a different first one, as a fleet
	// configured with them in any order spreads over them.
	k := len(e.id) + int(e.id[len(e.id)-1])
	targets := append(slices.Clone(intakes[k%len(intakes):]), intakes[:k%len(intakes)]...)
	s, err := replicator.New(replicator.Options{Targets: targets, Insecure: true,
		CursorPath: filepath.Join(dir, e.id+".cursor"), SoftwareVersion: "tribench-sim", QueryAddr: lis.Addr().String(),
		PollInterval: time.Second, AnnounceInterval: time.Second, Logger: logger})
	if err != nil {
		return fmt.Errorf("simulated edge %s: %w", e.id, err)
	}
	e.shipper = s
	ctx, cancel := context.WithCancel(context.Background())
	e.stop, e.done = cancel, make(chan error, 1)
	go func() { e.done <- s.Run(ctx, simSource{e}) }()
	return nil
}

// blackhole accepts connections and never answers them.
func (e *simEdge) blackhole() {
	for {
		c, err := e.lis.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		e.held = append(e.held, c)
		e.mu.Unlock()
	}
}

// offline stops the edge's Shipper: it no longer announces (its
// registration watermark ages).
func (e *simEdge) offline() error {
	if e.stop == nil {
		return nil
	}
	e.stop()
	e.stop = nil
	if err := <-e.done; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("simulated edge %s: %w", e.id, err)
	}
	return nil
}

// close stops everything the edge runs.
func (e *simEdge) close() error {
	err := e.offline()
	if e.g != nil {
		e.g.Stop()
	}
	if e.lis != nil {
		_ = e.lis.Close()
	}
	e.mu.Lock()
	for _, c := range e.held {
		_ = c.Close()
	}
	e.mu.Unlock()
	return err
}

// simQuery is a simulated edge's QueryService: every series has a point
// every Interval from History (and two minutes) before the edge was made
// until now, with values the benchmark
// computes (simPoints), answered by the benchmark's own naive model
// (expected), which also checks the coordinators' answers.
type simQuery struct {
	tributaryv1.UnimplementedQueryServiceServer
	e *simEdge
}

// simValue is the value of series i of an edge at time t.
func simValue(edge string, i int, t int64) float64 {
	return float64(len(edge)+i) + float64((t/1000)%3600)/100
}

// data returns the edge's series that match (label equalities only), with
// their points in [fromMs, toMs] (and not after now).
func (e *simEdge) data(match map[string]string, fromMs, toMs int64) []dataSeries {
	e.mu.Lock()
	series := slices.Clone(e.series)
	e.mu.Unlock()
	now := time.Now().UnixMilli()
	iv := e.o.Interval.Milliseconds()
	lo, hi := max(fromMs, e.firstMs), min(toMs, now)
	var out []dataSeries
	for i, ls := range series {
		m := make(map[string]string, len(ls))
		for _, l := range ls {
			m[l.Name] = l.Value
		}
		if !matches(m, match) {
			continue
		}
		d := dataSeries{labels: m}
		for t := (lo + iv - 1) / iv * iv; t <= hi; t += iv {
			d.ts, d.vs = append(d.ts, t), append(d.vs, simValue(e.id, i, t))
		}
		out = append(out, d)
	}
	return out
}

// matchOf turns equality matchers into a label map; other matchers are
// not used by the benchmark.
func matchOf(ms []*tributaryv1.Matcher) (map[string]string, error) {
	out := map[string]string{}
	for _, m := range ms {
		if m.GetType() != tributaryv1.Matcher_EQUAL {
			return nil, status.Errorf(codes.Unimplemented, "simulated edge: matcher type %v", m.GetType())
		}
		out[m.GetName()] = m.GetValue()
	}
	return out, nil
}

func (s simQuery) Query(req *tributaryv1.QueryRequest, stream grpc.ServerStreamingServer[tributaryv1.QueryResponse]) error {
	s.e.calls.Add(1)
	match, err := matchOf(req.GetMatchers())
	if err != nil {
		return err
	}
	q := querySpec{name: "sim", match: match, startMs: req.GetStartMs(), endMs: req.GetEndMs(), mode: req.GetMode(),
		stepMs: req.GetStepMs(), downsample: req.GetDownsample(), aggregate: req.GetAggregate(), groupBy: req.GetGroupBy()}
	from := q.startMs
	if q.mode == tributaryv1.QueryMode_QUERY_MODE_LAST_POINT {
		from = 0
	}
	data := s.e.data(match, from, q.endMs)
	byKey := map[string]map[string]string{}
	for _, d := range data {
		byKey[labelKey(d.labels)] = d.labels
	}
	want, err := expected(data, q)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	for i, w := range want {
		m := &tributaryv1.QueryResponse{SeriesIndex: int64(i), Series: protoSeries(byKey[w.key]), TimestampsMs: w.ts, Values: w.vs}
		if i == 0 {
			m.Source = "raw"
		}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

func (s simQuery) Series(_ context.Context, req *tributaryv1.SeriesRequest) (*tributaryv1.SeriesResponse, error) {
	match, err := matchOf(req.GetMatchers())
	if err != nil {
		return nil, err
	}
	out := &tributaryv1.SeriesResponse{}
	for _, d := range s.e.data(match, 1, 0) {
		out.Series = append(out.Series, protoSeries(d.labels))
	}
	return out, nil
}

func (s simQuery) LabelNames(_ context.Context, req *tributaryv1.LabelNamesRequest) (*tributaryv1.LabelNamesResponse, error) {
	names, err := s.distinct(req.GetMatchers(), func(labels map[string]string, seen map[string]bool) {
		for n := range labels {
			seen[n] = true
		}
	})
	if err != nil {
		return nil, err
	}
	return &tributaryv1.LabelNamesResponse{Names: names}, nil
}

func (s simQuery) LabelValues(_ context.Context, req *tributaryv1.LabelValuesRequest) (*tributaryv1.LabelValuesResponse, error) {
	values, err := s.distinct(req.GetMatchers(), func(labels map[string]string, seen map[string]bool) {
		if v := labels[req.GetName()]; v != "" {
			seen[v] = true
		}
	})
	if err != nil {
		return nil, err
	}
	return &tributaryv1.LabelValuesResponse{Values: values}, nil
}

// distinct is the sorted set that add collects from the labels of every
// series that ms select.
func (s simQuery) distinct(ms []*tributaryv1.Matcher, add func(labels map[string]string, seen map[string]bool)) ([]string, error) {
	match, err := matchOf(ms)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, d := range s.e.data(match, 1, 0) {
		add(d.labels, seen)
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// protoSeries is ls as the API sends it, sorted by name.
func protoSeries(ls map[string]string) *tributaryv1.Series {
	out := &tributaryv1.Series{}
	for n, v := range ls {
		out.Labels = append(out.Labels, &tributaryv1.Label{Name: n, Value: v})
	}
	slices.SortFunc(out.Labels, func(a, b *tributaryv1.Label) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}
