// Package record is the payload format of the node's WAL records (and so of
// replicated segments): which series a write touched and its samples.
//
// A payload starts with its kind: 1, raw samples in the client's order, or
// 2, compressed samples, one sorted run per series coded with package
// chunk's codec. A Decoder reads both kinds; an Encoder writes kind 1
// unless SetKind(KindCompressed) was called. A WAL segment holds payloads of
// one kind (package wal's format version 1 holds kind 1, version 2 kind 2),
// so a reader that knows only kind 1 refuses a version-2 segment by its
// header rather than calling a record corrupt.
//
// # Kind 1: raw samples
//
// Layout of one record payload (all varints are Go's encoding/binary forms):
//
//	byte     kind              1 = samples
//	uvarint  nDefs
//	nDefs × {
//	  uvarint  seriesID
//	  uvarint  len(key)
//	  bytes    key               canonical labels key (package labels)
//	}
//	uvarint  nRuns
//	nRuns × {
//	  uvarint  seriesID
//	  uvarint  n                 samples in the run, ≥ 1
//	  varint   t[0]
//	  (n-1) ×  varint t[i]-t[i-1]   (negative when the client sent them unsorted)
//	  n × 8    float64 values, little-endian IEEE-754 bits
//	}
//
// A series definition binds a node-local series id to its labels. The writer
// defines every series at least once in each WAL segment before (or in) the
// first record that uses it, so each segment can be read on its own; a reader
// that meets a run for an id it has no definition for treats the segment as
// corrupt. Samples of a run keep the client's order, so replaying a record
// reproduces last-write-wins for duplicate timestamps.
//
// # Kind 2: compressed samples
//
//	byte     kind              2 = compressed samples
//	uvarint  nStrings
//	nStrings × {
//	  uvarint  len
//	  bytes    string            the record's string table, each string once
//	}
//	uvarint  nDefs
//	nDefs × {
//	  uvarint  seriesID
//	  uvarint  m
//	  m = 0:   uvarint len(key), bytes key      a key stored literally
//	  m > 0:   2(m-1) × uvarint string index    m-1 labels: name, value, ...
//	}
//	varint   base              subtracted from every timestamp of the record
//	uvarint  nRuns
//	nRuns × {
//	  uvarint  seriesID
//	  uvarint  len(chunk)
//	  bytes    chunk             package chunk's encoding of (t - base, v)
//	}
//
// A definition with m > 0 stands for the canonical labels key of m-1 labels
// (package labels: uvarint count, then each name and value as uvarint
// length and bytes) whose strings are the indexed entries of the table: a
// label name or value that several series of the record share is stored
// once. A rebuilt key is bounded: at most MaxKeyBytes each, and at most
// MaxDefinedKeyBytes for all the rebuilt keys of one record together (a
// table of long strings referenced many times would otherwise stand for
// far more memory than the record's own size); a decoder refuses a record
// past either bound as corrupt. The encoder stores a key that is not of
// that form literally. The
// same rule as kind 1 holds: every series is defined at least once in each
// segment, before or in the first record that uses it.
//
// The encoder gathers all samples a record holds for a series into one
// run, sorts them by timestamp (stable) and, of samples with equal
// timestamps, keeps the last one added: what replaying them in the client's
// order leaves behind, since duplicate timestamps are last-write-wins.
// Chunks hold strictly increasing timestamps and at most chunk.MaxSamples
// samples, so a series with more samples in one record gets several runs,
// in timestamp order. base is the record's smallest timestamp (0 when its
// span overflows int64), which keeps each chunk's first timestamp a short
// varint; a decoder adds it back modulo 2^64.
//
// Decoding never panics: any inconsistency returns an error wrapping
// ErrCorrupt. An Encoder or Decoder is not safe for concurrent use.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tributarydb/tributary/internal/binread"
)

// MaxKeyBytes bounds one series key rebuilt from a kind 2 record's string
// table (the default label limits allow about 37 KiB), and
// MaxDefinedKeyBytes all the keys one record rebuilds.
const (
	MaxKeyBytes        = 1 << 20
	MaxDefinedKeyBytes = 64 << 20
)

// Record kinds: the first byte of a payload.
const (
	KindSamples    byte = 1 // raw samples in the client's order
	KindCompressed byte = 2 // sorted runs in package chunk's codec
)

// ErrCorrupt is wrapped by every decoding error.
var ErrCorrupt = errors.New("record: corrupt")

// Encoder builds one record payload.
type Encoder struct {
	defs, runs   []byte
	nDefs, nRuns int
	points       int64
	minT, maxT   int64 // valid when points > 0
	kind         byte  // 0: KindSamples
	c            compressor
}

// SetKind selects the kind of the payloads the encoder builds
// (KindSamples, the default, or KindCompressed) and resets it.
func (e *Encoder) SetKind(kind byte) {
	if kind != KindSamples && kind != KindCompressed {
		panic(fmt.Sprintf("BUG: record.Encoder.SetKind(%d)", kind))
	}
	e.kind = kind
	e.Reset()
}

// Kind is the kind of the payloads the encoder builds.
func (e *Encoder) Kind() byte {
	if e.kind == 0 {
		return KindSamples
	}
	return e.kind
}

// Reset empties the encoder, keeping its buffers.
func (e *Encoder) Reset() {
	e.defs, e.runs = e.defs[:0], e.runs[:0]
	e.nDefs, e.nRuns, e.points = 0, 0, 0
	e.minT, e.maxT = math.MaxInt64, math.MinInt64
	if e.kind == KindCompressed {
		e.c.reset()
	}
}

// DefineSeries binds id to the canonical labels key.
func (e *Encoder) DefineSeries(id uint64, key []byte) {
	if e.kind == KindCompressed {
		e.c.define(id, key)
		e.nDefs++
		return
	}
	e.defs = binary.AppendUvarint(e.defs, id)
	e.defs = binary.AppendUvarint(e.defs, uint64(len(key)))
	e.defs = append(e.defs, key...)
	e.nDefs++
}

// AddRun appends the samples of one series. REQUIRES len(ts)==len(vs)>0.
func (e *Encoder) AddRun(id uint64, ts []int64, vs []float64) {
	if len(ts) != len(vs) || len(ts) == 0 {
		panic("BUG: record.AddRun with mismatched or empty samples")
	}
	if e.points == 0 {
		e.minT, e.maxT = math.MaxInt64, math.MinInt64
	}
	if e.kind == KindCompressed {
		for _, t := range ts {
			e.minT = min(e.minT, t)
			e.maxT = max(e.maxT, t)
		}
		e.c.add(id, ts, vs)
		e.points += int64(len(ts))
		return
	}
	e.runs = binary.AppendUvarint(e.runs, id)
	e.runs = binary.AppendUvarint(e.runs, uint64(len(ts)))
	prev := int64(0)
	for _, t := range ts {
		e.runs = binary.AppendVarint(e.runs, t-prev)
		prev = t
		e.minT = min(e.minT, t)
		e.maxT = max(e.maxT, t)
	}
	for _, v := range vs {
		e.runs = binary.LittleEndian.AppendUint64(e.runs, math.Float64bits(v))
	}
	e.nRuns++
	e.points += int64(len(ts))
}

// Points, MinT and MaxT describe the samples added so far. Points counts
// every sample added, duplicates included; a KindCompressed payload holds
// EncodedPoints of them.
func (e *Encoder) Points() int64 { return e.points }

// EncodedPoints is the number of samples the payload holds: Points, less
// for KindCompressed the duplicate timestamps of a series that AppendTo
// dropped (valid after AppendTo).
func (e *Encoder) EncodedPoints() int64 {
	if e.kind == KindCompressed {
		return e.c.encoded
	}
	return e.points
}

// MinT is the smallest timestamp added; meaningless when Points is 0.
func (e *Encoder) MinT() int64 { return e.minT }

// MaxT is the largest timestamp added; meaningless when Points is 0.
func (e *Encoder) MaxT() int64 { return e.maxT }

// AppendTo appends the finished payload to dst.
func (e *Encoder) AppendTo(dst []byte) []byte {
	if e.kind == KindCompressed {
		base := e.minT
		if e.points == 0 || e.maxT-e.minT < 0 {
			base = 0 // no samples, or a span that overflows int64
		}
		return e.c.appendTo(dst, base)
	}
	dst = append(dst, KindSamples)
	dst = binary.AppendUvarint(dst, uint64(e.nDefs))
	dst = append(dst, e.defs...)
	dst = binary.AppendUvarint(dst, uint64(e.nRuns))
	return append(dst, e.runs...)
}

// Len is the size of the payload AppendTo would append now.
// REQUIRES: Kind() == KindSamples (a compressed payload's size is known
// only once it is built).
func (e *Encoder) Len() int {
	if e.kind == KindCompressed {
		panic("BUG: record.Encoder.Len of a compressed payload")
	}
	return 1 + binread.UvarintLen(uint64(e.nDefs)) + len(e.defs) + binread.UvarintLen(uint64(e.nRuns)) + len(e.runs)
}

// DefBytes is what DefineSeries(id, key) adds to a payload, not counting
// the growth of the definition count.
func DefBytes(id uint64, key []byte) int {
	return binread.UvarintLen(id) + binread.UvarintLen(uint64(len(key))) + len(key)
}

// FitRun returns how many leading samples of ts (n ≥ 0) a run of series
// id holds within budget bytes of payload, not counting the growth of the
// run count, and the bytes that run takes (0 when n is 0). Adding the
// run with AddRun(id, ts[:n], vs[:n]) adds exactly that many bytes.
func FitRun(id uint64, ts []int64, budget int) (n, bytes int) {
	head := binread.UvarintLen(id)
	body := 0
	prev := int64(0)
	for n < len(ts) {
		c := binread.VarintLen(ts[n]-prev) + 8
		if head+binread.UvarintLen(uint64(n+1))+body+c > budget {
			break
		}
		body += c
		prev = ts[n]
		n++
	}
	if n == 0 {
		return 0, 0
	}
	return n, head + binread.UvarintLen(uint64(n)) + body
}

// Decoder reads payloads, reusing its scratch buffers between calls.
type Decoder struct {
	ts   []int64
	vs   []float64
	strs [][]byte // kind 2: the record's string table
	key  []byte   // kind 2: a definition's key, rebuilt
}

// Decode calls def for each series definition and then run for each run, in
// order. The key, ts and vs slices are only valid during the callback.
func (d *Decoder) Decode(b []byte, def func(id uint64, key []byte) error, run func(id uint64, ts []int64, vs []float64) error) error {
	if len(b) > 0 && b[0] == KindCompressed {
		return d.decodeCompressed(b[1:], def, run)
	}
	if len(b) == 0 || b[0] != KindSamples {
		return fmt.Errorf("%w: unknown record kind", ErrCorrupt)
	}
	r := binread.New(b[1:])
	nDefs := r.Uvarint()
	for i := uint64(0); i < nDefs && r.Err() == nil; i++ {
		id := r.Uvarint()
		key := r.Bytes("series key")
		if r.Err() != nil {
			break
		}
		if err := def(id, key); err != nil {
			return err
		}
	}
	nRuns := r.Uvarint()
	for i := uint64(0); i < nRuns && r.Err() == nil; i++ {
		id := r.Uvarint()
		n := r.Uvarint()
		if r.Err() != nil {
			break
		}
		// Each sample needs at least 1 byte of timestamp and 8 of value.
		if left := len(r.Rest()); n == 0 || n > uint64(left)/9 {
			r.Fail(fmt.Errorf("run of %d samples does not fit in %d bytes", n, left))
			break
		}
		d.ts, d.vs = d.ts[:0], d.vs[:0]
		t := int64(0)
		for j := uint64(0); j < n; j++ {
			t += r.Varint()
			d.ts = append(d.ts, t)
		}
		raw := r.Next(int(n) * 8)
		if r.Err() != nil {
			break
		}
		for j := uint64(0); j < n; j++ {
			d.vs = append(d.vs, math.Float64frombits(binary.LittleEndian.Uint64(raw[j*8:])))
		}
		if err := run(id, d.ts, d.vs); err != nil {
			return err
		}
	}
	if err := r.Done(); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}
