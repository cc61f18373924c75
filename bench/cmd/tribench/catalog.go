package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/catalogbench"
)

func runCatalog(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := catalogbench.DefaultOptions()
	fs := newFlagSet("tribench catalog", stderr)
	fs.Var((*intList)(&o.Series), "series", "comma-separated catalog `sizes` in series, one run each")
	fs.IntVar(&o.SeriesPerEdge, "series-per-edge", o.SeriesPerEdge, "series of each edge (the fleet has series / this many edges)")
	fs.IntVar(&o.Metrics, "metrics", o.Metrics, "metric names the series are spread over")
	fs.IntVar(&o.Coordinators, "coordinators", o.Coordinators, "coordinators registered in the catalog")
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, catalogbench.Run)
}
