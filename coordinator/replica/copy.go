package replica

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tributarydb/tributary/internal/pace"
)

// ErrCopyRunning: a Copy of the same (edge, firstSeq, lastSeq) is already
// running on this store.
var ErrCopyRunning = errors.New("replica: a copy of this range is already running")

// Defaults of CopyOptions.
const (
	DefaultCopyInitialWindow = time.Hour
	DefaultCopyMaxWindow     = 32 * 24 * time.Hour
	minCopyWindow            = time.Minute
	// maxCopySpan bounds a Copy's time range (at most about 600 windows
	// of the longest default), so that a range given as "everything"
	// cannot mean billions of round trips: pass the range's time span.
	maxCopySpan = 50 * 365 * 24 * time.Hour
	// copyQueueFiles bounds the files exported ahead of the one being
	// applied (memory: that many files and one being built).
	copyQueueFiles = 2
)

// CopyOptions configure a Copy.
type CopyOptions struct {
	// BytesPerSec paces the copy in file bytes (uncompressed) per second,
	// with bursts of one second's worth; 0: unlimited. Ignored when Pacer
	// is set.
	BytesPerSec int64
	// Pacer, if set, paces this copy together with every other copy that
	// shares it (a coordinator's repairs share one rate).
	Pacer *CopyPacer
	// MaxFileBytes is the size of the files asked of the source (default
	// DefaultExportFileBytes; MinExportFileBytes to DefaultMaxSegmentBytes).
	MaxFileBytes int64
	// The time range is copied in windows, the first InitialWindow long
	// (default 1h). A window whose files held less than half of
	// WindowBytes doubles the next (up to MaxWindow, default 32 days); one
	// with more than twice WindowBytes halves it (down to a minute).
	// WindowBytes defaults to 4 × MaxFileBytes.
	InitialWindow, MaxWindow time.Duration
	WindowBytes              int64
}

// CopyPacer paces the copies that share it to one rate in file bytes
// (uncompressed) per second, with bursts of one second's worth: a token
// bucket that a copy spends a file's bytes from before applying it, and
// waits on while it is in debt. Safe for concurrent use.
type CopyPacer struct {
	mu sync.Mutex
	b  pace.Bucket
}

// NewCopyPacer returns a pacer of bytesPerSec (0 or negative: unlimited).
func NewCopyPacer(bytesPerSec int64) *CopyPacer {
	return &CopyPacer{b: pace.Bucket{Rate: max(bytesPerSec, 0)}}
}

// take spends n bytes at now and returns how long to wait before using
// them.
func (p *CopyPacer) take(n int64, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.b.Take(n, now)
	return p.b.Delay(now)
}

// Validate fills defaults and rejects impossible values.
func (o *CopyOptions) Validate() error {
	o.MaxFileBytes = cmp.Or(o.MaxFileBytes, DefaultExportFileBytes)
	o.InitialWindow = cmp.Or(o.InitialWindow, DefaultCopyInitialWindow)
	o.MaxWindow = cmp.Or(o.MaxWindow, max(DefaultCopyMaxWindow, o.InitialWindow))
	o.WindowBytes = cmp.Or(o.WindowBytes, 4*o.MaxFileBytes)
	switch {
	case o.BytesPerSec < 0:
		return fmt.Errorf("copy options: BytesPerSec %d is negative", o.BytesPerSec)
	case o.MaxFileBytes < MinExportFileBytes || o.MaxFileBytes > DefaultMaxSegmentBytes:
		return fmt.Errorf("copy options: MaxFileBytes %d out of range [%d, %d]", o.MaxFileBytes, MinExportFileBytes, DefaultMaxSegmentBytes)
	case o.InitialWindow < minCopyWindow || o.MaxWindow < o.InitialWindow:
		return fmt.Errorf("copy options: windows from %s to %s (at least %s, the first not above the longest)", o.InitialWindow, o.MaxWindow, minCopyWindow)
	case o.WindowBytes < 0:
		return fmt.Errorf("copy options: WindowBytes %d is negative", o.WindowBytes)
	}
	return nil
}

// CopyStats says what one Copy call did.
type CopyStats struct {
	AlreadyHeld bool  // the range was recorded as copied before the call: nothing was done
	Resumed     bool  // the call continued a copy an earlier call left unfinished
	FromMs      int64 // the first timestamp this call copied
	Windows     int   // windows copied to the end by this call
	Files       int64 // files applied (duplicates included)
	Bytes       int64 // file bytes applied, uncompressed
	Points      int64 // points written
	Rejected    int64 // points the engine refused (counted, see Applied)
}

// Copy copies edge's segments firstSeq..lastSeq, whose points have
// timestamps in [minT, maxT] (their time span as the catalog knows it; at
// most maxCopySpan), from src (another replica) into this store:
// it exports the time range from src in windows, applies each file with
// ApplyCopy, and once every window is applied records the range
// (RecordCopy), so that Holdings includes it.
//
// Resumable: after each window, the window copied through is recorded
// durably (the progress entry); a Copy of the same (edge, firstSeq,
// lastSeq, minT, maxT) that finds it continues after that window, also
// after a restart. A progress entry of another time range is discarded.
// Idempotent: the files of a window re-copied after an interruption write
// the same points again, which changes nothing, and a range already
// recorded is not copied again (AlreadyHeld). Throttled by
// opts.BytesPerSec, or by opts.Pacer together with the copies sharing it.
// Exports of the next files run while the current file is applied (at
// most copyQueueFiles ahead).
//
// A point the source holds in the range that belongs to another segment
// (the files carry every point of the edge in the time range) is copied
// too; that changes nothing either. Points this store refuses are counted
// in Rejected and do not stop the copy: the caller decides what they mean.
//
// Only one Copy of a range runs at a time on a store (ErrCopyRunning).
// Errors: a bad argument wraps ErrInvalidSegment; a file that does not
// verify or differs from what src said wraps ErrInvalidSegment; src's
// and the engine's errors are returned wrapped. The stats describe what
// was done before the error.
func (s *Store) Copy(ctx context.Context, src ExportSource, edge string, firstSeq, lastSeq uint64, minT, maxT int64, opts CopyOptions) (CopyStats, error) {
	var st CopyStats
	if err := checkRange(edge, firstSeq, lastSeq); err != nil {
		return st, fmt.Errorf("copy: %w", err)
	}
	if maxT < minT || uint64(maxT)-uint64(minT) > uint64(maxCopySpan.Milliseconds()) {
		return st, fmt.Errorf("copy %d..%d of %q: %w: time range [%d, %d] is inverted or longer than %s", firstSeq, lastSeq, edge, ErrInvalidSegment, minT, maxT, maxCopySpan)
	}
	if err := opts.Validate(); err != nil {
		return st, err
	}
	key := edgeKey(cpyPrefix, edge, firstSeq, lastSeq)
	if !s.startCopy(key) {
		return st, fmt.Errorf("copy %d..%d of %q: %w", firstSeq, lastSeq, edge, ErrCopyRunning)
	}
	defer s.endCopy(key)
	st, err := s.copyRange(ctx, src, edge, key, firstSeq, lastSeq, minT, maxT, opts)
	if err != nil {
		return st, fmt.Errorf("copy %d..%d of %q: %w", firstSeq, lastSeq, edge, err)
	}
	return st, nil
}

func (s *Store) startCopy(key string) bool {
	s.copyMu.Lock()
	defer s.copyMu.Unlock()
	if s.copying[key] {
		return false
	}
	if s.copying == nil {
		s.copying = map[string]bool{}
	}
	s.copying[key] = true
	return true
}

func (s *Store) endCopy(key string) {
	s.copyMu.Lock()
	defer s.copyMu.Unlock()
	delete(s.copying, key)
}

// copyProgress is the value of a progress entry: 4 × 8 bytes,
// little-endian: the copy's minT and maxT, the timestamp copied through,
// and the length of the next window in ms.
type copyProgress struct {
	minT, maxT, through, windowMs int64
}

func (p copyProgress) encode() []byte {
	b := make([]byte, 0, 32)
	for _, v := range []int64{p.minT, p.maxT, p.through, p.windowMs} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func decodeProgress(v []byte) (copyProgress, bool) {
	if len(v) != 32 {
		return copyProgress{}, false
	}
	at := func(i int) int64 { return int64(binary.LittleEndian.Uint64(v[8*i:])) }
	p := copyProgress{at(0), at(1), at(2), at(3)}
	ok := p.minT <= p.maxT && p.through >= p.minT && p.through <= p.maxT && p.windowMs > 0
	return p, ok
}

// copyItem is what the exporting goroutine hands the applying one: a file,
// or the end of a window (then through and next are set), or an error.
type copyItem struct {
	file          *ExportedFile
	windowEnd     bool
	through, next int64 // window end, next window's length (ms)
	err           error
}

func (s *Store) copyRange(ctx context.Context, src ExportSource, edge, key string, firstSeq, lastSeq uint64, minT, maxT int64, opts CopyOptions) (CopyStats, error) {
	var st CopyStats
	held, ok, err := s.copiedThrough(edge, firstSeq)
	if err != nil {
		return st, err
	}
	if ok && held >= lastSeq {
		st.AlreadyHeld = true
		return st, s.eng.DeleteReplicaMeta(key) // a progress entry a crash left behind
	}
	from, window := minT, opts.InitialWindow.Milliseconds()
	done := false
	if v, ok, err := s.eng.GetReplicaMeta(key); err != nil {
		return st, err
	} else if ok {
		p, valid := decodeProgress(v)
		switch {
		case !valid:
			s.log.Warn("damaged copy progress entry; starting the copy over", "edge", edge, "first_seq", firstSeq, "last_seq", lastSeq)
		case p.minT != minT || p.maxT != maxT:
			s.log.Info("copy progress of another time range; starting over", "edge", edge, "first_seq", firstSeq, "last_seq", lastSeq,
				"was_min_time_ms", p.minT, "was_max_time_ms", p.maxT)
		default:
			st.Resumed = true
			window = min(max(p.windowMs, minCopyWindow.Milliseconds()), opts.MaxWindow.Milliseconds())
			if p.through == maxT {
				done = true
			} else {
				from = p.through + 1
			}
		}
	}
	st.FromMs = from
	if !done {
		if err := s.copyWindows(ctx, src, edge, key, firstSeq, lastSeq, from, minT, maxT, window, opts, &st); err != nil {
			return st, err
		}
	}
	if err := s.RecordCopy(edge, firstSeq, lastSeq); err != nil {
		return st, err
	}
	// The range entry now vouches for the copy; a progress entry that
	// survives a crash here is deleted by the next Copy (AlreadyHeld).
	return st, s.eng.DeleteReplicaMeta(key)
}

// copyWindows copies [from, maxT] window by window: one goroutine exports,
// this one applies, paces and records progress.
func (s *Store) copyWindows(ctx context.Context, src ExportSource, edge, key string, firstSeq, lastSeq uint64, from, minT, maxT, window int64, opts CopyOptions, st *CopyStats) error {
	ctx, cancel := context.WithCancel(ctx)
	items := make(chan copyItem, copyQueueFiles)
	exported := make(chan struct{})
	defer func() {
		cancel()
		for range items { // unblock the exporter
		}
		<-exported
	}()
	go func() {
		defer close(exported)
		defer close(items)
		s.exportWindows(ctx, src, edge, firstSeq, lastSeq, from, maxT, window, opts, items)
	}()

	pacer := opts.Pacer
	if pacer == nil {
		pacer = NewCopyPacer(opts.BytesPerSec)
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for it := range items {
		if err := ctx.Err(); err != nil {
			return err // the exporter stops too
		}
		switch {
		case it.err != nil:
			return it.err
		case it.windowEnd:
			p := copyProgress{minT: minT, maxT: maxT, through: it.through, windowMs: it.next}
			if err := s.eng.PutReplicaMeta(key, p.encode()); err != nil {
				return fmt.Errorf("record copy progress through %d: %w", it.through, err)
			}
			st.Windows++
			continue
		}
		f := it.file
		if d := pacer.take(int64(len(f.Data)), time.Now()); d > 0 {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
		}
		a, err := s.applyCopy(ctx, edge, firstSeq, lastSeq, f.Data, &f.Info)
		if err != nil {
			return err
		}
		st.Files++
		st.Bytes += int64(len(f.Data))
		st.Points += a.Points
		st.Rejected += a.Rejected
	}
	// The exporter closes items only after its last window's end or an
	// error; ctx ending in between stops it without either.
	return ctx.Err()
}

// exportWindows exports [from, maxT] from src in windows of adapting
// length into items, each window followed by its end.
func (s *Store) exportWindows(ctx context.Context, src ExportSource, edge string, firstSeq, lastSeq uint64, from, maxT, window int64, opts CopyOptions, items chan<- copyItem) {
	send := func(it copyItem) error {
		select {
		case items <- it:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	minW, maxW := minCopyWindow.Milliseconds(), opts.MaxWindow.Milliseconds()
	for t := from; ; {
		end := maxT
		if uint64(window-1) <= uint64(maxT)-uint64(t) { // t + window - 1 without overflow (t <= maxT)
			end = t + window - 1
		}
		var bytes int64
		err := src.Export(ctx, edge, t, end, firstSeq, lastSeq, opts.MaxFileBytes, func(f ExportedFile) error {
			bytes += int64(len(f.Data))
			return send(copyItem{file: &f})
		})
		if err != nil {
			if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
				_ = send(copyItem{err: fmt.Errorf("export [%d, %d] from the source: %w", t, end, err)})
			}
			return
		}
		switch {
		case bytes < opts.WindowBytes/2 && window <= maxW/2:
			window *= 2
		case bytes < opts.WindowBytes/2:
			window = maxW
		case bytes > 2*opts.WindowBytes:
			window = max(window/2, minW)
		}
		if send(copyItem{windowEnd: true, through: end, next: window}) != nil || end == maxT {
			return
		}
		t = end + 1
	}
}
