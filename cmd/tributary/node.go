package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// nodeFlags binds the node's command-line flags to node.Options.
func nodeFlags(fs *flag.FlagSet, o *node.Options) (walSync, logLevel, logFormat *string) {
	fs.StringVar(&o.DataDir, "data-dir", "./data", "directory for the WAL and the store")
	fs.StringVar(&o.NodeID, "node-id", "", "this node's id in WAL segments and in the fleet (default: the id the data dir was created with, or \"local\")")
	walSync = fs.String("wal-sync", "always", "WAL fsync policy: 'always' (fsync before every acknowledgement, group commit) or 'interval:DURATION' (faster; a power cut may lose up to DURATION of acknowledged writes)")
	fs.Int64Var(&o.WALSegmentBytes, "wal-segment-bytes", 4<<20, "cut a WAL segment at this size")
	fs.DurationVar(&o.WALSegmentAge, "wal-segment-age", 5*time.Second, "cut a WAL segment at this age")
	fs.Int64Var(&o.HeadMaxBytes, "head-max-bytes", 32<<20, "memory bound for unflushed samples")
	fs.IntVar(&o.HeadChunkSamples, "head-chunk-samples", 480, "samples per head chunk (chunks also close at each hour boundary)")
	fs.DurationVar(&o.OutOfOrderWindow, "ooo-window", time.Hour, "accept samples this much older than their series' newest")
	fs.DurationVar(&o.FutureWindow, "future-window", 10*time.Minute, "reject samples further than this ahead of the clock")
	fs.DurationVar(&o.RetentionRaw, "retention-raw", 15*24*time.Hour, "keep raw samples this long")
	fs.DurationVar(&o.Retention1h, "retention-1h", 730*24*time.Hour, "keep hourly rollups this long")
	fs.DurationVar(&o.Retention1d, "retention-1d", 3650*24*time.Hour, "keep daily rollups this long")
	fs.Int64Var(&o.BlockCacheBytes, "block-cache-bytes", 8<<20, "RocksDB block cache size")
	fs.Int64Var(&o.WriteBufferBytes, "write-buffer-bytes", 4<<20, "RocksDB memtable size per column family")
	fs.IntVar(&o.MaxSeries, "max-series", 100_000, "series limit of this node")
	fs.Int64Var(&o.UnflushedWALMaxBytes, "wal-max-unflushed-bytes", 1<<30, "while the store cannot flush (the node is not ready), writes are still taken until the WAL segments holding unflushed samples reach this size (or unflushed samples reach 2 x --head-max-bytes), then refused (retryable)")
	fs.IntVar(&o.Limits.MaxLabels, "max-labels", labels.DefaultLimits.MaxLabels, "most labels per series, including the metric name")
	fs.IntVar(&o.Limits.MaxNameBytes, "max-label-name-bytes", labels.DefaultLimits.MaxNameBytes, "longest label name, in bytes")
	fs.IntVar(&o.Limits.MaxValueBytes, "max-label-value-bytes", labels.DefaultLimits.MaxValueBytes, "longest label value, in bytes")
	logLevel = fs.String("log-level", "info", "debug, info, warn or error")
	logFormat = fs.String("log-format", "text", "text or json")
	return
}

func parseWALSync(s string) (wal.SyncPolicy, error) {
	if s == "always" {
		return wal.SyncPolicy{}, nil
	}
	if d, ok := strings.CutPrefix(s, "interval:"); ok {
		iv, err := time.ParseDuration(d)
		if err == nil && iv > 0 {
			return wal.SyncPolicy{Interval: iv}, nil
		}
	}
	return wal.SyncPolicy{}, fmt.Errorf("%w: --wal-sync %q: want 'always' or 'interval:DURATION' (e.g. interval:1s)", errUsage, s)
}

func runNode(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "repair" {
		return runNodeRepair(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "restore" {
		return runNodeRestore(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o node.Options
	walSync, logLevel, logFormat := nodeFlags(fs, &o)
	var sf serveFlags
	sf.register(fs)
	var rf replicateFlags
	rf.register(fs)
	ignoreFleet := fs.Bool("ignore-fleet-config", false, "with --replicate-to: keep this node's own retention and no ingest rate limit instead of applying the fleet configuration the coordinators send")
	queryTunnel := fs.Bool("query-tunnel", true, "with --replicate-to: keep a query tunnel open to every coordinator, so they can query this node behind NAT")
	var smf selfMonitorFlags
	smf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	log, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	if o.WALSync, err = parseWALSync(*walSync); err != nil {
		return err
	}
	if _, err := sf.validate(); err != nil {
		return err
	}
	if _, err := sf.tokens(); err != nil {
		return err
	}
	if err := smf.validate(); err != nil {
		return err
	}
	ro, err := rf.options(o.DataDir, log)
	if err != nil {
		return err
	}
	certID, err := rf.replicationIdentity()
	if err != nil {
		return err
	}
	if o.NodeID != "" {
		if err := checkCertNamesNode(rf.cert, certID, o.NodeID, "--node-id"); err != nil {
			return err
		}
	}
	tp, err := sf.telemetry("node", o.NodeID)
	if err != nil {
		return err
	}
	defer stopTelemetry(tp, log)
	o.Logger = log
	o.MeterProvider, o.TracerProvider = tp.MeterProvider(), tp.TracerProvider()
	if ro != nil {
		ro.MeterProvider, ro.TracerProvider = o.MeterProvider, o.TracerProvider
	}
	// A restore that did not finish left a half-filled store and no
	// cursor: serving or shipping from it would be wrong.
	if err := replicator.CheckRestored(o.DataDir); err != nil {
		return err
	}
	var ship *shipping
	var fleetTarget atomic.Pointer[node.Node]
	if ro != nil && !*ignoreFleet {
		ro.OnConfig = fleetConfigHook(&fleetTarget, log)
	}
	if ro != nil {
		if ship, err = newShipping(ro, &o); err != nil {
			return err
		}
	}
	n, err := node.Open(o)
	if err != nil {
		return err
	}
	// Without --node-id, the id is the one the data dir was created with.
	if err := checkCertNamesNode(rf.cert, certID, n.NodeID(), "the node id its data dir was created with"); err != nil {
		n.Close()
		return err
	}
	fleetTarget.Store(n)
	var repl func() *pb.ReplicationStatus
	if ship != nil {
		repl = ship.status
	}
	grpcAPI := grpcapi.New(n, grpcapi.Options{MaxPointsPerRequest: sf.limits.MaxPointsPerRequest, Status: nodeStatus(n, version, repl)})
	extra := func(mux *http.ServeMux, st *httpapi.Stats) {
		mux.Handle("GET /metrics", metricsHandler(tp, grpcAPI, st))
		registerHealth(mux, nodeReady(n))
	}
	sf.limits.Labels = o.Limits // the HTTP parsers refuse what the node would
	gh := nodeGRPCHealth(n)
	fe, err := sf.start(n, gh.register(grpcAPI.Register), extra, log)
	if err != nil {
		gh.close()
		n.Close()
		return err
	}
	if ship != nil {
		ship.start(n, log)
	}
	var tunnels *background
	if ro != nil && *queryTunnel {
		if tunnels, err = startQueryTunnels(ro, n.NodeID(), grpcAPI.QueryServer, log); err != nil {
			gh.close()
			fe.stop(10 * time.Second)
			ship.stop()
			n.Close()
			return err
		}
	}
	selfMon := smf.start(n, tp, log)
	log.Info("node ready", append(fe.addrs, "data_dir", o.DataDir, "version", version, "replicate_to", rf.targets)...)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
		log.Info("shutting down: draining requests, flushing the head")
	case err = <-fe.errc:
		log.Error("listener stopped", "err", err)
	}
	gh.close() // NOT_SERVING while the listeners drain
	fe.stop(10 * time.Second)
	tunnels.stop()
	selfMon.stop()
	ship.stop()
	if cerr := n.Close(); cerr != nil {
		return fmt.Errorf("close node: %w", cerr)
	}
	log.Info("node stopped cleanly")
	return err
}

// fleetConfigHook is the replicator's OnConfig: it applies the fleet
// configuration the coordinators send to the node in target (stored once
// the node is open, before shipping starts). Retention is validated by the
// node; a configuration it refuses leaves the retention as it was. The
// rollup tiers are informational: the node always computes both.
func fleetConfigHook(target *atomic.Pointer[node.Node], log *slog.Logger) func(replicator.EdgeConfig) {
	return func(c replicator.EdgeConfig) {
		n := target.Load()
		if n == nil {
			log.Error("fleet config not applied: the node is not open", "version", c.Version)
			return
		}
		if err := n.SetRetention(c.RetentionRaw, c.Retention1h, c.Retention1d); err != nil {
			log.Error("fleet config: retention not applied", "version", c.Version, "err", err)
		}
		n.SetRateLimit(c.RateLimitPointsPerSec, c.RateLimitBurstPoints)
		raw, hourly, daily := n.Retention()
		log.Info("fleet config applied", "version", c.Version, "retention_raw", raw, "retention_1h", hourly, "retention_1d", daily,
			"rate_limit_points_per_sec", c.RateLimitPointsPerSec, "rate_limit_burst_points", c.RateLimitBurstPoints,
			"rollup_hourly", c.RollupHourly, "rollup_daily", c.RollupDaily)
	}
}

func runCompact(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "./data", "data directory of a stopped node")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(*dir); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	n, err := node.Open(node.Options{DataDir: *dir})
	if err != nil {
		return err
	}
	if err := n.Flush(); err != nil {
		n.Close()
		return err
	}
	sst, err := n.CompactStore()
	var points int64
	if err == nil {
		points, err = n.StoredPoints()
	}
	st := n.Status()
	if cerr := n.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(map[string]int64{
		"sst_bytes": sst, "points": points, "series": int64(st.Series),
	})
}
