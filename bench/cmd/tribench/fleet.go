package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/fleetbench"
)

func runFleet(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := fleetbench.DefaultOptions()
	fs := newFlagSet("tribench fleet", stderr)
	procFlags(fs, &o.Procs, "the coordinators", "keep", "coordinator-arg", "ready-timeout", "stop-timeout")
	fs.IntVar(&o.Coordinators, "coordinators", o.Coordinators, "coordinator processes (one raft cluster)")
	fs.Var((*intList)(&o.Edges), "edges", "comma-separated fleet `sizes`, one run each")
	fs.IntVar(&o.SeriesPerEdge, "series-per-edge", o.SeriesPerEdge, "sensor series on each simulated edge")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two points of a series")
	fs.DurationVar(&o.SealEvery, "seal-every", o.SealEvery, "how often each edge seals a WAL segment (a node's --wal-segment-age)")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "measured window of each fleet size")
	fs.DurationVar(&o.WarmupTimeout, "warmup-timeout", o.WarmupTimeout, "how long every edge may take to get its first segment acknowledged")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", o.SettleTimeout, "how long the window's segments may take to be acknowledged after it")
	fs.DurationVar(&o.PollInterval, "poll", o.PollInterval, "how often the edges' replication cursors are read")
	resultsDirFlag(fs, &o.ResultsDir, "results-dir", "fleet.json and the plots")
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, fleetbench.Run)
}
