package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/uplinkbench"
)

func runUplink(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := uplinkbench.DefaultOptions()
	fs := newFlagSet("tribench uplink", stderr)
	procFlags(fs, &o.Procs, "the coordinators and edges", "keep", "node-arg", "coordinator-arg", "ready-timeout", "stop-timeout")
	fs.Var((*durationList)(&o.LagBudgets), "lag-budgets", "comma-separated lag `budgets`, one row each (the default budget is added)")
	fs.IntVar(&o.Edges, "edges", o.Edges, "edge processes per lag budget")
	fs.IntVar(&o.Series, "series", o.Series, "series per edge, one point each per request")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two requests to an edge")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long every edge is written to (the rows run side by side)")
	fs.DurationVar(&o.CallTimeout, "timeout", o.CallTimeout, "timeout of each HTTP request")
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, uplinkbench.Run)
}
