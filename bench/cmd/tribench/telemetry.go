package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/tributarydb/tributary/bench/internal/ingest"
	"github.com/tributarydb/tributary/bench/internal/telbench"
)

func runTelemetry(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := telbench.Options{Ingest: ingest.DefaultOptions()}
	o.Ingest.Duration = 10 * time.Second // per run; nine runs by default
	o.Ingest.Settle = 0                  // storage figures are not compared here; no minute's wait per run
	in := &o.Ingest
	fs := newFlagSet("tribench telemetry", stderr)
	fs.StringVar(&in.Binary, "binary", "bin/tributary", "tributary `executable` to start as the node")
	fs.IntVar(&o.Rounds, "rounds", 3, "runs of each mode (off, metrics, metrics+traces), in a rotated order per round")
	fs.StringVar(&o.OTLPInterval, "otlp-interval", "10s", "the node's --otlp-interval in the traced mode")
	ingestFlags(fs, in)
	fs.DurationVar(&in.Duration, "duration", in.Duration, "how long each run writes")
	fs.StringVar(&in.WorkDir, "work-dir", "", "`dir`ectory for the temporary data directories (default: the system temp dir)")
	fs.Var((*stringList)(&in.NodeArgs), "node-arg", "extra `argument` for every 'tributary node' (repeatable)")
	if err := parseRun(ctx, fs, args, &o.Output, stdout, logger); err != nil {
		return err
	}
	in.Commit = o.Commit
	_, err := telbench.Run(ctx, o)
	return err
}
