package fanoutbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// runner carries one run's state from phase to phase.
type runner struct {
	o      Options
	c      *cluster
	logger *slog.Logger
	m      measurement

	data    []dataSeries
	fromMs  int64 // start of the queried hour
	dataEnd int64 // newest point of the loaded history
	dir     string
}

// run executes the phases in order. Once the load phase has finished,
// m.measured is set and the report is worth printing even if a later phase
// fails.
func (r *runner) run(ctx context.Context) error {
	r.logger.Info("starting coordinators", "n", len(r.c.coords))
	if err := nodeproc.StartAll(ctx, r.c.coords); err != nil {
		return err
	}
	if _, _, err := r.c.waitFleet(ctx, 100*time.Millisecond, r.o.ReadyTimeout, "a raft leader",
		func(f fleet) bool { return f.Raft.Leader != 0 }); err != nil {
		return err
	}
	r.logger.Info("starting edges", "n", len(r.c.edges))
	if err := nodeproc.StartAll(ctx, r.c.edges); err != nil {
		return err
	}
	if err := r.load(ctx); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	r.m.measured = true

	var errs []error
	if err := r.checkAnswers(ctx); err != nil {
		errs = append(errs, fmt.Errorf("check answers: %w", err))
	}
	if err := r.latency(ctx); err != nil {
		errs = append(errs, fmt.Errorf("latency: %w", err))
	}
	if err := r.registrations(ctx); err != nil {
		errs = append(errs, fmt.Errorf("registrations: %w", err))
	}
	if err := r.failover(ctx); err != nil {
		errs = append(errs, fmt.Errorf("failover: %w", err))
	}
	if err := r.stoppedEdge(ctx); err != nil {
		errs = append(errs, fmt.Errorf("stopped edge: %w", err))
	} else if !r.m.stoppedFlagged {
		errs = append(errs, fmt.Errorf("stopped edge: no warning names %s (warnings: %q)", r.m.stoppedEdge, r.m.stoppedWarnings))
	}
	if err := r.scale(ctx, simDir(r.dir)); err != nil {
		errs = append(errs, fmt.Errorf("fleet scale: %w", err))
	}
	return errors.Join(errs...)
}

// dialAll connects to ps' gRPC addresses; the returned function closes them.
func dialAll(ps []*proc) ([]*grpc.ClientConn, func(), error) {
	conns := make([]*grpc.ClientConn, 0, len(ps))
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	for _, p := range ps {
		c, err := nodeclient.Dial(p.grpcAddr)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		conns = append(conns, c)
	}
	return conns, closeAll, nil
}

// maxPointsPerWrite bounds the points of one series in one Write, so that a
// long history at a short interval stays well under gRPC's message limit.
const maxPointsPerWrite = 3600

// load writes the history, each edge its own group of series, and waits
// until the cloud holds every acknowledged point.
func (r *runner) load(ctx context.Context) error {
	o := r.o
	end := o.Now().Truncate(time.Minute)
	points := int(o.History / o.Interval)
	gen, err := workload.NewSensor(workload.SensorOptions{
		Series:     o.procEdges() * o.SeriesPerEdge,
		StartMs:    end.Add(-o.History + o.Interval).UnixMilli(),
		IntervalMs: o.Interval.Milliseconds(),
		Seed:       o.Seed,
	})
	if err != nil {
		return err
	}
	r.dataEnd = end.UnixMilli()
	r.fromMs = end.Add(-time.Hour).UnixMilli()
	reqs := gen.Requests(o.SeriesPerEdge, min(points, maxPointsPerWrite))
	if len(reqs) != o.procEdges() {
		return fmt.Errorf("BUG: %d requests for %d edges", len(reqs), o.procEdges())
	}
	conns, closeConns, err := dialAll(r.c.edges)
	if err != nil {
		return err
	}
	defer closeConns()
	r.data = make([]dataSeries, 0, o.procEdges()*o.SeriesPerEdge)
	for _, s := range gen.Series() {
		ls := map[string]string{}
		for _, l := range s.GetLabels() {
			ls[l.GetName()] = l.GetValue()
		}
		r.data = append(r.data, dataSeries{labels: ls, ts: make([]int64, 0, points), vs: make([]float64, 0, points)})
	}
	r.logger.Info("loading history", "edges", o.procEdges(), "series", len(r.data), "points", len(r.data)*points)
	t0 := time.Now()
	var acked atomic.Int64
	errs := make([]error, o.procEdges())
	var wg sync.WaitGroup
	for e, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := tributaryv1.NewWriteServiceClient(conns[e])
			base := e * o.SeriesPerEdge
			for left := points; left > 0; {
				n := min(left, maxPointsPerWrite)
				req.Next(n)
				// NB: req.Msg is reused by the next Next; copy the points out.
				for i, b := range req.Msg.GetBatches() {
					d := &r.data[base+i]
					d.ts = append(d.ts, b.GetTimestampsMs()...)
					d.vs = append(d.vs, b.GetValues()...)
				}
				cctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
				resp, err := wc.Write(cctx, req.Msg)
				cancel()
				if err == nil {
					err = nodeclient.CheckWrite(resp, req.Points())
				}
				if err != nil {
					errs[e] = fmt.Errorf("write history to %s: %w", r.c.edges[e].Name, err)
					return
				}
				acked.Add(int64(req.Points()))
				left -= n
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.m.loadWrite = time.Since(t0)
	r.m.points = acked.Load()
	r.logger.Info("history written; waiting for the cloud to hold it", "points", r.m.points)
	f, at, err := r.c.waitFleet(ctx, 100*time.Millisecond, o.ReplicationTimeout, "the cloud to hold every acknowledged point",
		func(f fleet) bool { return f.heldPoints() >= r.m.points })
	if err != nil {
		return fmt.Errorf("%w: it holds %d of %d points", err, f.heldPoints(), r.m.points)
	}
	r.m.loadReplicated = at.Sub(t0)
	if held := f.heldPoints(); held != r.m.points {
		return fmt.Errorf("the cloud holds %d points but the edges acknowledged %d", held, r.m.points)
	}
	return nil
}

// Label values the queries select by; see workload.NewSensor.
const (
	headlineSensor = "s0" // one temperature sensor per device, so per edge
	minuteMs       = int64(60_000)
)

// headline is the latency query: the 1-hour, 1-minute-step average of
// sensor s0 on every edge.
func (r *runner) headline(endMs int64) querySpec {
	return querySpec{name: "avg_1m_s0", match: map[string]string{"sensor": headlineSensor}, startMs: r.fromMs, endMs: endMs,
		mode: tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE, stepMs: minuteMs, downsample: tributaryv1.Aggregate_AGGREGATE_AVG}
}

// checkQueries are the answers checked through every coordinator.
func (r *runner) checkQueries(endMs int64) []querySpec {
	ds := tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE
	return []querySpec{
		{name: "raw_s0", match: map[string]string{"sensor": headlineSensor}, startMs: r.fromMs, endMs: endMs,
			mode: tributaryv1.QueryMode_QUERY_MODE_RAW},
		r.headline(endMs),
		{name: "max_1m_humidity", match: map[string]string{"__name__": "humidity"}, startMs: r.fromMs, endMs: endMs,
			mode: ds, stepMs: minuteMs, downsample: tributaryv1.Aggregate_AGGREGATE_MAX},
		{name: "last_point_s1", match: map[string]string{"sensor": "s1"}, startMs: r.fromMs, endMs: endMs,
			mode: tributaryv1.QueryMode_QUERY_MODE_LAST_POINT},
		{name: "max_by_sensor_temperature", match: map[string]string{"__name__": "temperature"}, startMs: r.fromMs, endMs: endMs,
			mode: ds, stepMs: minuteMs, downsample: tributaryv1.Aggregate_AGGREGATE_MAX,
			aggregate: tributaryv1.Aggregate_AGGREGATE_MAX, groupBy: []string{"sensor"}},
		{name: "count_sum_by_sensor_site00", match: map[string]string{"site": "site-00"}, startMs: r.fromMs, endMs: endMs,
			mode: ds, stepMs: minuteMs, downsample: tributaryv1.Aggregate_AGGREGATE_COUNT,
			aggregate: tributaryv1.Aggregate_AGGREGATE_SUM, groupBy: []string{"sensor"}},
	}
}

// checkAnswers runs every check query through every coordinator, with the
// range ending now, and compares the answers with the written data.
func (r *runner) checkAnswers(ctx context.Context) error {
	conns, closeConns, err := dialAll(r.c.coords)
	if err != nil {
		return err
	}
	defer closeConns()
	var errs []error
	for ci, conn := range conns {
		qc := tributaryv1.NewQueryServiceClient(conn)
		for _, q := range r.checkQueries(time.Now().UnixMilli()) {
			want, err := expected(r.data, q)
			if err != nil {
				return err
			}
			cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
			got, err := nodeclient.Query(cctx, qc, q.request())
			cancel()
			r.m.checked++
			if err == nil {
				err = compare(q, got, want)
			}
			if err == nil && len(got.Warnings) > 0 {
				err = fmt.Errorf("query %s: warnings on a complete fleet: %s", q.name, strings.Join(got.Warnings, "; "))
			}
			if err != nil {
				r.m.wrong++
				errs = append(errs, fmt.Errorf("through %s: %w", r.c.coords[ci].Name, err))
			}
		}
	}
	r.m.checkNames = nil
	for _, q := range r.checkQueries(0) {
		r.m.checkNames = append(r.m.checkNames, q.name)
	}
	return errors.Join(errs...)
}

// latency times the headline query, first with the range ending now (edges
// asked for their tails), then ending at the newest point loaded.
func (r *runner) latency(ctx context.Context) error {
	want, err := expected(r.data, r.headline(r.dataEnd))
	if err != nil {
		return err
	}
	r.m.headlineSeries = len(want)
	var errs []error
	lat, err := r.timeQueries(ctx, want, func() int64 { return time.Now().UnixMilli() })
	if err != nil {
		errs = append(errs, fmt.Errorf("range ending now: %w", err))
	}
	r.m.tailLatency = lat
	lat, err = r.timeQueries(ctx, want, func() int64 { return r.dataEnd })
	if err != nil {
		errs = append(errs, fmt.Errorf("range ending at the newest point: %w", err))
	}
	r.m.replicaLatency = lat
	return errors.Join(errs...)
}

// timeQueries sends the headline query from QueryClients clients, client i
// through coordinator i mod the number of coordinators, and returns the
// timed round trips. Every answer is checked against want.
func (r *runner) timeQueries(ctx context.Context, want []expSeries, endMs func() int64) ([]time.Duration, error) {
	conns, closeConns, err := dialAll(r.c.coords)
	if err != nil {
		return nil, err
	}
	defer closeConns()
	var (
		mu    sync.Mutex
		lat   = make([]time.Duration, 0, r.o.Queries)
		errs  []error
		wrong int
	)
	phase := func(total int, timed bool) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for cl := range r.o.QueryClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				qc := tributaryv1.NewQueryServiceClient(conns[cl%len(conns)])
				for next.Add(1) <= int64(total) && ctx.Err() == nil {
					q := r.headline(endMs())
					cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
					t0 := time.Now()
					got, err := nodeclient.Query(cctx, qc, q.request())
					d := time.Since(t0)
					cancel()
					if err == nil {
						err = compare(q, got, want)
					}
					if err == nil && len(got.Warnings) > 0 {
						err = fmt.Errorf("query %s: warnings on a complete fleet: %s", q.name, strings.Join(got.Warnings, "; "))
					}
					mu.Lock()
					r.m.checked++
					if err != nil {
						wrong++
						if len(errs) < 3 {
							errs = append(errs, err)
						}
					} else if timed {
						lat = append(lat, d)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	phase(r.o.WarmupQueries, false)
	phase(r.o.Queries, true)
	r.m.wrong += wrong
	if wrong > 0 {
		errs = append(errs, fmt.Errorf("%d answers wrong or failed", wrong))
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return lat, errors.Join(errs...)
}

// registrations has the edges create RegistrationSeries new series and
// times them until the catalog counts them all.
func (r *runner) registrations(ctx context.Context) error {
	o := r.o
	if o.RegistrationSeries == 0 {
		return nil
	}
	conns, closeConns, err := dialAll(r.c.edges)
	if err != nil {
		return err
	}
	defer closeConns()
	before, err := r.c.anyFleet(ctx)
	if err != nil {
		return err
	}
	// Build every request first, so that the timed part only sends.
	reqs := make([][]*tributaryv1.WriteRequest, o.procEdges())
	ts := o.Now().UnixMilli()
	for i := range o.RegistrationSeries {
		e := i % o.procEdges()
		list := reqs[e]
		if len(list) == 0 || len(list[len(list)-1].Batches) == o.RegistrationBatch {
			list = append(list, &tributaryv1.WriteRequest{})
		}
		req := list[len(list)-1]
		req.Batches = append(req.Batches, &tributaryv1.SeriesBatch{
			Series: &tributaryv1.Series{Labels: []*tributaryv1.Label{
				{Name: "__name__", Value: "fanout_registration"},
				{Name: "edge", Value: r.c.edges[e].Name},
				{Name: "id", Value: strconv.Itoa(i)},
			}},
			TimestampsMs: []int64{ts},
			Values:       []float64{float64(i)},
		})
		reqs[e] = list
	}
	want := before.Series + o.RegistrationSeries
	r.logger.Info("registering series", "series", o.RegistrationSeries, "catalog_before", before.Series)
	t0 := time.Now()
	errs := make([]error, o.procEdges())
	var wg sync.WaitGroup
	for e := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := tributaryv1.NewWriteServiceClient(conns[e])
			for _, req := range reqs[e] {
				cctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
				resp, err := wc.Write(cctx, req)
				cancel()
				if err == nil {
					err = nodeclient.CheckWrite(resp, len(req.Batches))
				}
				if err != nil {
					errs[e] = fmt.Errorf("write new series to %s: %w", r.c.edges[e].Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.m.regWrite = time.Since(t0)
	r.m.points += int64(o.RegistrationSeries)
	after, at, err := r.c.waitFleet(ctx, 50*time.Millisecond, o.ReplicationTimeout, "the catalog to count the new series",
		func(f fleet) bool { return f.Series >= want })
	if err != nil {
		return fmt.Errorf("%w: it counts %d of %d series", err, after.Series, want)
	}
	r.m.regElapsed = at.Sub(t0)
	r.m.regSeries = after.Series - before.Series
	r.m.proposals = int64(after.Raft.Applied) - int64(before.Raft.Applied)
	return nil
}

// stoppedEdge SIGKILLs the last edge and queries past its watermark: the
// answer must say that the edge is missing.
func (r *runner) stoppedEdge(ctx context.Context) error {
	p := r.c.edges[len(r.c.edges)-1]
	r.m.stoppedEdge = p.Name
	if err := p.Kill(); err != nil {
		return err
	}
	var via *proc
	for _, c := range r.c.coords {
		if c.Current() != nil {
			via = c
			break
		}
	}
	if via == nil {
		return errors.New("no coordinator runs")
	}
	conns, closeConns, err := dialAll([]*proc{via})
	if err != nil {
		return err
	}
	defer closeConns()
	q := r.headline(time.Now().UnixMilli())
	want, err := expected(r.data, q)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, r.o.CallTimeout)
	got, err := nodeclient.Query(cctx, tributaryv1.NewQueryServiceClient(conns[0]), q.request())
	cancel()
	if err != nil {
		return fmt.Errorf("query with %s stopped: %w", p.Name, err)
	}
	r.m.stoppedWarnings = got.Warnings
	r.m.stoppedFlagged = slices.ContainsFunc(got.Warnings, func(w string) bool { return strings.Contains(w, p.Name) })
	// The replicas hold everything the edge shipped, which is all of the
	// history: only the tail past the watermark may be missing.
	if cerr := compare(q, got, want); cerr != nil {
		r.m.stoppedAnswerDiff = cerr.Error()
	}
	r.m.stoppedChecked = true
	return nil
}
