package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"

	"github.com/tributarydb/tributary/internal/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// maxKeptBuf bounds the write buffer kept between calls.
const maxKeptBuf = 1 << 20

// writable reports why the log cannot be written, if it cannot.
// REQUIRES: l.mu held.
func (l *Log) writable() error {
	if l.closed {
		return ErrClosed
	}
	return l.failed
}

// fail records the first write or fsync error; the log refuses writes
// from then on. REQUIRES: l.mu held.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
	}
	return err
}

// startSegment creates segment seq holding a header and records that
// restate the whole log state except its entries (boot count, latest
// snapshot, compaction point, hard state), and makes it durable, file and
// directory entry, before it is used. Because every segment restates
// that state, a segment can be deleted as soon as no live entry is in it.
// REQUIRES: l.mu held (or l not yet shared); the current segment synced.
func (l *Log) startSegment(seq uint64) error {
	path := filepath.Join(l.opts.Dir, segName(seq))
	f, err := l.fs.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return l.fail(fmt.Errorf("raftlog: create %s: %w", path, err))
	}
	b := appendHeader(l.buf[:0], seq)
	b = appendRecord(b, recBoot, binary.AppendUvarint(nil, l.boot))
	if l.snap.Index > 0 {
		b = appendRecord(b, recSnapshot, encodeSnapshotRecord(nil, l.snap, false))
	}
	b = appendRecord(b, recCompact, encodeCompact(nil, l.ents[0].Index, l.ents[0].Term))
	if !raft.IsEmptyHardState(l.hs) {
		b = appendRecord(b, recHardState, encodeHardState(nil, l.hs))
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return l.fail(fmt.Errorf("raftlog: write %s: %w", path, err))
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return l.fail(fmt.Errorf("raftlog: sync %s: %w", path, err))
	}
	// Sync the directory: without it a power cut can lose the new file
	// while later records in it were acknowledged as durable.
	if err := l.fs.SyncDir(l.opts.Dir); err != nil {
		f.Close()
		return l.fail(fmt.Errorf("raftlog: sync %s: %w", l.opts.Dir, err))
	}
	if l.cur != nil {
		if err := l.cur.Close(); err != nil {
			l.opts.Logger.Warn("raft log: close segment", "err", err)
		}
	}
	l.cur, l.curLen = f, int64(len(b))
	l.segs = append(l.segs, seq)
	l.keepBuf(b)
	return nil
}

func (l *Log) keepBuf(b []byte) {
	if cap(b) <= maxKeptBuf {
		l.buf = b[:0]
	} else {
		l.buf = nil
	}
}

// write appends b to the current segment, fsyncing if sync.
// REQUIRES: l.mu held.
func (l *Log) write(b []byte, sync bool) error {
	seq := l.segs[len(l.segs)-1]
	if _, err := l.cur.Write(b); err != nil {
		return l.fail(fmt.Errorf("raftlog: write segment %d: %w", seq, err))
	}
	l.curLen += int64(len(b))
	if sync {
		if err := l.cur.Sync(); err != nil {
			return l.fail(fmt.Errorf("raftlog: sync segment %d: %w", seq, err))
		}
	}
	return nil
}

// maybeRotate starts a new segment once the current one is full.
// REQUIRES: l.mu held; the current segment synced.
func (l *Log) maybeRotate() error {
	if l.curLen < l.opts.SegmentBytes {
		return nil
	}
	if err := l.startSegment(l.segs[len(l.segs)-1] + 1); err != nil {
		return err
	}
	l.removeObsoleteSegments()
	return nil
}

// Save persists what a raft Ready asks for, in the order raft requires:
// the snapshot (written to its own file, made durable, then recorded in
// the log, discarding every entry), then the entries (an entry at index i
// replaces any stored entry at i or after), then the hard state. With sync
// (a Ready's MustSync) or a snapshot, everything is fsynced before Save
// returns; otherwise the records are written but may be lost by a crash,
// which raft allows for a commit-index-only change.
//
// An error from a file of the log fails the log for good: every later
// write returns it.
func (l *Log) Save(hs raftpb.HardState, ents []raftpb.Entry, snap raftpb.Snapshot, sync bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	dummy, last := l.ents[0].Index, l.lastIndex()
	var newSnap *snapMeta
	if !raft.IsEmptySnap(snap) {
		md := snap.Metadata
		if md.Index <= l.snap.Index {
			return fmt.Errorf("raftlog: snapshot %d is not newer than snapshot %d: %w", md.Index, l.snap.Index, raft.ErrSnapOutOfDate)
		}
		crc, err := l.writeSnapFile(md.Index, md.Term, md.ConfState, snap.Data)
		if err != nil {
			return err
		}
		newSnap = &snapMeta{Index: md.Index, Term: md.Term, ConfState: md.ConfState, FileCRC: crc}
		dummy, last = md.Index, md.Index
	}
	for len(ents) > 0 && ents[0].Index <= dummy {
		ents = ents[1:] // already compacted away
	}
	if len(ents) > 0 {
		if ents[0].Index > last+1 {
			return fmt.Errorf("raftlog: BUG: appending entry %d leaves a gap after %d", ents[0].Index, last)
		}
		for i := 1; i < len(ents); i++ {
			if ents[i].Index != ents[i-1].Index+1 {
				return fmt.Errorf("raftlog: BUG: entries %d and %d are not contiguous", ents[i-1].Index, ents[i].Index)
			}
		}
	}
	b := l.buf[:0]
	if newSnap != nil {
		b = appendRecord(b, recSnapshot, encodeSnapshotRecord(nil, *newSnap, true))
	}
	var scratch []byte
	for _, e := range ents {
		scratch = encodeEntry(scratch[:0], e)
		if len(scratch)+1 > MaxRecordBytes {
			return fmt.Errorf("raftlog: entry %d is %d bytes, limit is %d", e.Index, len(scratch), MaxRecordBytes)
		}
		b = appendRecord(b, recEntry, scratch)
	}
	if !raft.IsEmptyHardState(hs) {
		b = appendRecord(b, recHardState, encodeHardState(nil, hs))
	}
	if len(b) == 0 {
		return nil
	}
	if err := l.write(b, sync || newSnap != nil); err != nil {
		return err
	}
	l.keepBuf(b)
	if newSnap != nil {
		old := l.snap
		l.snap = *newSnap
		l.ents = []raftpb.Entry{{Index: newSnap.Index, Term: newSnap.Term}}
		l.entSeg = []uint64{0}
		l.removeSnapFile(old)
	}
	if len(ents) > 0 {
		k := ents[0].Index - l.ents[0].Index
		seq := l.segs[len(l.segs)-1]
		l.ents = append(l.ents[:k], ents...)
		l.entSeg = l.entSeg[:k]
		for range ents {
			l.entSeg = append(l.entSeg, seq)
		}
	}
	if !raft.IsEmptyHardState(hs) {
		l.hs = hs
	}
	if newSnap != nil {
		l.removeObsoleteSegments()
	}
	if !sync && newSnap == nil {
		return nil // rotate only after a sync: the old segment must be durable first
	}
	return l.maybeRotate()
}

// Append stores entries durably (Save with only entries).
func (l *Log) Append(ents []raftpb.Entry) error {
	return l.Save(raftpb.HardState{}, ents, raftpb.Snapshot{}, true)
}

// SetHardState stores the hard state durably.
func (l *Log) SetHardState(hs raftpb.HardState) error {
	return l.Save(hs, nil, raftpb.Snapshot{}, true)
}

// ApplySnapshot installs a snapshot received from the leader: it becomes
// the latest snapshot and every stored entry is discarded.
func (l *Log) ApplySnapshot(snap raftpb.Snapshot) error {
	return l.Save(raftpb.HardState{}, nil, snap, true)
}

// CreateSnapshot records a snapshot of the state machine taken at applied
// index index, with the configuration cs in force there. Entries are kept
// until Compact. data is written to its own file, which is made durable
// before the log refers to it.
func (l *Log) CreateSnapshot(index uint64, cs raftpb.ConfState, data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if index <= l.snap.Index {
		return fmt.Errorf("raftlog: snapshot at %d is not newer than snapshot %d: %w", index, l.snap.Index, raft.ErrSnapOutOfDate)
	}
	term, err := l.term(index)
	if err != nil {
		return fmt.Errorf("raftlog: snapshot at %d: %w", index, err)
	}
	crc, err := l.writeSnapFile(index, term, cs, data)
	if err != nil {
		return err
	}
	m := snapMeta{Index: index, Term: term, ConfState: cs, FileCRC: crc}
	if err := l.write(appendRecord(nil, recSnapshot, encodeSnapshotRecord(nil, m, false)), true); err != nil {
		return err
	}
	old := l.snap
	l.snap = m
	l.removeSnapFile(old)
	return l.maybeRotate()
}

// Compact discards the entries before index; index becomes the dummy
// entry whose term is still known. index must not be past the latest
// snapshot. Segment files holding no live entry are deleted.
func (l *Log) Compact(index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	dummy := l.ents[0].Index
	switch {
	case index <= dummy:
		return raft.ErrCompacted
	case index > l.snap.Index:
		return fmt.Errorf("raftlog: compact to %d is past the latest snapshot %d", index, l.snap.Index)
	case index > l.lastIndex():
		return fmt.Errorf("raftlog: compact to %d is past the last entry %d: %w", index, l.lastIndex(), raft.ErrUnavailable)
	}
	k := index - dummy
	term := l.ents[k].Term
	// The record must be durable before segments are deleted: without it
	// the remaining segments would start after a gap.
	if err := l.write(appendRecord(nil, recCompact, encodeCompact(nil, index, term)), true); err != nil {
		return err
	}
	l.ents = slices.Clone(l.ents[k:])
	l.ents[0] = raftpb.Entry{Index: index, Term: term}
	l.entSeg = slices.Clone(l.entSeg[k:])
	l.entSeg[0] = 0
	l.removeObsoleteSegments()
	return l.maybeRotate()
}

// removeObsoleteSegments deletes the oldest segments while none of their
// records is a live entry (the newest segment restates everything else).
// A failed removal is only logged: the file is replayed harmlessly at the
// next Open and removed then. REQUIRES: l.mu held.
func (l *Log) removeObsoleteSegments() {
	minLive := l.segs[len(l.segs)-1]
	if len(l.ents) > 1 {
		minLive = l.entSeg[1]
	}
	removed := false
	for len(l.segs) > 1 && l.segs[0] < minLive {
		path := filepath.Join(l.opts.Dir, segName(l.segs[0]))
		if err := l.fs.Remove(path); err != nil {
			l.opts.Logger.Warn("raft log: cannot remove obsolete segment", "file", path, "err", err)
			break
		}
		l.segs = l.segs[1:]
		removed = true
	}
	if removed {
		if err := l.fs.SyncDir(l.opts.Dir); err != nil {
			l.opts.Logger.Warn("raft log: sync after removing segments", "err", err)
		}
	}
}

// writeSnapFile writes a snapshot file durably (vfs.WriteFileAtomic: a
// temporary file, fsync, rename, fsync of the directory; without the last
// a power cut can undo the rename after the log already refers to the
// file). It does not fail the log: nothing refers to the file until it is
// durable. REQUIRES: l.mu held.
func (l *Log) writeSnapFile(index, term uint64, cs raftpb.ConfState, data []byte) (uint32, error) {
	path := filepath.Join(l.snapDir, snapName(index, term))
	head := snapFileHead(index, term, cs, len(data))
	crc := crc32.Update(crc32.Checksum(head, castagnoli), castagnoli, data)
	if err := vfs.WriteFileAtomic(l.fs, path, 0o644, head, data, binary.LittleEndian.AppendUint32(nil, crc)); err != nil {
		tmp := path + vfs.TempSuffix
		if rerr := l.fs.Remove(tmp); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			l.opts.Logger.Warn("raft log: remove temporary snapshot", "file", tmp, "err", rerr)
		}
		return 0, fmt.Errorf("raftlog: write snapshot %d/%d: %w", index, term, err)
	}
	return crc, nil
}

// removeSnapFile deletes a superseded snapshot file (best effort: Open
// removes leftovers). REQUIRES: l.mu held.
func (l *Log) removeSnapFile(m snapMeta) {
	if m.Index == 0 {
		return
	}
	path := filepath.Join(l.snapDir, snapName(m.Index, m.Term))
	if err := l.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.opts.Logger.Warn("raft log: remove old snapshot", "file", path, "err", err)
	}
}

// Close syncs and closes the current segment. Reads keep working; writes
// return ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if l.cur == nil {
		return nil
	}
	var err error
	if l.failed == nil {
		err = l.cur.Sync()
	}
	if cerr := l.cur.Close(); err == nil {
		err = cerr
	}
	return err
}
