// Package cursor is the replicator's durable cursor file: how far the cloud
// has acknowledged an edge node's WAL segments, which segments the node may
// delete, and the gaps (segments that will never be shipped) with the
// points they held.
//
// # File layout
//
// All integers are little-endian; the CRC is CRC32C (Castagnoli).
//
//	+-------+---------+-------+---------+---------------+----------+
//	| magic | version | idLen | node id | acked_through | released |
//	| TRCU  |    3    |   1   |  idLen  |       8       |    8     |
//	+-------+---------+-------+---------+---------------+----------+
//	+--------------+------------+----------------+-------+-----------+--------+
//	| gap_segments | gap_points | dropped_points | nGaps | gap × n   | crc32c |
//	|      8       |     8      |       8        |   4   | 50 each   |   4    |
//	+--------------+------------+----------------+-------+-----------+--------+
//
// Gap record, 50 bytes:
//
//	+-------+---------+----------+--------+------+------+--------+-------+
//	| after | through | segments | points | minT | maxT | reason | flags |
//	|   8   |    8    |    8     | 8 (i64)|  8   |  8   |   1    |   1   |
//	+-------+---------+----------+--------+------+------+--------+-------+
//
// The CRC covers every byte before it. A gap covers the sequence numbers
// after+1..through; points is -1 when unknown; reason uses the numbers of
// the wire enum GapReason; flags bit 0 says the cloud acknowledged the gap,
// bit 1 that the cloud acknowledged its backfill (the gap's points, read
// from the node's store, are shipped), bit 2 that the gap is
// unrecoverable: the node's store may lack some of its points, or their
// count or time span is unknown, so it is never backfilled (set only on
// MISSING gaps; never cleared).
//
// Version 1 is the same layout without bits 1 and 2, version 2 without
// bit 2; Decode reads both, Encode writes version 3. A MISSING gap in a
// version 1 or 2 file has bit 2 clear and is judged again by the
// replicator when it starts (it was never backfilled by those versions).
//
// The file is replaced atomically (vfs.WriteFileAtomic): written to
// <path>.tmp, fsynced, renamed over <path>, and the directory fsynced
// (without the directory fsync a power cut could undo the rename and bring
// back an older cursor; without the file's, leave a torn one). A leftover
// .tmp is a save that never happened and is ignored. Anything that does
// not decode exactly (magic, version, lengths, CRC), or is larger than the
// largest cursor, is a *CorruptError.
//
// # Power cuts
//
// Load and Save do their I/O through the file-system seam (internal/vfs),
// and the package's crash test runs them on a vfs.CrashFS, cutting the
// power at every step of a run of saves, tearing what was not fsynced:
// after a cut, Load returns the last cursor Save returned nil for, or the
// one being saved, whole; never an older one, never a torn one.
//
// Functions here are not safe for concurrent use on one path.
package cursor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"slices"
	"sort"

	"github.com/tributarydb/tributary/internal/enum"
	"github.com/tributarydb/tributary/internal/vfs"
)

const (
	magic          = "TRCU"
	version        = 3
	versionV1      = 1
	versionV2      = 2
	fixedBytes     = 4 + 1 + 1 + 8*5 + 4 + 4 // without node id and gaps
	gapBytes       = 8*6 + 2
	maxNodeID      = 255
	flagReported   = 1
	flagBackfilled = 2
	flagUnrecover  = 4
)

// MaxGaps bounds the gap records kept; Add merges the oldest ones past it.
const MaxGaps = 1024

// maxFileBytes is the size of the largest cursor file; Load reads no more.
const maxFileBytes = fixedBytes + maxNodeID + MaxGaps*gapBytes

// Reason says why a gap exists; the values are those of the wire enum
// GapReason.
type Reason uint8

// The reasons.
const (
	ReasonBacklogOverflow Reason = 1 // kept in the local store, to be backfilled
	ReasonDropped         Reason = 2 // drop-oldest policy: not to be replicated
	ReasonMissing         Reason = 3 // not on the edge's disk (removed, quarantined, unreadable)
)

var reasonNames = []string{
	ReasonBacklogOverflow: "backlog_overflow",
	ReasonDropped:         "dropped",
	ReasonMissing:         "missing",
}

func (r Reason) String() string { return enum.Name(reasonNames, r, "reason") }

// Gap is a run of segments the edge will not ship: it covers the sequence
// numbers After+1..Through.
type Gap struct {
	After, Through uint64
	Reason         Reason
	Segments       uint64
	Points         int64 // -1: unknown
	MinT, MaxT     int64 // time span of the points, ms; both 0 when unknown
	Reported       bool  // the cloud acknowledged the gap
	// Backfilled: the cloud acknowledged the backfill of the gap's points
	// from the node's store (ReasonBacklogOverflow, and ReasonMissing
	// gaps that are not Unrecoverable).
	Backfilled bool
	// Unrecoverable (ReasonMissing only): the node's store may lack some
	// of the gap's points (their segment was lost before its samples were
	// durable in the store), or their count or time span is unknown. Such
	// a gap is never backfilled and stays in the catalog with its count.
	Unrecoverable bool
}

// NeedsBackfill reports whether g's points are to be shipped from the
// node's store: a backlog overflow, or a missing gap whose points the
// store holds with a known count and time span, that the cloud recorded
// and that was not backfilled yet.
func (g *Gap) NeedsBackfill() bool {
	if !g.Reported || g.Backfilled {
		return false
	}
	switch g.Reason {
	case ReasonBacklogOverflow:
		return true
	case ReasonMissing:
		return !g.Unrecoverable && g.Points > 0 && g.SpanKnown()
	}
	return false
}

// SpanKnown reports whether g's time span is known (both ends 0 means
// unknown).
func (g *Gap) SpanKnown() bool { return g.MinT != 0 || g.MaxT != 0 }

// State is the cursor.
type State struct {
	NodeID string
	// AckedThrough is the cloud's acked_through as last told: every
	// sequence number up to it is covered by a segment the cloud holds or
	// by a gap it recorded.
	AckedThrough uint64
	// Released: every sequence number up to it is acknowledged or in a gap,
	// so the node may delete those segments. Released >= AckedThrough.
	Released uint64
	// Totals since the cursor was created (they survive merging gaps).
	GapSegments   uint64
	GapPoints     uint64 // points in gaps whose count is known
	DroppedPoints uint64 // points in ReasonDropped gaps
	Gaps          []Gap  // ascending by After, at most MaxGaps
}

// AddGap records g in order of After, updates the totals, and merges
// records: g into the record before it when g continues it with the same
// reason and recoverability and neither was reported; then, past MaxGaps,
// the two oldest records (the merged record keeps the older one's reason,
// its points are unknown if either's were, and it is unrecoverable if
// either was).
//
// A gap that covers nothing (Through <= After) is ignored.
func (s *State) AddGap(g Gap) {
	if g.Through <= g.After {
		return
	}
	s.GapSegments += g.Segments
	if g.Points > 0 {
		s.GapPoints += uint64(g.Points)
		if g.Reason == ReasonDropped {
			s.DroppedPoints += uint64(g.Points)
		}
	}
	i := sort.Search(len(s.Gaps), func(k int) bool { return s.Gaps[k].After > g.After })
	if i > 0 {
		prev := &s.Gaps[i-1]
		if prev.Through == g.After && prev.Reason == g.Reason && prev.Unrecoverable == g.Unrecoverable && !prev.Reported && !g.Reported {
			*prev = merge(*prev, g)
			return
		}
	}
	s.Gaps = slices.Insert(s.Gaps, i, g)
	for len(s.Gaps) > MaxGaps {
		s.Gaps[1] = merge(s.Gaps[0], s.Gaps[1])
		s.Gaps = s.Gaps[1:]
	}
}

// merge joins a and b, a before b.
func merge(a, b Gap) Gap {
	m := Gap{
		After: a.After, Through: b.Through, Reason: a.Reason,
		Segments: a.Segments + b.Segments,
		Points:   a.Points + b.Points,
		MinT:     a.MinT, MaxT: a.MaxT,
		Reported:      a.Reported && b.Reported,
		Backfilled:    a.Backfilled && b.Backfilled,
		Unrecoverable: a.Unrecoverable || b.Unrecoverable,
	}
	if a.Points < 0 || b.Points < 0 {
		m.Points = -1
	}
	switch {
	case a.MinT == 0 && a.MaxT == 0:
		m.MinT, m.MaxT = b.MinT, b.MaxT
	case b.MinT == 0 && b.MaxT == 0:
	default:
		m.MinT, m.MaxT = min(a.MinT, b.MinT), max(a.MaxT, b.MaxT)
	}
	return m
}

// CorruptError says why a cursor file could not be decoded.
type CorruptError struct {
	Path   string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("replicator: corrupt cursor file %s: %s", e.Path, e.Reason)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the file contents for s.
func (s *State) Encode() []byte {
	b := make([]byte, 0, fixedBytes+len(s.NodeID)+gapBytes*len(s.Gaps))
	b = append(b, magic...)
	b = append(b, version, byte(len(s.NodeID)))
	b = append(b, s.NodeID...)
	le := binary.LittleEndian
	b = le.AppendUint64(b, s.AckedThrough)
	b = le.AppendUint64(b, s.Released)
	b = le.AppendUint64(b, s.GapSegments)
	b = le.AppendUint64(b, s.GapPoints)
	b = le.AppendUint64(b, s.DroppedPoints)
	b = le.AppendUint32(b, uint32(len(s.Gaps)))
	for _, g := range s.Gaps {
		b = le.AppendUint64(b, g.After)
		b = le.AppendUint64(b, g.Through)
		b = le.AppendUint64(b, g.Segments)
		b = le.AppendUint64(b, uint64(g.Points))
		b = le.AppendUint64(b, uint64(g.MinT))
		b = le.AppendUint64(b, uint64(g.MaxT))
		var flags byte
		if g.Reported {
			flags |= flagReported
		}
		if g.Backfilled {
			flags |= flagBackfilled
		}
		if g.Unrecoverable {
			flags |= flagUnrecover
		}
		b = append(b, byte(g.Reason), flags)
	}
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// Decode parses file contents. The returned reason is empty on success.
func Decode(b []byte) (State, string) {
	var s State
	switch {
	case len(b) < fixedBytes:
		return s, fmt.Sprintf("%d bytes, shorter than the smallest cursor (%d)", len(b), fixedBytes)
	case string(b[:4]) != magic:
		return s, fmt.Sprintf("bad magic %q", b[:4])
	case b[4] != version && b[4] != versionV2 && b[4] != versionV1:
		return s, fmt.Sprintf("unsupported version %d", b[4])
	}
	le := binary.LittleEndian
	if got, want := crc32.Checksum(b[:len(b)-4], castagnoli), le.Uint32(b[len(b)-4:]); got != want {
		return s, fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", want, got)
	}
	idLen := int(b[5])
	if len(b) < fixedBytes+idLen {
		return s, "truncated node id"
	}
	s.NodeID = string(b[6 : 6+idLen])
	p := b[6+idLen:]
	s.AckedThrough = le.Uint64(p)
	s.Released = le.Uint64(p[8:])
	s.GapSegments = le.Uint64(p[16:])
	s.GapPoints = le.Uint64(p[24:])
	s.DroppedPoints = le.Uint64(p[32:])
	n := le.Uint32(p[40:])
	p = p[44 : len(p)-4]
	if n > MaxGaps || uint64(len(p)) != uint64(n)*gapBytes {
		return State{}, fmt.Sprintf("%d gap records in %d bytes", n, len(p))
	}
	if s.Released < s.AckedThrough {
		return State{}, fmt.Sprintf("released %d below acked_through %d", s.Released, s.AckedThrough)
	}
	s.Gaps = make([]Gap, n)
	for i := range s.Gaps {
		g := p[i*gapBytes:]
		s.Gaps[i] = Gap{
			After:      le.Uint64(g),
			Through:    le.Uint64(g[8:]),
			Segments:   le.Uint64(g[16:]),
			Points:     int64(le.Uint64(g[24:])),
			MinT:       int64(le.Uint64(g[32:])),
			MaxT:       int64(le.Uint64(g[40:])),
			Reason:     Reason(g[48]),
			Reported:   g[49]&flagReported != 0,
			Backfilled: g[49]&flagBackfilled != 0,
			// Bit 2 is unused before version 3: ignore it there.
			Unrecoverable: b[4] == version && g[49]&flagUnrecover != 0,
		}
		if s.Gaps[i].Through <= s.Gaps[i].After {
			return State{}, fmt.Sprintf("gap %d covers nothing (%d..%d]", i, s.Gaps[i].After, s.Gaps[i].Through)
		}
	}
	return s, ""
}

// Load reads the cursor at path through fsys. A missing file is the empty
// State with found false; one that does not decode is a *CorruptError.
func Load(fsys vfs.FS, path string) (s State, found bool, err error) {
	b, err := vfs.ReadFile(fsys, path, maxFileBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return State{}, false, nil
	case errors.Is(err, vfs.ErrTooLarge):
		return State{}, false, &CorruptError{Path: path, Reason: fmt.Sprintf("larger than the largest cursor (%d bytes)", maxFileBytes)}
	case err != nil:
		return State{}, false, fmt.Errorf("read cursor: %w", err)
	}
	s, reason := Decode(b)
	if reason != "" {
		return State{}, false, &CorruptError{Path: path, Reason: reason}
	}
	return s, true, nil
}

// Save replaces the cursor at path with s atomically and durably, through
// fsys.
func Save(fsys vfs.FS, path string, s *State) error {
	// Never write what Load would refuse.
	if len(s.NodeID) > maxNodeID || s.Released < s.AckedThrough || len(s.Gaps) > MaxGaps {
		return fmt.Errorf("BUG: save cursor: node id of %d bytes, released %d below acked_through %d, or %d gaps",
			len(s.NodeID), s.Released, s.AckedThrough, len(s.Gaps))
	}
	// NB: without the fsyncs of WriteFileAtomic a power cut could bring
	// back a cursor older than what the node was told it may delete (the
	// directory's), or leave a torn one (the file's).
	if err := vfs.WriteFileAtomic(fsys, path, 0o644, s.Encode()); err != nil {
		return fmt.Errorf("save cursor: %w", err)
	}
	return nil
}
