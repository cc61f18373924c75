package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/fanoutbench"
)

func runFanout(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := fanoutbench.DefaultOptions()
	fs := newFlagSet("tribench fanout", stderr)
	procFlags(fs, &o.Procs, "coordinators and edges", "keep", "node-arg", "coordinator-arg", "ready-timeout", "stop-timeout")
	fs.IntVar(&o.Coordinators, "coordinators", o.Coordinators, "coordinator processes (raft members)")
	fs.IntVar(&o.Edges, "edges", o.Edges, "edges: up to --process-edges run as node processes, the rest are simulated in this process for the fleet-scale phase")
	fs.IntVar(&o.ProcessEdges, "process-edges", o.ProcessEdges, "edges run as node processes (at most --edges)")
	fs.IntVar(&o.UnreachableEdges, "unreachable-edges", o.UnreachableEdges, "simulated edges that cannot be queried (-1: 5% of --edges)")
	fs.IntVar(&o.VisibilityTrials, "visibility-trials", o.VisibilityTrials, "new series timed until the coordinators list them (fleet-scale phase)")
	fs.IntVar(&o.SeriesPerEdge, "series-per-edge", o.SeriesPerEdge, "sensor series on each edge (8 = one device; the latency query reads sensor s0 of each)")
	fs.DurationVar(&o.History, "history", o.History, "history loaded at the start, ending at the current minute (at least 1h)")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two points of a series (must divide a minute)")
	fs.DurationVar(&o.SegmentAge, "segment-age", o.SegmentAge, "edges' --wal-segment-age")
	fs.IntVar(&o.QueryClients, "query-clients", o.QueryClients, "concurrent query clients, each on its own coordinator")
	fs.IntVar(&o.WarmupQueries, "warmup-queries", o.WarmupQueries, "queries sent before the timed ones")
	fs.IntVar(&o.Queries, "queries", o.Queries, "timed queries (each of the two variants)")
	fs.IntVar(&o.Kills, "kills", o.Kills, "times the raft leader is killed with SIGKILL and restarted")
	fs.IntVar(&o.RegistrationSeries, "registration-series", o.RegistrationSeries, "new series created across the edges for the registrations figure (0: skip)")
	fs.IntVar(&o.RegistrationBatch, "registration-batch", o.RegistrationBatch, "new series per Write")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the generated values")
	fs.DurationVar(&o.ReplicationTimeout, "replication-timeout", o.ReplicationTimeout, "how long each wait for the cloud to catch up may take")
	fs.DurationVar(&o.CallTimeout, "timeout", o.CallTimeout, "timeout of each RPC")
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, fanoutbench.Run)
}
