package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
)

// RemoveBefore deletes the sealed segments with Seq < seq, never the open
// one, and syncs the directory. A segment cut but not yet sealed is waited
// for. The caller decides what may go (checkpointed into the store and
// acknowledged by the cloud); the Log keeps no other reference to removed
// sequence numbers and never reuses them.
func (l *Log) RemoveBefore(seq uint64) error {
	l.maint.Lock()
	defer l.maint.Unlock()
	l.mu.Lock()
	for {
		if err := l.usableLocked(); err != nil {
			l.mu.Unlock()
			return err
		}
		if len(l.sealing) == 0 || l.sealing[0].w.seg.info.Seq >= seq {
			break
		}
		l.kickLocked()
		l.cond.Wait()
	}
	var victims []*segment
	for _, s := range l.segs {
		if s.info.Seq < seq && s.info.Sealed {
			victims = append(victims, s)
		}
	}
	next, last := l.nextSeq, l.lastSealed
	l.mu.Unlock()
	if len(victims) == 0 {
		return nil
	}
	// Persist the sequence counter first: once the newest segment files
	// are gone, their names can no longer tell the next Open where to
	// continue.
	if err := l.writeState(next, last); err != nil {
		return err
	}
	var err error
	for _, v := range victims {
		l.mu.Lock()
		l.segs = slices.DeleteFunc(l.segs, func(s *segment) bool { return s == v })
		l.mu.Unlock()
		if rerr := l.fs.Remove(v.info.Path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("remove segment %d: %w", v.info.Seq, rerr)
			break
		}
	}
	// Sync the directory even after a failed removal: the ones before it
	// are gone.
	if serr := l.syncDir(l.opts.Dir); serr != nil && err == nil {
		err = serr
	}
	return err
}
