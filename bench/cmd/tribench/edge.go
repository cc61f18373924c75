package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"time"

	"github.com/tributarydb/tributary/bench/internal/edgebench"
)

// commonFlags defines the flags the edge workloads share.
func commonFlags(fs *flag.FlagSet, c *edgebench.Common) {
	procFlags(fs, &c.Procs, "the node", "node-arg")
	fs.StringVar(&c.Profile, "profile", "short", "run size: short (a minute or two) or full")
	resultsDirFlag(fs, &c.ResultsDir, "results", "the JSON record and the PNG plots")
	fs.StringVar(&c.WALSync, "wal-sync", "always", "node --wal-sync policy: always (fsync before ack) or interval:1s")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the generated data and queries")
}

func runIoTDB(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := edgebench.DefaultIoTDBOptions()
	fs := newFlagSet("tribench iotdb", stderr)
	commonFlags(fs, &o.Common)
	fs.IntVar(&o.Groups, "groups", o.Groups, "storage groups (the devices are spread over them)")
	fs.IntVar(&o.Devices, "devices", o.Devices, "devices (each client writes one)")
	fs.IntVar(&o.Sensors, "sensors", o.Sensors, "sensors per device (one series each)")
	clients := intList(o.Clients)
	fs.Var(&clients, "clients", "comma-separated client `counts` of the sweep (full profile: 1..9)")
	fs.IntVar(&o.BatchRows, "batch-rows", o.BatchRows, "rows per write (one sample of every sensor each)")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two rows of a device")
	fs.Float64Var(&o.OutOfOrderRatio, "out-of-order-ratio", o.OutOfOrderRatio, "fraction of writes behind the device's newest row")
	fs.Float64Var(&o.ReadRatio, "read-ratio", o.ReadRatio, "fraction of reads in the read-write mix")
	dur := fs.Duration("duration", 0, "length of each run (default: 5s; full: 20s)")
	if err := parseRun(ctx, fs, args, &o.Output, stdout, logger); err != nil {
		return err
	}
	o.Clients = clients
	o.Duration = durationFor(o.Profile, *dur, o.Duration, 4*o.Duration)
	if o.Profile == "full" && !flagSet(fs, "clients") {
		o.Clients = []int{1, 2, 3, 4, 5, 6, 7, 8, 9}
	}
	_, err := edgebench.RunIoTDB(ctx, o)
	return err
}

// durationFor picks an explicit duration, or the profile's default.
func durationFor(profile string, explicit, short, full time.Duration) time.Duration {
	switch {
	case explicit > 0:
		return explicit
	case profile == "full":
		return full
	}
	return short
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func runTSBSCPU(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := edgebench.DefaultTSBSOptions()
	fs := newFlagSet("tribench tsbs-cpu", stderr)
	commonFlags(fs, &o.Common)
	fs.IntVar(&o.Hosts, "hosts", o.Hosts, "TSBS hosts (10 series each)")
	span := fs.Duration("span", 0, "time the data covers, ending now (default: 13h; full: 48h)")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two lines of a host")
	fs.IntVar(&o.Clients, "clients", o.Clients, "concurrent writers, one group of hosts each")
	fs.IntVar(&o.BatchLines, "batch-lines", o.BatchLines, "lines per write request")
	fs.IntVar(&o.QueryClients, "query-clients", o.QueryClients, "concurrent query clients")
	fs.IntVar(&o.Warmup, "warmup", o.Warmup, "untimed queries of each kind first")
	queries := fs.Int("queries", 0, "timed queries of each kind (default: 300; full: 2000)")
	if err := parseRun(ctx, fs, args, &o.Output, stdout, logger); err != nil {
		return err
	}
	o.Span = durationFor(o.Profile, *span, o.Span, 48*time.Hour)
	o.Queries = *queries
	if o.Queries == 0 {
		o.Queries = map[string]int{"short": 300, "full": 2000}[o.Profile]
	}
	_, err := edgebench.RunTSBS(ctx, o)
	return err
}

func runCANBus(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := edgebench.DefaultCANBusOptions()
	fs := newFlagSet("tribench canbus", stderr)
	commonFlags(fs, &o.Common)
	vehicles := fs.Int("vehicles", 0, "vehicles (22 series each; default: 20; full: 40)")
	minutes := fs.Int("minutes", 0, "minutes of 10 Hz data per vehicle (default: 20; full: 30)")
	fs.IntVar(&o.Clients, "clients", o.Clients, "concurrent writers, one group of vehicles each")
	fs.IntVar(&o.PointsPerRequest, "points-per-request", o.PointsPerRequest, "points per write request, in both modes")
	if err := parseRun(ctx, fs, args, &o.Output, stdout, logger); err != nil {
		return err
	}
	if o.Minutes = *minutes; o.Minutes == 0 {
		o.Minutes = map[string]int{"short": 20, "full": 30}[o.Profile]
	}
	if o.Vehicles = *vehicles; o.Vehicles == 0 {
		o.Vehicles = map[string]int{"short": 20, "full": 40}[o.Profile]
	}
	_, err := edgebench.RunCANBus(ctx, o)
	return err
}
