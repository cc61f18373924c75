package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/replbench"
)

func runReplication(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := replbench.DefaultOptions()
	fs := newFlagSet("tribench replication", stderr)
	procFlags(fs, &o.Procs, "coordinators and edges", "keep", "node-arg", "ready-timeout", "stop-timeout")
	fs.IntVar(&o.Coordinators, "coordinators", o.Coordinators, "coordinator processes (one raft cluster); the edge ships to all of them")
	fs.Float64Var(&o.PointsPerS, "rate", o.PointsPerS, "sustained write rate to the edge, `points/s`")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "length of the lag phase and of the replication-off run")
	fs.DurationVar(&o.Outage, "outage", o.Outage, "how long the coordinators stay down (SIGKILL) while the load goes on; 0 skips the drain phase")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", o.DrainTimeout, "give up waiting for the backlog to drain after this long (0: twice --outage, at least 2m)")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", o.SettleTimeout, "after the lag phase, wait at most this long for its writes to reach the cloud")
	fs.IntVar(&o.Hosts, "hosts", o.Hosts, "TSBS hosts (10 series each)")
	fs.IntVar(&o.HostsPerRequest, "hosts-per-request", o.HostsPerRequest, "hosts per Write request")
	fs.IntVar(&o.RowsPerRequest, "rows-per-request", o.RowsPerRequest, "consecutive rows of each series in a request")
	fs.IntVar(&o.Clients, "clients", o.Clients, "concurrent writers, one gRPC connection each")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the generated values")
	fs.StringVar(&o.WALSync, "wal-sync", o.WALSync, "edges' --wal-sync policy")
	fs.DurationVar(&o.SegmentAge, "segment-age", o.SegmentAge, "edges' --wal-segment-age (their lag budget)")
	fs.Int64Var(&o.BudgetBytes, "budget-bytes", o.BudgetBytes, "edge --replication-budget-bytes (0: enough for the outage's backlog)")
	fs.DurationVar(&o.PollInterval, "poll", o.PollInterval, "how often the edge's /metrics are read")
	fs.DurationVar(&o.CallTimeout, "timeout", o.CallTimeout, "timeout of each RPC")
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, replbench.Run)
}
