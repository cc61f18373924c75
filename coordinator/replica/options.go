package replica

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

// EdgeLabel is the reserved label naming the edge a stored series came from.
const EdgeLabel = "__edge__"

// Defaults for a cloud machine (node's own defaults are sized for a
// Raspberry Pi).
const (
	DefaultHeadMaxBytes     = 256 << 20
	DefaultBlockCacheBytes  = 256 << 20
	DefaultWriteBufferBytes = 64 << 20
	DefaultMaxSeries        = 10_000_000
	// DefaultFutureWindow: a point more than this ahead of the
	// coordinator's clock is refused (counted); anything nearer is the
	// edge's business.
	DefaultFutureWindow = 365 * 24 * time.Hour
	// applyBatchPoints bounds the points of one engine write while a
	// segment is applied, and applyKeepPoints the points an Apply keeps
	// from the verifying pass (more: decoded again as they are written):
	// 1 MiB of points each, per segment being applied.
	applyBatchPoints = 64 << 10
	applyKeepPoints  = 64 << 10
	// copyBatchPoints and copyKeepPoints are the same for a copied file
	// (a few copies run at once): 4 MiB of points a write (four times
	// fewer WAL syncs), and the points of a whole file of the default
	// size (about 10 bytes a point) kept.
	copyBatchPoints = 256 << 10
	copyKeepPoints  = 1 << 20
)

// Options configure a Store.
type Options struct {
	Dir           string // data directory of the replica engine (required)
	CoordinatorID string // this coordinator's node id (required; the engine's node id)
	Logger        *slog.Logger
	// Retention per tier; zero: node's defaults (15 days, 2 years, 10 years).
	// A point older than RetentionRaw (against the coordinator's clock) is
	// refused and counted (Applied.Rejected); there is no other age limit:
	// the engine's out-of-order window is the longest retention, so it is
	// never a retention of its own.
	RetentionRaw, Retention1h, Retention1d time.Duration
	// Engine sizing; zero: DefaultHeadMaxBytes, DefaultBlockCacheBytes,
	// DefaultWriteBufferBytes.
	HeadMaxBytes, BlockCacheBytes, WriteBufferBytes int64
	MaxSeries                                       int // zero: DefaultMaxSeries
	Now                                             func() time.Time
}

// Validate fills defaults and rejects impossible values.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("replica options: Dir is required")
	}
	if o.CoordinatorID == "" {
		return errors.New("replica options: CoordinatorID is required")
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	o.HeadMaxBytes = cmp.Or(o.HeadMaxBytes, DefaultHeadMaxBytes)
	o.BlockCacheBytes = cmp.Or(o.BlockCacheBytes, DefaultBlockCacheBytes)
	o.WriteBufferBytes = cmp.Or(o.WriteBufferBytes, DefaultWriteBufferBytes)
	o.MaxSeries = cmp.Or(o.MaxSeries, DefaultMaxSeries)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.HeadMaxBytes < 0 || o.BlockCacheBytes < 0 || o.WriteBufferBytes < 0 || o.MaxSeries < 0 {
		return fmt.Errorf("replica options: negative sizes (HeadMaxBytes %d, BlockCacheBytes %d, WriteBufferBytes %d, MaxSeries %d)",
			o.HeadMaxBytes, o.BlockCacheBytes, o.WriteBufferBytes, o.MaxSeries)
	}
	// The engine checks the rest (retention minimums, HeadMaxBytes floor).
	no := o.nodeOptions()
	if err := no.Validate(); err != nil {
		return fmt.Errorf("replica options: %w", err)
	}
	return nil
}

// nodeOptions are the engine's options for a replica.
func (o *Options) nodeOptions() node.Options {
	lim := labels.DefaultLimits
	lim.MaxLabels++ // room for EdgeLabel
	no := node.Options{
		DataDir:          o.Dir,
		NodeID:           o.CoordinatorID,
		Logger:           o.Logger.With("component", "replica-engine"),
		HeadMaxBytes:     o.HeadMaxBytes,
		BlockCacheBytes:  o.BlockCacheBytes,
		WriteBufferBytes: o.WriteBufferBytes,
		RetentionRaw:     o.RetentionRaw,
		Retention1h:      o.Retention1h,
		Retention1d:      o.Retention1d,
		FutureWindow:     DefaultFutureWindow,
		Limits:           lim,
		MaxSeries:        o.MaxSeries,
		Now:              o.Now,
		// The idle compaction serves an edge's SD card; a replica store,
		// fed by many edges, leaves its level-0 files to RocksDB's own
		// compactions, as it always has.
		NoIdleCompact: true,
	}
	// node's defaults, so that the out-of-order window can follow them.
	def := node.Options{DataDir: o.Dir}
	_ = def.Validate()
	no.RetentionRaw = cmp.Or(no.RetentionRaw, def.RetentionRaw)
	no.Retention1h = cmp.Or(no.Retention1h, def.Retention1h)
	no.Retention1d = cmp.Or(no.Retention1d, def.Retention1d)
	// Backlogs arrive out of order (newest first), an edge may come back
	// after weeks, and one point from an edge's skewed clock (up to the
	// future window ahead) must not make the series refuse the present:
	// the window spans every retention, so only RetentionRaw limits age.
	no.OutOfOrderWindow = max(no.RetentionRaw, no.Retention1h, no.Retention1d)
	return no
}
