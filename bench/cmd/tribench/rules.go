package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/rulesbench"
)

func runRulesBench(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := rulesbench.DefaultOptions()
	fs := newFlagSet("tribench rules", stderr)
	procFlags(fs, &o.Procs, "the node", "keep", "node-arg", "ready-timeout", "stop-timeout")
	fs.IntVar(&o.Rules, "rules", o.Rules, "recording rules in the group (a multiple of 4)")
	fs.IntVar(&o.Series, "series", o.Series, "live series the rules read, one point a second each (a multiple of 8)")
	fs.DurationVar(&o.EvalInterval, "eval-interval", o.EvalInterval, "the rule group's interval")
	fs.IntVar(&o.MaxConcurrentEvals, "max-concurrent-evals", o.MaxConcurrentEvals, "node --rules-max-concurrent-evals (0: the node's default)")
	fs.StringVar(&o.NodeCPUs, "node-cpus", o.NodeCPUs, "taskset CPU list the node runs on ('' for all CPUs)")
	fs.IntVar(&o.FeedSeries, "feed-series", o.FeedSeries, "series of the ingest feed (written as fast as the node takes them)")
	fs.IntVar(&o.BatchPoints, "batch-points", o.BatchPoints, "points per ingest Write request")
	fs.IntVar(&o.PointsPerSeriesPerBatch, "points-per-series-per-batch", o.PointsPerSeriesPerBatch, "consecutive points of each series in an ingest request")
	fs.IntVar(&o.Clients, "clients", o.Clients, "ingest writers, one gRPC connection each")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "live feed before the first phase (fills the rules' 1m windows)")
	fs.DurationVar(&o.Phase, "phase", o.Phase, "length of one phase with or without the rules")
	fs.IntVar(&o.Pairs, "pairs", o.Pairs, "pairs of phases without and with the rules")
	fs.StringVar(&o.WALSync, "wal-sync", o.WALSync, "node --wal-sync policy: always (fsync before ack) or interval:1s")
	fs.DurationVar(&o.CallTimeout, "timeout", o.CallTimeout, "timeout of each request")
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, rulesbench.Run)
}
