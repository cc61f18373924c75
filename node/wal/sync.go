package wal

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Sync blocks until the record ending at p is durable under the sync
// policy:
//
//   - Interval 0: fsynced, together with its segment's directory entry and
//     every earlier segment's footer. A single background fsync covers every
//     record appended before it starts, so concurrent callers share fsyncs
//     (group commit).
//   - Interval > 0: written to the operating system; the background syncer
//     fsyncs at most every Interval.
//
// Once the Log has failed, Sync returns the failure whatever p is. Safe for
// concurrent use; no Append ever waits for an fsync a Sync asked for.
func (l *Log) Sync(p Position) error { return l.SyncContext(context.Background(), p) }

// SyncContext is Sync that stops waiting when ctx ends, returning ctx's
// error: the record stays appended and is made durable with the others
// (the caller only stops waiting for it).
func (l *Log) SyncContext(ctx context.Context, p Position) error {
	if ctx.Done() != nil {
		// Wake the waiters when ctx ends, so that this one sees it.
		stop := context.AfterFunc(ctx, func() {
			l.mu.Lock()
			l.cond.Broadcast()
			l.mu.Unlock()
		})
		defer stop()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.Seq == 0 {
		return l.err
	}
	if cur := l.cur.seg; p.Seq > cur.info.Seq || p.Seq == cur.info.Seq && p.Offset > cur.dataEnd {
		return fmt.Errorf("wal: sync position %d:%d is past the end of the log (%d:%d)", p.Seq, p.Offset, cur.info.Seq, cur.dataEnd)
	}
	return l.waitDurableLocked(ctx, p, false)
}

// SyncAll blocks until every record appended before the call is fsynced,
// whatever the sync policy: under an interval policy it asks the syncer for
// an fsync now. The node calls it before it writes data covered by those
// records anywhere else (the store), so that nothing outlives its record in
// a power cut. Once the Log has failed it returns the failure. Safe for
// concurrent use.
func (l *Log) SyncAll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	p := Position{Seq: l.cur.seg.info.Seq, Offset: l.cur.seg.dataEnd}
	return l.waitDurableLocked(context.Background(), p, true)
}

// waitDurableLocked waits until the record ending at p is durable, for
// Sync (force false: under an interval policy, written to the operating
// system is enough) and SyncAll (force true: fsynced whatever the policy).
// REQUIRES: mu held.
func (l *Log) waitDurableLocked(ctx context.Context, p Position, force bool) error {
	for {
		if l.err != nil {
			return l.err
		}
		if l.lostLocked(p) {
			return fmt.Errorf("sync %d:%d: %w", p.Seq, p.Offset, ErrLost)
		}
		if !l.durable.less(p) {
			return nil
		}
		if !force && l.opts.Sync.Interval > 0 {
			// Every segment but the open one was flushed when it was cut.
			w := l.cur
			if p.Seq < w.seg.info.Seq || p.Offset <= w.flushed {
				return nil
			}
			if !l.finished {
				if err := w.flush(); err != nil {
					return l.failLocked(err)
				}
				return nil
			}
		}
		if l.finished {
			return ErrClosed
		}
		if force {
			l.forceSync = true
		}
		l.kickLocked()
		if err := ctx.Err(); err != nil {
			return err // the syncer makes it durable with the others
		}
		l.cond.Wait()
	}
}

// kickLocked wakes the syncer if it is not already due to run.
// REQUIRES: mu held.
func (l *Log) kickLocked() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// run is the syncer goroutine: it seals cut segments and fsyncs the open
// one, when kicked by Sync or a cut, and every Interval under an interval
// sync policy.
func (l *Log) run() {
	defer close(l.done)
	var tick <-chan time.Time
	if iv := l.opts.Sync.Interval; iv > 0 {
		t := time.NewTicker(iv)
		defer t.Stop()
		tick = t.C
	}
	retry := time.NewTicker(l.opts.RetryInterval)
	defer retry.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-retry.C:
			l.mu.Lock()
			failed := l.err != nil
			l.mu.Unlock()
			if failed {
				l.tryResume()
			}
		case <-l.kick:
			// Under an interval policy a kick comes from a cut (seal, but
			// leave the open segment to the ticker) or from SyncAll.
			l.mu.Lock()
			force := l.forceSync
			l.forceSync = false
			l.mu.Unlock()
			l.syncRound(l.opts.Sync.Interval == 0 || force)
		case <-tick:
			l.syncRound(true)
		}
	}
}

// syncRound is one group commit. Under mu it writes out the open segment's
// buffer and notes what to make durable; without mu (so Append carries on)
// it seals the cut segments, syncs the directory if a segment was created,
// and, if syncOpen, fsyncs the open segment; then it advances l.durable and
// wakes the waiters. Only the syncer calls it, so rounds never overlap.
func (l *Log) syncRound(syncOpen bool) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	w := l.cur
	if syncOpen {
		if err := w.flush(); err != nil {
			l.failLocked(err)
			l.mu.Unlock()
			return
		}
	}
	type sealWork struct {
		j        *sealJob
		syncData bool
	}
	seals := make([]sealWork, len(l.sealing))
	for i, j := range l.sealing {
		seals[i] = sealWork{j, j.w.synced < j.w.flushed}
	}
	dirDirty := l.dirDirty
	l.dirDirty = false
	target := w.flushed
	syncOpen = syncOpen && w.synced < target
	f, path := w.f, w.seg.info.Path
	l.mu.Unlock()

	var err error
	done := 0
	for _, s := range seals {
		if err = l.sealFile(s.j.w.f, s.j.w.seg.info.Path, s.syncData, s.j.footer); err != nil {
			break
		}
		done++
	}
	if err == nil && dirDirty {
		err = l.syncDir(l.opts.Dir)
	}
	if err == nil && syncOpen {
		err = l.syncFile(f, path)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range seals[:done] {
		l.sealedLocked(s.j)
	}
	if err != nil {
		l.failLocked(err)
		return
	}
	if syncOpen {
		w.synced = max(w.synced, target)
	}
	if p := (Position{Seq: w.seg.info.Seq, Offset: w.synced}); l.durable.less(p) {
		l.durable = p
	}
	l.cond.Broadcast()
}

// sealFile makes a cut segment's records durable, then writes its footer,
// makes that durable and closes the file. The records are fsynced before
// the footer is written so that a footer can never reach the disk ahead of
// the records it vouches for: a power cut could otherwise leave a file that
// looks sealed but has a hole.
func (l *Log) sealFile(f File, path string, syncData bool, footer []byte) error {
	if syncData {
		if err := l.syncFile(f, path); err != nil {
			return err
		}
	}
	if _, err := f.Write(footer); err != nil {
		return fmt.Errorf("write footer of %s: %w", path, err)
	}
	if err := l.syncFile(f, path); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close segment %s: %w", path, err)
	}
	return nil
}

func (l *Log) syncFile(f File, path string) error {
	if err := l.fsync(f); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}

// fsync fsyncs f, counted in Stats.Fsyncs and timed by Options.OnFsync.
func (l *Log) fsync(f File) error {
	l.fsyncs.Add(1)
	start := time.Now()
	err := f.Sync()
	if l.opts.OnFsync != nil {
		l.opts.OnFsync(time.Since(start))
	}
	return err
}

func (l *Log) syncDir(dir string) error {
	l.fsyncs.Add(1)
	if err := l.fs.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// countedFS is the log's file system with every fsync counted and timed
// like the log's own, for the files the log writes through the vfs
// helpers (the state file).
type countedFS struct{ l *Log }

var _ FS = countedFS{}

func (c countedFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := c.l.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countedFile{f, c.l}, nil
}

func (c countedFS) Rename(oldpath, newpath string) error { return c.l.fs.Rename(oldpath, newpath) }
func (c countedFS) Remove(name string) error             { return c.l.fs.Remove(name) }
func (c countedFS) ReadDir(dir string) ([]string, error) { return c.l.fs.ReadDir(dir) }
func (c countedFS) MkdirAll(dir string, perm os.FileMode) error {
	return c.l.fs.MkdirAll(dir, perm)
}

func (c countedFS) SyncDir(dir string) error {
	c.l.fsyncs.Add(1)
	return c.l.fs.SyncDir(dir)
}

type countedFile struct {
	File
	l *Log
}

func (f countedFile) Sync() error { return f.l.fsync(f.File) }
