package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/lowrate"
)

func runLowRate(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := lowrate.DefaultOptions()
	fs := newFlagSet("tribench lowrate", stderr)
	procFlags(fs, &o.Procs, "the node", "keep", "node-arg", "ready-timeout", "stop-timeout")
	fs.IntVar(&o.Series, "series", o.Series, "series, one point each per request")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two requests")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long to write (measured)")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "writes before the measured run")
	fs.StringVar(&o.WALSync, "wal-sync", o.WALSync, "node --wal-sync policy: always (fsync before ack) or interval:1s")
	fs.DurationVar(&o.CallTimeout, "timeout", o.CallTimeout, "timeout of each HTTP request")
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, lowrate.Run)
}
