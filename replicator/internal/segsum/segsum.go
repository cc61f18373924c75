// Package segsum is the replicator's file of per-segment summaries: for
// each sealed WAL segment the replicator has seen and not yet released, the
// numbers its footer vouched for (sequence, previous sequence, points, time
// span). When a segment later vanishes from the node's disk or is
// quarantined as corrupt, the summary is what says how many points it held
// and in which time span, so that they can be re-shipped from the node's
// store with an honest count (and kept as a gap when they cannot).
//
// # File layout
//
// All integers are little-endian; CRCs are CRC32C (Castagnoli).
//
//	header:  | magic "TRSS" | version 1 | idLen (1) | node id (idLen) | crc32c (4) |
//	entry:   | seq (8) | prev_seq (8) | points (8, i64) | minT (8) | maxT (8) | crc32c (4) |
//
// The header CRC covers the header bytes before it; each entry's CRC
// covers its 40 bytes before it. Entries are appended (write, then fsync)
// as segments are seen; an entry for a sequence already present replaces
// it on load (the later one wins). Load stops at the first entry that is
// short or fails its CRC: a torn tail (a crash during an append) loses
// only entries not yet fsynced. A file whose header does not decode, or
// that belongs to another node id, is ignored and rewritten.
//
// Compact rewrites the file with the entries still wanted, atomically
// (vfs.WriteFileAtomic: write <path>.tmp, fsync, rename, fsync the
// directory; without the directory fsync a power cut could undo the
// rename), and appends go on in the file renamed into place.
//
// # Power cuts
//
// The file is read and written through the file-system seam
// (internal/vfs), and the package's crash test runs it on a vfs.CrashFS,
// cutting the power at every step of a run of appends and compactions,
// tearing what was not fsynced: after a cut, Open holds every summary an
// Add returned nil for (unless dropped since), and nothing that was never
// added.
//
// A File is not safe for concurrent use.
package segsum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"

	"github.com/tributarydb/tributary/internal/vfs"
)

const (
	magic      = "TRSS"
	version    = 1
	entryBytes = 8*5 + 4
	maxNodeID  = 255
	// readBound: the file is read whole, however many summaries it
	// holds; compaction, not a fixed size, keeps it small.
	readBound = math.MaxInt
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Summary is what a sealed segment's footer says about it.
type Summary struct {
	Seq, PrevSeq uint64
	Points       int64
	MinT, MaxT   int64 // ms; both 0 when the segment holds no points
}

// File is an open summaries file and the summaries it holds.
type File struct {
	fs     vfs.FS
	path   string
	nodeID string
	f      vfs.File // nil after Close, or after a failed compaction could not reopen the file
	// dirDirty: a compaction failed, so the file's directory entry may
	// not be durable (its rename may be undone by a power cut); the next
	// Add fsyncs the directory before it returns.
	dirDirty bool
	sums     map[uint64]Summary
	// entries counts the entries in the file (live or not), to decide
	// when to compact.
	entries int
}

// Open loads the summaries at path, through fsys, for nodeID, creating
// the file if needed. A damaged or foreign file is replaced by an empty
// one; the returned note says why (empty when the file was fine or new).
func Open(fsys vfs.FS, path, nodeID string) (*File, string, error) {
	if nodeID == "" || len(nodeID) > maxNodeID {
		return nil, "", fmt.Errorf("segment summaries: node id of %d bytes", len(nodeID))
	}
	s := &File{fs: fsys, path: path, nodeID: nodeID, sums: map[uint64]Summary{}}
	b, err := vfs.ReadFile(fsys, path, readBound)
	var note string
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, "", fmt.Errorf("read segment summaries: %w", err)
	default:
		var n int
		n, note = s.decode(b)
		s.entries = n
		if note == "" {
			f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return nil, "", fmt.Errorf("open segment summaries: %w", err)
			}
			if valid := headerBytes(nodeID) + int64(n)*entryBytes; valid < int64(len(b)) {
				// Cut the torn tail, or appends would land behind it.
				if err := f.Truncate(valid); err != nil {
					f.Close()
					return nil, "", fmt.Errorf("truncate segment summaries: %w", err)
				}
			}
			s.f = f
			return s, "", nil
		}
		s.sums = map[uint64]Summary{}
	}
	if err := s.rewrite(); err != nil {
		s.Close()
		return nil, "", err
	}
	return s, note, nil
}

func headerBytes(nodeID string) int64 { return int64(4 + 1 + 1 + len(nodeID) + 4) }

func appendHeader(b []byte, nodeID string) []byte {
	start := len(b)
	b = append(b, magic...)
	b = append(b, version, byte(len(nodeID)))
	b = append(b, nodeID...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

func appendEntry(b []byte, s Summary) []byte {
	start := len(b)
	le := binary.LittleEndian
	b = le.AppendUint64(b, s.Seq)
	b = le.AppendUint64(b, s.PrevSeq)
	b = le.AppendUint64(b, uint64(s.Points))
	b = le.AppendUint64(b, uint64(s.MinT))
	b = le.AppendUint64(b, uint64(s.MaxT))
	return le.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// decode reads b into s.sums and returns the number of valid entries; the
// note is non-empty when the header is unusable.
func (s *File) decode(b []byte) (int, string) {
	hb := headerBytes(s.nodeID)
	le := binary.LittleEndian
	switch {
	case len(b) < 6 || string(b[:4]) != magic:
		return 0, "not a segment summaries file"
	case b[4] != version:
		return 0, fmt.Sprintf("unsupported version %d", b[4])
	case int(b[5]) != len(s.nodeID) || int64(len(b)) < hb:
		return 0, "written for another node"
	case le.Uint32(b[hb-4:]) != crc32.Checksum(b[:hb-4], castagnoli):
		return 0, "header checksum mismatch"
	case string(b[6:6+len(s.nodeID)]) != s.nodeID:
		return 0, fmt.Sprintf("written for node %q", b[6:6+len(s.nodeID)])
	}
	n := 0
	for p := b[hb:]; len(p) >= entryBytes; p = p[entryBytes:] {
		if le.Uint32(p[40:]) != crc32.Checksum(p[:40], castagnoli) {
			break
		}
		e := Summary{
			Seq: le.Uint64(p), PrevSeq: le.Uint64(p[8:]), Points: int64(le.Uint64(p[16:])),
			MinT: int64(le.Uint64(p[24:])), MaxT: int64(le.Uint64(p[32:])),
		}
		if e.PrevSeq >= e.Seq || e.Points < 0 || e.MinT > e.MaxT {
			break // cannot come from a sealed segment: treat as damage
		}
		s.sums[e.Seq] = e
		n++
	}
	return n, ""
}

// Get returns the summary of segment seq.
func (s *File) Get(seq uint64) (Summary, bool) {
	e, ok := s.sums[seq]
	return e, ok
}

// Chain returns the summaries of the segments that cover after+1..through
// exactly, each one's PrevSeq the previous one's Seq, oldest first; ok is
// false when a link is missing.
func (s *File) Chain(after, through uint64) ([]Summary, bool) {
	// Segments are found by their own sequence; walk down from through.
	var out []Summary
	for seq := through; seq > after; {
		e, ok := s.sums[seq]
		if !ok || e.PrevSeq < after {
			return nil, false
		}
		out = append(out, e)
		seq = e.PrevSeq
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, len(out) > 0
}

// Len returns the number of summaries held.
func (s *File) Len() int { return len(s.sums) }

// Add appends the summaries not held yet (or held with other numbers)
// and fsyncs the file once.
func (s *File) Add(sums ...Summary) error {
	var b []byte
	for _, e := range sums {
		if old, ok := s.sums[e.Seq]; ok && old == e {
			continue
		}
		if e.PrevSeq >= e.Seq || e.Points < 0 || e.MinT > e.MaxT {
			return fmt.Errorf("BUG: segment summary %+v", e)
		}
		b = appendEntry(b, e)
		s.sums[e.Seq] = e
		s.entries++
	}
	if len(b) == 0 {
		return nil
	}
	if s.f == nil {
		return errors.New("append segment summaries: the file is closed")
	}
	if _, err := s.f.Write(b); err != nil {
		return fmt.Errorf("append segment summaries: %w", err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("fsync segment summaries: %w", err)
	}
	if s.dirDirty {
		dir := filepath.Dir(s.path)
		if err := s.fs.SyncDir(dir); err != nil {
			return fmt.Errorf("fsync segment summaries' directory %s: %w", dir, err)
		}
		s.dirDirty = false
	}
	return nil
}

// DropThrough forgets the summaries of segments at or below seq, and
// compacts the file once most of its entries are forgotten.
func (s *File) DropThrough(seq uint64) error {
	for k := range s.sums {
		if k <= seq {
			delete(s.sums, k)
		}
	}
	if s.entries < 256 || s.entries < 2*len(s.sums) {
		return nil
	}
	return s.rewrite()
}

// rewrite replaces the file with the summaries held, atomically.
func (s *File) rewrite() error {
	keys := make([]uint64, 0, len(s.sums))
	for k := range s.sums {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	b := appendHeader(nil, s.nodeID)
	for _, k := range keys {
		b = appendEntry(b, s.sums[k])
	}
	werr := vfs.WriteFileAtomic(s.fs, s.path, 0o644, b)
	if werr == nil {
		s.entries, s.dirDirty = len(keys), false
	} else {
		s.dirDirty = true
	}
	// Appends go to the file path names: the new one once the rename
	// happened (the old handle names a file no longer at path), the old
	// one, still whole, if it did not. A failed WriteFileAtomic does not
	// say which, so reopen either way.
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	f, err := s.fs.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		s.f = f
	}
	switch {
	case werr != nil:
		return fmt.Errorf("rewrite segment summaries: %w", werr)
	case err != nil:
		return fmt.Errorf("reopen segment summaries: %w", err)
	}
	return nil
}

// Close closes the file.
func (s *File) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
