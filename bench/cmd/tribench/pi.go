package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/pibench"
	"github.com/tributarydb/tributary/bench/internal/report"
)

func runPi(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := pibench.DefaultOptions()
	fs := newFlagSet("tribench pi", stderr)
	fs.StringVar(&o.Image, "image", "", "node `image` to run (default: build one from --static-binary and --dockerfile)")
	fs.StringVar(&o.StaticBinary, "static-binary", o.StaticBinary, "static linux/amd64 tributary `executable` for the image")
	fs.StringVar(&o.Dockerfile, "dockerfile", o.Dockerfile, "Dockerfile of the FROM-scratch node image")
	fs.StringVar(&o.BuildTag, "tag", o.BuildTag, "`tag` of the image built")
	fs.StringVar(&o.CPUs, "cpus", o.CPUs, "docker --cpus of the node's container")
	fs.StringVar(&o.Memory, "memory", o.Memory, "docker --memory of the node's container (swap off)")
	fs.Var((*stringList)(&o.NodeArgs), "node-arg", "extra `argument` for 'tributary node' in the container (repeatable)")
	fs.IntVar(&o.Series, "series", o.Series, "sensor series written")
	fs.IntVar(&o.SeriesPerRequest, "series-per-request", o.SeriesPerRequest, "series in one Write")
	fs.IntVar(&o.PointsPerSeries, "points-per-series", o.PointsPerSeries, "consecutive points of each series in one Write")
	fs.IntVar(&o.Clients, "clients", o.Clients, "concurrent writers, one connection each")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two points of a series")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "how long to write")
	fs.IntVar(&o.Queries, "queries", o.Queries, "timed runs of each query type")
	fs.IntVar(&o.Warmup, "warmup", o.Warmup, "untimed runs of each query type first")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the generated values")
	resultsDirFlag(fs, &o.ResultsDir, "results-dir", "pi.json")
	fs.StringVar(&o.WorkDir, "work-dir", "", "`dir`ectory for the temporary image context (default: the system temp dir)")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", o.ReadyTimeout, "how long the node in the container may take to answer")
	fs.DurationVar(&o.CallTimeout, "timeout", o.CallTimeout, "timeout of each RPC")
	if err := parseRun(ctx, fs, args, &o.Output, stdout, logger); err != nil {
		return err
	}
	_, err := pibench.Run(ctx, o)
	if errors.Is(err, pibench.ErrNoDocker) {
		fmt.Fprintf(stdout, "pi profile skipped: %v\n", err)
		return report.WriteJSONLine(stdout, map[string]any{"skipped": true, "reason": err.Error()})
	}
	return err
}

func runARM64Smoke(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := pibench.DefaultSmokeOptions()
	fs := newFlagSet("tribench arm64-smoke", stderr)
	fs.StringVar(&o.Binary, "binary", o.Binary, "arm64 static tributary `executable`")
	fs.StringVar(&o.Qemu, "qemu", o.Qemu, "user-mode `emulator` that runs it")
	fs.StringVar(&o.QemuCPU, "qemu-cpu", o.QemuCPU, "CPU the emulator presents (QEMU_CPU)")
	fs.IntVar(&o.Series, "series", o.Series, "sensor series written")
	fs.IntVar(&o.Points, "points", o.Points, "points per series")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two points of a series")
	resultsDirFlag(fs, &o.ResultsDir, "results-dir", "arm64-smoke.json")
	fs.StringVar(&o.WorkDir, "work-dir", "", "`dir`ectory for the temporary data directory (default: the system temp dir)")
	fs.BoolVar(&o.KeepDataDir, "keep", false, "keep the data directory and node log after the run")
	fs.DurationVar(&o.ReadyTimeout, "ready-timeout", o.ReadyTimeout, "how long each (emulated) node start may take")
	fs.DurationVar(&o.CallTimeout, "timeout", o.CallTimeout, "timeout of each RPC")
	return parseAndRun(ctx, fs, args, stdout, logger, &o, &o.Output, pibench.Smoke)
}
