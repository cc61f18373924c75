package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"github.com/tributarydb/tributary/internal/vfs"
)

// The state file records the sequence counter, so that sequence numbers
// never go back even when the newest segment files are removed:
//
//	+-------+---------+--------------+--------------------+---------+
//	| magic | version | next seq     | last sealed seq    | crc32c  |
//	| TWST  | 1 byte  | uint64 LE    | uint64 LE          | 4 bytes |
//	+-------+---------+--------------+--------------------+---------+
//
// It is replaced atomically (vfs.WriteFileAtomic): written to
// wal.state.tmp, fsynced, renamed over wal.state, and the directory fsynced.
const (
	stateName    = "wal.state"
	stateTmpName = stateName + vfs.TempSuffix
	stateMagic   = "TWST"
	stateBytes   = 4 + 1 + 8 + 8 + 4
)

type state struct {
	next       uint64 // no segment with a smaller sequence will be created
	lastSealed uint64 // PrevSeq for the next segment
}

func (s state) encode() []byte {
	b := make([]byte, 0, stateBytes)
	b = append(b, stateMagic...)
	b = append(b, stateVersion)
	b = binary.LittleEndian.AppendUint64(b, s.next)
	b = binary.LittleEndian.AppendUint64(b, s.lastSealed)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeState(b []byte) (state, string) {
	switch {
	case len(b) != stateBytes:
		return state{}, fmt.Sprintf("%d bytes, want %d", len(b), stateBytes)
	case string(b[:4]) != stateMagic:
		return state{}, "bad magic"
	case b[4] != stateVersion:
		return state{}, fmt.Sprintf("unsupported version %d", b[4])
	case crc32.Checksum(b[:stateBytes-4], castagnoli) != binary.LittleEndian.Uint32(b[stateBytes-4:]):
		return state{}, "checksum mismatch"
	}
	return state{
		next:       binary.LittleEndian.Uint64(b[5:]),
		lastSealed: binary.LittleEndian.Uint64(b[13:]),
	}, ""
}

// loadState reads the state file, given the names in the directory. A
// leftover temporary file is removed (its rename never happened, so the
// state file is current). A damaged state file is quarantined; segment
// file names then decide the next sequence.
func (l *Log) loadState(names []string) (state, error) {
	if slices.Contains(names, stateTmpName) {
		if err := l.fs.Remove(l.path(stateTmpName)); err != nil {
			return state{}, fmt.Errorf("remove %s: %w", stateTmpName, err)
		}
	}
	if !slices.Contains(names, stateName) {
		return state{}, nil
	}
	path := l.path(stateName)
	f, err := l.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return state{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	b := make([]byte, stateBytes+1)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return state{}, fmt.Errorf("read %s: %w", path, err)
	}
	st, reason := decodeState(b[:n])
	if reason != "" {
		// Carry on rather than refuse to start: the segment names still
		// give a floor for the next sequence, and a number reused because
		// the newest segments were removed shows up as a checksum
		// conflict where the segments are shipped.
		if err := l.quarantine(path, stateName, 0, "state file: "+reason+"; sequence numbers continue after the segment names"); err != nil {
			return state{}, err
		}
		return state{}, nil
	}
	l.state = st
	return st, nil
}

// writeState replaces the state file unless it already holds these values.
// REQUIRES: maint held, or Open.
func (l *Log) writeState(next, lastSealed uint64) error {
	st := state{next: next, lastSealed: lastSealed}
	if st == l.state {
		return nil
	}
	// Without the directory fsync a power cut could undo the rename, and
	// sequence numbers handed out since could be handed out again.
	if err := vfs.WriteFileAtomic(countedFS{l}, l.path(stateName), 0o644, st.encode()); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	l.state = st
	return nil
}
