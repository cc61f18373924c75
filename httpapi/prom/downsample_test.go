package prom

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pmodel "github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/rollup"
)

// TestDownsample_RandomQueriesMatchRaw is the proof of the optimisation:
// random range functions over random windows, steps and start times
// (aligned to the window, one millisecond either side of it, to the data's
// 10 s grid, or anywhere), with offsets, aggregations and instant queries,
// over data with samples on window edges, NaN and staleness markers first
// in windows, in the head and in the store. The answers with the
// optimisation, without it, and of the engine over an in-memory copy must
// be byte for byte the same.
func TestDownsample_RandomQueriesMatchRaw(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	ref := &refStorage{}
	e.writeChunked(genData(rand.New(rand.NewPCG(seed, 2))), ref)
	plain := newTestEnvFor(t, e.node, e.b, httpapi.Config{}, Options{DisableDownsampling: true})
	ng := refEngine()

	funcs := []string{"max_over_time", "min_over_time", "last_over_time", "present_over_time", "absent_over_time",
		"sum_over_time", "avg_over_time", "count_over_time"}
	sels := []string{`gauge`, `special`, `sparse`, `counter_total{host="h1"}`, `{__name__=~"gauge|special"}`, `gauge{host="nope"}`}
	windows := []int64{1000, 5000, 10_000, 15_000, 30_000, 60_000, 90_000, 300_000, 420_000, 3600_000}
	dataStart, dataEnd := ms(testNow.Add(-dataSpan)), ms(testNow)
	const queries = 1500
	for range queries {
		r := windows[rng.IntN(len(windows))]
		step := r
		switch rng.IntN(8) {
		case 0:
			step = 2 * r
		case 1:
			step = max(1000, r/2)
		}
		start := dataStart + rng.Int64N(dataEnd-dataStart)
		switch rng.IntN(6) {
		case 0: // evaluation times on multiples of the window
			start -= floorMod(start, r)
		case 1: // first window starts on a multiple: node buckets are epoch-aligned
			start -= floorMod(start, r) + 1
		case 2:
			start -= floorMod(start, r) - 1
		case 3: // on the data's 10 s grid: samples on both window edges
			start -= floorMod(start, 10_000)
		}
		steps := rng.Int64N(60)
		end := start + steps*step
		if rng.IntN(3) == 0 {
			end += rng.Int64N(step)
		}
		if rng.IntN(6) == 0 {
			end, step = start, 0 // instant query
		}
		f := funcs[rng.IntN(len(funcs))]
		sel := fmt.Sprintf("%s[%s]", sels[rng.IntN(len(sels))], pmodel.Duration(time.Duration(r)*time.Millisecond))
		switch rng.IntN(6) {
		case 0:
			sel += " offset " + pmodel.Duration(time.Duration(rng.Int64N(600))*time.Second).String()
		case 1:
			sel += " offset -" + pmodel.Duration(time.Duration(1+rng.Int64N(60))*time.Second).String()
		}
		qs := fmt.Sprintf("%s(%s)", f, sel)
		switch rng.IntN(5) {
		case 0:
			qs = "sum by (host) (" + qs + ")"
		case 1:
			qs = "max(" + qs + ")"
		}
		e.compareWithRef(ng, ref, qs, start, end, time.Duration(step)*time.Millisecond)
		plain.compareWithRef(ng, ref, qs, start, end, time.Duration(step)*time.Millisecond)
	}
	down, fromRaw := e.stats.Get(StatSelectsDownsampled), e.stats.Get(StatWindowsFromRaw)
	t.Logf("%d of %d selects downsampled; %d series needed raw windows (NaN first in a window)", down, down+e.stats.Get(StatSelectsRaw), fromRaw)
	if down < queries/4 || fromRaw == 0 {
		t.Fatalf("the random queries did not exercise the optimisation: %d downsampled selects, %d with raw windows", down, fromRaw)
	}
}

// TestDownsample_Plan checks which selects are answered from per-window
// samples.
func TestDownsample_Plan(t *testing.T) {
	q := &queryable{api: &API{opts: Options{}}, downsample: true}
	approx := &queryable{api: &API{opts: Options{ApproximateRollups: true}}, downsample: true}
	off := &queryable{api: &API{opts: Options{}}}
	const h = rollup.Hour
	for _, tc := range []struct {
		name  string
		q     *queryable
		hints storage.SelectHints
		ok    bool
		want  plan
	}{
		{"range = step", q, storage.SelectHints{Start: 1_000_001, End: 2_000_000, Step: 60_000, Range: 60_000, Func: "max_over_time"}, true,
			plan{fn: rollup.FuncMax, width: 60_000, offset: 40_001, qStart: 1_000_001, qEnd: 2_000_000, end: 2_000_000}},
		{"instant", q, storage.SelectHints{Start: 1_000_001, End: 1_060_000, Step: 0, Range: 60_000, Func: "last_over_time"}, true,
			plan{fn: rollup.FuncLast, width: 60_000, offset: 40_001, qStart: 1_000_001, qEnd: 1_060_000, end: 1_060_000, newest: true}},
		{"instant max scans the window", q, storage.SelectHints{Start: 1_000_001, End: 1_060_000, Step: 0, Range: 60_000, Func: "max_over_time"}, true,
			plan{fn: rollup.FuncMax, width: 60_000, offset: 40_001, qStart: 1_000_001, qEnd: 1_060_000, end: 1_060_000}},
		{"present uses last", q, storage.SelectHints{Start: 1, End: 100, Step: 10, Range: 10, Func: "present_over_time"}, true,
			plan{fn: rollup.FuncLast, width: 10, offset: 1, qStart: 1, qEnd: 100, end: 100}},
		{"step differs", q, storage.SelectHints{Start: 1, End: 100, Step: 20, Range: 10, Func: "max_over_time"}, false, plan{}},
		{"instant with a longer range", q, storage.SelectHints{Start: 1, End: 100, Step: 0, Range: 10, Func: "max_over_time"}, false, plan{}},
		{"sum is not exact", q, storage.SelectHints{Start: 1, End: 100, Step: 10, Range: 10, Func: "sum_over_time"}, false, plan{}},
		{"avg is not exact", q, storage.SelectHints{Start: 1, End: 100, Step: 10, Range: 10, Func: "avg_over_time"}, false, plan{}},
		{"count never", approx, storage.SelectHints{Start: h + 1, End: 10 * h, Step: h, Range: h, Func: "count_over_time"}, false, plan{}},
		{"rate never", q, storage.SelectHints{Start: 1, End: 100, Step: 10, Range: 10, Func: "rate"}, false, plan{}},
		{"vector selector", q, storage.SelectHints{Start: 1, End: 100, Step: 10, Func: "max_over_time"}, false, plan{}},
		{"statement not eligible", off, storage.SelectHints{Start: 1, End: 100, Step: 10, Range: 10, Func: "max_over_time"}, false, plan{}},
		{"max on hourly rollups is not exact", q, storage.SelectHints{Start: h, End: 10*h - 1, Step: h, Range: h, Func: "max_over_time"}, false, plan{}},
		{"last on hourly rollups is", q, storage.SelectHints{Start: h, End: 10*h - 1, Step: h, Range: h, Func: "last_over_time"}, true,
			plan{fn: rollup.FuncLast, width: h, qStart: h, qEnd: 10*h - 1, end: 10*h - 1}},
		{"approximate: aligned hours", approx, storage.SelectHints{Start: h + 1, End: 10 * h, Step: h, Range: h, Func: "avg_over_time"}, true,
			plan{fn: rollup.FuncAvg, width: h, qStart: h, qEnd: 10*h - 1, end: 10 * h, approx: true}},
		{"approximate: unaligned falls back to exact", approx, storage.SelectHints{Start: h + 2, End: 10*h + 1, Step: h, Range: h, Func: "max_over_time"}, true,
			plan{fn: rollup.FuncMax, width: h, offset: 2, qStart: h + 2, qEnd: 10*h + 1, end: 10*h + 1}},
		{"approximate: unaligned sum is raw", approx, storage.SelectHints{Start: h + 2, End: 10*h + 1, Step: h, Range: h, Func: "sum_over_time"}, false, plan{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.q.plan(&tc.hints)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("plan %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	for qs, want := range map[string]bool{
		`max_over_time(x[1m])`:                      true,
		`max_over_time(x[1m]) + vector(1)`:          true,
		`max_over_time(x[1m] offset 5m)`:            true,
		`max_over_time(x[1m] @ 100)`:                false,
		`max_over_time(x[1m] @ end())`:              false,
		`max_over_time(x[5m:1m])`:                   false,
		`max_over_time(max_over_time(x[1m])[5m:])`:  false,
		`sum(max_over_time(x[1m])) / count(x @ 10)`: false,
	} {
		expr, err := parser.ParseExpr(qs)
		must(t, err)
		if got := downsamplable(&parser.EvalStmt{Expr: expr}); got != want {
			t.Errorf("%s: downsamplable %v, want %v", qs, got, want)
		}
	}
}

// recordingBackend notes the source of every query answer.
type recordingBackend struct {
	backend.Backend
	mu      sync.Mutex
	sources map[string]int
}

func (b *recordingBackend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	info, err := b.Backend.Query(ctx, q, emit)
	b.mu.Lock()
	b.sources[info.Source]++
	b.mu.Unlock()
	return info, err
}

// TestDownsample_ApproximateRollups: with the option, hour-aligned windows
// read the rollups; with no sample on a window edge the answers equal raw
// evaluation (sums and averages up to rounding), and a sample exactly on
// an edge is counted in the other window, as documented.
func TestDownsample_ApproximateRollups(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	base := newTestEnv(t, func(o *node.Options) { o.OutOfOrderWindow = 12 * time.Hour }, httpapi.Config{}, Options{})
	const hours = 8
	first := ms(testNow.Truncate(time.Hour).Add(-hours * time.Hour))
	ts := prompb.TimeSeries{Labels: lbls("__name__", "temp", "room", "a")}
	for t := first + 1000; t < first+hours*rollup.Hour; t += 10_000 {
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: float64(rng.IntN(4000)) / 10})
	}
	base.write(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{ts}})
	must(t, base.node.Flush())
	rec := &recordingBackend{Backend: base.b, sources: map[string]int{}}
	approx := newTestEnvFor(t, base.node, rec, httpapi.Config{}, Options{ApproximateRollups: true})
	plain := newTestEnvFor(t, base.node, base.b, httpapi.Config{}, Options{DisableDownsampling: true})
	start, end := first+rollup.Hour, first+hours*rollup.Hour-rollup.Hour
	values := func(e *testEnv, qs string) []float64 {
		path, params := queryParams(qs, start, end, time.Hour)
		code, body := e.serve(http.MethodGet, path, params)
		var r struct {
			Data struct {
				Result []struct {
					Values [][2]any `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		must(t, json.Unmarshal(body, &r))
		if code != 200 || len(r.Data.Result) != 1 {
			t.Fatalf("%s: %d %s", qs, code, body)
		}
		var out []float64
		for _, p := range r.Data.Result[0].Values {
			v, err := strconv.ParseFloat(p[1].(string), 64)
			must(t, err)
			out = append(out, v)
		}
		return out
	}
	for _, f := range []string{"max_over_time", "min_over_time", "last_over_time", "sum_over_time", "avg_over_time"} {
		qs := f + "(temp[1h])"
		got, want := values(approx, qs), values(plain, qs)
		if len(got) != len(want) || len(got) != hours-1 {
			t.Fatalf("%s: %d points, want %d (%d)", qs, len(got), len(want), hours-1)
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-9*math.Abs(want[i]) {
				t.Fatalf("%s point %d: %v, want %v", qs, i, got[i], want[i])
			}
		}
	}
	if rec.sources["rollup_1h"] == 0 {
		t.Fatalf("no query read the hourly rollups: %v", rec.sources)
	}
	// A sample exactly on an hour edge belongs to the window it ends, but
	// to the rollup bucket it starts.
	edge := prompb.TimeSeries{Labels: ts.Labels, Samples: []prompb.Sample{{Timestamp: first + 3*rollup.Hour, Value: 1e6}}}
	base.write(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{edge}})
	must(t, base.node.Flush())
	got, want := values(approx, "max_over_time(temp[1h])"), values(plain, "max_over_time(temp[1h])")
	if want[2] != 1e6 || got[3] != 1e6 || got[2] == 1e6 {
		t.Fatalf("edge sample: approximate %v, raw %v", got, want)
	}
}

// TestDownsample_NewestSampleMatchesRaw: instant queries of the functions
// answered by the node's last-point read, at times inside the data, at its
// end and after it, over windows from a second to two days (so that the
// newest sample comes from the head, an hourly rollup, a daily rollup or
// raw chunks), answer as the engine does over an in-memory copy.
func TestDownsample_NewestSampleMatchesRaw(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	ref := &refStorage{}
	e.writeChunked(genData(rand.New(rand.NewPCG(seed, 8))), ref)
	ng := refEngine()
	dataStart, dataEnd := ms(testNow.Add(-dataSpan)), ms(testNow)
	windows := []string{"1s", "10s", "1m", "7m", "1h", "90m", "6h", "1d", "2d"}
	sels := []string{`gauge`, `special`, `sparse`, `counter_total{host="h1"}`, `{__name__=~"gauge|special"}`}
	before := e.stats.Get(StatSelectsDownsampled)
	for range 300 {
		at := dataStart + rng.Int64N(dataEnd-dataStart+600_000)
		switch rng.IntN(4) {
		case 0:
			at = dataEnd - rng.Int64N(3)
		case 1:
			at -= floorMod(at, 10_000)
		}
		f := []string{"last_over_time", "present_over_time", "absent_over_time"}[rng.IntN(3)]
		qs := fmt.Sprintf("%s(%s[%s])", f, sels[rng.IntN(len(sels))], windows[rng.IntN(len(windows))])
		e.compareWithRef(ng, ref, qs, at, at, 0)
	}
	if n := e.stats.Get(StatSelectsDownsampled) - before; n < 250 {
		t.Fatalf("only %d of 300 selects used the last-point read", n)
	}
}

// TestFold_RandomQueriesMatchEngine: max and min aggregations by labels
// over max/min/first/last_over_time evaluated every window, which Select
// folds by group when no window needs raw samples, must answer byte for
// byte as the engine over an in-memory copy, and as the API without
// downsampling; over series with NaN and staleness markers too, whose
// windows then come from raw samples and are not folded.
func TestFold_RandomQueriesMatchEngine(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	ref := &refStorage{}
	e.writeChunked(genData(rand.New(rand.NewPCG(seed, 4))), ref)
	plain := newTestEnvFor(t, e.node, e.b, httpapi.Config{}, Options{DisableDownsampling: true})
	ng := refEngine()

	aggs := []string{"max", "min"}
	groupings := []string{"", " by (host)", " by (dc)", " by (__name__)", " by (dc, __name__)", " by (nope)", " without (host)"}
	funcs := []string{"max_over_time", "min_over_time", "last_over_time"} // first_over_time is experimental
	sels := []string{`gauge`, `{__name__=~"gauge|counter_total"}`, `gauge{host=~"h1|h2"}`, `{__name__=~"gauge|special"}`, `special`, `sparse`}
	windows := []int64{10_000, 60_000, 300_000, 3600_000}
	dataStart, dataEnd := ms(testNow.Add(-dataSpan)), ms(testNow)
	const queries = 400
	for range queries {
		r := windows[rng.IntN(len(windows))]
		start := dataStart + rng.Int64N(dataEnd-dataStart)
		if rng.IntN(2) == 0 {
			start -= floorMod(start, 10_000) // samples on window edges
		}
		end, step := start+rng.Int64N(60)*r, r
		if rng.IntN(6) == 0 {
			end, step = start, 0 // instant query
		}
		inner := fmt.Sprintf("%s(%s[%s])", funcs[rng.IntN(len(funcs))], sels[rng.IntN(len(sels))], pmodel.Duration(time.Duration(r)*time.Millisecond))
		if rng.IntN(8) == 0 {
			inner = "(" + inner + ")"
		}
		qs := aggs[rng.IntN(len(aggs))] + groupings[rng.IntN(len(groupings))] + " (" + inner + ")"
		// The engine refuses some aggregations by __name__ that the API
		// answers (keepname.go): compare with the API without
		// downsampling, and with the engine when it answers.
		path, params := queryParams(qs, start, end, time.Duration(step)*time.Millisecond)
		wantCode, want := plain.serve(http.MethodGet, path, params)
		code, got := e.serve(http.MethodGet, path, params)
		if code != wantCode || string(got) != string(want) {
			t.Fatalf("%s [%d, %d] step %d:\ngot  %d %s\nwant %d %s", qs, start, end, step, code, got, wantCode, want)
		}
		if !strings.Contains(string(got), "__name__ kept") {
			e.compareWithRef(ng, ref, qs, start, end, time.Duration(step)*time.Millisecond)
		}
	}
	folded := e.stats.Get(StatSelectsFolded)
	t.Logf("%d of %d selects folded by group", folded, e.stats.Get(StatSelectsDownsampled)+e.stats.Get(StatSelectsRaw))
	if folded < queries/10 {
		t.Fatalf("only %d selects folded", folded)
	}
}

func TestGroupFolds(t *testing.T) {
	cases := []struct {
		qs   string
		want string // "max by [..]" per selector with a fold, in order
	}{
		{`max(max_over_time({__name__=~"cpu_(usage_user)",hostname=~"h1|h2"}[1m])) by (__name__)`, "max [__name__]"},
		{`min by (b, a, b) (last_over_time(x[5m]))`, "min [a b]"},
		{`max((min_over_time(x[5m])))`, "max []"},
		{`max without (a) (max_over_time(x[5m]))`, ""},
		{`sum by (a) (max_over_time(x[5m]))`, ""},
		{`max by (a) (avg_over_time(x[5m]))`, ""},
		{`max by (a) (max_over_time(x[5m]) + 1)`, ""},
		{`max by (a) (x)`, ""},
		{`max(max_over_time(x[5m])) + min(min_over_time(y[5m]))`, "max []min []"},
	}
	for _, c := range cases {
		expr, err := parser.ParseExpr(c.qs)
		must(t, err)
		folds := groupFolds(&parser.EvalStmt{Expr: expr})
		got := ""
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				if f := folds[vs.LabelMatchers[0]]; f != nil {
					got += fmt.Sprintf("%s %v", map[bool]string{true: "max", false: "min"}[f.max], f.by)
				}
			}
			return nil
		})
		if got != c.want {
			t.Errorf("%s: folds %q, want %q", c.qs, got, c.want)
		}
	}
}
