package node

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/tributarydb/tributary/internal/memlimit"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
)

// DefaultNodeID names a node whose options and data directory name none.
const DefaultNodeID = "local"

// The block cache a node takes by default: a share of the memory it may
// use, within bounds.
const (
	minBlockCacheBytes    = 8 << 20
	maxBlockCacheBytes    = 64 << 20
	blockCacheMemoryShare = 64 // 1/64 of the memory
)

// DefaultBlockCacheBytes is the RocksDB block cache of a node whose
// options give none: 1/64 of the memory the process may use (the machine's,
// or its cgroup's limit when smaller; memlimit.System), at least 8 MiB and
// at most 64 MiB — 8 MiB on a 512 MiB Raspberry Pi, 64 MiB from 4 GiB up.
// The cache holds what queries read (data, index and filter blocks), so a
// node whose queries touch less never fills it.
func DefaultBlockCacheBytes() int64 {
	return blockCacheFor(memlimit.System())
}

// blockCacheFor is DefaultBlockCacheBytes for a process that may use mem
// bytes (ok false: unknown).
func blockCacheFor(mem int64, ok bool) int64 {
	if !ok {
		return minBlockCacheBytes
	}
	return min(max(mem/blockCacheMemoryShare, minBlockCacheBytes), maxBlockCacheBytes)
}

// Options configure a Node. The zero value of every field means its
// default; defaults are sized for a 512 MiB Raspberry Pi.
type Options struct {
	// DataDir holds the WAL (DataDir/wal) and the RocksDB store (DataDir/db).
	DataDir string
	// NodeID names this node in WAL segments and, later, in the fleet. A
	// data directory keeps the id it was created with; empty means that one
	// (DefaultNodeID for a new directory).
	NodeID string
	Logger *slog.Logger

	// MeterProvider and TracerProvider give the component its metrics and
	// spans (internal/telemetry); nil: no-op providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider

	// WALSync: the zero value fsyncs before every acknowledgement (group
	// commit). Interval > 0 fsyncs at most that often and may lose up to
	// that much acknowledged data on power loss.
	WALSync         wal.SyncPolicy
	WALSegmentBytes int64 // default 4 MiB
	// WALSegmentAge and WALSegmentMinPoints are the WAL's seal policy
	// (wal.Options MaxSegmentAge and MinSegmentPoints): a segment is
	// sealed, and can be shipped, once its first record is WALSegmentAge
	// old (default DefaultWALSegmentAge) and it holds WALSegmentMinPoints
	// points (default 0: any), or at wal.MinPointsWaitFactor times the age
	// whatever it holds. SetSealPolicy changes both while the node runs
	// (a fleet's lag budget).
	WALSegmentAge       time.Duration
	WALSegmentMinPoints int64
	// WALFormat is the format version of the WAL segments the node writes:
	// wal.FormatV2 (the default), compressed records (package record's
	// kind 2), or wal.FormatV1, raw samples, which coordinators of any
	// version read. The node replays segments of both versions whatever
	// it writes.
	WALFormat uint8
	// HeadChunkSamples closes an open head chunk at this many samples
	// (default 480; chunks also close at every hour boundary).
	HeadChunkSamples int
	// HeadMaxBytes bounds the memory of unflushed samples (compressed head
	// chunks, about 1-2 bytes a sample, and out-of-order buffers, 16 bytes a
	// sample); past it every open chunk is flushed. Default 32 MiB.
	HeadMaxBytes int64
	// ChunkMaxAge closes an open chunk that has been open this long in wall
	// time, so idle series do not pin the WAL. Default 10m.
	ChunkMaxAge time.Duration
	// FlushInterval is how often closed chunks are written to RocksDB. Default 1s.
	FlushInterval time.Duration
	// StoreFlushWALBytes: chunks and rollups go to RocksDB without its WAL,
	// so WAL segments whose samples are all in RocksDB stay until the
	// store's memtables are flushed to disk; the store is flushed once they
	// hold this many bytes (and at idle and shutdown). More means fewer,
	// larger SST files (less rewriting) but a longer replay after a crash.
	// Default 8 MiB with WALFormat 2, 32 MiB with 1.
	StoreFlushWALBytes int64
	// IdleFlush: after this long without a write the whole head and the
	// store are flushed and the WAL segments replication no longer needs
	// are released, so that the data directory converges to its
	// compressed size. Default 50s, so that with the flush itself it has
	// converged within a minute of the last write; negative never.
	IdleFlush time.Duration
	// NoIdleCompact turns off the compaction that follows each idle flush
	// (compact.go): it merges the store's level-0 and upper-level files
	// but the chunks' into its bottom level, so that what store flushes
	// rewrite (rollup packs, postings) is held once at rest, at the cost of
	// rewriting those files once per idle period that followed writes.
	NoIdleCompact bool

	// A store call that fails with a corruption makes the store unhealthy
	// at once; other failures (a full disk, an I/O error) once they have
	// repeated FailuresBeforeUnhealthy times (default 3) over at least
	// FailingBeforeUnhealthy (default 10s). See health.go.
	FailuresBeforeUnhealthy int
	FailingBeforeUnhealthy  time.Duration
	// UnflushedWALMaxBytes bounds, while the store is unhealthy, the WAL
	// segments holding samples not flushed to it: past it writes are
	// refused (retryable). Default 1 GiB.
	UnflushedWALMaxBytes int64

	// OutOfOrderWindow: a sample older than its series' newest sample by
	// more than this is rejected as too old. Default 1h.
	OutOfOrderWindow time.Duration
	// FutureWindow: a sample more than this ahead of the node's clock is
	// rejected. Default 10m.
	FutureWindow time.Duration

	// Retention per tier: raw samples, hourly and daily rollups. Defaults
	// 15 days, 2 years, 10 years. Retention works by whole partitions, so
	// data is kept up to one partition longer.
	RetentionRaw, Retention1h, Retention1d time.Duration
	// RetentionInterval is how often retention runs. Default 1h.
	RetentionInterval time.Duration

	// Store sizing; see package store for the memory bound they imply.
	PartitionDuration time.Duration // raw chunk partition, default 24h
	BlockCacheBytes   int64         // default DefaultBlockCacheBytes()
	WriteBufferBytes  int64         // default 4 MiB

	Limits    labels.Limits // default labels.DefaultLimits
	MaxSeries int           // default 100,000

	// WALFS is the file system the WAL lives on: nil is the real one; tests
	// use a crash-simulating one (vfs.CrashFS, internal/vfs).
	WALFS wal.FS

	// WALRetention, if set, is asked before WAL segments are removed:
	// segments with a sequence at or above the number it returns stay on
	// disk even once all their samples are in RocksDB (0 keeps every
	// segment). The replicator sets it to keep segments until the cloud
	// acknowledges them. It is called from the flush goroutine, also
	// during Open, and must be fast and not call the Node.
	WALRetention func() uint64
	// WriteGate, if set, is asked at the start of every Write; an error
	// refuses the whole write with that error and stores nothing. The
	// replicator's block-writers overflow policy sets it; an error that
	// matches model.ErrOverloaded (errors.Is) tells clients to retry later. It
	// must be fast and not call the Node.
	WriteGate func() error

	// Now is the clock (tests). Default time.Now.
	Now func() time.Time
}

// Validate fills defaults and rejects impossible values.
func (o *Options) Validate() error {
	if o.DataDir == "" {
		return errors.New("node options: DataDir is required")
	}
	telemetry.Defaults(&o.Logger, &o.MeterProvider, &o.TracerProvider)
	o.WALSegmentBytes = cmp.Or(o.WALSegmentBytes, 4<<20)
	o.WALSegmentAge = cmp.Or(o.WALSegmentAge, DefaultWALSegmentAge)
	o.WALFormat = cmp.Or(o.WALFormat, wal.FormatV2)
	o.HeadChunkSamples = cmp.Or(o.HeadChunkSamples, 480)
	o.HeadMaxBytes = cmp.Or(o.HeadMaxBytes, 32<<20)
	if o.BlockCacheBytes == 0 {
		o.BlockCacheBytes = DefaultBlockCacheBytes()
	}
	o.ChunkMaxAge = cmp.Or(o.ChunkMaxAge, 10*time.Minute)
	o.FlushInterval = cmp.Or(o.FlushInterval, time.Second)
	if o.StoreFlushWALBytes == 0 {
		// About as long a replay after a crash either way: 8 MiB of
		// compressed records hold 10-25 M points, 32 MiB of raw ones 3 M.
		o.StoreFlushWALBytes = 32 << 20
		if o.WALFormat == wal.FormatV2 {
			o.StoreFlushWALBytes = 8 << 20
		}
	}
	o.IdleFlush = cmp.Or(o.IdleFlush, 50*time.Second)
	o.FailuresBeforeUnhealthy = cmp.Or(o.FailuresBeforeUnhealthy, 3)
	o.FailingBeforeUnhealthy = cmp.Or(o.FailingBeforeUnhealthy, 10*time.Second)
	o.UnflushedWALMaxBytes = cmp.Or(o.UnflushedWALMaxBytes, 1<<30)
	o.OutOfOrderWindow = cmp.Or(o.OutOfOrderWindow, time.Hour)
	o.FutureWindow = cmp.Or(o.FutureWindow, 10*time.Minute)
	o.RetentionRaw = cmp.Or(o.RetentionRaw, 15*24*time.Hour)
	o.Retention1h = cmp.Or(o.Retention1h, 730*24*time.Hour)
	o.Retention1d = cmp.Or(o.Retention1d, 3650*24*time.Hour)
	o.RetentionInterval = cmp.Or(o.RetentionInterval, time.Hour)
	o.PartitionDuration = cmp.Or(o.PartitionDuration, 24*time.Hour)
	if o.Limits == (labels.Limits{}) {
		o.Limits = labels.DefaultLimits
	}
	o.MaxSeries = cmp.Or(o.MaxSeries, 100_000)
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.HeadChunkSamples < 8 || o.HeadChunkSamples > 1<<16:
		return fmt.Errorf("node options: HeadChunkSamples %d out of range [8, 65536]", o.HeadChunkSamples)
	case o.StoreFlushWALBytes < 0:
		return fmt.Errorf("node options: StoreFlushWALBytes %d is negative", o.StoreFlushWALBytes)
	case o.HeadMaxBytes < 1<<20:
		return fmt.Errorf("node options: HeadMaxBytes %d is below 1 MiB", o.HeadMaxBytes)
	case o.WALFormat != wal.FormatV1 && o.WALFormat != wal.FormatV2:
		return fmt.Errorf("node options: WALFormat %d is not a WAL format version (%d or %d)", o.WALFormat, wal.FormatV1, wal.FormatV2)
	case o.WALSegmentBytes < 4096:
		return fmt.Errorf("node options: WALSegmentBytes %d is below 4 KiB", o.WALSegmentBytes)
	case o.WALSegmentAge < 0:
		return fmt.Errorf("node options: WALSegmentAge %s is negative", o.WALSegmentAge)
	case o.WALSegmentMinPoints < 0 || o.WALSegmentMinPoints > wal.MaxMinSegmentPoints:
		return fmt.Errorf("node options: WALSegmentMinPoints %d is outside 0..%d", o.WALSegmentMinPoints, wal.MaxMinSegmentPoints)
	case o.OutOfOrderWindow < 0 || o.FutureWindow < 0:
		return errors.New("node options: OutOfOrderWindow and FutureWindow must not be negative")
	case o.RetentionRaw < time.Hour || o.Retention1h < time.Hour || o.Retention1d < 24*time.Hour:
		return fmt.Errorf("node options: retention raw=%s 1h=%s 1d=%s: raw and 1h need at least 1h, 1d at least 24h",
			o.RetentionRaw, o.Retention1h, o.Retention1d)
	case o.PartitionDuration%time.Hour != 0 || o.PartitionDuration <= 0:
		return fmt.Errorf("node options: PartitionDuration %s must be a positive multiple of 1h", o.PartitionDuration)
	case o.MaxSeries < 1:
		return fmt.Errorf("node options: MaxSeries %d must be positive", o.MaxSeries)
	case o.FailuresBeforeUnhealthy < 1 || o.FailingBeforeUnhealthy < 0:
		return fmt.Errorf("node options: FailuresBeforeUnhealthy %d must be positive and FailingBeforeUnhealthy %s not negative",
			o.FailuresBeforeUnhealthy, o.FailingBeforeUnhealthy)
	case o.UnflushedWALMaxBytes < 1<<20:
		return fmt.Errorf("node options: UnflushedWALMaxBytes %d is below 1 MiB", o.UnflushedWALMaxBytes)
	}
	return nil
}

func (o *Options) walDir() string { return filepath.Join(o.DataDir, "wal") }
func (o *Options) dbDir() string  { return filepath.Join(o.DataDir, "db") }
