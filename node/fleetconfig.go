package node

import (
	"fmt"
	"github.com/tributarydb/tributary/model"
	"sync"
	"sync/atomic"
	"time"
)

// ErrRateLimited is returned by Write when the write's points exceed what
// the ingest rate limit (SetRateLimit) allows now. Nothing of the write is
// stored. It matches model.ErrOverloaded (errors.Is), so clients retry later as
// they do when the head is full.
var ErrRateLimited error = rateLimitError{}

type rateLimitError struct{}

func (rateLimitError) Error() string { return "node: ingest rate limit reached; retry later" }

// Is makes ErrRateLimited match model.ErrOverloaded.
func (rateLimitError) Is(target error) bool { return target == model.ErrOverloaded }

// fleetState holds the settings that can change while the node runs (the
// fleet configuration the replicator receives from the cloud). Its zero
// value means "as in Options": no rate limit, Options' retention.
type fleetState struct {
	// Retention per tier in nanoseconds; 0: Options' value.
	retentionRaw, retention1h, retention1d atomic.Int64

	mu sync.Mutex // guards the token bucket
	// ratePerSec is the refill rate in points per second (0: unlimited);
	// burst the bucket's size; tokens what it holds at last.
	ratePerSec, burst uint64
	tokens            float64
	last              time.Time
	// rateLimited counts the writes refused by the limit, and their points.
	rateLimitedWrites, rateLimitedPoints atomic.Int64
}

// SetRetention changes the retention of the three tiers (raw samples,
// hourly and daily rollups) while the node runs, with the bounds of
// Options.Validate. Retention applies them the next time it runs (every
// Options.RetentionInterval); writes are checked against the new raw
// retention at once. Safe for concurrent use.
func (n *Node) SetRetention(raw, hourly, daily time.Duration) error {
	if raw < time.Hour || hourly < time.Hour || daily < 24*time.Hour {
		return fmt.Errorf("set retention raw=%s 1h=%s 1d=%s: raw and 1h need at least 1h, 1d at least 24h", raw, hourly, daily)
	}
	n.fleet.retentionRaw.Store(int64(raw))
	n.fleet.retention1h.Store(int64(hourly))
	n.fleet.retention1d.Store(int64(daily))
	return nil
}

// Retention reports the retention in force for raw samples, hourly and
// daily rollups.
func (n *Node) Retention() (raw, hourly, daily time.Duration) {
	get := func(v *atomic.Int64, def time.Duration) time.Duration {
		if d := v.Load(); d != 0 {
			return time.Duration(d)
		}
		return def
	}
	return get(&n.fleet.retentionRaw, n.opts.RetentionRaw), get(&n.fleet.retention1h, n.opts.Retention1h),
		get(&n.fleet.retention1d, n.opts.Retention1d)
}

// DefaultWALSegmentAge is Options.WALSegmentAge when not set: the lag
// budget of an edge that no fleet configuration sets (and the catalog's
// default). At 8 series × 1 Hz it brings the bytes shipped per point within
// the uplink target (docs/operations.md, "SD card and uplink budget").
const DefaultWALSegmentAge = 30 * time.Second

// SetSealPolicy changes the WAL's seal policy while the node runs: a
// segment is sealed (and shipped) once it is age old and holds minPoints
// points, or at wal.MinPointsWaitFactor × age whatever it holds (a fleet's
// lag budget and minimum points per segment). The open segment is judged
// by the new policy within a second (the flush loop). Safe for concurrent
// use.
func (n *Node) SetSealPolicy(age time.Duration, minPoints int64) error {
	if err := n.wal.SetSealPolicy(age, minPoints); err != nil {
		return fmt.Errorf("set seal policy: %w", err)
	}
	return nil
}

// SealPolicy reports the WAL's seal policy in force: the segment age and
// the minimum points per segment.
func (n *Node) SealPolicy() (age time.Duration, minPoints int64) {
	return n.wal.SealPolicy()
}

// SetRateLimit limits ingest to pointsPerSec points per second with a
// token bucket of burst points (0: one second of the rate); pointsPerSec 0
// removes the limit. A write whose points (valid or not) exceed the tokens
// in the bucket is refused whole with ErrRateLimited, so a write larger
// than the burst is always refused. The bucket starts full. Safe for
// concurrent use.
func (n *Node) SetRateLimit(pointsPerSec, burst uint64) {
	f := &n.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	if burst == 0 {
		burst = pointsPerSec
	}
	f.ratePerSec, f.burst = pointsPerSec, burst
	f.tokens = float64(burst)
	f.last = n.opts.Now()
}

// RateLimited reports the writes refused by the rate limit and the points
// they carried, since Open.
func (n *Node) RateLimited() (writes, points int64) {
	return n.fleet.rateLimitedWrites.Load(), n.fleet.rateLimitedPoints.Load()
}

// admit takes points tokens from the bucket, or returns ErrRateLimited
// (wrapped, with the numbers) and takes none.
func (n *Node) admit(points int64) error {
	f := &n.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ratePerSec == 0 || points == 0 {
		return nil
	}
	now := n.opts.Now()
	if el := now.Sub(f.last); el > 0 {
		f.tokens = min(float64(f.burst), f.tokens+el.Seconds()*float64(f.ratePerSec))
	}
	f.last = now
	if float64(points) > f.tokens {
		f.rateLimitedWrites.Add(1)
		f.rateLimitedPoints.Add(points)
		return fmt.Errorf("write of %d points (limit %d points/s, burst %d): %w", points, f.ratePerSec, f.burst, ErrRateLimited)
	}
	f.tokens -= float64(points)
	return nil
}
