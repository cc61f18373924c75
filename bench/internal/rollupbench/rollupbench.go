// Package rollupbench is the rollup workload after the TickTockDB 0.20
// Raspberry Pi 5 benchmark: 100 series at one point per minute over five
// years, loaded into an in-process node, then downsampled queries that the
// hourly and daily rollups answer, and the kdb+ "max by minute for one
// series over one hour" query that reads raw chunks.
//
// The node runs in this process so that query latency is measured without
// a network hop (the kdb+ figure is in-process too). Cold figures are the
// first run after reopening the node (RocksDB block cache empty; the page
// cache is not dropped).
//
// Not safe for concurrent use; Run owns its node.
package rollupbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// Options configure a run.
type Options struct {
	Dir        string // data directory; a temp dir when empty (removed after)
	Series     int    // default 100
	Years      float64
	IntervalMs int64 // default 60,000
	Repeats    int   // runs per query for the median; default 20
	Seed       uint64
	Log        io.Writer // progress lines; nil = discard
	CPUProfile string    // file for a CPU profile of the query phase; "" = none
	// GridRepeats is the warm runs of each range × step cell; default 3.
	GridRepeats int
	// ColdQuery, when set, runs a grid cell's cold query in a fresh
	// process; otherwise a freshly opened node in this process runs it.
	ColdQuery func(context.Context, GridQuery) (float64, error)
}

// Result holds the figures, named as the issue names them.
type Result struct {
	Series           int            `json:"series"`
	Points           int64          `json:"points"`
	Years            float64        `json:"years"`
	LoadSeconds      float64        `json:"load_s"`
	LoadPointsPerS   float64        `json:"load_points_per_s"`
	SSTBytes         int64          `json:"sst_bytes"`
	BytesPerPoint    float64        `json:"bytes_per_point"`
	Q5y1dAvgMs       float64        `json:"q_5y_1d_avg_ms"`
	Q5y1dAvgColdMs   float64        `json:"q_5y_1d_avg_cold_ms"`
	Q1y12hAvgMs      float64        `json:"q_1y_12h_avg_ms"`
	Q1y12hAvgColdMs  float64        `json:"q_1y_12h_avg_cold_ms"`
	Q1hMaxByMinP50Ms float64        `json:"q_1h_max_by_min_p50_ms"`
	Q1hMaxByMinP99Ms float64        `json:"q_1h_max_by_min_p99_ms"`
	Grid             []GridCell     `json:"grid"`
	Commit           string         `json:"commit,omitempty"`
	Machine          report.Machine `json:"machine"`
}

// WithDefaults returns o with every unset field given its default.
func (o Options) WithDefaults() Options {
	if o.Series == 0 {
		o.Series = 100
	}
	if o.Years == 0 {
		o.Years = 5
	}
	if o.IntervalMs == 0 {
		o.IntervalMs = 60_000
	}
	if o.Repeats == 0 {
		o.Repeats = 20
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.GridRepeats == 0 {
		o.GridRepeats = 3
	}
	return o
}

// end is a fixed "now" so that runs are comparable: data covers the Years
// before it.
var end = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (o *Options) nodeOptions(dir string) node.Options {
	span := time.Duration(o.Years*365.25*24) * time.Hour
	return node.Options{
		DataDir:          dir,
		Now:              func() time.Time { return end },
		RetentionRaw:     span + 30*24*time.Hour,
		Retention1h:      span + 30*24*time.Hour,
		Retention1d:      span + 30*24*time.Hour,
		OutOfOrderWindow: time.Hour,
		WALSegmentBytes:  16 << 20,
	}
}

// Run loads the data, runs the queries and returns the figures.
func Run(ctx context.Context, o Options) (Result, error) {
	o = o.WithDefaults()
	res := Result{Series: o.Series, Years: o.Years, Machine: report.DetectMachine()}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "tribench-rollup-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	n, err := node.Open(o.nodeOptions(dir))
	if err != nil {
		return res, err
	}
	defer func() {
		if n != nil {
			n.Close()
		}
	}()

	start := end.UnixMilli() - int64(o.Years*365.25*float64(rollup.Day))
	start = rollup.BucketStart(start, rollup.Day)
	fmt.Fprintf(o.Log, "loading %d series x 1 point/%ds from %s to %s\n", o.Series, o.IntervalMs/1000,
		time.UnixMilli(start).UTC().Format(time.DateOnly), end.Format(time.DateOnly))
	t0 := time.Now()
	pts, err := load(ctx, n, o, start, end.UnixMilli())
	if err != nil {
		return res, err
	}
	if err := n.Flush(); err != nil {
		return res, err
	}
	res.LoadSeconds = time.Since(t0).Seconds()
	res.Points = pts
	res.LoadPointsPerS = float64(pts) / res.LoadSeconds
	fmt.Fprintf(o.Log, "loaded %d points in %.1fs; compacting\n", pts, res.LoadSeconds)
	sst, err := n.CompactStore()
	if err != nil {
		return res, err
	}
	res.SSTBytes = sst
	res.BytesPerPoint = float64(sst) / float64(pts)

	// Reopen: the block cache starts empty, so the first run of each
	// query is the cold figure.
	if err := n.Close(); err != nil {
		return res, err
	}
	if n, err = node.Open(o.nodeOptions(dir)); err != nil {
		return res, err
	}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile()
	}
	all := []*labels.Matcher{mustMatcher(labels.MatchEqual, labels.MetricName, "sensor")}
	endMs := end.UnixMilli() - 1
	q5y := model.Query{Matchers: all, Start: start, End: endMs, Mode: model.ModeDownsample, Step: rollup.Day, Downsample: rollup.FuncAvg}
	q1y := model.Query{Matchers: all, Start: endMs + 1 - 365*rollup.Day, End: endMs, Mode: model.ModeDownsample, Step: 12 * rollup.Hour, Downsample: rollup.FuncAvg}
	for _, c := range []struct {
		q          model.Query
		cold, warm *float64
		wantSeries int
	}{
		{q5y, &res.Q5y1dAvgColdMs, &res.Q5y1dAvgMs, o.Series},
		{q1y, &res.Q1y12hAvgColdMs, &res.Q1y12hAvgMs, o.Series},
	} {
		times, err := repeat(ctx, n, c.q, o.Repeats, c.wantSeries)
		if err != nil {
			return res, err
		}
		*c.cold = times[0]
		*c.warm = median(times[1:])
	}
	// One series, one random hour, max by minute.
	rng := rand.New(rand.NewPCG(o.Seed, 3))
	var lat []float64
	for i := 0; i < 50*o.Repeats; i++ {
		h := rollup.BucketStart(start+rng.Int64N(endMs-start-rollup.Hour), rollup.Hour)
		q := model.Query{
			Matchers: []*labels.Matcher{all[0], mustMatcher(labels.MatchEqual, "id", seriesID(rng.IntN(o.Series)))},
			Start:    h, End: h + rollup.Hour - 1, Mode: model.ModeDownsample, Step: 60_000, Downsample: rollup.FuncMax,
		}
		t, err := repeat(ctx, n, q, 1, 1)
		if err != nil {
			return res, err
		}
		lat = append(lat, t[0])
	}
	slices.Sort(lat)
	res.Q1hMaxByMinP50Ms = lat[len(lat)/2]
	res.Q1hMaxByMinP99Ms = lat[len(lat)*99/100]
	if o.CPUProfile != "" {
		pprof.StopCPUProfile()
	}
	if err := n.Close(); err != nil {
		return res, err
	}
	n = nil
	if res.Grid, err = runGrid(ctx, o, dir); err != nil {
		return res, err
	}
	return res, nil
}

func seriesID(i int) string { return fmt.Sprintf("s%03d", i) }

func mustMatcher(t labels.MatchType, name, value string) *labels.Matcher {
	m, err := labels.NewMatcher(t, name, value)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return m
}

// load writes one day of every series per request, as a sensor gateway
// catching up would, and returns the number of points written.
func load(ctx context.Context, n *node.Node, o Options, start, end int64) (int64, error) {
	rng := rand.New(rand.NewPCG(o.Seed, 1))
	perDay := rollup.Day / o.IntervalMs
	values := make([]float64, o.Series)
	for i := range values {
		values[i] = 20 + float64(rng.IntN(100))/10
	}
	var total int64
	lastReport := time.Now()
	batches := make([]model.Batch, o.Series)
	for i := range batches {
		batches[i].Labels = []labels.Label{{Name: labels.MetricName, Value: "sensor"}, {Name: "id", Value: seriesID(i)}}
		batches[i].Ts = make([]int64, perDay)
		batches[i].Vs = make([]float64, perDay)
	}
	for day := start; day < end; day += rollup.Day {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		for i := range batches {
			b := &batches[i]
			for k := int64(0); k < perDay; k++ {
				// A smooth random walk with one decimal, like a temperature.
				values[i] = math.Round((values[i]+float64(rng.IntN(3)-1)/10)*10) / 10
				b.Ts[k] = day + k*o.IntervalMs
				b.Vs[k] = values[i]
			}
		}
		res, err := n.Write(context.Background(), batches)
		// A loaded machine may flush more slowly than the load writes: wait
		// for the flush, as a client told to retry later would.
		for wait := 0; errors.Is(err, model.ErrOverloaded) && wait < 600; wait++ {
			select {
			case <-ctx.Done():
				return total, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
			res, err = n.Write(context.Background(), batches)
		}
		if err != nil {
			return total, err
		}
		if res.Rejected > 0 {
			return total, fmt.Errorf("load: %d points rejected: %v", res.Rejected, res.Rejections[0].Message)
		}
		total += res.Accepted
		if time.Since(lastReport) > 5*time.Second {
			fmt.Fprintf(o.Log, "  ... %s, %d points\n", time.UnixMilli(day).UTC().Format(time.DateOnly), total)
			lastReport = time.Now()
		}
	}
	return total, nil
}

// repeat runs q times times and returns each latency in ms.
func repeat(ctx context.Context, n *node.Node, q model.Query, times, wantSeries int) ([]float64, error) {
	var out []float64
	for i := 0; i < times; i++ {
		series := 0
		t0 := time.Now()
		_, err := n.Query(ctx, q, func(s model.Series) error {
			series++
			return nil
		})
		el := time.Since(t0)
		if err != nil {
			return nil, err
		}
		if series != wantSeries {
			return nil, fmt.Errorf("query %s step %d: %d series answered, want %d", q.Downsample, q.Step, series, wantSeries)
		}
		out = append(out, float64(el.Microseconds())/1000)
	}
	return out, nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// Print writes the table for people.
func Print(w io.Writer, r Result) error {
	fmt.Fprintf(w, "rollup workload: %d series x 1 point/min over %.1f years = %s points (%s)\n",
		r.Series, r.Years, report.Int(r.Points), r.Machine)
	fmt.Fprintf(w, "load: %.1f s, %s points/s; store %s bytes after compaction = %.3f bytes/point\n\n",
		r.LoadSeconds, report.Int(int64(r.LoadPointsPerS)), report.Int(r.SSTBytes), r.BytesPerPoint)
	t := report.Table{
		Header:     []string{"query", "source", "warm median ms", "cold ms", "target ms"},
		RightAlign: []bool{false, false, true, true, true},
	}
	t.Add(fmt.Sprintf("5 years, %d series, 1d avg", r.Series), "rollup_1d", report.Float(r.Q5y1dAvgMs, 2), report.Float(r.Q5y1dAvgColdMs, 2), "50")
	t.Add(fmt.Sprintf("1 year, %d series, 12h avg", r.Series), "rollup_1h", report.Float(r.Q1y12hAvgMs, 2), report.Float(r.Q1y12hAvgColdMs, 2), "50")
	t.Add("1 hour, 1 series, max by minute (p50)", "raw", report.Float(r.Q1hMaxByMinP50Ms, 3), "", "0.25")
	t.Add("1 hour, 1 series, max by minute (p99)", "raw", report.Float(r.Q1hMaxByMinP99Ms, 3), "", "")
	if err := t.Write(w); err != nil {
		return err
	}
	return printGrid(w, r)
}
