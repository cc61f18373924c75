package raftlog

import (
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// lastIndex: REQUIRES l.mu held.
func (l *Log) lastIndex() uint64 { return l.ents[0].Index + uint64(len(l.ents)) - 1 }

// term: REQUIRES l.mu held.
func (l *Log) term(i uint64) (uint64, error) {
	dummy := l.ents[0].Index
	switch {
	case i < dummy:
		return 0, raft.ErrCompacted
	case i > l.lastIndex():
		return 0, raft.ErrUnavailable
	}
	return l.ents[i-dummy].Term, nil
}

// InitialState implements raft.Storage: the stored hard state and the
// configuration of the latest snapshot (later configuration changes are
// in the entries, which the application applies again after a restart).
func (l *Log) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hs, l.snap.ConfState, nil
}

// Entries implements raft.Storage. The returned slice is a copy; the
// entries' Data is shared and must not be modified.
func (l *Log) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	dummy := l.ents[0].Index
	switch {
	case lo <= dummy:
		return nil, raft.ErrCompacted
	case hi > l.lastIndex()+1 || lo > hi:
		return nil, raft.ErrUnavailable
	case lo == hi:
		return nil, nil
	}
	ents := l.ents[lo-dummy : hi-dummy]
	size := uint64(ents[0].Size())
	n := 1
	for ; n < len(ents); n++ {
		size += uint64(ents[n].Size())
		if size > maxSize {
			break
		}
	}
	return slices.Clone(ents[:n]), nil
}

// Term implements raft.Storage.
func (l *Log) Term(i uint64) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term(i)
}

// LastIndex implements raft.Storage.
func (l *Log) LastIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastIndex(), nil
}

// FirstIndex implements raft.Storage.
func (l *Log) FirstIndex() (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ents[0].Index + 1, nil
}

// Snapshot implements raft.Storage: the latest snapshot, read from its
// file and verified. An empty snapshot when none was taken.
func (l *Log) Snapshot() (raftpb.Snapshot, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.snap.Index == 0 {
		return raftpb.Snapshot{}, nil
	}
	m, data, err := l.readSnapFile(l.snap)
	if err != nil {
		l.opts.Logger.Error("raft log: cannot read the latest snapshot", "index", l.snap.Index, "err", err)
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	return raftpb.Snapshot{
		Data:     data,
		Metadata: raftpb.SnapshotMetadata{ConfState: m.ConfState, Index: m.Index, Term: m.Term},
	}, nil
}

// Boot returns how many times the log was opened, this time included. It
// never repeats for a directory, so callers use it to tell their
// incarnations apart.
func (l *Log) Boot() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.boot
}

// SnapshotIndex returns the index of the latest snapshot (0: none).
func (l *Log) SnapshotIndex() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snap.Index
}

// HardState returns the stored hard state.
func (l *Log) HardState() raftpb.HardState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hs
}

// Segments returns the sequence numbers of the segment files in use.
func (l *Log) Segments() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.segs)
}

// Err returns the error that failed the log, if one did.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}
