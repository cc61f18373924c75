package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/healbench"
)

func runHeal(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := healbench.DefaultOptions()
	fs := newFlagSet("tribench heal", stderr)
	procFlags(fs, &o.Procs, "coordinators and edges", "keep", "node-arg", "coordinator-arg", "ready-timeout")
	fs.IntVar(&o.Coordinators, "coordinators", o.Coordinators, "coordinator processes (replication factor min(3, this))")
	fs.IntVar(&o.Edges, "edges", o.Edges, "edge node processes")
	fs.IntVar(&o.SeriesPerEdge, "series-per-edge", o.SeriesPerEdge, "series on each edge")
	fs.DurationVar(&o.History, "history", o.History, "history loaded on every edge before the fault, ending now (0: none)")
	fs.DurationVar(&o.HistoryStep, "history-step", o.HistoryStep, "time between two points of a series in the history")
	fs.IntVar(&o.HistoryBatch, "history-batch", o.HistoryBatch, "history points per series in one Write")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two writes of the steady load to an edge")
	fs.IntVar(&o.PointsPerWrite, "points-per-write", o.PointsPerWrite, "points per series in one steady write (the interval divided by them is the step)")
	fs.DurationVar(&o.Warm, "warm", o.Warm, "steady load before the fault")
	fs.StringVar(&o.Victim, "victim", o.Victim, "the coordinator that loses its disk: follower or leader")
	fs.DurationVar(&o.RestartDelay, "restart-delay", o.RestartDelay, "time between the kill and the start with --rejoin")
	fs.DurationVar(&o.DeadAfter, "dead-after", o.DeadAfter, "the coordinators' --dead-after")
	fs.DurationVar(&o.SegmentAge, "segment-age", o.SegmentAge, "edges' --wal-segment-age")
	fs.DurationVar(&o.AckPoll, "ack-poll", o.AckPoll, "how often each edge's acked-through gauge is read")
	fs.DurationVar(&o.HealTimeout, "heal-timeout", o.HealTimeout, "give up if the history is not at RF again after this long")
	fs.DurationVar(&o.LoadTimeout, "load-timeout", o.LoadTimeout, "how long each wait for the cloud to hold what was written may take")
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, healbench.Run)
}
