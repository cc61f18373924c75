package lpbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/bench/workload"
)

// The query is the kdb+ blog's "maximum of one field of one host over one
// hour, by minute", in PromQL:
//
//	max_over_time(cpu_usage_user{hostname="host_N"}[1m])
//
// evaluated from H+60 s to H+3600 s at a 60 s step, H a whole minute inside
// the written day: 60 points, the one at t the maximum of the samples in
// (t-60 s, t] (PromQL range selectors are open on the left), which together
// cover the hour (H, H+3600 s].
const (
	queryField    = 0 // usage_user
	queryMetric   = workload.TSBSCPUMeasurement + "_usage_user"
	queryStepS    = 60
	queryRangeS   = 60 // the [1m] of the selector
	queryPoints   = 60
	queryWindowS  = queryPoints * queryStepS
	queryRangeStr = "1m"
)

// querySpec is one query of the plan.
type querySpec struct {
	host int
	// hourS is H, the start of the hour queried, in Unix seconds; the
	// evaluation times are hourS + 60·j for j = 1..60.
	hourS int64
	url   string
}

// queryPlan is the queries to send and what their answers must be.
type queryPlan struct {
	gen *workload.TSBSCPU
	// values[h] is host h's usage_user, one value per row.
	values [][]int64
	specs  []querySpec
}

// hourRange is the range of whole minutes that can start a queried hour:
// every sample that any of its windows needs lies inside the written data.
func hourRange(g *workload.TSBSCPU) (firstS, lastS int64, ok bool) {
	const minuteNs = 60e9
	startNs := g.StartNs()
	firstS = (startNs + minuteNs - 1) / minuteNs * 60 // the first whole minute ≥ the first sample
	lastSampleS := g.TimestampNs(g.Rows()-1) / 1e9
	lastS = (lastSampleS - queryWindowS) / 60 * 60
	return firstS, lastS, lastS >= firstS
}

// newQueryPlan draws n queries (random host, random minute-aligned hour
// inside the written data) from seed and builds their URLs on baseURL.
func newQueryPlan(g *workload.TSBSCPU, n int, seed uint64) (*queryPlan, error) {
	firstS, lastS, ok := hourRange(g)
	if !ok {
		return nil, fmt.Errorf("the written data (%d rows every %v) is too short for a one-hour query", g.Rows(), time.Duration(g.IntervalNs()))
	}
	p := &queryPlan{gen: g, values: make([][]int64, g.Hosts()), specs: make([]querySpec, n)}
	for h := range p.values {
		p.values[h] = g.FieldValues(h, queryField)
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c70_7175_6572_7900)) // independent of the data's streams
	minutes := (lastS-firstS)/60 + 1
	for i := range p.specs {
		p.specs[i] = querySpec{host: rng.IntN(g.Hosts()), hourS: firstS + 60*rng.Int64N(minutes)}
	}
	return p, nil
}

// setBaseURL builds every query's URL on base ("http://host:port").
func (p *queryPlan) setBaseURL(base string) {
	for i := range p.specs {
		s := &p.specs[i]
		q := url.Values{}
		q.Set("query", fmt.Sprintf(`max_over_time(%s{hostname=%q}[%s])`, queryMetric, p.gen.HostName(s.host), queryRangeStr))
		q.Set("start", strconv.FormatInt(s.hourS+queryStepS, 10))
		q.Set("end", strconv.FormatInt(s.hourS+queryWindowS, 10))
		q.Set("step", strconv.Itoa(queryStepS))
		s.url = base + "/api/v1/query_range?" + q.Encode()
	}
}

// expected is the answer the query must get: the value at each evaluation
// time, computed from the generated data.
func (p *queryPlan) expected(s querySpec) []float64 {
	out := make([]float64, queryPoints)
	for j := range out {
		out[j] = windowMax(p.gen, p.values[s.host], s.hourS+int64(j+1)*queryStepS, queryRangeS)
	}
	return out
}

// promResponse is the part of a Prometheus query or query_range answer
// the benchmark checks: Values of a matrix, Value of a vector.
type promResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

// check compares a query_range answer with the expected values and says
// what is wrong, or returns nil.
func (p *queryPlan) check(s querySpec, body []byte) error {
	var r promResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("answer is not JSON: %v", err)
	}
	if r.Status != "success" {
		return fmt.Errorf("status %q: %s: %s", r.Status, r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "matrix" || len(r.Data.Result) != 1 {
		return fmt.Errorf("want a matrix of 1 series, got %q with %d", r.Data.ResultType, len(r.Data.Result))
	}
	res := r.Data.Result[0]
	if host := p.gen.HostName(s.host); res.Metric["hostname"] != host {
		return fmt.Errorf("series %v, want hostname %q", res.Metric, host)
	}
	want := p.expected(s)
	if len(res.Values) != len(want) {
		return fmt.Errorf("%d points, want %d (one per minute of the hour)", len(res.Values), len(want))
	}
	for j, pair := range res.Values {
		tS := s.hourS + int64(j+1)*queryStepS
		ts, ok1 := pair[0].(float64)
		vs, ok2 := pair[1].(string)
		v, err := strconv.ParseFloat(vs, 64)
		if !ok1 || !ok2 || err != nil {
			return fmt.Errorf("point %d is %v, want [seconds, \"value\"]", j, pair)
		}
		if ts != float64(tS) || v != want[j] {
			return fmt.Errorf("point %d is [%v, %v], want [%d, %v]", j, ts, vs, tS, want[j])
		}
	}
	return nil
}

// queryConfig describes the query phase.
type queryConfig struct {
	Plan *queryPlan
	// Warmup is how many of the plan's first queries are sent, and checked,
	// before the timed ones.
	Warmup  int
	Clients int
	// CallTimeout bounds one request.
	CallTimeout time.Duration
	// NodeExited, when closed, ends the phase at once.
	NodeExited <-chan struct{}
}

// queryStats is what the query phase measured.
type queryStats struct {
	Warmup int
	timedStats
}

// timedStats is what one warmed-up, timed run of queries measured.
type timedStats struct {
	Queries int64 // timed queries
	Elapsed time.Duration
	// Latencies holds every timed query's round trip, body read included.
	Latencies []time.Duration
	// Checked counts answers compared with the data, warm-up included;
	// Wrong those that did not match, with the first few in Examples.
	Checked  int64
	Wrong    int64
	Examples []string
}

// maxExamples is how many wrong answers a report quotes.
const maxExamples = 5

// runQueries runs the plan's queries (runTimed): its warm-up ones, then
// its timed ones from cfg.Clients clients, the answers checked against the
// data (the timed ones after the clock stops).
func runQueries(ctx context.Context, cfg queryConfig) (queryStats, error) {
	specs := cfg.Plan.specs
	st, err := runTimed(ctx, timedRun{
		n: len(specs), warm: cfg.Warmup, clients: cfg.Clients, timeout: cfg.CallTimeout, nodeExited: cfg.NodeExited,
		url:   func(i int) string { return specs[i].url },
		check: func(i int, body []byte) error { return cfg.Plan.check(specs[i], body) },
		label: func(i int) string { return specs[i].url },
	})
	return queryStats{Warmup: cfg.Warmup, timedStats: st}, err
}

// timedRun describes a run of n queries for runTimed.
type timedRun struct {
	// what, if not empty, leads the message of a failed query.
	what string
	// n is how many queries; the first warm of them are the warm-up.
	n, warm int
	// clients is how many clients send at once (each its own connection),
	// timeout bounds one request.
	clients int
	timeout time.Duration
	// nodeExited, when closed, ends the run at once.
	nodeExited <-chan struct{}
	// url gives query i's URL, check the error in its answer (nil when
	// right), label what a quoted wrong answer starts with.
	url   func(i int) string
	check func(i int, body []byte) error
	label func(i int) string
}

// runTimed sends r's warm-up queries, checking each answer as it comes,
// then the rest timed; the timed answers are kept (as many as
// tsbsKeepBytes holds) and checked after the clock stops. It fails on a
// transport error or a status other than 200.
func runTimed(ctx context.Context, r timedRun) (timedStats, error) {
	ctx, stop := watchNode(ctx, r.nodeExited)
	defer stop(nil)
	clients := newHTTPClients(r.clients, r.timeout)
	defer closeClients(clients)
	var (
		st   timedStats
		mu   sync.Mutex
		kept = map[int][]byte{}
		size int
	)
	verdict := func(i int, body []byte) {
		err := r.check(i, body)
		st.Checked++
		if err != nil {
			st.Wrong++
			if len(st.Examples) < maxExamples {
				st.Examples = append(st.Examples, fmt.Sprintf("%s: %v", r.label(i), err))
			}
		}
	}
	warm := min(r.warm, r.n)
	_, err := queryRound(ctx, stop, clients, r.what, 0, warm, r.url, func(i int, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		verdict(i, body)
	})
	if err != nil {
		return st, fmt.Errorf("warm-up: %w", err)
	}
	t0 := time.Now()
	lats, err := queryRound(ctx, stop, clients, r.what, warm, r.n, r.url, func(i int, body []byte) {
		mu.Lock()
		defer mu.Unlock()
		if size+len(body) <= tsbsKeepBytes {
			kept[i] = bytes.Clone(body)
			size += len(body)
		}
	})
	st.Elapsed = time.Since(t0)
	st.Latencies, st.Queries = lats, int64(len(lats))
	for i, body := range kept {
		verdict(i, body)
	}
	return st, err
}

// queryRound sends the queries lo ≤ i < hi (their URLs given by url) from
// every client in clients at once, each client taking the next query not
// yet sent, and hands each answer to answer on the client's goroutine. The
// first failure (a transport error or a status other than 200; what, if
// not empty, leads its message) ends ctx through stop and the round. It
// returns the round trips of the answered queries, body read included.
func queryRound(ctx context.Context, stop func(error), clients []*http.Client, what string, lo, hi int,
	url func(i int) string, answer func(i int, body []byte)) ([]time.Duration, error) {
	if what != "" {
		what += ", "
	}
	var (
		next     atomic.Int64
		mu       sync.Mutex
		firstErr error
		lats     []time.Duration
		wg       sync.WaitGroup
	)
	next.Store(int64(lo))
	for c := range clients {
		wg.Go(func() {
			var body bytes.Buffer
			var mine []time.Duration
			for {
				i := int(next.Add(1) - 1)
				if i >= hi || ctx.Err() != nil {
					break
				}
				t0 := time.Now()
				err := get(ctx, clients[c], url(i), &body)
				lat := time.Since(t0)
				if err != nil {
					mu.Lock()
					if firstErr == nil && ctx.Err() == nil {
						firstErr = fmt.Errorf("%sclient %d, query %d (%s): %w", what, c, i+1, url(i), err)
						stop(firstErr)
					}
					mu.Unlock()
					break
				}
				mine = append(mine, lat)
				answer(i, body.Bytes())
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return lats, phaseError(ctx, firstErr)
}

// maxAnswerBytes caps one answer; a one-hour answer is a few KiB.
const maxAnswerBytes = 16 << 20

// get fetches url into body and requires 200 OK.
func get(ctx context.Context, hc *http.Client, url string, body *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET: %w", err)
	}
	defer resp.Body.Close()
	body.Reset()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return fmt.Errorf("status %s, want 200 OK: %s", resp.Status, bytes.TrimSpace(msg))
	}
	n, err := body.ReadFrom(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if n > maxAnswerBytes {
		return fmt.Errorf("answer is larger than %d bytes", maxAnswerBytes)
	}
	return nil
}

// runPings fetches url n times from the given number of clients, each on
// its own connection, and returns the round trips, or nil if a request
// failed or did not answer 2xx. Fetching a path that does no work (GET
// /ping) measures the floor under the query latencies: HTTP on both sides
// and the loopback.
func runPings(ctx context.Context, url string, clientCount, n int, timeout time.Duration) []time.Duration {
	clients := make([]*http.Client, clientCount)
	for c := range clients {
		clients[c] = newHTTPClient(timeout)
	}
	defer closeClients(clients)
	var (
		mu     sync.Mutex
		lats   []time.Duration
		failed atomic.Bool
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	for _, hc := range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && !failed.Load() && ctx.Err() == nil {
				t0 := time.Now()
				ok := pingOnce(ctx, hc, url)
				lat := time.Since(t0)
				if !ok {
					failed.Store(true)
					return
				}
				mu.Lock()
				lats = append(lats, lat)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed.Load() || len(lats) != n {
		return nil
	}
	return lats
}

func pingOnce(ctx context.Context, hc *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return err == nil && resp.StatusCode/100 == 2
}
