package edgebench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"

	"github.com/tributarydb/tributary/bench/internal/benchplot"
	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/workload"
)

// TSBSOptions configure the tsbs-cpu workload: the TSBS cpu-only data
// (Hosts hosts × 10 tags × 10 fields every Interval over Span) written as
// line protocol over HTTP, then the kdb+ blog's queries and two more, each
// sent Queries times by QueryClients clients over gRPC.
type TSBSOptions struct {
	Common
	Hosts      int
	Span       time.Duration
	Interval   time.Duration
	Clients    int
	BatchLines int
	// QueryClients send the queries concurrently; Warmup queries of each
	// kind precede its Queries timed ones.
	QueryClients, Warmup, Queries int
}

// DefaultTSBSOptions is the short profile: 100 hosts over 13 hours (4.7 M
// points), 300 timed queries of each kind.
func DefaultTSBSOptions() TSBSOptions {
	return TSBSOptions{
		Common:       defaultCommon(),
		Hosts:        100,
		Span:         13 * time.Hour,
		Interval:     10 * time.Second,
		Clients:      2,
		BatchLines:   5000,
		QueryClients: 2,
		Warmup:       30,
		Queries:      300,
	}
}

func (o TSBSOptions) validate() error {
	errs := []error{o.Common.validate()}
	if o.Hosts < 8 {
		errs = append(errs, fmt.Errorf("hosts must be at least 8 (a query reads 8 hosts), got %d", o.Hosts))
	}
	if o.Interval <= 0 || time.Minute%o.Interval != 0 {
		errs = append(errs, fmt.Errorf("interval must divide a minute, got %s", o.Interval))
	}
	if o.Span < 12*time.Hour+time.Minute {
		errs = append(errs, fmt.Errorf("span must exceed 12 hours (a query reads 12), got %s", o.Span))
	}
	if o.Clients <= 0 || o.Clients > o.Hosts || o.BatchLines <= 0 || o.QueryClients <= 0 || o.Queries <= 0 || o.Warmup < 0 {
		errs = append(errs, errors.New("clients (at most the hosts), batch lines, query clients and queries must be positive"))
	}
	return errors.Join(errs...)
}

// The queries: the kdb+ blog's three, TSBS's lastpoint and cpu-max-all-1.
var tsbsQueries = []struct{ name, about string }{
	{"1host_1h_max_by_min", "max usage_user by minute, 1 host, 1 hour"},
	{"1host_12h_max_by_min", "max usage_user by minute, 1 host, 12 hours"},
	{"8hosts_1h_max_by_min", "max usage_user by minute, 8 hosts, 1 hour"},
	{"lastpoint", "last point of every field of every host"},
	{"max_all_fields_8h_by_hour", "max of all 10 fields by hour, 1 host, 8 hours"},
}

// TSBSResult holds the figures.
type TSBSResult struct {
	Lines          int64              `json:"lines"`
	Points         int64              `json:"points"`
	Series         int                `json:"series"`
	WriteSeconds   float64            `json:"write_s"`
	RowsPerS       float64            `json:"rows_per_s"`
	PointsPerS     float64            `json:"points_per_s"`
	WriteLatency   Latency            `json:"write_latency"`
	Queries        map[string]Latency `json:"queries"`
	CheckedAnswers int                `json:"checked_answers"`
}

// RunTSBS runs the workload on a fresh node.
func RunTSBS(ctx context.Context, o TSBSOptions) (res TSBSResult, err error) {
	if err := o.validate(); err != nil {
		return res, fmt.Errorf("tsbs-cpu: %w", err)
	}
	host := detectHost()
	rows := int(o.Span / o.Interval)
	// The data ends at the start of the current minute.
	endNs := time.Now().Truncate(time.Minute).UnixNano()
	g, err := workload.NewTSBSCPU(workload.TSBSCPUOptions{Hosts: o.Hosts, Rows: rows,
		StartNs: endNs - int64(rows)*o.Interval.Nanoseconds(), IntervalNs: o.Interval.Nanoseconds(), Seed: o.Seed})
	if err != nil {
		return res, err
	}
	o.Log().Info("tsbs-cpu: rendering line protocol", "hosts", o.Hosts, "rows", rows)
	perClient := make([][]lpBody, o.Clients)
	for c := range o.Clients {
		s := g.Stream(c*o.Hosts/o.Clients, (c+1)*o.Hosts/o.Clients)
		for s.Remaining() > 0 {
			b, n := s.AppendLines(make([]byte, 0, o.BatchLines*s.MaxLineBytes()), o.BatchLines)
			perClient[c] = append(perClient[c], lpBody{body: b, lines: int64(n), points: int64(n) * workload.TSBSCPUFields})
		}
	}
	n, err := startNode(ctx, o.Common, "tsbs")
	if err != nil {
		return res, err
	}
	failed := true
	defer func() {
		if serr := n.stop(failed); serr != nil && err == nil {
			err = serr
		}
	}()
	o.Log().Info("tsbs-cpu: writing", "lines", g.Lines(), "clients", o.Clients)
	ws, err := writeLP(ctx, "http://"+n.httpAddr+"/write?db=benchmark&precision=ns", perClient)
	if err != nil {
		return res, fmt.Errorf("write: %w", err)
	}
	perClient = nil
	res.Lines, res.Points, res.Series = ws.Lines, ws.Points, o.Hosts*workload.TSBSCPUFields
	res.WriteSeconds = report.Round(ws.Elapsed.Seconds(), 2)
	res.RowsPerS = report.Round(float64(ws.Lines)/ws.Elapsed.Seconds(), 0)
	res.PointsPerS = report.Round(float64(ws.Points)/ws.Elapsed.Seconds(), 0)
	res.WriteLatency = summarize(ws.Latencies, ws.Elapsed)

	conn, err := nodeclient.Dial(n.grpcAddr)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	qc := tributaryv1.NewQueryServiceClient(conn)
	q := &tsbsQuerier{g: g, qc: qc, rows: rows, intervalMs: o.Interval.Milliseconds(), startMs: g.StartNs() / 1e6,
		expect: map[int][]int64{}}
	res.Queries = map[string]Latency{}
	for _, kind := range tsbsQueries {
		o.Log().Info("tsbs-cpu: querying", "query", kind.name, "queries", o.Queries)
		l, err := runQueries(ctx, o, q, kind.name)
		if err != nil {
			return res, fmt.Errorf("%s: %w", kind.name, err)
		}
		res.Queries[kind.name] = l
	}
	res.CheckedAnswers = int(q.checked.Load())
	host.finish()
	printTSBS(o, host, res)
	var plots []string
	lc := benchplot.Chart{Title: "tsbs-cpu: query latency", XLabel: "percentile", YLabel: "ms", XNames: PercentileNames, LogY: true}
	for _, kind := range tsbsQueries {
		s := benchplot.Series{Name: kind.name, Y: res.Queries[kind.name].Values()}
		for i := range s.Y {
			s.X = append(s.X, float64(i))
		}
		lc.Series = append(lc.Series, s)
	}
	if o.ResultsDir != "" {
		p, err := savePlot(o.Common, "tsbs-cpu", "latency", lc)
		if err != nil {
			return res, err
		}
		plots = append(plots, p)
	}
	failed = false
	return res, finishRecord(o.Common, Record{
		Workload: "tsbs-cpu", Profile: o.Profile, Time: time.Now().UTC(), Commit: o.Commit, Machine: host,
		Config: map[string]any{"hosts": o.Hosts, "span_h": o.Span.Hours(), "interval_s": o.Interval.Seconds(),
			"clients": o.Clients, "batch_lines": o.BatchLines, "query_clients": o.QueryClients,
			"warmup": o.Warmup, "queries": o.Queries, "wal_sync": o.WALSync, "seed": o.Seed},
		Figures: res, Plots: plots,
		Published: map[string]string{
			"kdb_pi3_ingest_rows_per_s":                 "60000 (kdb+, Raspberry Pi 3; other hardware)",
			"kdb_pi3_1host_1h_max_by_min_queries_per_s": "5500 on 4 cores (kdb+, Raspberry Pi 3; other hardware)",
		},
	})
}

// runQueries sends Warmup and then Queries queries of one kind from
// QueryClients clients and summarises the timed ones.
func runQueries(ctx context.Context, o TSBSOptions, q *tsbsQuerier, kind string) (Latency, error) {
	rng := rand.New(rand.NewPCG(o.Seed, uint64(len(kind))))
	reqs := make([]tsbsRequest, o.Warmup+o.Queries)
	for i := range reqs {
		reqs[i] = q.plan(kind, rng)
	}
	for _, r := range reqs[:o.Warmup] {
		if err := q.run(ctx, r); err != nil {
			return Latency{}, err
		}
	}
	timed := reqs[o.Warmup:]
	lat := make([]time.Duration, len(timed))
	errs := make([]error, o.QueryClients)
	var wg sync.WaitGroup
	t0 := time.Now()
	for c := range o.QueryClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < len(timed); i += o.QueryClients {
				t := time.Now()
				if err := q.run(ctx, timed[i]); err != nil {
					errs[c] = err
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return Latency{}, err
	}
	return summarize(lat, elapsed), nil
}

// tsbsQuerier plans, sends and checks the queries.
type tsbsQuerier struct {
	g          *workload.TSBSCPU
	qc         tributaryv1.QueryServiceClient
	rows       int
	intervalMs int64
	startMs    int64
	mu         sync.Mutex
	expect     map[int][]int64 // usage_user of a host, by row
	checked    atomicInt
}

type tsbsRequest struct {
	kind  string
	hosts []int
	req   *tributaryv1.QueryRequest
	want  int // series in the answer
	// buckets per series of a downsampled answer; 0 for lastpoint
	buckets int
}

func (q *tsbsQuerier) plan(kind string, rng *rand.Rand) tsbsRequest {
	endMs := q.startMs + int64(q.rows)*q.intervalMs // exclusive
	window := func(d time.Duration) (int64, int64) {
		// A minute-aligned window inside the data.
		span := d.Milliseconds()
		first := (q.startMs + 59_999) / 60_000
		last := (endMs - span) / 60_000
		s := (first + rng.Int64N(last-first+1)) * 60_000
		return s, s + span - 1
	}
	hostRe := func(hs []int) string {
		names := make([]string, len(hs))
		for i, h := range hs {
			names[i] = q.g.HostName(h)
		}
		return strings.Join(names, "|")
	}
	user := &tributaryv1.Matcher{Name: "__name__", Value: "cpu_usage_user"}
	r := tsbsRequest{kind: kind}
	switch kind {
	case "1host_1h_max_by_min", "1host_12h_max_by_min", "8hosts_1h_max_by_min":
		d, nh := time.Hour, 1
		if kind == "1host_12h_max_by_min" {
			d = 12 * time.Hour
		}
		if kind == "8hosts_1h_max_by_min" {
			nh = 8
		}
		r.hosts = rng.Perm(q.g.Hosts())[:nh]
		s, e := window(d)
		r.req = &tributaryv1.QueryRequest{Matchers: []*tributaryv1.Matcher{user,
			{Type: tributaryv1.Matcher_REGEX, Name: "hostname", Value: hostRe(r.hosts)}},
			StartMs: s, EndMs: e, Mode: tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE, StepMs: 60_000,
			Downsample: tributaryv1.Aggregate_AGGREGATE_MAX}
		r.want, r.buckets = nh, int(d/time.Minute)
	case "lastpoint":
		r.req = &tributaryv1.QueryRequest{Matchers: []*tributaryv1.Matcher{
			{Type: tributaryv1.Matcher_REGEX, Name: "__name__", Value: "cpu_usage_.*"}},
			EndMs: endMs, Mode: tributaryv1.QueryMode_QUERY_MODE_LAST_POINT}
		r.want = q.g.Hosts() * workload.TSBSCPUFields
	case "max_all_fields_8h_by_hour":
		r.hosts = []int{rng.IntN(q.g.Hosts())}
		s := (q.startMs/3_600_000 + 1) * 3_600_000
		hours := (endMs-s)/3_600_000 - 8
		s += rng.Int64N(hours+1) * 3_600_000
		r.req = &tributaryv1.QueryRequest{Matchers: []*tributaryv1.Matcher{
			{Type: tributaryv1.Matcher_REGEX, Name: "__name__", Value: "cpu_usage_.*"},
			{Name: "hostname", Value: q.g.HostName(r.hosts[0])}},
			StartMs: s, EndMs: s + 8*3_600_000 - 1, Mode: tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE,
			StepMs: 3_600_000, Downsample: tributaryv1.Aggregate_AGGREGATE_MAX}
		r.want, r.buckets = workload.TSBSCPUFields, 8
	default:
		panic("BUG: unknown tsbs query " + kind)
	}
	r.req.LimitSeries = int64(r.want)
	return r
}

// run sends r and checks the answer's shape; for the usage_user queries
// it also checks every bucket's maximum against the generated data.
func (q *tsbsQuerier) run(ctx context.Context, r tsbsRequest) error {
	ans, err := nodeclient.Query(ctx, q.qc, r.req)
	if err != nil {
		return err
	}
	if len(ans.Series) != r.want {
		return fmt.Errorf("%d series in the answer, want %d", len(ans.Series), r.want)
	}
	for _, s := range ans.Series {
		if r.buckets > 0 && len(s.Values) != r.buckets {
			return fmt.Errorf("series %s: %d buckets, want %d", s.Label("hostname"), len(s.Values), r.buckets)
		}
		if r.buckets == 0 && len(s.Values) != 1 {
			return fmt.Errorf("series %s: %d last points, want 1", s.Label("__name__"), len(s.Values))
		}
	}
	if r.req.GetMatchers()[0].GetValue() != "cpu_usage_user" {
		q.checked.add(1)
		return nil
	}
	for _, s := range ans.Series {
		h, err := strconv.Atoi(strings.TrimPrefix(s.Label("hostname"), "host_"))
		if err != nil {
			return fmt.Errorf("answer series without a host: %v", s.Labels)
		}
		vals := q.userValues(h)
		for i, ts := range s.TimestampsMs {
			first := int((ts - q.startMs + q.intervalMs - 1) / q.intervalMs)
			last := int((ts + 60_000 - 1 - q.startMs) / q.intervalMs)
			want := int64(-1)
			for row := max(first, 0); row <= last && row < len(vals); row++ {
				want = max(want, vals[row])
			}
			if float64(want) != s.Values[i] {
				return fmt.Errorf("host_%d max at %d: got %g, want %d", h, ts, s.Values[i], want)
			}
		}
	}
	q.checked.add(1)
	return nil
}

func (q *tsbsQuerier) userValues(h int) []int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	v, ok := q.expect[h]
	if !ok {
		v = q.g.FieldValues(h, 0)
		q.expect[h] = v
	}
	return v
}

func printTSBS(o TSBSOptions, host Host, r TSBSResult) {
	w := o.Out
	fmt.Fprintf(w, "tsbs-cpu workload: %d hosts × 10 tags × 10 fields every %s over %s = %s lines, %s points (line protocol over HTTP, %d clients)\n",
		o.Hosts, o.Interval, o.Span, report.Int(r.Lines), report.Int(r.Points), o.Clients)
	fmt.Fprintf(w, "machine: %s\n\n", host)
	fmt.Fprintf(w, "ingest: %s rows/s = %s points/s (%.1f s; request p50 %.1f ms, p99 %.1f ms)\n\n",
		report.Int(int64(r.RowsPerS)), report.Int(int64(r.PointsPerS)), r.WriteSeconds, r.WriteLatency.P50Ms, r.WriteLatency.P99Ms)
	hdr := append([]string{"query", "queries", "queries/s"}, PercentileNames...)
	for i := 3; i < len(hdr); i++ {
		hdr[i] += " ms"
	}
	t := report.Table{Header: hdr, RightAlign: []bool{false, true, true, true, true, true, true, true, true, true}}
	for _, k := range tsbsQueries {
		l := r.Queries[k.name]
		row := []string{k.name, report.Int(int64(l.Ops)), report.Float(l.OpsPerS, 0)}
		for _, v := range l.Values() {
			row = append(row, report.Float(v, 3))
		}
		t.Add(row...)
	}
	t.Write(w)
	fmt.Fprintf(w, "\n%d answers checked (usage_user maxima against the generated data); %d query clients\n", r.CheckedAnswers, o.QueryClients)
	fmt.Fprintf(w, "published (other hardware): kdb+ on a Raspberry Pi 3: 60,000 rows/s ingest; 5,500 queries/s of 1host_1h_max_by_min on 4 cores\n")
}
