package prom

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
)

// dataSpan is how much history genData writes before testNow.
const dataSpan = 3 * time.Hour

// genData builds a few hours of varied series: gauges every ~10 s with
// samples exactly on minute and hour edges, counters with resets, sparse
// series with gaps longer than the lookback, and a series with NaN,
// staleness markers and infinities, some of them first in their minute.
func genData(rng *rand.Rand) *prompb.WriteRequest {
	start := ms(testNow.Add(-dataSpan))
	end := ms(testNow.Add(-time.Minute))
	req := &prompb.WriteRequest{}
	hosts := []string{"h0", "h1", "h2", "h3"}
	for i, h := range hosts {
		dc := []string{"a", "b"}[i%2]
		g := prompb.TimeSeries{Labels: lbls("__name__", "gauge", "host", h, "dc", dc)}
		c := prompb.TimeSeries{Labels: lbls("__name__", "counter_total", "host", h, "dc", dc)}
		sp := prompb.TimeSeries{Labels: lbls("__name__", "sparse", "host", h)}
		v, cnt := 50.0, 0.0
		for t := start; t < end; {
			v += float64(rng.IntN(41)-20) / 8
			g.Samples = append(g.Samples, prompb.Sample{Timestamp: t, Value: v})
			cnt += float64(rng.IntN(100))
			if rng.IntN(200) == 0 {
				cnt = 0 // counter reset
			}
			c.Samples = append(c.Samples, prompb.Sample{Timestamp: t, Value: cnt})
			if rng.IntN(40) == 0 {
				sp.Samples = append(sp.Samples, prompb.Sample{Timestamp: t, Value: float64(rng.IntN(10))})
			}
			switch rng.IntN(4) {
			case 0: // next multiple of 10 s: lands on minute and hour edges
				t += 10_000 - t%10_000
			case 1:
				t += 10_000
			default:
				t += 1 + rng.Int64N(15_000)
			}
		}
		req.Timeseries = append(req.Timeseries, g, c, sp)
	}
	special := prompb.TimeSeries{Labels: lbls("__name__", "special", "kind", "nan")}
	for t := start; t < end; t += 5_000 {
		var v float64
		switch r := rng.IntN(20); {
		case r == 0:
			v = math.NaN()
		case r == 1:
			v = math.Float64frombits(staleNaNBits)
		case r == 2:
			v = math.Inf(1)
		case r == 3:
			v = math.Inf(-1)
		default:
			v = float64(rng.IntN(1000)) / 10
		}
		special.Samples = append(special.Samples, prompb.Sample{Timestamp: t, Value: v})
	}
	req.Timeseries = append(req.Timeseries, special)
	return req
}

// writeChunked writes req in time order, 20 minutes at a time (inside the
// node's out-of-order window), flushing the node after the first half so
// answers merge stored chunks and the head.
func (e *testEnv) writeChunked(req *prompb.WriteRequest, ref *refStorage) {
	e.t.Helper()
	start := ms(testNow.Add(-dataSpan))
	const chunk = 20 * 60_000
	for lo := start; lo < ms(testNow); lo += chunk {
		part := &prompb.WriteRequest{}
		for _, ts := range req.Timeseries {
			p := prompb.TimeSeries{Labels: ts.Labels}
			for _, s := range ts.Samples {
				if s.Timestamp >= lo && s.Timestamp < lo+chunk {
					p.Samples = append(p.Samples, s)
				}
			}
			if len(p.Samples) > 0 {
				part.Timeseries = append(part.Timeseries, p)
			}
		}
		e.write(part)
		if lo-start == chunk*4 {
			must(e.t, e.node.Flush())
		}
	}
	if ref != nil {
		ref.addWrite(req)
	}
}

// refEngine evaluates queries over the reference storage with the same
// engine settings as the API.
func refEngine() *promql.Engine {
	return promql.NewEngine(promql.EngineOpts{
		MaxSamples:               DefaultMaxSamples,
		Timeout:                  time.Minute,
		LookbackDelta:            DefaultLookbackDelta,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		EnableDelayedNameRemoval: true,
	})
}

// refBody is the response body the API must send for a query: the
// reference engine's answer in the API's encoding.
func refBody(t testing.TB, ng *promql.Engine, ref *refStorage, qs string, start, end int64, step time.Duration) []byte {
	t.Helper()
	ctx := context.Background()
	var q promql.Query
	var err error
	if step == 0 {
		q, err = ng.NewInstantQuery(ctx, ref, nil, qs, time.UnixMilli(start))
	} else {
		q, err = ng.NewRangeQuery(ctx, ref, nil, qs, time.UnixMilli(start), time.UnixMilli(end), step)
	}
	if err != nil {
		t.Fatalf("%s: %v", qs, err)
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		t.Fatalf("reference %s: %v", qs, res.Err)
	}
	warn, info := res.Warnings.AsStrings(qs, 10, 10)
	b := append([]byte(nil), `{"status":"success","data":`...)
	b = appendResult(b, res.Value)
	b = appendStringList(b, "warnings", warn)
	b = appendStringList(b, "infos", info)
	return append(b, '}')
}

// queryParams are the parameters of an instant (step 0) or range query.
func queryParams(qs string, start, end int64, step time.Duration) (string, url.Values) {
	if step == 0 {
		return "/api/v1/query", url.Values{"query": {qs}, "time": {unixParam(start)}}
	}
	return "/api/v1/query_range", url.Values{"query": {qs}, "start": {unixParam(start)}, "end": {unixParam(end)},
		"step": {fmt.Sprint(step.Seconds())}}
}

// compareWithRef runs a query through the API in process and requires the
// reference body.
func (e *testEnv) compareWithRef(ng *promql.Engine, ref *refStorage, qs string, start, end int64, step time.Duration) {
	e.t.Helper()
	want := refBody(e.t, ng, ref, qs, start, end, step)
	path, params := queryParams(qs, start, end, step)
	method := http.MethodGet
	if len(qs)%2 == 0 {
		method = http.MethodPost
	}
	code, got := e.serve(method, path, params)
	if code != http.StatusOK || string(got) != string(want) {
		e.t.Fatalf("%s %s [%d, %d] step %s:\ngot  %d %s\nwant %s", method, qs, start, end, step, code, got, want)
	}
}
