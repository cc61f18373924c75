package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/benchplot"
	"github.com/tributarydb/tributary/bench/internal/edgebench"
	"github.com/tributarydb/tributary/bench/internal/rollupbench"
)

// coldQueryInProcess runs one rollup grid query in a fresh tribench
// process ("tribench rollup-cold <json>") and reads the time it prints.
func coldQueryInProcess(ctx context.Context, g rollupbench.GridQuery) (float64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	arg, err := json.Marshal(g)
	if err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, self, "rollup-cold", string(arg))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("cold query process: %w", err)
	}
	ms, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return 0, fmt.Errorf("cold query process printed %q: %w", out, err)
	}
	return ms, nil
}

// runRollupCold is the fresh process of a cold grid query: it prints the
// query's time in ms.
func runRollupCold(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: tribench rollup-cold '<grid query JSON>' (run by tribench rollup)")
		return errUsage
	}
	var g rollupbench.GridQuery
	if err := json.Unmarshal([]byte(args[0]), &g); err != nil {
		return fmt.Errorf("grid query: %w", err)
	}
	ms, err := rollupbench.ColdQuery(ctx, g)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%.3f\n", ms)
	return err
}

// saveRollup writes the rollup run's JSON record and its query time vs
// range plot under the results directory.
func saveRollup(c edgebench.Common, host edgebench.Host, o rollupbench.Options, res rollupbench.Result, stdout io.Writer) error {
	if c.ResultsDir == "" {
		return nil
	}
	chart := benchplot.Chart{Title: fmt.Sprintf("rollup: average of %d series, query time vs range", res.Series),
		XLabel: "range (days)", YLabel: "ms", LogX: true, LogY: true}
	for _, step := range []string{"30m", "12h", "1d"} {
		for _, kind := range []string{"cold", "warm"} {
			s := benchplot.Series{Name: step + " " + kind}
			for _, cell := range res.Grid {
				if cell.Step != step {
					continue
				}
				y := cell.WarmMs
				if kind == "cold" {
					y = cell.ColdMs
				}
				s.X, s.Y = append(s.X, float64(cell.RangeDays)), append(s.Y, y)
			}
			if len(s.X) > 0 {
				chart.Series = append(chart.Series, s)
			}
		}
	}
	var plots []string
	if len(chart.Series) > 0 {
		p, err := edgebench.SavePlot(c, "rollup", "range", chart)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	path, err := edgebench.Record{Workload: "rollup", Profile: c.Profile, Time: time.Now().UTC(), Commit: res.Commit,
		Machine: host, Figures: res, Plots: plots,
		Config: map[string]any{"series": o.Series, "years": o.Years, "interval_ms": o.IntervalMs, "repeats": o.Repeats,
			"grid_repeats": o.GridRepeats, "seed": o.Seed, "cold": "first query in a fresh process"},
		Published: map[string]string{
			"ticktockdb_020_pi5_5y_100series_1d_avg_s":  "0.24 uncached (TickTockDB 0.20, Raspberry Pi 5; other hardware)",
			"ticktockdb_020_pi5_5y_100series_12h_avg_s": "2.84 uncached (TickTockDB 0.20, Raspberry Pi 5; other hardware)",
		}}.Save(c)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nresults: %s %s\n", path, strings.Join(plots, " "))
	return nil
}
