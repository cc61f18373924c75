package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/tributarydb/tributary/internal/memlimit"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// nodeFlagValues holds what the node's flags set beyond the fields of
// node.Options.
type nodeFlagValues struct {
	o                            *node.Options
	walSync, logLevel, logFormat string
	walFormat                    uint
	idleCompact                  bool
	// sealFixed: --wal-segment-age or --wal-segment-min-points was given,
	// so the fleet's lag budget does not replace the node's seal policy.
	sealFixed bool
}

// nodeFlags binds the node's command-line flags to o, and the others to
// the returned values.
func nodeFlags(fs *flag.FlagSet, o *node.Options) *nodeFlagValues {
	v := &nodeFlagValues{o: o}
	fs.StringVar(&o.DataDir, "data-dir", "./data", "directory for the WAL and the store")
	fs.StringVar(&o.NodeID, "node-id", "", "this node's id in WAL segments and in the fleet (default: the id the data dir was created with, or \"local\")")
	fs.StringVar(&v.walSync, "wal-sync", "always", "WAL fsync policy: 'always' (fsync before every acknowledgement, group commit) or 'interval:DURATION' (faster; a power cut may lose up to DURATION of acknowledged writes)")
	fs.Int64Var(&o.WALSegmentBytes, "wal-segment-bytes", 4<<20, "cut a WAL segment at this size")
	fs.DurationVar(&o.WALSegmentAge, "wal-segment-age", node.DefaultWALSegmentAge, "seal a WAL segment (and ship it, with --replicate-to) once its first record is this old: the lag budget; given explicitly, it (and --wal-segment-min-points) wins over the fleet's lag budget")
	fs.Int64Var(&o.WALSegmentMinPoints, "wal-segment-min-points", 0, "a segment --wal-segment-age old with fewer points than this waits for more, up to 4 x --wal-segment-age, so that a slow edge ships fewer, fuller segments (0: none; given explicitly, wins over the fleet's)")
	fs.UintVar(&v.walFormat, "wal-format", uint(wal.FormatV2), "WAL segment format written: 2, compressed records (coordinators from this version on read it), or 1, raw records (for edges that ship to older coordinators); both are read")
	fs.Int64Var(&o.HeadMaxBytes, "head-max-bytes", 32<<20, "memory bound for unflushed samples")
	fs.DurationVar(&o.IdleFlush, "idle-flush", 50*time.Second, "after this long without a write (default 50s: converged within a minute of the last write), flush the head and the store and release the WAL segments replication no longer needs, so the data dir shrinks to its compressed size (negative: never)")
	fs.BoolVar(&v.idleCompact, "idle-compact", true, "after each idle flush that followed writes, merge what the store's flushes rewrote (rollup packs, postings, series) into its bottom level, so the data dir at rest holds it once (rewrites those files once per idle period; the chunks are left to RocksDB; a write cuts it short)")
	fs.Int64Var(&o.StoreFlushWALBytes, "store-flush-wal-bytes", 0, "flush the store's memtables to disk, and release the WAL segments they cover, once those segments hold this many bytes (larger: less rewriting of the store, longer replay after a crash; 0: 8 MiB with --wal-format 2, 32 MiB with 1)")
	fs.IntVar(&o.HeadChunkSamples, "head-chunk-samples", 480, "samples per head chunk (chunks also close at each hour boundary)")
	fs.DurationVar(&o.OutOfOrderWindow, "ooo-window", time.Hour, "accept samples this much older than their series' newest")
	fs.DurationVar(&o.FutureWindow, "future-window", 10*time.Minute, "reject samples further than this ahead of the clock")
	fs.DurationVar(&o.RetentionRaw, "retention-raw", 15*24*time.Hour, "keep raw samples this long")
	fs.DurationVar(&o.Retention1h, "retention-1h", 730*24*time.Hour, "keep hourly rollups this long")
	fs.DurationVar(&o.Retention1d, "retention-1d", 3650*24*time.Hour, "keep daily rollups this long")
	fs.Int64Var(&o.BlockCacheBytes, "block-cache-bytes", 0, "RocksDB block cache size: it holds the data, index and filter blocks queries read (0: 1/64 of the memory the node may use, the machine's or its cgroup's limit, at least 8 MiB and at most 64 MiB)")
	fs.Int64Var(&o.WriteBufferBytes, "write-buffer-bytes", 4<<20, "RocksDB memtable size per column family")
	fs.IntVar(&o.MaxSeries, "max-series", 100_000, "series limit of this node")
	fs.Int64Var(&o.UnflushedWALMaxBytes, "wal-max-unflushed-bytes", 1<<30, "while the store cannot flush (the node is not ready), writes are still taken until the WAL segments holding unflushed samples reach this size (or unflushed samples reach 2 x --head-max-bytes), then refused (retryable)")
	fs.IntVar(&o.Limits.MaxLabels, "max-labels", labels.DefaultLimits.MaxLabels, "most labels per series, including the metric name")
	fs.IntVar(&o.Limits.MaxNameBytes, "max-label-name-bytes", labels.DefaultLimits.MaxNameBytes, "longest label name, in bytes")
	fs.IntVar(&o.Limits.MaxValueBytes, "max-label-value-bytes", labels.DefaultLimits.MaxValueBytes, "longest label value, in bytes")
	fs.StringVar(&v.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&v.logFormat, "log-format", "text", "text or json")
	return v
}

// parse parses a command line of flags only, sets the options' WALSync
// from --wal-sync, and returns the logger --log-level and --log-format
// describe.
func (v *nodeFlagValues) parse(fs *flag.FlagSet, args []string, stderr io.Writer) (*slog.Logger, error) {
	if err := parseNoArgs(fs, args); err != nil {
		return nil, err
	}
	log, err := newLogger(stderr, v.logLevel, v.logFormat)
	if err != nil {
		return nil, err
	}
	if v.o.WALSync, err = parseWALSync(v.walSync); err != nil {
		return nil, err
	}
	if v.walFormat != uint(wal.FormatV1) && v.walFormat != uint(wal.FormatV2) {
		return nil, fmt.Errorf("%w: --wal-format %d: want 1 or 2", errUsage, v.walFormat)
	}
	v.o.WALFormat = uint8(v.walFormat)
	v.o.NoIdleCompact = !v.idleCompact
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "wal-segment-age" || f.Name == "wal-segment-min-points" {
			v.sealFixed = true
		}
	})
	if v.o.WALSegmentAge <= 0 {
		return nil, fmt.Errorf("%w: --wal-segment-age %v: want a positive duration such as 30s", errUsage, v.o.WALSegmentAge)
	}
	if n := v.o.WALSegmentMinPoints; n < 0 || n > wal.MaxMinSegmentPoints {
		return nil, fmt.Errorf("%w: --wal-segment-min-points %d: want 0..%d", errUsage, n, wal.MaxMinSegmentPoints)
	}
	return log, nil
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
	c, err := parseNodeArgs(args, stderr)
	if err != nil {
		return err
	}
	defer c.startMemoryLimit()()
	tp, err := c.sf.telemetry("node", c.o.NodeID)
	if err != nil {
		return err
	}
	defer stopTelemetry(tp, c.log)
	c.o.Logger = c.log
	c.o.MeterProvider, c.o.TracerProvider = tp.MeterProvider(), tp.TracerProvider()
	if c.ro != nil {
		c.ro.MeterProvider, c.ro.TracerProvider = c.o.MeterProvider, c.o.TracerProvider
	}
	n, ship, err := c.open()
	if err != nil {
		return err
	}
	return c.serve(n, ship, tp)
}

// nodeCmd is `tributary node` with its flags parsed and checked.
type nodeCmd struct {
	o           node.Options
	sf          serveFlags
	rf          replicateFlags
	smf         selfMonitorFlags
	mqf         mqttFlags
	rulesf      rulesFlags
	ignoreFleet bool
	// fleetRules passes the fleet's rule groups to the rule manager (nil
	// without replication or with --ignore-fleet-config), kept in
	// fleetFile.
	fleetRules  *fleetRules
	fleetFile   string
	sealFixed   bool // --wal-segment-age or --wal-segment-min-points given
	queryTunnel bool
	goMemLimit  int64 // --go-memory-limit
	log         *slog.Logger
	ro          *replicator.Options // nil: no replication
	certID      string              // the node id --replicate-cert names
}

// nodeGoMemoryBase is the Go memory of a node beyond its head (series
// index, request and parser buffers, flush scratch) that the default
// --go-memory-limit allows for.
const nodeGoMemoryBase = 32 << 20

// startMemoryLimit puts the Go runtime's soft memory limit of
// --go-memory-limit in place and returns what removes it. GOMEMLIMIT in the
// environment wins: the runtime has applied it already.
func (c *nodeCmd) startMemoryLimit() (stop func()) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		c.log.Info("GOMEMLIMIT is set: --go-memory-limit is ignored", "GOMEMLIMIT", v)
		return func() {}
	}
	return memlimit.Start(memlimit.Options{Budget: c.goMemoryBudget(), Logger: c.log})
}

// goMemoryBudget is the Go memory budget of --go-memory-limit: its value,
// 2 x --head-max-bytes + nodeGoMemoryBase when it is zero, none (<= 0) when
// negative. The limit in place is higher while the live heap outgrows it.
func (c *nodeCmd) goMemoryBudget() int64 {
	if c.goMemLimit != 0 {
		return c.goMemLimit
	}
	return 2*cmp.Or(c.o.HeadMaxBytes, 32<<20) + nodeGoMemoryBase
}

// parseNodeArgs parses and checks the flags of `tributary node`.
func parseNodeArgs(args []string, stderr io.Writer) (*nodeCmd, error) {
	fs := newFlagSet("node", stderr, "")
	c := &nodeCmd{}
	nf := nodeFlags(fs, &c.o)
	c.sf.register(fs)
	c.rf.register(fs)
	fs.BoolVar(&c.ignoreFleet, "ignore-fleet-config", false, "with --replicate-to: keep this node's own retention, seal policy (--wal-segment-age), no ingest rate limit and no rule groups of the fleet instead of applying the fleet configuration the coordinators send")
	fs.BoolVar(&c.queryTunnel, "query-tunnel", true, "with --replicate-to: keep a query tunnel open to every coordinator, so they can query this node behind NAT")
	fs.Int64Var(&c.goMemLimit, "go-memory-limit", 0, "soft limit, in bytes, of the Go runtime's memory (heap and stacks; RocksDB's memtables and block cache come on top): the garbage collector works to stay within it, and it follows the live heap (+25%) when that outgrows it, so a node holding more never collects continuously (0: 2 x --head-max-bytes + 32 MiB; negative: none, the heap grows to twice what is live; GOMEMLIMIT, when set, takes precedence)")
	c.smf.register(fs)
	c.mqf.register(fs)
	c.rulesf.register(fs)
	var err error
	if c.log, err = nf.parse(fs, args, stderr); err != nil {
		return nil, err
	}
	c.sealFixed = nf.sealFixed
	if err := c.sf.check(); err != nil {
		return nil, err
	}
	if err := errors.Join(c.smf.validate(), c.rulesf.validate(c.rf.targets != "" && !c.ignoreFleet)); err != nil {
		return nil, err
	}
	if err := c.mqf.validate(c.o.Limits, c.sf.limits); err != nil {
		return nil, err
	}
	if c.ro, err = c.rf.options(c.o.DataDir, c.log); err != nil {
		return nil, err
	}
	if c.certID, err = c.rf.replicationIdentity(); err != nil {
		return nil, err
	}
	if c.o.NodeID != "" {
		if err := checkCertNamesNode(c.rf.cert, c.certID, c.o.NodeID, "--node-id"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// open opens the node, with its Shipper when it replicates (created first:
// its cursor decides which WAL segments the node keeps).
func (c *nodeCmd) open() (*node.Node, *shipping, error) {
	// A restore that did not finish left a half-filled store and no
	// cursor: serving or shipping from it would be wrong.
	if err := replicator.CheckRestored(c.o.DataDir); err != nil {
		return nil, nil, err
	}
	var ship *shipping
	var fleetTarget atomic.Pointer[node.Node]
	if c.ro != nil {
		c.fleetRules, c.fleetFile = fleetHooks(c.ro, &fleetTarget, c.o.DataDir, c.ignoreFleet, c.sealFixed, c.log)
	}
	if c.ro != nil {
		var err error
		if ship, err = newShipping(c.ro, &c.o); err != nil {
			return nil, nil, err
		}
	}
	n, err := node.Open(c.o)
	if err != nil {
		return nil, nil, err
	}
	// Without --node-id, the id is the one the data dir was created with.
	if err := checkCertNamesNode(c.rf.cert, c.certID, n.NodeID(), "the node id its data dir was created with"); err != nil {
		n.Close()
		return nil, nil, err
	}
	fleetTarget.Store(n)
	return n, ship, nil
}

// serve serves the node's APIs, ships and keeps the query tunnels open
// until SIGINT or SIGTERM or a listener fails, then stops it all and
// closes the node.
func (c *nodeCmd) serve(n *node.Node, ship *shipping, tp *telemetry.Provider) error {
	var repl func() *pb.ReplicationStatus
	if ship != nil {
		repl = ship.status
	}
	grpcAPI := grpcapi.New(n, grpcapi.Options{MaxPointsPerRequest: c.sf.limits.MaxPointsPerRequest, Status: nodeStatus(n, version, repl)})
	extra := func(mux *http.ServeMux, st *httpapi.Stats) {
		mux.Handle("GET /metrics", metricsHandler(tp, grpcAPI, st))
		httpapi.RegisterHealth(mux, nodeReady(n))
	}
	c.sf.limits.Labels = c.o.Limits // the HTTP parsers refuse what the node would
	rr, err := c.rulesf.open(n, &c.sf, c.fleetFile, c.o.MeterProvider, c.log)
	if err != nil {
		n.Close()
		return err
	}
	c.fleetRules.attach(rr)
	rr.serveGroups(grpcAPI.QueryServer)
	gh := nodeGRPCHealth(n)
	fe, err := c.sf.start(n, gh.Register(grpcAPI.Register), extra, c.log)
	if err != nil {
		rr.stop()
		gh.Close()
		n.Close()
		return err
	}
	if ship != nil {
		ship.start(n, c.log)
	}
	var tunnels *background
	if c.ro != nil && c.queryTunnel {
		if tunnels, err = startQueryTunnels(c.ro, n.NodeID(), grpcAPI.QueryServer, c.log); err != nil {
			gh.Close()
			fe.stop(10 * time.Second)
			rr.stop()
			ship.stop()
			n.Close()
			return err
		}
	}
	selfMon := c.smf.start(n, tp, c.log)
	mqttIn := c.mqf.run(n, n.NodeID(), c.o.MeterProvider, c.log)
	rr.start(c.log)
	c.log.Info("node ready", append(fe.addrs, "data_dir", c.o.DataDir, "version", version, "replicate_to", c.rf.targets)...)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
		c.log.Info("shutting down: draining requests, flushing the head")
	case err = <-fe.errc:
		c.log.Error("listener stopped", "err", err)
	}
	gh.Close() // NOT_SERVING while the listeners drain
	fe.stop(10 * time.Second)
	tunnels.stop()
	mqttIn.stop()
	rr.stop()
	selfMon.stop()
	ship.stop()
	if cerr := n.Close(); cerr != nil {
		return fmt.Errorf("close node: %w", cerr)
	}
	c.log.Info("node stopped cleanly")
	return err
}

// fleetHooks sets the Shipper's hooks of the fleet configuration and the
// fleet's rule groups, and returns the rule groups' receiver and the file
// that keeps them; with ignore, none (nil and ""). sealFixed: the
// operator fixed the node's seal policy (fleetConfigHook).
func fleetHooks(ro *replicator.Options, target *atomic.Pointer[node.Node], dataDir string, ignore, sealFixed bool, log *slog.Logger) (*fleetRules, string) {
	if ignore {
		return nil, ""
	}
	ro.OnConfig = fleetConfigHook(target, sealFixed, log)
	fr := &fleetRules{log: log.With("component", "rules")}
	ro.OnRuleGroups = fr.hook
	return fr, fleetRulesFile(dataDir)
}

// fleetConfigHook is the replicator's OnConfig: it applies the fleet
// configuration the coordinators send to the node in target (stored once
// the node is open, before shipping starts). Retention is validated by the
// node; a configuration it refuses leaves the retention as it was. The
// lag budget and minimum points per segment become the WAL's seal policy
// unless sealFixed (the operator gave --wal-segment-age or
// --wal-segment-min-points) or the coordinators did not send one. The
// rollup tiers are informational: the node always computes both.
func fleetConfigHook(target *atomic.Pointer[node.Node], sealFixed bool, log *slog.Logger) func(replicator.EdgeConfig) {
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
		switch {
		case c.LagBudget <= 0:
		case sealFixed:
			log.Info("fleet lag budget not applied: --wal-segment-age or --wal-segment-min-points fixes this node's", "version", c.Version,
				"lag_budget", c.LagBudget, "min_segment_points", c.MinSegmentPoints)
		default:
			if err := n.SetSealPolicy(c.LagBudget, int64(min(c.MinSegmentPoints, wal.MaxMinSegmentPoints))); err != nil {
				log.Error("fleet config: lag budget not applied", "version", c.Version, "err", err)
			}
		}
		age, minPoints := n.SealPolicy()
		raw, hourly, daily := n.Retention()
		log.Info("fleet config applied", "version", c.Version, "retention_raw", raw, "retention_1h", hourly, "retention_1d", daily,
			"rate_limit_points_per_sec", c.RateLimitPointsPerSec, "rate_limit_burst_points", c.RateLimitBurstPoints,
			"rollup_hourly", c.RollupHourly, "rollup_daily", c.RollupDaily, "wal_segment_age", age, "wal_segment_min_points", minPoints)
	}
}

func runCompact(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("compact", stderr, "")
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
