package wal

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Stats are counters of a Log.
type Stats struct {
	Segments           int    // segment files, the open one included
	Bytes              int64  // their total size
	OpenSeq            uint64 // sequence of the open segment
	Fsyncs             int64  // file and directory fsyncs since Open
	CorruptQuarantined int64  // files Open moved to quarantine/
	TornTruncations    int64  // torn tails Open cut off
}

// Log is a node's segmented write-ahead log. See the package documentation.
type Log struct {
	opts   Options
	fs     FS
	logger *slog.Logger

	// maint serialises RemoveBefore and Close.
	maint sync.Mutex
	state state // contents of the state file; REQUIRES maint held, or Open

	mu   sync.Mutex
	cond sync.Cond // on mu; broadcast whenever durable, a seal, err or finished changes

	// All below: REQUIRES mu.
	cur        *segWriter
	segs       []*segment // every segment file, ascending seq; the last is cur's
	sealing    []*sealJob // cut, footer not yet durable; ascending seq
	nextSeq    uint64     // sequence of the next segment to create
	lastSealed uint64     // PrevSeq of the next segment to create
	// durable: every record ending at or before this position is durable,
	// and so is every segment cut before durable.Seq, with its footer.
	durable  Position
	dirDirty bool  // a segment was created since the directory was last synced
	err      error // set on a write or fsync failure; cleared when tryResume succeeds
	// lost: for each segment a recovery cut back, where its records now
	// end (0: removed). Sync refuses positions past it.
	lost   map[uint64]int64
	closed bool // Close has begun
	// forceSync: SyncAll wants the open segment fsynced at the next kick,
	// also under an interval policy.
	forceSync bool
	finished  bool // Close is done

	fsyncs      atomic.Int64
	quarantined atomic.Int64
	torn        atomic.Int64

	kick chan struct{} // wakes the syncer; capacity 1
	stop chan struct{} // closed by Close to stop the syncer
	done chan struct{} // closed by the syncer when it exits
}

// segment is what the Log knows about one segment file.
type segment struct {
	info    SegmentInfo // for the open segment: kept current by Append
	hdrLen  int64
	dataEnd int64 // offset just past the last record
}

// segWriter is the open segment, and a cut segment until it is sealed.
type segWriter struct {
	seg     *segment
	f       File
	buf     []byte // frames not yet written to f
	flushed int64  // bytes written to f
	synced  int64  // bytes fsynced
	crc     uint32 // CRC32C of every byte of the segment so far, buf included
	firstAt time.Time
	// cutBack: after a failure, the file was truncated to synced by
	// tryResume. REQUIRES: only the syncer touches it.
	cutBack bool
}

// sealJob is a cut segment waiting for the syncer to seal it.
type sealJob struct {
	w      *segWriter
	footer []byte
	crc    uint32
	began  time.Time
}

// Open opens the log in opts.Dir, creating the directory if needed, and
// recovers what a crash left: sealed segments are verified and corrupt ones
// quarantined; an unsealed segment has its torn tail truncated and is
// sealed (or removed if it holds no record). Then a new segment is opened
// with the next sequence number.
func Open(opts Options) (*Log, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l := &Log{
		opts:   opts,
		fs:     opts.FS,
		logger: opts.Logger,
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	l.cond.L = &l.mu
	if err := l.recover(); err != nil {
		return nil, fmt.Errorf("open wal %s: %w", opts.Dir, err)
	}
	go l.run()
	return l, nil
}

func (l *Log) path(name string) string { return filepath.Join(l.opts.Dir, name) }

// usableLocked says why the Log cannot take writes, if it cannot.
// REQUIRES: mu held.
func (l *Log) usableLocked() error {
	if l.err != nil {
		return l.err
	}
	if l.closed {
		return ErrClosed
	}
	return nil
}

// failLocked fails the Log with err and returns the error every call
// gets until the syncer's tryResume brings it back. A failed fsync is never
// retried over the same bytes: the kernel may already have dropped the
// dirty pages, so a later fsync could succeed without the data ever
// reaching the disk; tryResume cuts them away instead.
// REQUIRES: mu held.
func (l *Log) failLocked(err error) error {
	if l.err == nil {
		l.err = fmt.Errorf("wal failed: %w", err)
		l.logger.Error("wal: failed; writes are refused until it recovers", "dir", l.opts.Dir, "retry_every", l.opts.RetryInterval, "err", err)
		l.cond.Broadcast()
	}
	return l.err
}

// OpenSeq returns the sequence of the open segment.
func (l *Log) OpenSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur.seg.info.Seq
}

// Segments describes every segment file, sealed and open, in ascending
// sequence. A segment that was cut is reported Sealed only once its footer
// is durable.
func (l *Log) Segments() []SegmentInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.info
	}
	return out
}

// Stats returns the Log's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := Stats{
		Segments:           len(l.segs),
		OpenSeq:            l.cur.seg.info.Seq,
		Fsyncs:             l.fsyncs.Load(),
		CorruptQuarantined: l.quarantined.Load(),
		TornTruncations:    l.torn.Load(),
	}
	for _, s := range l.segs {
		st.Bytes += s.info.Bytes
	}
	return st
}

// Close makes every appended record durable, seals the open segment (or
// removes it if it holds no record) and stops the background syncer. After
// a failure it releases everything and returns the failure.
func (l *Log) Close() error {
	l.maint.Lock()
	defer l.maint.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.mu.Unlock()

	close(l.stop)
	<-l.done

	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.finishLocked()
	l.finished = true
	l.cond.Broadcast()
	return err
}

// finishLocked does Close's I/O once the syncer has stopped.
// REQUIRES: mu held, syncer stopped.
func (l *Log) finishLocked() error {
	defer l.closeFilesLocked()
	if l.err != nil {
		return l.err
	}
	w := l.cur
	if err := w.flush(); err != nil {
		return l.failLocked(err)
	}
	for len(l.sealing) > 0 {
		j := l.sealing[0]
		if err := l.sealFile(j.w.f, j.w.seg.info.Path, j.w.synced < j.w.flushed, j.footer); err != nil {
			return l.failLocked(err)
		}
		l.sealedLocked(j)
	}
	if w.seg.info.Records > 0 {
		j := l.prepareSealLocked(w)
		if err := l.sealFile(w.f, w.seg.info.Path, w.synced < w.flushed, j.footer); err != nil {
			return l.failLocked(err)
		}
		l.sealedLocked(j)
	} else {
		// An empty segment holds nothing worth keeping: remove it rather
		// than leave empty sealed segments behind, after recording that
		// its sequence number is used so it is never handed out again.
		if err := l.writeState(l.nextSeq, l.lastSealed); err != nil {
			return l.failLocked(err)
		}
		if err := w.f.Close(); err != nil {
			return l.failLocked(fmt.Errorf("close segment %s: %w", w.seg.info.Path, err))
		}
		w.f = nil
		if err := l.fs.Remove(w.seg.info.Path); err != nil {
			return l.failLocked(fmt.Errorf("remove empty segment %s: %w", w.seg.info.Path, err))
		}
		l.segs = l.segs[:len(l.segs)-1]
		l.dirDirty = true
	}
	if l.dirDirty {
		if err := l.syncDir(l.opts.Dir); err != nil {
			return l.failLocked(err)
		}
		l.dirDirty = false
	}
	l.durable = Position{Seq: w.seg.info.Seq, Offset: w.seg.dataEnd}
	return nil
}

// closeFilesLocked closes every file still open, ignoring errors: it runs
// after the outcome is decided.
// REQUIRES: mu held, syncer stopped.
func (l *Log) closeFilesLocked() {
	for _, j := range l.sealing {
		if j.w.f != nil {
			j.w.f.Close()
			j.w.f = nil
		}
	}
	if l.cur.f != nil {
		l.cur.f.Close()
		l.cur.f = nil
	}
}
