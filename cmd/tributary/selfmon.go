package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/selfmon"
)

// selfMonitorFlags are --self-monitor and --self-monitor-max-series
// (tributary node and tributary local).
type selfMonitorFlags struct {
	every     time.Duration
	maxSeries int
}

func (f *selfMonitorFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.every, "self-monitor", 0, "write this process's own metrics into its own store every interval (e.g. 15s), named as on /metrics with instance=<node id> and job=\"tributary\", so PromQL can ask the node about itself (0: off)")
	fs.IntVar(&f.maxSeries, "self-monitor-max-series", selfmon.DefaultMaxSeries, "most series self-monitoring writes; further series are skipped")
}

func (f *selfMonitorFlags) validate() error {
	if f.every < 0 {
		return fmt.Errorf("%w: --self-monitor %s is negative", errUsage, f.every)
	}
	if f.every > 0 && f.every < time.Second {
		return fmt.Errorf("%w: --self-monitor %s: want at least 1s", errUsage, f.every)
	}
	if f.maxSeries < 1 {
		return fmt.Errorf("%w: --self-monitor-max-series %d: want 1 or more", errUsage, f.maxSeries)
	}
	return nil
}

// start runs self-monitoring of n (node/selfmon) when asked; stop the
// result before closing n. Off, it starts nothing (a nil *background
// stops as a no-op).
func (f *selfMonitorFlags) start(n *node.Node, tp *telemetry.Provider, log *slog.Logger) *background {
	if f.every <= 0 {
		return nil
	}
	o := selfmon.Options{Writer: n, Metrics: tp.Gatherer(), Instance: n.NodeID(), Interval: f.every, MaxSeries: f.maxSeries, Logger: log}
	return goBackground("self-monitoring", func(ctx context.Context) error { return selfmon.Run(ctx, o) }, log)
}
