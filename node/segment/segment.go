// Package segment builds sealed WAL segment files (package wal's format,
// holding package record's payloads) from series' points, in memory, and
// compacts a node's segment into one record for shipping (Compact). The
// replicator builds a backfill from the node's store with it, and a
// coordinator's replica store exports an edge's data for another replica
// with it; both hand the file to a reader that takes it for a segment the
// node's WAL wrote. Read is that reader's first pass: it verifies a whole
// file and returns its series, so that a node's import and a replica
// store refuse a damaged file alike, before storing anything.
//
// # What a built file holds
//
// A built file is of WAL format version 1 (raw records, package record's
// kind 1), which every coordinator and node reads: its sizes are counted
// exactly as it is built, which compressed records do not allow.
//
// Series get ids 1, 2, ... in the order they are first added to the file,
// and each is defined (record.Encoder.DefineSeries) once per file, in the
// record that holds its first run: the file reads by itself, as a WAL
// segment does. A run holds at most MaxRunPoints samples, in the order
// they were added (so duplicate timestamps stay last-write-wins), and a
// record is closed once its payload reaches RecordBytes. The header's
// creation time is 0 (wal.EncodeSegment), so the same points added in the
// same order, under the same sequence numbers, always build the same bytes
// and checksum.
//
// # Size
//
// A Builder never builds a file larger than its limit. Add takes the
// leading points of a series that fit and reports how many; fewer than
// given means the file is full: finish it, and add the rest to the next
// file (the series is defined again there). The sizes are counted exactly
// (record.DefBytes, record.FitRun) except a record frame's own fields,
// counted at their largest (maxFrameOverhead bytes), so a full file may be
// up to that much below the limit per record.
//
// Memory: the records of one file (at most the limit) and, while Finish
// runs, the file itself.
//
// A Builder is not safe for concurrent use; Read is safe for concurrent
// use.
package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
)

const (
	// RecordBytes: a record is closed once its payload reaches this size.
	RecordBytes = 1 << 20
	// MaxRunPoints bounds the samples of one run.
	MaxRunPoints = 8192
	// maxFrameOverhead is the most a frame adds to its payload: a 4-byte
	// CRC, the length and three varints of metadata (see wal.FrameBytes).
	maxFrameOverhead = 4 + 4*binary.MaxVarintLen64
	// maxLimitBytes bounds a Builder's limit (the file is built in memory).
	maxLimitBytes = 1 << 30
)

// ErrSeriesTooLarge: one point of the series (with its definition) does
// not fit in an empty file of the Builder's limit.
var ErrSeriesTooLarge = errors.New("segment: a series does not fit in an empty file")

// Builder builds segment files of one node, one after another.
type Builder struct {
	nodeID   string
	limit    int64
	overhead int64 // header and footer

	recs   []wal.Record
	closed int64 // bytes of the frames in recs
	enc    record.Encoder
	open   bool // enc holds a definition or a run
	points int64

	nextID  uint64
	lastID  uint64 // the series added last (0: none in this file)
	lastKey []byte
	key     []byte // scratch
}

// NewBuilder returns a Builder of files of nodeID (the id their headers
// carry) of at most maxFileBytes bytes each.
func NewBuilder(nodeID string, maxFileBytes int64) (*Builder, error) {
	if nodeID == "" || len(nodeID) > wal.MaxNodeIDBytes {
		return nil, fmt.Errorf("segment builder: node id of %d bytes (1 to %d)", len(nodeID), wal.MaxNodeIDBytes)
	}
	overhead := wal.SegmentOverheadBytes(nodeID)
	if lo := overhead + maxFrameOverhead + 64; maxFileBytes < lo || maxFileBytes > maxLimitBytes {
		return nil, fmt.Errorf("segment builder: file limit %d bytes out of range [%d, %d]", maxFileBytes, lo, maxLimitBytes)
	}
	b := &Builder{nodeID: nodeID, limit: maxFileBytes, overhead: overhead}
	b.Reset()
	return b, nil
}

// Reset drops what was added since the last Finish.
func (b *Builder) Reset() {
	b.recs, b.closed, b.points = nil, 0, 0
	b.enc.Reset()
	b.open = false
	b.nextID, b.lastID = 1, 0
	b.lastKey = b.lastKey[:0]
}

// Points is the number of points added since the last Finish or Reset.
func (b *Builder) Points() int64 { return b.points }

// Bytes bounds the size of the file Finish would build now (exact but for
// the open record's frame, counted at its largest).
func (b *Builder) Bytes() int64 {
	n := b.overhead + b.closed
	if b.open {
		n += maxFrameOverhead + int64(b.enc.Len())
	}
	return n
}

// Add adds the leading points of series ls (ts and vs of equal length, in
// the order they should be replayed) that fit in the file and returns how
// many it added. n < len(ts) means the file is full: Finish it and add
// ts[n:] to the next. Adding the same series again right after continues
// it (no second definition). An error (ErrSeriesTooLarge, or ts and vs of
// different lengths) adds nothing.
func (b *Builder) Add(ls labels.Labels, ts []int64, vs []float64) (int, error) {
	if len(ts) != len(vs) {
		return 0, fmt.Errorf("segment builder: series %s with %d timestamps and %d values", ls, len(ts), len(vs))
	}
	if len(ts) == 0 {
		return 0, nil
	}
	b.key = ls.AppendKey(b.key[:0])
	id, define := b.lastID, b.lastID == 0 || !bytes.Equal(b.key, b.lastKey)
	if define {
		id = b.nextID
	}
	added := 0
	for added < len(ts) {
		// The open record's frame at its largest, and a byte for the
		// growth of the run count (and of the definition count below).
		free := b.limit - b.overhead - b.closed - maxFrameOverhead - int64(b.enc.Len()) - 1
		if define {
			free -= int64(record.DefBytes(id, b.key)) + 1
		}
		chunk := ts[added:min(len(ts), added+MaxRunPoints)]
		n := 0
		if free > 0 {
			n, _ = record.FitRun(id, chunk, int(min(free, 1<<40)))
		}
		if n == 0 {
			if b.points == 0 && !b.open {
				return 0, fmt.Errorf("%w: series %s (%d bytes of labels) in files of %d bytes", ErrSeriesTooLarge, ls, len(b.key), b.limit)
			}
			return added, nil
		}
		if define {
			b.enc.DefineSeries(id, b.key)
			b.nextID++
			b.lastID = id
			b.lastKey = append(b.lastKey[:0], b.key...)
			define = false
		}
		b.enc.AddRun(id, ts[added:added+n], vs[added:added+n])
		b.open = true
		b.points += int64(n)
		added += n
		if b.enc.Len() >= RecordBytes {
			b.closeRecord()
		}
		if n < len(chunk) {
			return added, nil
		}
	}
	return added, nil
}

// closeRecord moves the open record into recs.
func (b *Builder) closeRecord() {
	if !b.open {
		return
	}
	r := wal.Record{Data: b.enc.AppendTo(make([]byte, 0, b.enc.Len())), MinT: b.enc.MinT(), MaxT: b.enc.MaxT(), Points: b.enc.Points()}
	if r.Points == 0 {
		r.MinT, r.MaxT = 0, 0
	}
	b.recs = append(b.recs, r)
	b.closed += wal.FrameBytes(r)
	b.enc.Reset()
	b.open = false
}

// Finish builds the file of what was added since the last Finish (it may
// hold no points), as segment seq created after prevSeq (prevSeq < seq),
// and resets the Builder for the next file.
func (b *Builder) Finish(seq, prevSeq uint64) ([]byte, wal.SegmentInfo, error) {
	b.closeRecord()
	recs := b.recs
	b.Reset()
	file, info, err := wal.EncodeSegment(b.nodeID, seq, prevSeq, recs)
	if err != nil {
		return nil, wal.SegmentInfo{}, fmt.Errorf("build segment: %w", err)
	}
	if int64(len(file)) > b.limit {
		return nil, wal.SegmentInfo{}, fmt.Errorf("BUG: segment builder: file of %d bytes over its limit of %d", len(file), b.limit)
	}
	return file, info, nil
}
