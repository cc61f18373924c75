package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/tributarydb/tributary/internal/enum"
)

// The range of timestamps (Unix ms) the store accepts. Keeping them well
// inside int64 makes partition arithmetic overflow-free.
const (
	MinTimestampMs int64 = -(1 << 62)
	MaxTimestampMs int64 = 1<<62 - 1
)

// Kind names a partitioned time-series column family.
type Kind int

// The partitioned kinds of data.
const (
	KindChunks Kind = iota
	KindRollup1h
	KindRollup1d
)

// Rollup partition widths (see the package doc).
const (
	rollup1hWidthMs = int64(8 * 24 * time.Hour / time.Millisecond)
	rollup1dWidthMs = int64(128 * 24 * time.Hour / time.Millisecond)
)

var kinds = [...]Kind{KindChunks, KindRollup1h, KindRollup1d}

var kindNames = []string{KindChunks: cfChunks, KindRollup1h: cfRollup1h, KindRollup1d: cfRollup1d}

// String returns the column family name of k.
func (k Kind) String() string { return enum.Name(kindNames, k, "Kind") }

func (k Kind) valid() bool { return k >= KindChunks && k <= KindRollup1d }

// KindOf returns the kind whose column family is named cf.
func KindOf(cf string) (Kind, bool) {
	for _, k := range kinds {
		if k.String() == cf {
			return k, true
		}
	}
	return 0, false
}

// WidthMs is the partition width of k, given the chunk partition width.
func (k Kind) WidthMs(chunkWidthMs int64) int64 {
	switch k {
	case KindRollup1h:
		return rollup1hWidthMs
	case KindRollup1d:
		return rollup1dWidthMs
	}
	return chunkWidthMs
}

// Key sizes of the partitioned column families.
const (
	partitionPrefixLen = 8                      // partitionStart
	seriesPrefixLen    = partitionPrefixLen + 8 // partitionStart | seriesID: the RocksDB prefix
	timeKeyLen         = seriesPrefixLen + 8    // partitionStart | seriesID | time
)

// partitionStart returns the start of the epoch-aligned window of width
// widthMs that holds t.
// REQUIRES: widthMs > 0, t within [MinTimestampMs, MaxTimestampMs].
func partitionStart(t, widthMs int64) int64 {
	p := t / widthMs * widthMs
	if p > t { // Go division truncates toward zero; floor for negative t.
		p -= widthMs
	}
	return p
}

func clampTime(t int64) int64 {
	return max(MinTimestampMs, min(t, MaxTimestampMs))
}

func inTimeRange(t int64) bool { return t >= MinTimestampMs && t <= MaxTimestampMs }

func appendTime(dst []byte, t int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(t)^(1<<63))
}

func decodeTime(b []byte) int64 {
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
}

func appendID(dst []byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, id)
}

// appendTimeKey appends partitionStart | seriesID | t.
func appendTimeKey(dst []byte, partition int64, seriesID uint64, t int64) []byte {
	dst = appendTime(dst, partition)
	dst = appendID(dst, seriesID)
	return appendTime(dst, t)
}

// Escaping of label names and values in postings keys (see the package doc).
const (
	escByte  = 0x00
	escZero  = 0xFF // escByte escZero is a literal 0x00
	escTerm  = 0x01 // escByte escTerm ends the string
	escAfter = 0x02 // escByte escAfter sorts after every key of the string
)

func appendEscaped(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		dst = append(dst, escByte, escZero)
		s = s[i+1:]
	}
}

// appendTerminated appends esc(s) term.
func appendTerminated(dst []byte, s string) []byte {
	return append(appendEscaped(dst, s), escByte, escTerm)
}

// appendAfter appends esc(s) 0x00 0x02: the smallest key greater than every
// key that starts with esc(s) term.
func appendAfter(dst []byte, s string) []byte {
	return append(appendEscaped(dst, s), escByte, escAfter)
}

// readTerminated parses esc(s) term at the start of b and returns s and the
// rest of b.
func readTerminated(b []byte) (string, []byte, error) {
	var out []byte
	for {
		i := bytes.IndexByte(b, escByte)
		if i < 0 || i+1 >= len(b) {
			return "", nil, fmt.Errorf("%w: unterminated label string", ErrCorrupt)
		}
		switch b[i+1] {
		case escTerm:
			if out == nil {
				return string(b[:i]), b[i+2:], nil
			}
			out = append(out, b[:i]...)
			return string(out), b[i+2:], nil
		case escZero:
			out = append(out, b[:i]...)
			out = append(out, 0)
			b = b[i+2:]
		default:
			return "", nil, fmt.Errorf("%w: bad escape 0x00 0x%02x in label string", ErrCorrupt, b[i+1])
		}
	}
}

// Postings keys.

func appendPostingsValuePrefix(dst []byte, name, value string) []byte {
	return appendTerminated(appendTerminated(dst, name), value)
}

func appendPostingsKey(dst []byte, name, value string, seriesID uint64) []byte {
	return appendID(appendPostingsValuePrefix(dst, name, value), seriesID)
}
