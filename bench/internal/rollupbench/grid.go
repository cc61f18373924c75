package rollupbench

import (
	"context"
	"fmt"
	"io"

	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// GridQuery is one cell of the range × step grid: an average over every
// series, RangeDays days ending at the end of the data, in buckets of
// StepMs. It is what a cold run in a fresh process is told to run.
type GridQuery struct {
	Dir       string  `json:"dir"`
	Years     float64 `json:"years"`
	Series    int     `json:"series"`
	RangeDays int     `json:"range_days"`
	StepMs    int64   `json:"step_ms"`
}

// GridCell holds a cell's figures.
type GridCell struct {
	Range     string  `json:"range"`
	RangeDays int     `json:"range_days"`
	Step      string  `json:"step"`
	StepMs    int64   `json:"step_ms"`
	Source    string  `json:"source"`
	ColdMs    float64 `json:"cold_ms"`
	WarmMs    float64 `json:"warm_median_ms"`
	// ColdProcess says whether the cold run was a fresh process (else a
	// freshly opened node in this process).
	ColdProcess bool `json:"cold_fresh_process"`
}

// gridRanges and gridSteps span TickTockDB 0.20's rollup figures: one
// month to five years at 30-minute, 12-hour and daily averages.
var (
	gridRanges = []struct {
		name string
		days int
	}{{"1 month", 30}, {"3 months", 91}, {"1 year", 365}, {"5 years", 5 * 365}}
	gridSteps = []struct {
		name string
		ms   int64
	}{{"30m", 30 * 60_000}, {"12h", 12 * rollup.Hour}, {"1d", rollup.Day}}
)

// gridQueries lists the cells that fit in the data.
func gridQueries(o Options, dir string) []GridQuery {
	var qs []GridQuery
	for _, r := range gridRanges {
		if float64(r.days) > o.Years*365.25 {
			continue
		}
		for _, s := range gridSteps {
			qs = append(qs, GridQuery{Dir: dir, Years: o.Years, Series: o.Series, RangeDays: r.days, StepMs: s.ms})
		}
	}
	return qs
}

func (g GridQuery) query() model.Query {
	endMs := end.UnixMilli() - 1
	return model.Query{
		Matchers:   []*labels.Matcher{mustMatcher(labels.MatchEqual, labels.MetricName, "sensor")},
		Start:      endMs + 1 - int64(g.RangeDays)*rollup.Day,
		End:        endMs,
		Mode:       model.ModeDownsample,
		Step:       g.StepMs,
		Downsample: rollup.FuncAvg,
	}
}

// ColdQuery opens the node of a finished load at g.Dir, runs g once and
// returns its time in ms: the cold figure when called in a fresh process.
func ColdQuery(ctx context.Context, g GridQuery) (float64, error) {
	o := Options{Years: g.Years, Series: g.Series}
	o = o.WithDefaults()
	n, err := node.Open(o.nodeOptions(g.Dir))
	if err != nil {
		return 0, err
	}
	defer n.Close()
	t, err := repeat(ctx, n, g.query(), 1, g.Series)
	if err != nil {
		return 0, err
	}
	return t[0], nil
}

// runGrid measures every cell: first cold (through o.ColdQuery, a fresh
// process each, or a freshly opened node), then warm on one open node.
// The node at dir must be closed.
func runGrid(ctx context.Context, o Options, dir string) ([]GridCell, error) {
	qs := gridQueries(o, dir)
	cells := make([]GridCell, len(qs))
	for i, g := range qs {
		c := &cells[i]
		c.RangeDays, c.StepMs = g.RangeDays, g.StepMs
		for _, r := range gridRanges {
			if r.days == g.RangeDays {
				c.Range = r.name
			}
		}
		for _, s := range gridSteps {
			if s.ms == g.StepMs {
				c.Step = s.name
			}
		}
		c.Source = "raw"
		if g.StepMs%rollup.Day == 0 {
			c.Source = "rollup_1d"
		} else if g.StepMs%rollup.Hour == 0 {
			c.Source = "rollup_1h"
		}
		fmt.Fprintf(o.Log, "cold: %s at %s\n", c.Range, c.Step)
		var err error
		if o.ColdQuery != nil {
			c.ColdMs, err = o.ColdQuery(ctx, g)
			c.ColdProcess = true
		} else {
			c.ColdMs, err = ColdQuery(ctx, g)
		}
		if err != nil {
			return nil, fmt.Errorf("cold %s at %s: %w", c.Range, c.Step, err)
		}
	}
	n, err := node.Open(o.nodeOptions(dir))
	if err != nil {
		return nil, err
	}
	defer n.Close()
	for i, g := range qs {
		// The first run warms the cache; the median of the rest is the
		// warm figure.
		times, err := repeat(ctx, n, g.query(), o.GridRepeats+1, o.Series)
		if err != nil {
			return nil, fmt.Errorf("warm %s at %s: %w", cells[i].Range, cells[i].Step, err)
		}
		cells[i].WarmMs = median(times[1:])
	}
	return cells, nil
}

// printGrid writes the grid's table.
func printGrid(w io.Writer, r Result) error {
	if len(r.Grid) == 0 {
		return nil
	}
	how := "a freshly opened node"
	if r.Grid[0].ColdProcess {
		how = "a fresh process"
	}
	fmt.Fprintf(w, "\naverage of all %d series over a range ending at the end of the data; cold = first query in %s (OS page cache not dropped)\n", r.Series, how)
	t := report.Table{Header: []string{"range", "step", "source", "cold ms", "warm median ms"}, RightAlign: []bool{false, false, false, true, true}}
	for _, c := range r.Grid {
		t.Add(c.Range, c.Step, c.Source, report.Float(c.ColdMs, 1), report.Float(c.WarmMs, 1))
	}
	if err := t.Write(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "published (other hardware): TickTockDB 0.20 on a Raspberry Pi 5, uncached: 0.24 s for 5 years of 100 series at 1d average, 2.84 s at 12h average\n")
	return err
}
