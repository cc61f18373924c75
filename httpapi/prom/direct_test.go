package prom

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pmodel "github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tributarydb/tributary/httpapi"
)

// withoutDirect is an API on e's node that always evaluates with the
// engine (downsampling and folding as e does).
func withoutDirect(t *testing.T, e *testEnv, opts Options) *testEnv {
	t.Helper()
	o := newTestEnvFor(t, e.node, e.b, httpapi.Config{}, opts)
	o.api.noDirect = true
	return o
}

// TestDirect_RandomQueriesMatchEngine: range and instant queries of the shapes
// evalDirect answers, and of shapes near them, must be answered byte for
// byte (status, data, warnings and infos) as the engine answers them on
// the same node, over series with NaN, staleness markers and metrics that
// collide once their name is dropped; and as the engine over an in-memory
// copy where that engine answers at all.
// With Options.ApproximateRollups, the engine's answers over the same
// per-window samples are the reference.
func TestDirect_RandomQueriesMatchEngine(t *testing.T) {
	for _, approx := range []bool{false, true} {
		t.Run(fmt.Sprintf("approx=%v", approx), func(t *testing.T) { testDirectRandom(t, Options{ApproximateRollups: approx}) })
	}
}

func testDirectRandom(t *testing.T, opts Options) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 5))
	e := newTestEnv(t, nil, httpapi.Config{}, opts)
	ref := &refStorage{}
	e.writeChunked(genData(rand.New(rand.NewPCG(seed, 6))), ref)
	engine := withoutDirect(t, e, opts)
	ng := refEngine()

	funcs := []string{"max_over_time", "min_over_time", "last_over_time", "sum_over_time"}
	sels := []string{`gauge`, `{__name__=~"gauge|counter_total"}`, `gauge{host=~"h1|h2"}`, `{__name__=~"gauge|special"}`,
		`special`, `sparse`, `{host="h1"}`, `{__name__=~"gauge|sparse",host=~"h[12]"}`, `gauge{host="nope"}`}
	outer := []string{"", "", "max", "min", "max by (host)", "min by (__name__)", "max by (__name__)", "max by (dc, __name__)",
		"max by (nope)", "max without (host)", "sum by (host)"}
	windows := []int64{10_000, 60_000, 300_000, 3600_000}
	dataStart, dataEnd := ms(testNow.Add(-dataSpan)), ms(testNow)
	const queries = 500
	direct, instant := 0, 0
	for range queries {
		r := windows[rng.IntN(len(windows))]
		start := dataStart + rng.Int64N(dataEnd-dataStart)
		switch rng.IntN(4) {
		case 0, 1:
			start -= floorMod(start, 10_000) // samples on window edges
		case 2:
			start -= floorMod(start, r) // whole windows: rollups in approximate mode
		}
		step := r
		if rng.IntN(8) == 0 {
			step = 2 * r
		}
		end := start + rng.Int64N(60)*step
		if rng.IntN(5) == 0 {
			end, step = start, 0 // instant query
		}
		qs := fmt.Sprintf("%s(%s[%s])", funcs[rng.IntN(len(funcs))], sels[rng.IntN(len(sels))], pmodel.Duration(time.Duration(r)*time.Millisecond))
		if o := outer[rng.IntN(len(outer))]; o != "" {
			qs = o + " (" + qs + ")"
		}
		path, params := queryParams(qs, start, end, time.Duration(step)*time.Millisecond)
		wantCode, want := engine.serve(http.MethodGet, path, params)
		before := e.stats.Get(StatQueriesDirect)
		code, got := e.serve(http.MethodGet, path, params)
		d := int(e.stats.Get(StatQueriesDirect) - before)
		direct += d
		if step == 0 {
			instant += d
		}
		if code != wantCode || string(got) != string(want) {
			t.Fatalf("%s [%d, %d] step %d:\ngot  %d %s\nwant %d %s", qs, start, end, step, code, got, wantCode, want)
		}
		if code == http.StatusOK && !strings.Contains(string(got), "__name__ kept") && !opts.ApproximateRollups {
			e.compareWithRef(ng, ref, qs, start, end, time.Duration(step)*time.Millisecond)
		}
	}
	t.Logf("%d of %d queries answered without the engine, %d of them instant", direct, queries, instant)
	if direct < queries/5 || instant < queries/50 {
		t.Fatalf("only %d queries answered without the engine", direct)
	}
	if n := engine.stats.Get(StatQueriesDirect); n != 0 {
		t.Fatalf("the engine-only API answered %d queries without the engine", n)
	}
}

// TestDirect_KeptNamesAndCollisions: an aggregation by __name__ over two
// metrics (the engine refuses it, keepname.go answers it) and a function
// over two metrics (the engine refuses it after dropping the names) are
// answered as with the engine, which reads the store no more than alone.
func TestDirect_KeptNamesAndCollisions(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	e.writeChunked(genData(rand.New(rand.NewPCG(7, 8))), nil)
	engine := withoutDirect(t, e, Options{})
	start, end := ms(testNow.Add(-2*time.Hour))-ms(testNow.Add(-2*time.Hour))%60_000+17_000, ms(testNow.Add(-time.Hour))
	for _, c := range []struct {
		qs     string
		direct bool
		want   string // in the body
	}{
		{`max by (__name__) (max_over_time({__name__=~"gauge|counter_total",host="h1"}[1m]))`, true, "__name__ kept"},
		{`max by (__name__) (last_over_time({__name__=~"gauge|counter_total",host="h1"}[1m]))`, true, `"__name__":"gauge"`},
		{`max_over_time({__name__=~"gauge|counter_total",host="h1"}[1m])`, false, "same labelset"},
		{`last_over_time({__name__=~"gauge|counter_total",host="h1"}[1m])`, true, `"__name__":"counter_total"`},
		{`max by (host) (max_over_time(gauge[1m]))`, true, `"host":"h3"`},
	} {
		path, params := queryParams(c.qs, start, end, time.Minute)
		before, read, engineRead := e.stats.Get(StatQueriesDirect), e.stats.Get(StatSamplesRead), engine.stats.Get(StatSamplesRead)
		wantCode, want := engine.serve(http.MethodGet, path, params)
		code, got := e.serve(http.MethodGet, path, params)
		// Left to the engine or not, the store is read once.
		if r, er := e.stats.Get(StatSamplesRead)-read, engine.stats.Get(StatSamplesRead)-engineRead; r != er || r == 0 {
			t.Errorf("%s: %d samples read, the engine alone reads %d", c.qs, r, er)
		}
		if code != wantCode || string(got) != string(want) {
			t.Fatalf("%s:\ngot  %d %s\nwant %d %s", c.qs, code, got, wantCode, want)
		}
		if !strings.Contains(string(got), c.want) {
			t.Errorf("%s: %s does not hold %s", c.qs, got, c.want)
		}
		if direct := e.stats.Get(StatQueriesDirect) > before; direct != c.direct {
			t.Errorf("%s: answered without the engine %v, want %v", c.qs, direct, c.direct)
		}
	}
}

// TestDirect_WarningsAndFreshness: the backend's warnings (a
// coordinator's partial answer) and the answer's freshness header reach
// a query answered without the engine as they reach the engine's.
func TestDirect_WarningsAndFreshness(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	e.writeChunked(genData(rand.New(rand.NewPCG(9, 10))), nil)
	warns := []string{"edge pi-7 unreachable: points after 2026-06-01T11:00:00Z missing", "edge pi-9 unreachable"}
	direct := newTestEnvFor(t, e.node, warningBackend{e.node, warns}, httpapi.Config{}, Options{})
	engine := newTestEnvFor(t, e.node, warningBackend{e.node, warns}, httpapi.Config{}, Options{})
	engine.api.noDirect = true
	start, end := ms(testNow.Add(-2*time.Hour)), ms(testNow.Add(-time.Hour))
	for _, qs := range []string{`max by (host) (max_over_time(gauge[1m]))`, `last_over_time(gauge{host="h2"}[1m])`} {
		path, params := queryParams(qs, start, end, time.Minute)
		params.Set("max_staleness", "1h")
		serve := func(e *testEnv) (int, string, string) {
			req := httptest.NewRequest(http.MethodGet, path+"?"+params.Encode(), nil)
			rec := httptest.NewRecorder()
			e.mux.ServeHTTP(rec, req)
			return rec.Code, rec.Body.String(), rec.Header().Get(httpapi.FreshThroughHeader)
		}
		before := direct.stats.Get(StatQueriesDirect)
		code, got, fresh := serve(direct)
		wantCode, want, wantFresh := serve(engine)
		// The engine lists warnings in no set order (a map's).
		var g, w apiResponse
		must(t, json.Unmarshal([]byte(got), &g))
		must(t, json.Unmarshal([]byte(want), &w))
		slices.Sort(g.Warnings)
		slices.Sort(w.Warnings)
		if code != wantCode || string(g.Data) != string(w.Data) || !slices.Equal(g.Warnings, w.Warnings) ||
			!slices.Equal(g.Infos, w.Infos) || fresh != wantFresh {
			t.Fatalf("%s:\ngot  %d %s %q\nwant %d %s %q", qs, code, got, fresh, wantCode, want, wantFresh)
		}
		if direct.stats.Get(StatQueriesDirect) == before || !strings.Contains(got, warns[1]) {
			t.Fatalf("%s: not answered without the engine, or without the warnings: %s", qs, got)
		}
	}
}

// TestDirect_AnswersFollowNewData: the shape of a query is kept between
// requests, its answer never is. A query repeated after new samples and a
// new series arrive must include them, as the engine's answer does.
func TestDirect_AnswersFollowNewData(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	engine := withoutDirect(t, e, Options{})
	end := ms(testNow)
	start := end - 10*60_000
	write := func(host string, t0 int64, v float64) {
		ts := prompb.TimeSeries{Labels: lbls("__name__", "temp", "host", host)}
		for t := t0; t < t0+60_000; t += 10_000 {
			ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
		}
		e.write(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}})
	}
	write("a", start-30_000, 1)
	queries := []struct {
		qs   string
		step time.Duration // 0: instant, at end
	}{
		{`max_over_time(temp[1m])`, time.Minute}, {`max(max_over_time(temp[1m]))`, time.Minute},
		{`max by (host) (max_over_time(temp[1m]))`, time.Minute}, {`last_over_time({__name__=~"te(mp)"}[1m])`, time.Minute},
		{`last_over_time(temp[15m])`, 0}, {`max by (host) (last_over_time(temp[15m]))`, 0},
	}
	check := func(wantIn string) {
		t.Helper()
		for _, q := range queries {
			qs, from := q.qs, start
			if q.step == 0 {
				from = end
			}
			path, params := queryParams(qs, from, end, q.step)
			wantCode, want := engine.serve(http.MethodGet, path, params)
			before := e.stats.Get(StatQueriesDirect)
			code, got := e.serve(http.MethodGet, path, params)
			if code != wantCode || string(got) != string(want) {
				t.Fatalf("%s:\ngot  %d %s\nwant %d %s", qs, code, got, wantCode, want)
			}
			if e.stats.Get(StatQueriesDirect) == before {
				t.Fatalf("%s was answered by the engine", qs)
			}
			if !strings.Contains(string(got), wantIn) {
				t.Fatalf("%s: %s does not hold %s", qs, got, wantIn)
			}
		}
	}
	check(`"1"]`)
	write("a", start+3*60_000, 5) // new samples of the series
	check(`"5"]`)
	write("b", start+5*60_000, 9) // a new series
	check(`"9"]`)
	if err := e.node.Flush(); err != nil {
		t.Fatal(err)
	}
	write("a", start+7*60_000, 7) // after a flush: stored chunks and the head
	check(`"7"]`)
}

func TestParseDirectShape(t *testing.T) {
	cases := []struct {
		qs   string
		want string // fn range fold dropName byName, "" for none
	}{
		{`max_over_time(x[1m])`, "max_over_time 60000 <nil> true false"},
		{`last_over_time(x{a="b"}[5m])`, "last_over_time 300000 <nil> false false"},
		{`max(max_over_time({__name__=~"cpu_.*",hostname="host_4"}[1h])) by (__name__)`, "max_over_time 3600000 max [__name__] true true"},
		{`min by (b, a) ((min_over_time(x[10s])))`, "min_over_time 10000 min [a b] true false"},
		{`(max(last_over_time(x[1m])))`, "last_over_time 60000 max [] false false"},
		{`max without (a) (max_over_time(x[1m]))`, ""},
		{`sum(max_over_time(x[1m]))`, ""},
		{`topk(1, max_over_time(x[1m]))`, ""},
		{`avg_over_time(x[1m])`, ""},
		{`max_over_time(x[1m] offset 1m)`, ""},
		{`max_over_time(x[1m] @ 100)`, ""},
		{`max_over_time(x[5m:1m])`, ""},
		{`max_over_time(x[1m]) + 1`, ""},
		{`max_over_time(x[1m]`, ""},
		{`x`, ""},
	}
	for _, c := range cases {
		got := ""
		if s := parseDirectShape(c.qs); s != nil {
			fold := "<nil>"
			if s.fold != nil {
				fold = fmt.Sprintf("%s %v", map[bool]string{true: "max", false: "min"}[s.fold.max], s.fold.by)
			}
			got = fmt.Sprintf("%s %d %s %v %v", s.fn, s.rng, fold, s.dropName, s.byName)
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.qs, got, c.want)
		}
	}
}

// TestDirectCache_Bounded: the shape cache holds at most maxCachedQueries
// query strings and none longer than maxCachedQueryBytes, and answers a
// kept string with the shape it parsed.
func TestDirectCache_Bounded(t *testing.T) {
	var c directCache
	for i := range 3 * maxCachedQueries {
		qs := fmt.Sprintf(`max_over_time(x{i="%d"}[1m])`, i)
		if s := c.shape(qs); s == nil || s.matchers[0].Value != fmt.Sprint(i) && s.matchers[1].Value != fmt.Sprint(i) {
			t.Fatalf("%s: wrong shape %+v", qs, s)
		}
		if c.shapes.len() > maxCachedQueries {
			t.Fatalf("%d entries cached", c.shapes.len())
		}
	}
	long := `max_over_time(x{a="` + strings.Repeat("y", maxCachedQueryBytes) + `"}[1m])`
	if c.shape(long) == nil {
		t.Fatal("long query has no shape")
	}
	if c.shapes.has(long) {
		t.Fatal("long query cached")
	}
}

// TestDirect_ConcurrentRequests: requests answered at once share the
// shape cache (and overflow it) and still get the engine's answers.
func TestDirect_ConcurrentRequests(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	e.writeChunked(genData(rand.New(rand.NewPCG(11, 12))), nil)
	engine := withoutDirect(t, e, Options{})
	start, end := ms(testNow.Add(-2*time.Hour)), ms(testNow.Add(-time.Hour))
	type req struct {
		path   string
		params map[string][]string
		want   string
	}
	var reqs []req
	for i, qs := range []string{`max by (host) (max_over_time(gauge[1m]))`, `min(min_over_time({__name__=~"gauge|sparse"}[5m]))`,
		`last_over_time(gauge{host="h2"}[1m])`, `max by (__name__) (max_over_time({host="h1"}[1m]))`, `max_over_time(special[1m])`} {
		step := time.Minute
		if strings.Contains(qs, "[5m]") {
			step = 5 * time.Minute
		}
		if i%2 == 1 {
			step = 0 // instant, at start
		}
		path, params := queryParams(qs, start, end, step)
		code, want := engine.serve(http.MethodGet, path, params)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", qs, code, want)
		}
		reqs = append(reqs, req{path, params, string(want)})
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				r := reqs[(g+i)%len(reqs)]
				if i%8 == 7 { // others fill the shape cache meanwhile
					e.api.direct.shape(fmt.Sprintf(`max_over_time(x{g="%d",i="%d"}[1m])`, g, i))
				}
				if code, got := e.serve(http.MethodGet, r.path, r.params); code != http.StatusOK || string(got) != r.want {
					t.Errorf("%s: got %d %s\nwant %s", r.params["query"], code, got, r.want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e.stats.Get(StatQueriesDirect) == 0 {
		t.Fatal("no query answered without the engine")
	}
}
