package main

import (
	"context"
	"flag"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/lowrate"
)

func runLowRate(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := lowrate.DefaultOptions()
	fs := flag.NewFlagSet("tribench lowrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Binary, "binary", "bin/tributary", "tributary `executable` to start as the node")
	fs.IntVar(&o.Series, "series", o.Series, "series, one point each per request")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two requests")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long to write (measured)")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "writes before the measured run")
	fs.StringVar(&o.WALSync, "wal-sync", o.WALSync, "node --wal-sync policy: always (fsync before ack) or interval:1s")
	fs.StringVar(&o.WorkDir, "work-dir", "", "`dir`ectory for the temporary data directory (default: the system temp dir)")
	fs.BoolVar(&o.KeepDataDir, "keep", false, "keep the data directory and node log after the run")
	fs.Var((*stringList)(&o.NodeArgs), "node-arg", "extra `argument` for 'tributary node' (repeatable)")
	commit := commitFlag(ctx, fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	o.Commit, o.Out, o.Logger = commit(), stdout, logger
	_, err := lowrate.Run(ctx, o)
	return err
}
