package raftlog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/tributarydb/tributary/internal/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Options configure a Log.
type Options struct {
	// Dir holds the log; it is created if missing. One Log at a time may
	// use it.
	Dir string
	// FS is the file system (default vfs.OS{}); crash tests pass a
	// vfs.CrashFS.
	FS vfs.FS
	// SegmentBytes is the size past which the log starts a new segment
	// file (default 64 MiB, at least 4 KiB).
	SegmentBytes int64
	// Logger receives repair notices (default slog.Default()).
	Logger *slog.Logger
}

// DefaultSegmentBytes is the default Options.SegmentBytes.
const DefaultSegmentBytes = 64 << 20

// Validate fills defaults and rejects impossible options.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("raftlog: Options.Dir is empty")
	}
	if o.FS == nil {
		o.FS = vfs.OS{}
	}
	o.SegmentBytes = cmp.Or(o.SegmentBytes, DefaultSegmentBytes)
	if o.SegmentBytes < 4<<10 {
		return fmt.Errorf("raftlog: SegmentBytes %d is below 4 KiB", o.SegmentBytes)
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return nil
}

// Log is a durable raft log: raft.Storage plus the writes raft asks of an
// application. See the package documentation.
type Log struct {
	opts    Options
	fs      vfs.FS
	snapDir string

	mu sync.Mutex
	// REQUIRES: mu held for everything below.
	hs   raftpb.HardState
	snap snapMeta // latest snapshot; Index 0: none
	// ents[0] is a dummy holding the index and term of the last compacted
	// entry (0, 0 when nothing was compacted); ents[1:] are the live
	// entries, contiguous.
	ents []raftpb.Entry
	// entSeg[i] is the segment holding the record of ents[i] (entSeg[0]
	// is unused). It never decreases with i.
	entSeg []uint64
	boot   uint64
	segs   []uint64 // segment sequence numbers on disk, ascending
	cur    vfs.File
	curLen int64
	buf    []byte
	// failed is the first write or fsync error; the log accepts no more
	// writes after it (after a failed fsync the kernel may have dropped
	// the dirty pages, so a retry could report success for lost data).
	failed error
	closed bool
}

var _ raft.Storage = (*Log)(nil)

// ErrClosed is returned by writes after Close.
var ErrClosed = errors.New("raftlog: closed")

func segName(seq uint64) string { return fmt.Sprintf("%020d.rlog", seq) }

func parseSegName(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, ".rlog")
	if !ok || len(base) != 20 {
		return 0, false
	}
	seq, err := strconv.ParseUint(base, 10, 64)
	return seq, err == nil && seq > 0
}

func snapName(index, term uint64) string { return fmt.Sprintf("%020d-%020d.snap", index, term) }

// Open opens the log in opts.Dir, creating it if needed. It replays every
// segment, cuts a torn tail off the last one, checks that the log is
// whole, verifies the latest snapshot file, removes stale snapshot files,
// and starts a new segment recording one more boot.
func Open(opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l := &Log{opts: opts, fs: opts.FS, snapDir: filepath.Join(opts.Dir, "snap")}
	for _, d := range []string{opts.Dir, l.snapDir} {
		// Durable: a log whose directory entry a power cut takes away is
		// a member that forgot its votes and entries.
		if err := vfs.MkdirAllDurable(l.fs, d, 0o755); err != nil {
			return nil, fmt.Errorf("raftlog: create %s: %w", d, err)
		}
	}
	names, err := l.fs.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("raftlog: list %s: %w", opts.Dir, err)
	}
	var segs []uint64
	for _, name := range names {
		if seq, ok := parseSegName(name); ok {
			segs = append(segs, seq)
		}
	}
	slices.Sort(segs)

	r := &replay{}
	for i, seq := range segs {
		last := i == len(segs)-1
		keep, err := l.replaySegment(r, seq, last)
		if err != nil {
			return nil, err
		}
		if keep {
			l.segs = append(l.segs, seq)
		}
	}
	if err := r.finish(); err != nil {
		return nil, &CorruptionError{Path: opts.Dir, Reason: err.Error()}
	}
	l.hs, l.snap, l.boot = r.hs, r.snap, r.boot
	l.ents = append([]raftpb.Entry{{Index: r.dummyIndex, Term: r.dummyTerm}}, r.ents...)
	l.entSeg = append([]uint64{0}, r.entSeg...)
	if l.snap.Index > 0 {
		if _, _, err := l.readSnapFile(l.snap); err != nil {
			return nil, err
		}
	}
	if err := l.removeStaleSnapshots(); err != nil {
		return nil, err
	}
	next := uint64(1)
	if len(segs) > 0 {
		next = segs[len(segs)-1] + 1
	}
	l.boot++
	if err := l.startSegment(next); err != nil {
		return nil, err
	}
	l.removeObsoleteSegments()
	return l, nil
}

// replay is the log state rebuilt from segment records.
type replay struct {
	hs                    raftpb.HardState
	snap                  snapMeta
	dummyIndex, dummyTerm uint64
	// ents is a contiguous run of entries starting at ents[0].Index. After
	// segments were deleted it may start past dummyIndex+1 until a later
	// compaction or snapshot record covers the gap; finish checks that
	// none is left.
	ents   []raftpb.Entry
	entSeg []uint64
	boot   uint64
}

func (r *replay) entry(e raftpb.Entry, seq uint64) {
	if e.Index <= r.dummyIndex {
		return
	}
	if len(r.ents) > 0 {
		start := r.ents[0].Index
		if e.Index >= start && e.Index <= start+uint64(len(r.ents)) {
			// Append, or overwrite a suffix (raft replaced entries).
			k := e.Index - start
			r.ents, r.entSeg = append(r.ents[:k], e), append(r.entSeg[:k], seq)
			return
		}
	}
	// Empty, or not adjacent: entries before it lived in removed segments.
	r.ents, r.entSeg = append(r.ents[:0], e), append(r.entSeg[:0], seq)
}

func (r *replay) compact(index, term uint64) error {
	if index < r.dummyIndex {
		return nil // restated in a segment header, already superseded
	}
	if len(r.ents) > 0 {
		start := r.ents[0].Index
		if index >= start && index < start+uint64(len(r.ents)) && r.ents[index-start].Term != term {
			return fmt.Errorf("compaction to %d/%d disagrees with entry term %d", index, term, r.ents[index-start].Term)
		}
		switch {
		case index >= start+uint64(len(r.ents))-1:
			r.ents, r.entSeg = r.ents[:0], r.entSeg[:0]
		case index >= start:
			k := index + 1 - start
			r.ents, r.entSeg = r.ents[k:], r.entSeg[k:]
		}
	}
	r.dummyIndex, r.dummyTerm = index, term
	return nil
}

func (r *replay) finish() error {
	// A snapshot's index was committed when it was taken or received; a
	// commit record may lag it only if one was lost, which fsync order
	// rules out, but raft refuses to start with commit < snapshot.
	r.hs.Commit = max(r.hs.Commit, r.snap.Index)
	if len(r.ents) > 0 && r.ents[0].Index != r.dummyIndex+1 {
		return fmt.Errorf("entries %d..%d are missing", r.dummyIndex+1, r.ents[0].Index-1)
	}
	last := r.dummyIndex + uint64(len(r.ents))
	if r.hs.Commit > last {
		return fmt.Errorf("commit index %d is past the last entry %d", r.hs.Commit, last)
	}
	if r.snap.Index < r.dummyIndex {
		return fmt.Errorf("log compacted to %d past the latest snapshot %d", r.dummyIndex, r.snap.Index)
	}
	return nil
}

// replaySegment applies the records of one segment to r. In the last
// segment a damaged record is a torn tail: the file is cut there (and
// removed if not even its header survived). Anywhere else damage is
// corruption. It reports whether the segment is kept.
func (l *Log) replaySegment(r *replay, seq uint64, last bool) (bool, error) {
	path := filepath.Join(l.opts.Dir, segName(seq))
	data, err := vfs.ReadFile(l.fs, path, readBound)
	if err != nil {
		return false, fmt.Errorf("raftlog: read %s: %w", path, err)
	}
	hseq, herr := parseHeader(data)
	if herr == nil && hseq != seq {
		herr = fmt.Errorf("header names segment %d", hseq)
	}
	if herr != nil {
		// A segment is synced with its header before anything depends on
		// it, so only the newest one can have a torn header, and only if
		// it holds nothing else.
		if last && isTornHeader(data) {
			l.opts.Logger.Warn("raft log: removing segment with a torn header", "file", path, "bytes", len(data))
			if err := l.fs.Remove(path); err != nil {
				return false, fmt.Errorf("raftlog: remove torn segment %s: %w", path, err)
			}
			if err := l.fs.SyncDir(l.opts.Dir); err != nil {
				return false, fmt.Errorf("raftlog: sync %s: %w", l.opts.Dir, err)
			}
			return false, nil
		}
		return false, &CorruptionError{Path: path, Reason: "segment header: " + herr.Error()}
	}
	off := headerSize
	for off < len(data) {
		typ, payload, n, err := nextRecord(data[off:])
		if err == nil {
			err = applyRecord(r, typ, payload, seq)
		}
		if err != nil {
			// A torn write damages only the end of the newest segment: a
			// bad record that a valid one follows is damage to data that
			// was synced (and acknowledged), never a torn tail.
			if !last || validRecordFollows(data, off) {
				return false, &CorruptionError{Path: path, Offset: int64(off), Reason: err.Error()}
			}
			l.opts.Logger.Warn("raft log: cutting torn tail", "file", path, "offset", off, "bytes", len(data)-off, "reason", err.Error())
			if err := truncateFile(l.fs, path, int64(off)); err != nil {
				return false, fmt.Errorf("raftlog: cut torn tail of %s: %w", path, err)
			}
			break
		}
		off += n
	}
	return true, nil
}

// validRecordFollows reports whether the record frame at off is whole (its
// length fits in data) and the frame after it is a valid record.
func validRecordFollows(data []byte, off int) bool {
	if len(data)-off < frameSize {
		return false
	}
	length := binary.LittleEndian.Uint32(data[off:])
	next := uint64(off) + 8 + uint64(length)
	if length == 0 || length > MaxRecordBytes || next >= uint64(len(data)) {
		return false
	}
	_, _, _, err := nextRecord(data[next:])
	return err == nil
}

// isTornHeader reports whether data can be what is left of a header write
// interrupted by a crash: shorter than a header, or a header-sized prefix
// that is all zeros.
func isTornHeader(data []byte) bool {
	if len(data) < headerSize {
		return true
	}
	for _, c := range data[:headerSize] {
		if c != 0 {
			return false
		}
	}
	return true
}

func applyRecord(r *replay, typ byte, payload []byte, seq uint64) error {
	switch typ {
	case recEntry:
		e, err := decodeEntry(payload)
		if err != nil {
			return fmt.Errorf("entry record: %w", err)
		}
		// Copy: data holds the whole file, which must not stay pinned
		// by a few live entries.
		e.Data = slices.Clone(e.Data)
		r.entry(e, seq)
	case recHardState:
		hs, err := decodeHardState(payload)
		if err != nil {
			return fmt.Errorf("hard state record: %w", err)
		}
		r.hs = hs
	case recSnapshot:
		m, reset, err := decodeSnapshotRecord(payload)
		if err != nil {
			return fmt.Errorf("snapshot record: %w", err)
		}
		if m.Index < r.snap.Index {
			return fmt.Errorf("snapshot record %d older than snapshot %d", m.Index, r.snap.Index)
		}
		r.snap = m
		if reset {
			r.dummyIndex, r.dummyTerm = m.Index, m.Term
			r.ents, r.entSeg = r.ents[:0], r.entSeg[:0]
		}
	case recCompact:
		index, term, err := decodeCompact(payload)
		if err != nil {
			return fmt.Errorf("compact record: %w", err)
		}
		return r.compact(index, term)
	case recBoot:
		n, err := decodeBoot(payload)
		if err != nil {
			return fmt.Errorf("boot record: %w", err)
		}
		r.boot = max(r.boot, n)
	default:
		return fmt.Errorf("unknown record type %d", typ)
	}
	return nil
}

// readBound is the bound of vfs.ReadFile for the log's files: none beyond
// the address space. A segment or a snapshot is read whole, as large as
// the log wrote it (a segment is about SegmentBytes plus one record, but a
// log written with a larger SegmentBytes must still open).
const readBound = math.MaxInt

func truncateFile(fsys vfs.FS, path string, size int64) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readSnapFile reads and verifies the snapshot file m names.
// REQUIRES: l.mu held or l not yet shared.
func (l *Log) readSnapFile(m snapMeta) (snapMeta, []byte, error) {
	path := filepath.Join(l.snapDir, snapName(m.Index, m.Term))
	data, err := vfs.ReadFile(l.fs, path, readBound)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil, &CorruptionError{Path: path, Reason: "the latest snapshot file is missing"}
	}
	if err != nil {
		return m, nil, fmt.Errorf("raftlog: read snapshot %s: %w", path, err)
	}
	got, body, err := decodeSnapFile(data)
	if err != nil {
		return m, nil, &CorruptionError{Path: path, Reason: err.Error()}
	}
	if !got.equal(m) {
		return m, nil, &CorruptionError{Path: path, Reason: fmt.Sprintf("file holds snapshot %d/%d crc %08x, the log names %d/%d crc %08x",
			got.Index, got.Term, got.FileCRC, m.Index, m.Term, m.FileCRC)}
	}
	return got, body, nil
}

// removeStaleSnapshots deletes snapshot files other than the latest one,
// and temporary files left by a crash.
func (l *Log) removeStaleSnapshots() error {
	names, err := l.fs.ReadDir(l.snapDir)
	if err != nil {
		return fmt.Errorf("raftlog: list %s: %w", l.snapDir, err)
	}
	keep := ""
	if l.snap.Index > 0 {
		keep = snapName(l.snap.Index, l.snap.Term)
	}
	for _, name := range names {
		if name == keep || !(strings.HasSuffix(name, ".snap") || strings.HasSuffix(name, vfs.TempSuffix)) {
			continue
		}
		if err := l.fs.Remove(filepath.Join(l.snapDir, name)); err != nil {
			l.opts.Logger.Warn("raft log: cannot remove stale snapshot", "file", name, "err", err)
		}
	}
	return nil
}
