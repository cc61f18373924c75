package replicator

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/internal/enum"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/node/labels"
)

// OverflowPolicy says what the Shipper does when the segments it keeps
// for shipping outgrow Options.BudgetBytes.
type OverflowPolicy int

const (
	// OverflowKeepInStore (the default) releases the oldest unshipped
	// segments to the node, which deletes them once they are flushed: their
	// points stay in the node's local store. The released range is recorded
	// as a gap (GapReason BACKLOG_OVERFLOW) with its points, in the cursor
	// and to the cloud, for a later backfill from the store.
	OverflowKeepInStore OverflowPolicy = iota
	// OverflowBlockWriters keeps every segment and makes the node refuse
	// writes (WriteGate returns ErrBacklogFull, a retryable error) until
	// the backlog is back under 90% of the budget.
	OverflowBlockWriters
	// OverflowDropOldest releases the oldest unshipped segments like
	// OverflowKeepInStore, but records them as dropped (GapReason DROPPED):
	// they will not be replicated, and every point in them is counted in
	// Stats.DroppedPoints.
	OverflowDropOldest
)

var overflowPolicyNames = []string{
	OverflowKeepInStore:  "keep-in-store",
	OverflowBlockWriters: "block-writers",
	OverflowDropOldest:   "drop-oldest",
}

func (p OverflowPolicy) String() string { return enum.Name(overflowPolicyNames, p, "OverflowPolicy") }

// ParseOverflowPolicy parses the names String returns.
func ParseOverflowPolicy(s string) (OverflowPolicy, error) {
	for _, p := range []OverflowPolicy{OverflowKeepInStore, OverflowBlockWriters, OverflowDropOldest} {
		if s == p.String() {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown overflow policy %q (want keep-in-store, block-writers or drop-oldest)", s)
}

// Options configure a Shipper. The zero value of a field means its
// default.
type Options struct {
	// Targets are the coordinators' gRPC addresses (host:port, or any
	// grpc.NewClient target). The Shipper uses one at a time and moves to
	// the next after a failure. Required.
	Targets []string
	// TLS is the client TLS configuration: the CA that signs the
	// coordinators' certificates, and this node's own certificate
	// (mTLS; the coordinators derive the node's identity from it).
	// Exactly one of TLS and Insecure must be set.
	TLS *tls.Config
	// Insecure ships in plaintext; only for tests and local mode.
	Insecure bool
	// DialOptions are added to the Shipper's own (tests use a custom
	// dialer).
	DialOptions []grpc.DialOption
	// SoftwareVersion is sent in the hello.
	SoftwareVersion string
	// QueryAddr is sent in the hello: the address (host:port) where the
	// coordinators can reach this node's QueryService; empty when they
	// cannot.
	QueryAddr string

	// CursorPath is the cursor file (see package doc). Required.
	CursorPath string
	// FS is the file system the cursor and the segment summaries beside
	// it live on (internal/vfs): nil is the real one; crash tests pass a
	// vfs.CrashFS.
	FS vfs.FS

	// WindowSegments and WindowBytes bound what is sent but not yet
	// acknowledged: segments, and compressed bytes (one segment may exceed
	// WindowBytes on its own). Defaults 8 and 16 MiB.
	WindowSegments int
	WindowBytes    int64
	// MaxPartBytes bounds the data of one message (default 1 MiB, and never
	// more than the coordinator announces).
	MaxPartBytes int
	// Compression is the zstd level. Default zstd.SpeedDefault (on sensor
	// data about as fast as SpeedFastest and 20% smaller).
	Compression zstd.EncoderLevel
	// ShipAsWritten ships WAL segments as the node wrote them. By default
	// a segment of compressed records is shipped compacted, its records
	// merged into one (segment.Compact): at a few points a second that
	// ships about a third of the bytes.
	ShipAsWritten bool

	// Reconnection backoff: attempt k waits a random duration in
	// [d*(1-BackoffJitter), d] with d = min(BackoffInitial*2^k, BackoffMax).
	// Defaults 500ms, 1m, 0.5.
	BackoffInitial, BackoffMax time.Duration
	BackoffJitter              float64
	// KeepaliveTime and KeepaliveTimeout are the gRPC keepalive pings on
	// the connection (also when idle, to keep NAT mappings and to notice
	// a dead peer). Defaults 30s and 10s.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// AckTimeout: a stream that makes no progress (no welcome, no part
	// sent, no acknowledgement) for this long while something is
	// outstanding is dead and is replaced. It catches a half-open peer
	// that stopped reading. Default 30s.
	AckTimeout time.Duration

	// MaxBytesPerSec limits the compressed bytes shipped per second (0:
	// unlimited). BacklogBytesPerSec limits, further, the segments shipped
	// from behind the fresh tail after an outage (0: only MaxBytesPerSec).
	MaxBytesPerSec, BacklogBytesPerSec int64
	// FreshSegments: the newest this many sealed segments ship before any
	// older one, so that after an outage fresh data arrives first and the
	// backlog drains behind it, oldest first. Default 4; negative ships
	// strictly in sequence order.
	FreshSegments int

	// BudgetBytes bounds the sealed segments kept on disk for shipping.
	// Default 1 GiB. Overflow says what happens past it.
	BudgetBytes int64
	Overflow    OverflowPolicy

	// PollInterval is how often the node's WAL is checked for newly
	// sealed segments and the budget enforced. Default 250ms.
	PollInterval time.Duration

	// AnnounceInterval is how often the series the node created since the
	// last announcement are announced to the coordinator (with the
	// registration watermark), when the Source is a SeriesSource and the
	// coordinator's welcome lists the feature "announce". Default 1s;
	// negative: never announce (the catalog then learns the node's series
	// from its segments only, and queries keep asking the node).
	AnnounceInterval time.Duration

	// OnConfig, if set, receives the fleet configuration each time the
	// cloud sends one with a higher version than the last (see
	// EdgeConfig; never version 0). It is called from the Shipper's
	// goroutine: it must be fast and must not call the Shipper.
	OnConfig func(EdgeConfig)
	// OnRuleGroups, if set, receives the fleet's rule groups that select
	// this node (by Labels) each time the cloud sends a set with a higher
	// version than the last handed over since the Shipper started (the
	// receiver keeps its own version across restarts). Called from the
	// Shipper's goroutine: it must be fast and must not call the Shipper.
	OnRuleGroups func(RuleGroups)
	// Labels are the node's labels (--edge-label), sent in every hello:
	// the catalog records them and selects the fleet's rule groups by
	// them. At most 32; names as for series labels.
	Labels map[string]string

	Logger *slog.Logger

	// MeterProvider and TracerProvider give the component its metrics and
	// spans (internal/telemetry); nil: no-op providers.
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// Now is the clock that dates the lag (against segment times).
	// Default time.Now.
	Now func() time.Time
}

// Validate fills in defaults and rejects impossible values.
func (o *Options) Validate() error {
	bad := checkLink(o.Targets, o.TLS, o.Insecure)
	if o.CursorPath == "" {
		bad = append(bad, "CursorPath is required")
	}
	bad = append(bad, checkLabels(o.Labels)...)
	defInt := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	defInt64 := func(p *int64, v int64) {
		if *p == 0 {
			*p = v
		}
	}
	defDur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	defInt(&o.WindowSegments, 8)
	defInt64(&o.WindowBytes, 16<<20)
	defInt(&o.MaxPartBytes, 1<<20)
	o.Compression = cmp.Or(o.Compression, zstd.SpeedDefault)
	defDur(&o.BackoffInitial, 500*time.Millisecond)
	defDur(&o.BackoffMax, time.Minute)
	o.BackoffJitter = cmp.Or(o.BackoffJitter, 0.5)
	defDur(&o.KeepaliveTime, 30*time.Second)
	defDur(&o.KeepaliveTimeout, 10*time.Second)
	defDur(&o.AckTimeout, 30*time.Second)
	defInt(&o.FreshSegments, 4)
	defInt64(&o.BudgetBytes, 1<<30)
	defDur(&o.PollInterval, 250*time.Millisecond)
	defDur(&o.AnnounceInterval, time.Second)
	if o.FS == nil {
		o.FS = vfs.OS{}
	}
	telemetry.Defaults(&o.Logger, &o.MeterProvider, &o.TracerProvider)
	if o.Now == nil {
		o.Now = time.Now
	}
	switch {
	case o.WindowSegments < 1 || o.WindowBytes < 1:
		bad = append(bad, fmt.Sprintf("window of %d segments, %d bytes", o.WindowSegments, o.WindowBytes))
	case o.MaxPartBytes < 1024:
		bad = append(bad, fmt.Sprintf("MaxPartBytes %d is below 1 KiB", o.MaxPartBytes))
	}
	if o.BackoffInitial < 0 || o.BackoffMax < o.BackoffInitial || o.BackoffJitter < 0 || o.BackoffJitter > 1 {
		bad = append(bad, fmt.Sprintf("backoff initial %s, max %s, jitter %g (want 0 < initial <= max, 0 <= jitter <= 1)",
			o.BackoffInitial, o.BackoffMax, o.BackoffJitter))
	}
	if o.KeepaliveTime < 0 || o.KeepaliveTimeout < 0 || o.AckTimeout < 0 || o.PollInterval < 0 {
		bad = append(bad, "negative keepalive, ack timeout or poll interval")
	}
	if o.MaxBytesPerSec < 0 || o.BacklogBytesPerSec < 0 {
		bad = append(bad, "negative rate limit")
	}
	if o.Compression < zstd.SpeedFastest || o.Compression > zstd.SpeedBestCompression {
		bad = append(bad, fmt.Sprintf("unknown zstd level %d", int(o.Compression)))
	}
	if o.BudgetBytes < 0 {
		bad = append(bad, fmt.Sprintf("BudgetBytes %d is negative", o.BudgetBytes))
	}
	if o.Overflow < OverflowKeepInStore || o.Overflow > OverflowDropOldest {
		bad = append(bad, fmt.Sprintf("unknown overflow policy %d", int(o.Overflow)))
	}
	if len(bad) > 0 {
		return errors.New("replicator options: " + strings.Join(bad, "; "))
	}
	return nil
}

// checkLink checks the coordinators' addresses and the link security.
func checkLink(targets []string, tlsCfg *tls.Config, insecure bool) []string {
	var bad []string
	if len(targets) == 0 {
		bad = append(bad, "Targets is empty")
	}
	for i, t := range targets {
		if strings.TrimSpace(t) == "" {
			bad = append(bad, fmt.Sprintf("Targets[%d] is empty", i))
		}
	}
	if (tlsCfg == nil) == !insecure {
		bad = append(bad, "set exactly one of TLS and Insecure")
	}
	return bad
}

// MaxLabels bounds Options.Labels (the catalog's bound on a node's labels).
const MaxLabels = 32

// checkLabels checks the node's labels as the catalog will: at most
// MaxLabels, names as for series labels, values not empty, valid UTF-8,
// lengths within labels.DefaultLimits.
func checkLabels(m map[string]string) []string {
	var bad []string
	if len(m) > MaxLabels {
		bad = append(bad, fmt.Sprintf("%d labels, limit is %d", len(m), MaxLabels))
	}
	lim := labels.DefaultLimits
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		switch {
		case !validLabelName(k) || len(k) > lim.MaxNameBytes:
			bad = append(bad, fmt.Sprintf("label name %.64q: want [A-Za-z_] then [A-Za-z0-9_.:-], at most %d bytes", k, lim.MaxNameBytes))
		case v == "":
			bad = append(bad, fmt.Sprintf("label %q has an empty value", k))
		case len(v) > lim.MaxValueBytes || !utf8.ValidString(v):
			bad = append(bad, fmt.Sprintf("label %q: the value must be UTF-8 of at most %d bytes", k, lim.MaxValueBytes))
		}
	}
	return bad
}

func validLabelName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(i > 0 && ((c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':'))
		if !ok {
			return false
		}
	}
	return true
}
