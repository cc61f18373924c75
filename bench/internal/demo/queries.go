package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// dataset is the oracle the demo's answers are checked against: every
// sample written of the channels the queries aggregate, and the newest
// sample of every series. All series share one time grid: sample i of every
// series is at startMs + i × interval.
//
// record may be called concurrently for disjoint series.
type dataset struct {
	gen     *workload.Generator
	startMs int64
	samples int
	vals    [][]float64 // per series in gen.Series() order; nil if not kept
	last    []float64   // newest value of each series
}

// keptChannels are the channels whose every sample the oracle needs.
var keptChannels = []string{"speed", "rpm"}

func newDataset(gen *workload.Generator, startMs int64, samples int) *dataset {
	d := &dataset{gen: gen, startMs: startMs, samples: samples,
		vals: make([][]float64, gen.NumSeries()), last: make([]float64, gen.NumSeries())}
	for i, s := range gen.Series() {
		if slices.Contains(keptChannels, workload.Label(s, workload.MetricName)) {
			d.vals[i] = make([]float64, samples)
		}
	}
	return d
}

// record notes the values of a request whose first batch is series
// firstSeries and whose first sample is sample offset. Each series' requests
// must be recorded in time order.
func (d *dataset) record(firstSeries, offset int, msg *tributaryv1.WriteRequest) {
	for i, b := range msg.GetBatches() {
		s := firstSeries + i
		if d.vals[s] != nil {
			copy(d.vals[s][offset:], b.GetValues())
		}
		if n := len(b.GetValues()); n > 0 {
			d.last[s] = b.GetValues()[n-1]
		}
	}
}

// fill records in d what write sends, without sending it (the generator
// is deterministic per vehicle).
func (d *dataset) fill(gen *workload.Generator, perRequest int) {
	for v, req := range gen.Requests(gen.SeriesPerUnit(), perRequest) {
		for done := 0; done < d.samples; {
			n := min(perRequest, d.samples-done)
			req.Next(n)
			d.record(v*gen.SeriesPerUnit(), done, req.Msg)
			done += n
		}
	}
}

func (d *dataset) ts(i int) int64 { return d.startMs + int64(i)*d.gen.IntervalMs() }
func (d *dataset) endMs() int64   { return d.ts(d.samples - 1) }

// series returns the index of the series of channel for vehicle v.
func (d *dataset) series(v int, channel string) int {
	for c, ch := range workload.CANChannels() {
		if ch.Name == channel {
			return v*len(workload.CANChannels()) + c
		}
	}
	panic("BUG: no CAN channel " + channel)
}

// buckets downsamples samples [from, to] of series s with fn into buckets
// of stepMs aligned to the Unix epoch, as the node's DOWNSAMPLE mode does.
func (d *dataset) buckets(s, from, to int, stepMs int64, fn func([]float64) float64) (ts []int64, vals []float64) {
	for i := from; i <= to; {
		b := d.ts(i) - d.ts(i)%stepMs
		j := i
		for j <= to && d.ts(j) < b+stepMs {
			j++
		}
		ts = append(ts, b)
		vals = append(vals, fn(d.vals[s][i:j]))
		i = j
	}
	return ts, vals
}

func avg(xs []float64) float64 {
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

func maxOf(xs []float64) float64 { return slices.Max(xs) }

// demoQuery is one step of the tour.
type demoQuery struct {
	title    string
	describe func() string
	run      func(ctx context.Context, qc tributaryv1.QueryServiceClient, timeout time.Duration) QueryOutcome
}

// queries are the questions a new user asks first, with the answers the
// data written implies.
func queries(d *dataset, o Options) []demoQuery {
	const window = 10 * time.Second
	end := d.endMs()
	car := workload.VehicleID(0)
	name := func(v string) *tributaryv1.Matcher {
		return &tributaryv1.Matcher{Type: tributaryv1.Matcher_EQUAL, Name: workload.MetricName, Value: v}
	}
	vehicle := &tributaryv1.Matcher{Type: tributaryv1.Matcher_EQUAL, Name: "vehicle", Value: car}
	loc := o.Location
	w := o.Out
	vehicles := d.gen.NumSeries() / d.gen.SeriesPerUnit()
	minute := int64(time.Minute / time.Millisecond)

	return []demoQuery{
		streamQuery(w, "Last 5 samples of speed for "+car, loc, &tributaryv1.QueryRequest{
			Matchers: []*tributaryv1.Matcher{name("speed"), vehicle},
			StartMs:  end - window.Milliseconds(), EndMs: end,
			Mode: tributaryv1.QueryMode_QUERY_MODE_RAW,
		}, func(ans nodeclient.Answer) error {
			s := d.series(0, "speed")
			from := d.samples - 1 - int(window.Milliseconds()/d.gen.IntervalMs())
			return expectOne(ans, d.gridTs(from, d.samples-1), d.vals[s][from:], 0)
		}, func(w io.Writer, ans nodeclient.Answer) {
			tb := report.Table{Header: []string{"time", "speed (km/h)"}, RightAlign: []bool{false, true}}
			if len(ans.Series) > 0 {
				s := ans.Series[0]
				for i := max(0, len(s.TimestampsMs)-5); i < len(s.TimestampsMs); i++ {
					tb.Add(fmtTime(s.TimestampsMs[i], loc, "15:04:05.0"), fmtValue(s.Values[i]))
				}
			}
			writeIndented(w, tb)
		}),

		streamQuery(w, "Average speed per vehicle, per minute", loc, &tributaryv1.QueryRequest{
			Matchers: []*tributaryv1.Matcher{name("speed")},
			StartMs:  d.startMs, EndMs: end,
			Mode:   tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE,
			StepMs: minute, Downsample: tributaryv1.Aggregate_AGGREGATE_AVG,
			GroupBy: []string{"vehicle"}, Aggregate: tributaryv1.Aggregate_AGGREGATE_AVG,
		}, func(ans nodeclient.Answer) error {
			want := map[string]wantSeries{}
			for v := range vehicles {
				ts, vals := d.buckets(d.series(v, "speed"), 0, d.samples-1, minute, avg)
				want[workload.VehicleID(v)] = wantSeries{ts, vals}
			}
			return expectGroups(ans, "vehicle", want, 1e-9)
		}, func(w io.Writer, ans nodeclient.Answer) {
			writeIndented(w, pivot(ans, "vehicle", loc, report.Decimals(2)))
		}),

		streamQuery(w, "Highest rpm across the fleet, per minute", loc, &tributaryv1.QueryRequest{
			Matchers: []*tributaryv1.Matcher{name("rpm")},
			StartMs:  d.startMs, EndMs: end,
			Mode:   tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE,
			StepMs: minute, Downsample: tributaryv1.Aggregate_AGGREGATE_MAX,
			Aggregate: tributaryv1.Aggregate_AGGREGATE_MAX,
		}, func(ans nodeclient.Answer) error {
			var ts []int64
			var fleet []float64
			for v := range vehicles {
				bts, vals := d.buckets(d.series(v, "rpm"), 0, d.samples-1, minute, maxOf)
				if v == 0 {
					ts, fleet = bts, vals
					continue
				}
				for i := range fleet {
					fleet[i] = max(fleet[i], vals[i])
				}
			}
			return expectOne(ans, ts, fleet, 0)
		}, func(w io.Writer, ans nodeclient.Answer) {
			tb := report.Table{Header: []string{"minute", "max rpm"}, RightAlign: []bool{false, true}}
			if len(ans.Series) > 0 {
				s := ans.Series[0]
				for i := range s.TimestampsMs {
					tb.Add(fmtTime(s.TimestampsMs[i], loc, "15:04"), fmtValue(s.Values[i]))
				}
			}
			writeIndented(w, tb)
		}),

		streamQuery(w, "Latest value of every channel of "+car, loc, &tributaryv1.QueryRequest{
			Matchers: []*tributaryv1.Matcher{vehicle},
			StartMs:  d.startMs, EndMs: end,
			Mode: tributaryv1.QueryMode_QUERY_MODE_LAST_POINT,
		}, func(ans nodeclient.Answer) error {
			want := map[string]wantSeries{}
			for _, ch := range workload.CANChannels() {
				s := d.series(0, ch.Name)
				want[ch.Name] = wantSeries{[]int64{end}, []float64{d.last[s]}}
			}
			return expectGroups(ans, workload.MetricName, want, 0)
		}, func(w io.Writer, ans nodeclient.Answer) {
			tb := report.Table{Header: []string{"channel", "value", "unit", "time"}, RightAlign: []bool{false, true, false, false}}
			for _, ch := range workload.CANChannels() {
				for _, s := range ans.Series {
					if s.Label(workload.MetricName) == ch.Name && len(s.Values) > 0 {
						last := len(s.Values) - 1
						tb.Add(ch.Name, fmtValue(s.Values[last]), ch.Unit, fmtTime(s.TimestampsMs[last], loc, "15:04:05.0"))
					}
				}
			}
			writeIndented(w, tb)
		}),

		seriesCountQuery(w, d, vehicles),
	}
}

// streamQuery runs a Query RPC, prints its answer with show, and checks it.
func streamQuery(w io.Writer, title string, loc *time.Location, req *tributaryv1.QueryRequest,
	check func(nodeclient.Answer) error, show func(io.Writer, nodeclient.Answer)) demoQuery {
	return demoQuery{
		title:    title,
		describe: func() string { return describeQuery(req, loc) },
		run: func(ctx context.Context, qc tributaryv1.QueryServiceClient, timeout time.Duration) QueryOutcome {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			t0 := time.Now()
			ans, err := nodeclient.Query(ctx, qc, req)
			out := QueryOutcome{Title: title, Latency: time.Since(t0), Series: len(ans.Series)}
			for _, s := range ans.Series {
				out.Points += len(s.Values)
			}
			if err != nil {
				out.Err = err
				return out
			}
			fmt.Fprintf(w, "   answered in %.1f ms%s\n", float64(out.Latency)/float64(time.Millisecond), sourceNote(ans.Source))
			show(w, ans)
			for _, warning := range ans.Warnings {
				fmt.Fprintf(w, "   warning: %s\n", warning)
			}
			out.Err = check(ans)
			return out
		},
	}
}

// seriesCountQuery asks the Series RPC for every series with a vehicle
// label and requires every series written to be among them.
func seriesCountQuery(w io.Writer, d *dataset, vehicles int) demoQuery {
	req := &tributaryv1.SeriesRequest{
		Matchers: []*tributaryv1.Matcher{{Type: tributaryv1.Matcher_REGEX, Name: "vehicle", Value: ".+"}},
		StartMs:  d.startMs, EndMs: d.endMs(),
	}
	title := "Number of series"
	return demoQuery{
		title:    title,
		describe: func() string { return "Series " + matchersString(req.Matchers) },
		run: func(ctx context.Context, qc tributaryv1.QueryServiceClient, timeout time.Duration) QueryOutcome {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			t0 := time.Now()
			resp, err := qc.Series(ctx, req)
			out := QueryOutcome{Title: title, Latency: time.Since(t0), Series: len(resp.GetSeries())}
			if err != nil {
				out.Err = fmt.Errorf("series: %w", err)
				return out
			}
			perVehicle := map[string]int{}
			got := map[string]bool{}
			for _, s := range resp.GetSeries() {
				perVehicle[workload.Label(s, "vehicle")]++
				got[workload.Label(s, workload.MetricName)+"/"+workload.Label(s, "vehicle")] = true
			}
			fmt.Fprintf(w, "   answered in %.1f ms: %d series\n", float64(out.Latency)/float64(time.Millisecond), len(resp.GetSeries()))
			tb := report.Table{Header: []string{"vehicle", "series"}, RightAlign: []bool{false, true}}
			for _, v := range slices.Sorted(maps.Keys(perVehicle)) {
				tb.Add(v, strconv.Itoa(perVehicle[v]))
			}
			writeIndented(w, tb)
			var missing []string
			for _, s := range d.gen.Series() {
				key := workload.Label(s, workload.MetricName) + "/" + workload.Label(s, "vehicle")
				if !got[key] {
					missing = append(missing, key)
				}
			}
			if len(missing) > 0 {
				out.Err = fmt.Errorf("%d of the %d series written are missing, e.g. %s", len(missing), vehicles*len(workload.CANChannels()), missing[0])
			}
			return out
		},
	}
}

type wantSeries struct {
	ts   []int64
	vals []float64
}

func (d *dataset) gridTs(from, to int) []int64 {
	ts := make([]int64, 0, to-from+1)
	for i := from; i <= to; i++ {
		ts = append(ts, d.ts(i))
	}
	return ts
}

// expectOne requires an answer of exactly one series equal to (ts, vals).
func expectOne(ans nodeclient.Answer, ts []int64, vals []float64, tol float64) error {
	if len(ans.Series) != 1 {
		return fmt.Errorf("answer has %d series, want 1", len(ans.Series))
	}
	return compareSeries(ans.Series[0], ts, vals, tol)
}

// expectGroups requires one answer series per entry of want, identified by
// its label key, each equal to its entry.
func expectGroups(ans nodeclient.Answer, key string, want map[string]wantSeries, tol float64) error {
	if len(ans.Series) != len(want) {
		return fmt.Errorf("answer has %d series, want %d", len(ans.Series), len(want))
	}
	for _, s := range ans.Series {
		k := s.Label(key)
		ws, ok := want[k]
		if !ok {
			return fmt.Errorf("unexpected series with %s=%q", key, k)
		}
		if err := compareSeries(s, ws.ts, ws.vals, tol); err != nil {
			return fmt.Errorf("%s=%q: %w", key, k, err)
		}
	}
	return nil
}

// compareSeries compares timestamps exactly and values within a relative
// tolerance (0: exactly; aggregates such as avg may sum in another order).
func compareSeries(s nodeclient.Series, ts []int64, vals []float64, tol float64) error {
	if len(s.TimestampsMs) != len(ts) {
		return fmt.Errorf("%d samples, want %d", len(s.TimestampsMs), len(ts))
	}
	for i := range ts {
		if s.TimestampsMs[i] != ts[i] {
			return fmt.Errorf("sample %d at %d ms, want %d ms", i, s.TimestampsMs[i], ts[i])
		}
		if d := math.Abs(s.Values[i] - vals[i]); d > tol*max(1, math.Abs(vals[i])) || math.IsNaN(d) {
			return fmt.Errorf("sample %d at %d ms is %v, want %v", i, ts[i], s.Values[i], vals[i])
		}
	}
	return nil
}

// pivot lays grouped answers out with one row per timestamp and one column
// per group.
func pivot(ans nodeclient.Answer, key string, loc *time.Location, format func(float64) string) report.Table {
	groups := make([]nodeclient.Series, len(ans.Series))
	copy(groups, ans.Series)
	slices.SortFunc(groups, func(a, b nodeclient.Series) int { return strings.Compare(a.Label(key), b.Label(key)) })
	tb := report.Table{Header: []string{"minute"}, RightAlign: []bool{false}}
	var all []int64
	for _, g := range groups {
		tb.Header = append(tb.Header, g.Label(key))
		tb.RightAlign = append(tb.RightAlign, true)
		all = append(all, g.TimestampsMs...)
	}
	slices.Sort(all)
	for _, ts := range slices.Compact(all) {
		row := []string{fmtTime(ts, loc, "15:04")}
		for _, g := range groups {
			cell := ""
			if i := slices.Index(g.TimestampsMs, ts); i >= 0 {
				cell = format(g.Values[i])
			}
			row = append(row, cell)
		}
		tb.Add(row...)
	}
	return tb
}

// describeQuery renders a request the way a user would write it down.
func describeQuery(q *tributaryv1.QueryRequest, loc *time.Location) string {
	var sb strings.Builder
	sb.WriteString("Query " + matchersString(q.GetMatchers()))
	sb.WriteString(" " + strings.TrimPrefix(q.GetMode().String(), "QUERY_MODE_"))
	if q.GetStepMs() > 0 {
		fmt.Fprintf(&sb, " step=%v downsample=%s", time.Duration(q.GetStepMs())*time.Millisecond, aggName(q.GetDownsample()))
	}
	if q.GetAggregate() != tributaryv1.Aggregate_AGGREGATE_UNSPECIFIED {
		fmt.Fprintf(&sb, " aggregate=%s", aggName(q.GetAggregate()))
		if len(q.GetGroupBy()) > 0 {
			fmt.Fprintf(&sb, " by (%s)", strings.Join(q.GetGroupBy(), ", "))
		}
	}
	fmt.Fprintf(&sb, " from %s to %s", fmtTime(q.GetStartMs(), loc, "15:04:05.0"), fmtTime(q.GetEndMs(), loc, "15:04:05.0"))
	return sb.String()
}

func matchersString(ms []*tributaryv1.Matcher) string {
	ops := map[tributaryv1.Matcher_Type]string{
		tributaryv1.Matcher_EQUAL: "=", tributaryv1.Matcher_NOT_EQUAL: "!=",
		tributaryv1.Matcher_REGEX: "=~", tributaryv1.Matcher_NOT_REGEX: "!~",
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.GetName() + ops[m.GetType()] + strconv.Quote(m.GetValue())
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func aggName(a tributaryv1.Aggregate) string {
	return strings.ToLower(strings.TrimPrefix(a.String(), "AGGREGATE_"))
}

// fmtValue prints a reading in its shortest exact decimal form.
func fmtValue(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

func sourceNote(source string) string {
	if source == "" {
		return ""
	}
	return " from " + source
}

func writeIndented(w io.Writer, tb report.Table) {
	var buf bytes.Buffer
	_ = tb.Write(&buf)
	fmt.Fprint(w, indent(buf.String(), "   "))
}

func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	var sb strings.Builder
	for _, l := range lines {
		if l != "" {
			sb.WriteString(prefix + l)
		}
	}
	return sb.String()
}
