package wal

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
)

// FS is the file-system seam (internal/vfs) the Log does all its I/O
// through. vfs.OS is the real one; vfs.NewCrashFS simulates power cuts for
// tests.
type FS = vfs.FS

// File is an open file of an FS.
type File = vfs.File

// Segment format versions, the header's version byte. Both frame records
// alike; they differ in what the records carry (package record): kind 1
// payloads (raw samples) in version 1, kind 2 (compressed samples) in
// version 2. Readers accept both.
const (
	FormatV1 uint8 = 1
	FormatV2 uint8 = 2
)

// Defaults and limits of Options and Record.
const (
	DefaultMaxSegmentBytes = 4 << 20
	DefaultMaxSegmentAge   = 5 * time.Second
	DefaultRetryInterval   = time.Second
	// MinPointsWaitFactor bounds how long a segment short of
	// MinSegmentPoints waits: it is cut at MinPointsWaitFactor times
	// MaxSegmentAge whatever it holds, so a trickle still ships.
	MinPointsWaitFactor = 4
	// MaxMinSegmentPoints bounds MinSegmentPoints.
	MaxMinSegmentPoints = 10_000_000
	// MinSegmentBytes is the smallest MaxSegmentBytes accepted: room for a
	// header, a footer and a few records.
	MinSegmentBytes = 1 << 10
	// MaxNodeIDBytes bounds Options.NodeID; the header stores its length
	// in one byte.
	MaxNodeIDBytes = 255
	// MaxRecordBytes bounds Record.Data. A record may be larger than
	// MaxSegmentBytes (it then fills a segment by itself), never larger
	// than this.
	MaxRecordBytes = 64 << 20
)

// SyncPolicy says when appended records are fsynced.
type SyncPolicy struct {
	// Interval 0: Sync returns only once the record is fsynced; concurrent
	// callers share fsyncs (group commit).
	// Interval > 0: records are fsynced at most every Interval, and Sync
	// returns once the record has been handed to the operating system, so a
	// power cut (not a process crash) can lose up to Interval of
	// acknowledged writes.
	Interval time.Duration
}

// Options configure a Log.
type Options struct {
	Dir             string        // directory of the log; created if missing
	NodeID          string        // written into every segment header; required, at most 255 bytes
	MaxSegmentBytes int64         // MaybeCut cuts once the open segment reaches this; default 4 MiB
	MaxSegmentAge   time.Duration // MaybeCut cuts once the open segment's first record is this old; default 5s
	// MinSegmentPoints (0: none) holds back a cut for age: a segment that
	// is MaxSegmentAge old but holds fewer points waits for more, up to
	// MinPointsWaitFactor × MaxSegmentAge. It never holds back a cut for
	// size. SetSealPolicy changes both while the Log runs.
	MinSegmentPoints int64
	Sync             SyncPolicy
	// Format is the format version of the segments the Log creates:
	// FormatV1 (the default) or FormatV2. It only names what the caller's
	// record payloads are (package record's kind 1 or 2); the Log frames
	// both alike, and reads segments of either version whatever Format is.
	Format uint8
	// RetryInterval: after a failed write or fsync (a full disk, an I/O
	// error) the Log refuses writes and tries to recover this often;
	// default 1s.
	RetryInterval time.Duration
	FS            FS           // nil: the real file system
	Logger        *slog.Logger // nil: discard
	// OnFsync, when set, is called after each fsync of a segment file with
	// how long it took (metrics). It runs on the syncer and must not block.
	OnFsync func(time.Duration)
	// OnSeal, when set, is called once a segment is sealed (its footer
	// durable) with its info and when its sealing began (traces). It runs
	// with the log's lock held and must not block or call the Log.
	OnSeal func(info SegmentInfo, began time.Time)
}

// Validate fills in defaults and rejects values the Log cannot work with.
func (o *Options) Validate() error {
	var bad []string
	if o.Dir == "" {
		bad = append(bad, "Dir is required")
	}
	switch {
	case o.NodeID == "":
		bad = append(bad, "NodeID is required")
	case len(o.NodeID) > MaxNodeIDBytes:
		bad = append(bad, fmt.Sprintf("NodeID is %d bytes, more than %d", len(o.NodeID), MaxNodeIDBytes))
	}
	switch {
	case o.MaxSegmentBytes == 0:
		o.MaxSegmentBytes = DefaultMaxSegmentBytes
	case o.MaxSegmentBytes < MinSegmentBytes:
		bad = append(bad, fmt.Sprintf("MaxSegmentBytes %d is below the minimum of %d", o.MaxSegmentBytes, MinSegmentBytes))
	}
	switch {
	case o.MaxSegmentAge == 0:
		o.MaxSegmentAge = DefaultMaxSegmentAge
	case o.MaxSegmentAge < 0:
		bad = append(bad, fmt.Sprintf("MaxSegmentAge %v is negative", o.MaxSegmentAge))
	}
	if o.MinSegmentPoints < 0 || o.MinSegmentPoints > MaxMinSegmentPoints {
		bad = append(bad, fmt.Sprintf("MinSegmentPoints %d is outside 0..%d", o.MinSegmentPoints, MaxMinSegmentPoints))
	}
	switch o.Format {
	case 0:
		o.Format = FormatV1
	case FormatV1, FormatV2:
	default:
		bad = append(bad, fmt.Sprintf("Format %d is not a format version (%d or %d)", o.Format, FormatV1, FormatV2))
	}
	switch {
	case o.RetryInterval == 0:
		o.RetryInterval = DefaultRetryInterval
	case o.RetryInterval < 0:
		bad = append(bad, fmt.Sprintf("RetryInterval %v is negative", o.RetryInterval))
	}
	if o.Sync.Interval < 0 {
		bad = append(bad, fmt.Sprintf("Sync.Interval %v is negative", o.Sync.Interval))
	}
	if len(bad) > 0 {
		return fmt.Errorf("wal options: %s", strings.Join(bad, "; "))
	}
	if o.FS == nil {
		o.FS = vfs.OS{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
