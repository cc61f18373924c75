package tributary

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// WriterOptions configure a Writer. A zero field takes its default.
type WriterOptions struct {
	// MaxBatchPoints: a batch is sent once it holds this many points.
	// Default 10,000.
	MaxBatchPoints int
	// MaxBatchBytes: a batch is sent once its estimated encoded size
	// reaches this. Default 3 MiB, under gRPC's default 4 MiB message limit.
	MaxBatchBytes int
	// FlushInterval: buffered points are sent at least this often.
	// Default 1s.
	FlushInterval time.Duration
	// MaxBufferedPoints bounds the points held by the Writer, waiting or
	// being sent; Add blocks while it is reached. Default 100,000.
	MaxBufferedPoints int
	// MaxBufferedBytes bounds the estimated encoded size of those points
	// and their labels (memory use is a small multiple of it, plus a cache
	// of up to 4 MiB of recently seen series). Default 16 MiB.
	MaxBufferedBytes int
	// Retry overrides the client's retry policy for the Writer's requests.
	// RetryPolicy{MaxAttempts: -1} retries until Close gives up: no point
	// is dropped while the server is away, and Add blocks when the buffer
	// is full.
	Retry *RetryPolicy
	// OnRejected is called for each point (or whole series batch) the
	// server refused, with its series, timestamp and reason. The server
	// details at most 64 rejections a request; WriterStats.Rejected counts
	// them all.
	OnRejected func(Rejection)
	// OnError is called with a *WriteError for each request that failed
	// for good (not retryable, or retries exhausted); its points are lost
	// unless the caller sends them again.
	OnError func(error)
}

// Defaults of WriterOptions.
const (
	DefaultMaxBatchPoints    = 10_000
	DefaultMaxBatchBytes     = 3 << 20
	DefaultFlushInterval     = time.Second
	DefaultMaxBufferedPoints = 100_000
	DefaultMaxBufferedBytes  = 16 << 20
)

// Validate fills in defaults and rejects impossible values. A Retry
// policy is copied before its defaults are filled in.
func (o *WriterOptions) Validate() error {
	switch {
	case o.MaxBatchPoints < 0, o.MaxBatchBytes < 0, o.MaxBufferedPoints < 0, o.MaxBufferedBytes < 0:
		return errors.New("writer options: negative size")
	case o.FlushInterval < 0:
		return fmt.Errorf("writer options: negative flush interval %s", o.FlushInterval)
	}
	o.MaxBatchPoints = cmp.Or(o.MaxBatchPoints, DefaultMaxBatchPoints)
	o.MaxBatchBytes = cmp.Or(o.MaxBatchBytes, DefaultMaxBatchBytes)
	o.FlushInterval = cmp.Or(o.FlushInterval, DefaultFlushInterval)
	o.MaxBufferedPoints = cmp.Or(o.MaxBufferedPoints, max(DefaultMaxBufferedPoints, o.MaxBatchPoints))
	o.MaxBufferedBytes = cmp.Or(o.MaxBufferedBytes, max(DefaultMaxBufferedBytes, o.MaxBatchBytes))
	o.MaxBatchPoints = min(o.MaxBatchPoints, o.MaxBufferedPoints)
	o.MaxBatchBytes = min(o.MaxBatchBytes, o.MaxBufferedBytes)
	if o.Retry != nil {
		p := *o.Retry
		if err := p.Validate(); err != nil {
			return fmt.Errorf("writer options: retry: %w", err)
		}
		o.Retry = &p
	}
	return nil
}

// ErrWriterClosed is returned by a Writer's methods after Close.
var ErrWriterClosed = errors.New("tributary: writer is closed")

// ErrInvalidSeries is wrapped by Add's error for labels no server accepts
// (no metric name, a bad label name, a duplicate label, invalid UTF-8).
var ErrInvalidSeries = labels.ErrInvalid

// WriteError reports points that were not delivered: the requests carrying
// them failed for good.
type WriteError struct {
	Points   int64 // points not written
	Requests int   // requests that failed
	Err      error // the first failure
}

func (e *WriteError) Error() string {
	return fmt.Sprintf("%d points in %d requests not written: %v", e.Points, e.Requests, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// WriterStats counts what a Writer did, in points unless said otherwise.
type WriterStats struct {
	Added    int64 // taken by Add and AddSeries
	Accepted int64 // stored by the server
	Rejected int64 // refused by the server (see OnRejected)
	Failed   int64 // not delivered (see OnError)
	Buffered int64 // added, not yet answered
	Requests int64 // write requests answered by the server
	Retries  int64 // attempts repeated after a retryable failure
}

// Writer buffers points and writes them in batches from one background
// goroutine. It is safe for concurrent use.
//
// Batches are sent one at a time in the order they were cut, so points of a
// series reach the server in the order they were added: a duplicate
// timestamp keeps the value added last. Callbacks run on the sender
// goroutine; they must return quickly and must not call the Writer's
// methods other than Stats.
type Writer struct {
	send func(ctx context.Context, req *pb.WriteRequest, onRetry func(error)) (*pb.WriteResponse, error)
	opts WriterOptions

	mu        sync.Mutex
	closed    bool
	cur       *pendingBatch   // being filled
	queue     []*pendingBatch // cut, waiting for the sender
	bufPoints int64           // points in cur, queue and in flight
	bufBytes  int64
	cutSeq    uint64 // sequence of the last cut batch
	doneSeq   uint64 // sequence of the last answered batch (callbacks run)
	changed   chan struct{}
	fail      *WriteError // failures since the last Flush or Close
	stats     WriterStats
	keyBuf    []byte
	// cache holds the series seen lately, so that a series is validated
	// and its labels encoded once, not once a batch.
	cache      map[string]*cachedSeries
	cacheBytes int64
	retries    atomic.Int64

	kick       chan struct{}
	stop       chan struct{}
	done       chan struct{}
	sendCtx    context.Context
	cancelSend context.CancelFunc
}

// pendingBatch is one write request being built or waiting to be sent.
type pendingBatch struct {
	seq    uint64
	index  map[string]int // series key -> index in req.Batches
	req    *pb.WriteRequest
	points int64
	bytes  int64
}

// Estimated encoded sizes: a point is a varint timestamp (about 6 bytes for
// current times, up to 10) and an 8-byte double; a label is its two strings
// with their tags and lengths.
const (
	pointBytes       = 18
	seriesBaseBytes  = 16
	labelFramingByte = 8
)

func seriesBytes(ls Labels) int64 {
	n := int64(seriesBaseBytes)
	for _, l := range ls {
		n += int64(len(l.Name) + len(l.Value) + labelFramingByte)
	}
	return n
}

// NewWriter starts a Writer that sends through c. Close it to send what is
// buffered and stop its goroutine.
func (c *Client) NewWriter(opts WriterOptions) (*Writer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	p := c.opts.retry
	if opts.Retry != nil {
		p = *opts.Retry
	}
	send := func(ctx context.Context, req *pb.WriteRequest, onRetry func(error)) (*pb.WriteResponse, error) {
		return c.writeRequest(ctx, req, p, onRetry)
	}
	return newWriter(send, opts), nil
}

// newWriter starts a Writer over a send function. REQUIRES: opts has its
// defaults.
func newWriter(send func(context.Context, *pb.WriteRequest, func(error)) (*pb.WriteResponse, error), opts WriterOptions) *Writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Writer{
		send:       send,
		opts:       opts,
		cur:        newPendingBatch(),
		cache:      map[string]*cachedSeries{},
		changed:    make(chan struct{}),
		kick:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
		sendCtx:    ctx,
		cancelSend: cancel,
	}
	go w.run()
	return w
}

func newPendingBatch() *pendingBatch {
	return &pendingBatch{index: map[string]int{}, req: &pb.WriteRequest{}}
}

// Add buffers one point of the series ls; timestampMs is milliseconds since
// the Unix epoch (time.Now().UnixMilli()). When the buffer is full, Add
// blocks until the sender makes room or ctx ends, and then returns ctx's
// error. Labels that no server accepts are refused at once with an error
// wrapping ErrInvalidSeries. ls is not retained.
func (w *Writer) Add(ctx context.Context, ls Labels, timestampMs int64, value float64) error {
	ts, vs := [1]int64{timestampMs}, [1]float64{value}
	return w.add(ctx, ls, ts[:], vs[:])
}

// AddSeries buffers points of one series: timestampsMs[i] goes with
// values[i]. It blocks like Add, possibly several times for long slices;
// when ctx ends part way, the error says how many points were buffered.
// The slices are not retained.
func (w *Writer) AddSeries(ctx context.Context, ls Labels, timestampsMs []int64, values []float64) error {
	if len(timestampsMs) != len(values) {
		return fmt.Errorf("add %s: %d timestamps but %d values", ls, len(timestampsMs), len(values))
	}
	return w.add(ctx, ls, timestampsMs, values)
}

func (w *Writer) add(ctx context.Context, ls Labels, ts []int64, vs []float64) error {
	ls = ls.normalized()
	total, added := len(ts), 0
	partial := func(err error) error {
		if total > 1 {
			return fmt.Errorf("add %s: %d of %d points buffered: %w", ls, added, total, err)
		}
		return fmt.Errorf("add %s: %w", ls, err)
	}
	for len(ts) > 0 {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return partial(ErrWriterClosed)
		}
		w.keyBuf = ls.appendKey(w.keyBuf[:0])
		e := w.cache[string(w.keyBuf)]
		if e == nil {
			if err := ls.validate(); err != nil {
				w.mu.Unlock()
				return fmt.Errorf("add %s: %w", ls, err)
			}
			e = w.cacheLocked(ls)
		}
		idx, known := w.cur.index[e.key]
		var cost int64
		if !known {
			cost = e.bytes
		}
		n := w.roomLocked(cost, len(ts))
		if n == 0 && w.cur.points > 0 {
			// The current batch is full or the buffer is: hand the batch
			// to the sender and look again.
			w.cutLocked()
			w.mu.Unlock()
			continue
		}
		if n == 0 {
			// The buffer is full of batches being sent: wait for room.
			ch := w.changed
			w.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return partial(ctx.Err())
			}
		}
		if !known {
			idx = len(w.cur.req.Batches)
			w.cur.index[e.key] = idx
			w.cur.req.Batches = append(w.cur.req.Batches, &pb.SeriesBatch{Series: e.series})
		}
		sb := w.cur.req.Batches[idx]
		sb.TimestampsMs = append(sb.TimestampsMs, ts[:n]...)
		sb.Values = append(sb.Values, vs[:n]...)
		b := cost + int64(n)*pointBytes
		w.cur.points += int64(n)
		w.cur.bytes += b
		w.bufPoints += int64(n)
		w.bufBytes += b
		w.stats.Added += int64(n)
		if w.cur.points >= int64(w.opts.MaxBatchPoints) || w.cur.bytes >= int64(w.opts.MaxBatchBytes) {
			w.cutLocked()
		}
		w.mu.Unlock()
		ts, vs = ts[n:], vs[n:]
		added += n
	}
	return nil
}

// seriesCacheBytes bounds the cache of validated series (estimated
// encoded size of their labels).
const seriesCacheBytes = 4 << 20

// cachedSeries is a validated series and its message, shared by every
// request that carries it (messages are never changed once built).
type cachedSeries struct {
	key    string
	series *pb.Series
	bytes  int64
}

// cacheLocked adds the validated series ls, whose key is in w.keyBuf, to
// the cache, emptying the cache first when it would exceed its bound.
// REQUIRES: w.mu held.
func (w *Writer) cacheLocked(ls Labels) *cachedSeries {
	e := &cachedSeries{key: string(w.keyBuf), series: ls.proto(), bytes: seriesBytes(ls)}
	if w.cacheBytes+e.bytes > seriesCacheBytes {
		clear(w.cache)
		w.cacheBytes = 0
	}
	w.cache[e.key] = e
	w.cacheBytes += e.bytes
	return e
}

// roomLocked returns how many of want points of a series costing
// seriesCost more bytes fit into the buffer and the current batch. An empty
// buffer always takes one point, so that a series larger than the byte
// bound still gets through. REQUIRES: w.mu held.
func (w *Writer) roomLocked(seriesCost int64, want int) int {
	n := int64(want)
	n = min(n, int64(w.opts.MaxBufferedPoints)-w.bufPoints)
	n = min(n, (int64(w.opts.MaxBufferedBytes)-w.bufBytes-seriesCost)/pointBytes)
	n = min(n, int64(w.opts.MaxBatchPoints)-w.cur.points)
	if w.cur.points > 0 {
		n = min(n, (int64(w.opts.MaxBatchBytes)-w.cur.bytes-seriesCost)/pointBytes)
	}
	if w.bufPoints == 0 {
		n = max(n, 1)
	}
	return int(max(n, 0))
}

// cutLocked queues the current batch for sending, if it holds points.
// REQUIRES: w.mu held.
func (w *Writer) cutLocked() {
	if w.cur.points == 0 {
		return
	}
	w.cutSeq++
	w.cur.seq = w.cutSeq
	w.cur.index = nil
	w.queue = append(w.queue, w.cur)
	w.cur = newPendingBatch()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// broadcastLocked wakes everyone waiting for room or progress.
// REQUIRES: w.mu held.
func (w *Writer) broadcastLocked() {
	close(w.changed)
	w.changed = make(chan struct{})
}

// run is the sender goroutine.
func (w *Writer) run() {
	defer close(w.done)
	t := time.NewTicker(w.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-w.kick:
		case <-t.C:
			w.mu.Lock()
			w.cutLocked()
			w.mu.Unlock()
		case <-w.stop:
			w.mu.Lock()
			w.cutLocked()
			w.mu.Unlock()
			w.drain()
			return
		}
		w.drain()
	}
}

// drain sends every queued batch, in order.
func (w *Writer) drain() {
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		b := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.mu.Unlock()
		w.sendBatch(b)
	}
}

func (w *Writer) sendBatch(b *pendingBatch) {
	resp, err := w.send(w.sendCtx, b.req, func(error) { w.retries.Add(1) })
	var werr *WriteError
	w.mu.Lock()
	w.bufPoints -= b.points
	w.bufBytes -= b.bytes
	if err != nil {
		werr = &WriteError{Points: b.points, Requests: 1, Err: err}
		w.stats.Failed += b.points
		if w.fail == nil {
			w.fail = &WriteError{Err: err}
		}
		w.fail.Points += b.points
		w.fail.Requests++
	} else {
		w.stats.Accepted += resp.Accepted
		w.stats.Rejected += resp.Rejected
		w.stats.Requests++
	}
	w.broadcastLocked() // room for blocked Adds
	w.mu.Unlock()

	if werr != nil && w.opts.OnError != nil {
		w.opts.OnError(werr)
	}
	if err == nil && w.opts.OnRejected != nil {
		for _, rj := range resp.Rejections {
			w.opts.OnRejected(toRejection(b.req, rj))
		}
	}

	w.mu.Lock()
	w.doneSeq = b.seq
	w.broadcastLocked() // progress for Flush
	w.mu.Unlock()
}

// Flush sends everything added before it was called and waits for the
// answers (and for the callbacks about them). It returns a *WriteError when
// requests failed for good since the previous Flush or Close, or ctx's
// error when ctx ends first (the points stay buffered).
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrWriterClosed
	}
	w.cutLocked()
	target := w.cutSeq
	for w.doneSeq < target {
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("flush: %w", ctx.Err())
		}
		w.mu.Lock()
	}
	err := w.takeFailureLocked()
	w.mu.Unlock()
	return err
}

// takeFailureLocked returns and resets the failures since the last call.
// REQUIRES: w.mu held.
func (w *Writer) takeFailureLocked() error {
	if w.fail == nil {
		return nil
	}
	err := w.fail
	w.fail = nil
	return err
}

// Close stops taking points, sends everything buffered and stops the
// sender. When ctx ends first, the request in flight is abandoned and the
// points not yet delivered are counted as failed (and reported to OnError).
// It returns a *WriteError when requests failed since the last Flush, and
// ctx's error when it ended first. Blocked Adds return ErrWriterClosed.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrWriterClosed
	}
	w.closed = true
	w.broadcastLocked()
	w.mu.Unlock()
	close(w.stop)
	var ctxErr error
	select {
	case <-w.done:
	case <-ctx.Done():
		ctxErr = fmt.Errorf("close: %w", ctx.Err())
		w.cancelSend()
		<-w.done
	}
	w.cancelSend()
	w.mu.Lock()
	err := w.takeFailureLocked()
	w.mu.Unlock()
	return errors.Join(ctxErr, err)
}

// Stats returns the Writer's counters.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Buffered = w.bufPoints
	s.Retries = w.retries.Load()
	return s
}
