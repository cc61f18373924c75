package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// SeriesLabel is the label that names a load series (its value is the
// series' key in the Ledger).
const SeriesLabel = "series"

// Value is the value the load generator writes for series at timestampMs.
// Deriving it from both makes a point returned under the wrong series or
// timestamp detectable. It is exact in a float64 (below 2^53).
func Value(series string, timestampMs int64) float64 {
	h := fnv.New32a()
	h.Write([]byte(series))
	return float64((timestampMs%1_000_000_000)*1_000_000 + int64(h.Sum32()%1_000_000))
}

// Ledger records every point the load generator wrote: acknowledged ones
// (the edge answered OK, so they are durable) and in-doubt ones (the write
// failed or timed out, so they may or may not be stored). It is safe for
// concurrent use.
type Ledger struct {
	mu      sync.Mutex
	acked   map[string]map[int64]float64
	inDoubt map[string]map[int64]float64
	nAcked  int
	nDoubt  int
	// newestMs and oldestMs bound the acknowledged timestamps.
	newestMs, oldestMs int64
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{acked: map[string]map[int64]float64{}, inDoubt: map[string]map[int64]float64{}, oldestMs: math.MaxInt64}
}

func (l *Ledger) record(m map[string]map[int64]float64, series string, ts []int64, vs []float64) int {
	if m[series] == nil {
		m[series] = map[int64]float64{}
	}
	added := 0
	for i, t := range ts {
		if _, dup := m[series][t]; !dup {
			added++
		}
		m[series][t] = vs[i]
	}
	return added
}

// Ack records acknowledged points.
func (l *Ledger) Ack(series string, ts []int64, vs []float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nAcked += l.record(l.acked, series, ts, vs)
	for _, t := range ts {
		l.newestMs, l.oldestMs = max(l.newestMs, t), min(l.oldestMs, t)
	}
}

// Doubt records points whose write failed: they may be stored.
func (l *Ledger) Doubt(series string, ts []int64, vs []float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nDoubt += l.record(l.inDoubt, series, ts, vs)
}

// Acked returns the number of acknowledged points.
func (l *Ledger) Acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nAcked
}

// InDoubt returns the number of points whose write failed.
func (l *Ledger) InDoubt() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nDoubt
}

// lookup says whether series@ts was acknowledged or is in doubt, and with
// which value.
func (l *Ledger) lookup(series string, ts int64) (v float64, acked, doubt bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v, ok := l.acked[series][ts]; ok {
		return v, true, false
	}
	v, doubt = l.inDoubt[series][ts]
	return v, false, doubt
}

// WriterOptions configure the load generator.
type WriterOptions struct {
	Addr            string        // the edge's gRPC address (required)
	Metric          string        // default "e2e_load"
	Series          int           // series written to; default 20
	PointsPerSeries int           // points per series per request; default 10
	Interval        time.Duration // between requests; default 50ms
	StartMs         int64         // first timestamp; default: now
	RequestTimeout  time.Duration // default 5s
	Client          Client        // TLS and token (zero: plaintext, none)
	// StepMs is the time between a series' consecutive points; default 1.
	// Interval/PointsPerSeries keeps the timestamps at the clock's pace.
	StepMs int64
}

// WithDefaults returns o with every unset field given its default.
func (o WriterOptions) WithDefaults() WriterOptions {
	if o.Metric == "" {
		o.Metric = "e2e_load"
	}
	if o.Series == 0 {
		o.Series = 20
	}
	if o.PointsPerSeries == 0 {
		o.PointsPerSeries = 10
	}
	if o.Interval == 0 {
		o.Interval = 50 * time.Millisecond
	}
	if o.StartMs == 0 {
		o.StartMs = time.Now().UnixMilli()
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 5 * time.Second
	}
	if o.StepMs == 0 {
		o.StepMs = 1
	}
	return o
}

// Validate reports every bad field of o (after defaults).
func (o WriterOptions) Validate() error {
	var bad []error
	if o.Addr == "" {
		bad = append(bad, errors.New("writer options: Addr is empty"))
	}
	if o.Series < 1 || o.PointsPerSeries < 1 {
		bad = append(bad, fmt.Errorf("writer options: Series %d and PointsPerSeries %d must be at least 1", o.Series, o.PointsPerSeries))
	}
	if o.Interval < 0 || o.RequestTimeout < 0 || o.StepMs < 0 {
		bad = append(bad, errors.New("writer options: Interval, RequestTimeout and StepMs must not be negative"))
	}
	if err := errors.Join(bad...); err != nil {
		return fmt.Errorf("writer options: %w", err)
	}
	return nil
}

// WriterStats summarize a load run.
type WriterStats struct {
	Requests, Failed int
	Acked, InDoubt   int
	Elapsed          time.Duration
	MaxLatency       time.Duration // the slowest request, failed ones included
	FirstErr         error         // the first failed write, if any
	// Latencies are every request's, in the order sent.
	Latencies []RequestLatency
}

// RequestLatency is one request's start and duration.
type RequestLatency struct {
	At   time.Time
	Took time.Duration
}

// Quantile returns the q-quantile (0..1, nearest rank) of the latencies of
// the requests started in [from, to) (zero times: no bound), and how many
// there were.
func (s WriterStats) Quantile(q float64, from, to time.Time) (time.Duration, int) {
	var ds []time.Duration
	for _, l := range s.Latencies {
		if (!from.IsZero() && l.At.Before(from)) || (!to.IsZero() && !l.At.Before(to)) {
			continue
		}
		ds = append(ds, l.Took)
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)], len(ds)
}

// PointsPerSecond is the acknowledged load.
func (s WriterStats) PointsPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Acked) / s.Elapsed.Seconds()
}

// Writer writes a steady load through an edge's WriteService and records
// every point in its Ledger. Each series gets consecutive unique
// timestamps, StepMs apart (one millisecond by default), starting at
// StartMs.
type Writer struct {
	opts   WriterOptions
	Ledger *Ledger
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{}
	stats  WriterStats
	nextMs int64
	mu     sync.Mutex // guards stats.Latencies, read by Progress while running
}

// Progress returns a copy of the latencies recorded so far; it may be
// called while the writer runs.
func (w *Writer) Progress() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WriterStats{Latencies: slices.Clone(w.stats.Latencies)}
}

// NewWriter connects (lazily) to the edge; Start begins writing.
func NewWriter(o WriterOptions) (*Writer, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	// A short reconnection backoff: an edge restarted after a kill is
	// written to again within ~100 ms, not after gRPC's default 1 s and up.
	conn, err := grpc.NewClient(o.Addr, append(o.Client.DialOptions(),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: time.Second,
			Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond}}))...)
	if err != nil {
		return nil, fmt.Errorf("writer: connect to %s: %w", o.Addr, err)
	}
	return &Writer{opts: o, Ledger: NewLedger(), conn: conn, nextMs: o.StartMs}, nil
}

// SeriesName is the SeriesLabel value of load series i.
func SeriesName(i int) string { return fmt.Sprintf("s%03d", i) }

// Start runs the load in a goroutine until Stop.
func (w *Writer) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		start := time.Now()
		tick := time.NewTicker(w.opts.Interval)
		defer tick.Stop()
		for {
			w.writeOnce(ctx)
			select {
			case <-ctx.Done():
				w.stats.Elapsed = time.Since(start)
				return
			case <-tick.C:
			}
		}
	}()
}

// WriteOnce writes one request synchronously (for tests that do not need
// a steady load). Do not call it while the writer is started.
func (w *Writer) WriteOnce(ctx context.Context) error {
	before := w.stats.Failed
	w.writeOnce(ctx)
	if w.stats.Failed > before {
		return w.stats.FirstErr
	}
	return nil
}

func (w *Writer) writeOnce(ctx context.Context) {
	o := w.opts
	req := &pb.WriteRequest{}
	for i := range o.Series {
		b := &pb.SeriesBatch{Series: &pb.Series{Labels: []*pb.Label{
			{Name: "__name__", Value: o.Metric}, {Name: SeriesLabel, Value: SeriesName(i)}}}}
		for k := range o.PointsPerSeries {
			ts := w.nextMs + int64(k)*o.StepMs
			b.TimestampsMs = append(b.TimestampsMs, ts)
			b.Values = append(b.Values, Value(SeriesName(i), ts))
		}
		req.Batches = append(req.Batches, b)
	}
	w.nextMs += int64(o.PointsPerSeries) * o.StepMs
	rctx, cancel := context.WithTimeout(ctx, o.RequestTimeout)
	defer cancel()
	w.stats.Requests++
	began := time.Now()
	resp, err := pb.NewWriteServiceClient(w.conn).Write(rctx, req)
	took := time.Since(began)
	w.stats.MaxLatency = max(w.stats.MaxLatency, took)
	w.mu.Lock()
	w.stats.Latencies = append(w.stats.Latencies, RequestLatency{At: began, Took: took})
	w.mu.Unlock()
	if err == nil && (resp.Rejected != 0 || resp.Accepted != int64(o.Series*o.PointsPerSeries)) {
		err = fmt.Errorf("write: %d accepted, %d rejected (%v)", resp.Accepted, resp.Rejected, resp.Rejections)
	}
	for i, b := range req.Batches {
		if err == nil {
			w.Ledger.Ack(SeriesName(i), b.TimestampsMs, b.Values)
		} else {
			w.Ledger.Doubt(SeriesName(i), b.TimestampsMs, b.Values)
		}
	}
	// A request cut short by Stop is in doubt but is not a failure.
	if err != nil && ctx.Err() == nil {
		w.stats.Failed++
		if w.stats.FirstErr == nil {
			w.stats.FirstErr = fmt.Errorf("write request %d to %s: %w", w.stats.Requests, o.Addr, err)
		}
	}
}

// Stop ends the load (an in-flight request finishes or times out) and
// returns its statistics.
func (w *Writer) Stop() WriterStats {
	if w.cancel != nil {
		w.cancel()
		<-w.done
		w.cancel = nil
	}
	w.stats.Acked, w.stats.InDoubt = w.Ledger.Acked(), w.Ledger.InDoubt()
	return w.stats
}

// Close stops the load and closes the connection.
func (w *Writer) Close() error {
	w.Stop()
	return w.conn.Close()
}
