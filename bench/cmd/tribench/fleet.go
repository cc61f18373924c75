package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"

	"github.com/tributarydb/tributary/bench/internal/fleetbench"
)

func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := fleetbench.DefaultOptions()
	fs := newFlagSet("tribench fleet", stderr)
	procFlags(fs, &o.Procs, "the coordinators", "keep", "coordinator-arg", "ready-timeout", "stop-timeout")
	fs.IntVar(&o.Coordinators, "coordinators", o.Coordinators, "coordinator processes (one raft cluster)")
	edges := fs.String("edges", joinInts(o.Edges), "comma-separated fleet `sizes`, one run each")
	fs.IntVar(&o.SeriesPerEdge, "series-per-edge", o.SeriesPerEdge, "sensor series on each simulated edge")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two points of a series")
	fs.DurationVar(&o.SealEvery, "seal-every", o.SealEvery, "how often each edge seals a WAL segment (a node's --wal-segment-age)")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "measured window of each fleet size")
	fs.DurationVar(&o.WarmupTimeout, "warmup-timeout", o.WarmupTimeout, "how long every edge may take to get its first segment acknowledged")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", o.SettleTimeout, "how long the window's segments may take to be acknowledged after it")
	fs.DurationVar(&o.PollInterval, "poll", o.PollInterval, "how often the edges' replication cursors are read")
	fs.StringVar(&o.ResultsDir, "results-dir", defaultResultsDir, "`dir`ectory for fleet.json and the plots (empty: none; "+publishedResultsDir+": the published figures)")
	if err := parseRun(ctx, fs, args, &o.Output, stdout, logger); err != nil {
		return err
	}
	ns, err := parseInts(*edges)
	if err != nil {
		fmt.Fprintf(stderr, "--edges: %v\n", err)
		return errUsage
	}
	o.Edges = ns
	_, err = fleetbench.Run(ctx, o)
	return err
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// parseInts parses "10,100,1000".
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
