package influxql

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/influxdata/influxql"
)

// oraclePoint is one generated point of the oracle test.
type oraclePoint struct {
	host, field string
	t           int64 // ns
	v           float64
}

// naiveAggregate is a deliberately plain model of InfluxQL's functions:
// values in time order, ties of time by series (host) order.
func naiveAggregate(fn string, arg float64, pts []oraclePoint) (float64, bool) {
	if len(pts) == 0 {
		return 0, false
	}
	vs := make([]float64, len(pts))
	for i, p := range pts {
		vs[i] = p.v
	}
	total := 0.0
	for _, v := range vs {
		total += v
	}
	sorted := append([]float64(nil), vs...)
	sort.Float64s(sorted)
	n := len(vs)
	switch fn {
	case "count":
		return float64(n), true
	case "sum":
		return total, true
	case "mean":
		return total / float64(n), true
	case "min":
		return sorted[0], true
	case "max":
		return sorted[n-1], true
	case "spread":
		return sorted[n-1] - sorted[0], true
	case "median":
		if n%2 == 1 {
			return sorted[n/2], true
		}
		return (sorted[n/2-1] + sorted[n/2]) / 2, true
	case "stddev":
		if n < 2 {
			return 0, false
		}
		ss := 0.0
		for _, v := range vs {
			ss += (v - total/float64(n)) * (v - total/float64(n))
		}
		return math.Sqrt(ss / float64(n-1)), true
	case "percentile":
		i := int(math.Floor(float64(n)*arg/100+0.5)) - 1
		if i < 0 || i >= n {
			return 0, false
		}
		return sorted[i], true
	case "first", "last":
		best := pts[0]
		for _, p := range pts[1:] {
			earlier, later := p.t < best.t, p.t > best.t
			if (fn == "first" && earlier) || (fn == "last" && later) || (p.t == best.t && p.v > best.v) {
				best = p
			}
		}
		return best.v, true
	}
	panic("unknown function " + fn)
}

// TestSelect_AggregatesMatchNaiveModel generates random points, writes
// them through the line protocol API, and compares every function, with
// and without GROUP BY time() and tags, pushed down or computed from raw
// points (a condition on the field forces that), with the naive model.
func TestSelect_AggregatesMatchNaiveModel(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	e := newTestEnv(t, Options{})
	start := testNow.Add(-5 * time.Hour).Truncate(time.Hour)
	hosts := []string{"h0", "h1", "h2", "h3"}
	var pts []oraclePoint
	var body strings.Builder
	for _, h := range hosts {
		for ts := start.Add(time.Duration(rng.Intn(60)) * time.Second); ts.Before(start.Add(3 * time.Hour)); ts = ts.Add(time.Duration(5+rng.Intn(120)) * time.Second) {
			v := float64(rng.Intn(20000)-10000) / 100
			pts = append(pts, oraclePoint{h, "usage", ts.UnixNano(), v})
			fmt.Fprintf(&body, "cpu,host=%s usage=%v %d\n", h, v, ts.Unix())
		}
	}
	e.write("db", body.String())
	if err := e.node.Flush(); err != nil { // so 1h buckets read the rollups
		t.Fatal(err)
	}
	funcs := []string{"count", "sum", "mean", "min", "max", "spread", "median", "stddev", "percentile", "first", "last"}
	intervals := []time.Duration{0, time.Minute, 17 * time.Minute, time.Hour}
	filters := []struct {
		where string
		keep  func(string) bool
	}{
		{"", func(string) bool { return true }},
		{" AND host = 'h1'", func(h string) bool { return h == "h1" }},
		{" AND (host = 'h0' OR host = 'h2')", func(h string) bool { return h == "h0" || h == "h2" }},
		{" AND host =~ /[13]/", func(h string) bool { return h == "h1" || h == "h3" }},
		{" AND host != 'h3'", func(h string) bool { return h != "h3" }},
	}
	lo, hi := start.Add(20*time.Minute), start.Add(150*time.Minute)
	for i := 0; i < 60; i++ {
		fn := funcs[rng.Intn(len(funcs))]
		iv := intervals[rng.Intn(len(intervals))]
		f := filters[rng.Intn(len(filters))]
		byHost := rng.Intn(2) == 0
		raw := rng.Intn(2) == 0
		call := fn + "(usage)"
		arg := 0.0
		if fn == "percentile" {
			arg = float64(1 + rng.Intn(99))
			call = fmt.Sprintf("percentile(usage, %v)", arg)
		}
		q := fmt.Sprintf("SELECT %s FROM cpu WHERE time >= '%s' AND time < '%s'%s", call, lo.Format(time.RFC3339), hi.Format(time.RFC3339), f.where)
		if raw {
			q += " AND usage > -1000000"
		}
		var dims []string
		if iv > 0 {
			dims = append(dims, fmt.Sprintf("time(%s)", influxql.FormatDuration(iv)))
		}
		if byHost {
			dims = append(dims, "host")
		}
		if len(dims) > 0 {
			q += " GROUP BY " + strings.Join(dims, ", ")
		}
		if iv > 0 {
			q += " fill(none)"
		}
		want := naiveAnswer(pts, fn, arg, lo.UnixNano(), hi.UnixNano()-1, int64(iv), byHost, f.keep)
		got := e.query("db", q, "ns")
		compareOracle(t, q, got, want, fn)
	}
}

// naiveAnswer computes, per group key ("" or the host) and bucket, the
// expected value.
func naiveAnswer(pts []oraclePoint, fn string, arg float64, lo, hi, iv int64, byHost bool, keep func(string) bool) map[string]map[int64]float64 {
	cells := map[string]map[int64][]oraclePoint{}
	for _, p := range pts {
		if p.t < lo || p.t > hi || !keep(p.host) {
			continue
		}
		g := ""
		if byHost {
			g = p.host
		}
		b := lo
		if iv > 0 {
			b = p.t - ((p.t%iv)+iv)%iv
		}
		if cells[g] == nil {
			cells[g] = map[int64][]oraclePoint{}
		}
		cells[g][b] = append(cells[g][b], p)
	}
	out := map[string]map[int64]float64{}
	for g, buckets := range cells {
		for b, ps := range buckets {
			sort.SliceStable(ps, func(i, j int) bool { return ps[i].t < ps[j].t })
			if v, ok := naiveAggregate(fn, arg, ps); ok {
				if out[g] == nil {
					out[g] = map[int64]float64{}
				}
				out[g][b] = v
			}
		}
	}
	return out
}

func compareOracle(t *testing.T, q string, got answer, want map[string]map[int64]float64, fn string) {
	t.Helper()
	if len(got.Results) != 1 || got.Results[0].Err != "" {
		t.Fatalf("%s: %s", q, got.raw)
	}
	seen := map[string]map[int64]float64{}
	for _, s := range got.Results[0].Series {
		g := s.Tags["host"]
		seen[g] = map[int64]float64{}
		for _, r := range s.Values {
			ts, _ := r[0].(json.Number).Int64()
			if r[1] == nil {
				continue
			}
			v, _ := r[1].(json.Number).Float64()
			seen[g][ts] = v
		}
	}
	selector := selectorFuncs[fn] && !strings.Contains(q, "time(")
	for g, buckets := range want {
		if len(seen[g]) != len(buckets) {
			t.Errorf("%s: group %q: %d rows, want %d\n%s", q, g, len(seen[g]), len(buckets), got.raw)
			continue
		}
		for b, v := range buckets {
			gv, ok := seen[g][b]
			if selector { // the time is the selected point's
				for _, x := range seen[g] {
					gv, ok = x, true
				}
			}
			if !ok || math.Abs(gv-v) > 1e-9*math.Max(1, math.Abs(v)) {
				t.Errorf("%s: group %q bucket %d: got %v (present %v), want %v", q, g, b, gv, ok, v)
			}
		}
	}
	for g := range seen {
		if want[g] == nil {
			t.Errorf("%s: unexpected group %q", q, g)
		}
	}
}
