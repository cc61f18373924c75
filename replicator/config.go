package replicator

import (
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// EdgeConfig is the part of the fleet configuration an edge applies, as
// the coordinators send it: in the welcome of every stream and on the
// stream when it changes (tributary.v1.EdgeConfig).
type EdgeConfig struct {
	// Version is the raft index of the change that set the configuration;
	// higher is newer.
	Version uint64
	// Retention per tier (raw samples, hourly and daily rollups).
	RetentionRaw, Retention1h, Retention1d time.Duration
	// RollupHourly and RollupDaily say which rollup tiers to compute.
	RollupHourly, RollupDaily bool
	// RateLimitPointsPerSec bounds ingest (0: unlimited);
	// RateLimitBurstPoints is the token-bucket burst (0: one second of the
	// rate).
	RateLimitPointsPerSec, RateLimitBurstPoints uint64
	// LagBudget is the seal policy's segment age: how long a point may
	// wait on the edge before its segment is sealed and shipped (0: the
	// coordinators predate it; keep the node's own). MinSegmentPoints
	// holds an old segment with fewer points for more, up to four times
	// the lag budget (0: none).
	LagBudget        time.Duration
	MinSegmentPoints uint64
}

func edgeConfigFromProto(c *pb.EdgeConfig) EdgeConfig {
	return EdgeConfig{
		Version:               c.GetVersion(),
		RetentionRaw:          time.Duration(c.GetRetentionRawMs()) * time.Millisecond,
		Retention1h:           time.Duration(c.GetRetention_1HMs()) * time.Millisecond,
		Retention1d:           time.Duration(c.GetRetention_1DMs()) * time.Millisecond,
		RollupHourly:          c.GetRollupHourly(),
		RollupDaily:           c.GetRollupDaily(),
		RateLimitPointsPerSec: c.GetRateLimitPointsPerSec(),
		RateLimitBurstPoints:  c.GetRateLimitBurstPoints(),
		LagBudget:             time.Duration(c.GetLagBudgetMs()) * time.Millisecond,
		MinSegmentPoints:      c.GetMinSegmentPoints(),
	}
}

// onConfig hands a configuration from the cloud to Options.OnConfig when
// its version is higher than the last one handed over. Version 0 (the
// catalog's defaults, never set by an operator) is not handed over: the
// node keeps its own settings until an operator sets the fleet's.
//
// REQUIRES: called from the loop goroutine.
func (l *loop) onConfig(c *pb.EdgeConfig) {
	if c == nil || c.GetVersion() <= l.configVersion {
		return
	}
	l.configVersion = c.GetVersion()
	cfg := edgeConfigFromProto(c)
	l.log.Info("fleet config received", "version", cfg.Version, "retention_raw", cfg.RetentionRaw,
		"retention_1h", cfg.Retention1h, "retention_1d", cfg.Retention1d,
		"rate_limit_points_per_sec", cfg.RateLimitPointsPerSec, "rate_limit_burst_points", cfg.RateLimitBurstPoints,
		"lag_budget", cfg.LagBudget, "min_segment_points", cfg.MinSegmentPoints)
	if l.o.OnConfig != nil {
		l.o.OnConfig(cfg)
	}
}
