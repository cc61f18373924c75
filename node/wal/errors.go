package wal

import (
	"errors"
	"fmt"
)

// ErrCorrupt is matched (errors.Is) by every *CorruptionError.
var ErrCorrupt = errors.New("wal: corrupt")

// ErrClosed is returned once the Log is closed by Append, MaybeCut, Cut,
// Replay, RemoveBefore and a second Close. (Segments, Stats and OpenSeq keep
// answering; Sync of a position appended before Close returns nil.)
var ErrClosed = errors.New("wal: log closed")

// ErrInvalidRecord is wrapped by Append when a record cannot be written
// (negative point count, inverted time range, too large). The Log stays
// usable.
var ErrInvalidRecord = errors.New("wal: invalid record")

// ErrSegmentChanged is returned by AppendIn when the open segment is not
// the one the caller named (the Log recovered from a failure and opened a
// fresh one). Nothing was appended; the caller starts over with MaybeCut.
var ErrSegmentChanged = errors.New("wal: open segment changed")

// CorruptionError says where a segment file is damaged and why.
type CorruptionError struct {
	Path   string // segment file
	Offset int64  // byte offset of the damaged header, frame or footer
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal: corrupt segment %s at offset %d: %s", e.Path, e.Offset, e.Reason)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }
