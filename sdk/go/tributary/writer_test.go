package tributary_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// waitFor polls cond; it fails the test if cond stays false for 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func newWriter(t *testing.T, c *tributary.Client, o tributary.WriterOptions) *tributary.Writer {
	t.Helper()
	w, err := c.NewWriter(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

func countPoints(t *testing.T, c *tributary.Client, selector string) (series, points int) {
	t.Helper()
	got, err := c.Query(context.Background(), tributary.Raw(selector, time.Now().Add(-2*time.Hour), time.Now().Add(time.Minute))).Collect()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		points += len(s.Points)
	}
	return len(got), points
}

func TestWriter_FlushesBySizeInTheBackground(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	w := newWriter(t, c, tributary.WriterOptions{MaxBatchPoints: 100, FlushInterval: time.Hour})
	ctx := context.Background()
	now := time.Now().Add(-time.Minute).UnixMilli()
	for i := range 250 {
		if err := w.Add(ctx, tributary.Metric("m", "s", fmt.Sprint(i%3)), now+int64(i), float64(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "two full batches", func() bool { return w.Stats().Requests == 2 })
	if st := w.Stats(); st.Accepted != 200 || st.Buffered != 50 || st.Added != 250 {
		t.Fatalf("after two batches: %+v", st)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Accepted != 250 || st.Buffered != 0 || st.Requests != 3 {
		t.Fatalf("after flush: %+v", st)
	}
	if series, points := countPoints(t, c, "m"); series != 3 || points != 250 {
		t.Fatalf("stored %d series, %d points", series, points)
	}
}

func TestWriter_FlushesByInterval(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	w := newWriter(t, c, tributary.WriterOptions{FlushInterval: 10 * time.Millisecond})
	if err := w.Add(context.Background(), tributary.Metric("tick"), time.Now().UnixMilli(), 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the interval flush", func() bool { return w.Stats().Accepted == 1 })
	if _, points := countPoints(t, c, "tick"); points != 1 {
		t.Fatalf("stored %d points", points)
	}
}

func TestWriter_ReportsRejectedPoints(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	var mu sync.Mutex
	var rejected []tributary.Rejection
	w := newWriter(t, c, tributary.WriterOptions{OnRejected: func(r tributary.Rejection) {
		mu.Lock()
		defer mu.Unlock()
		rejected = append(rejected, r)
	}})
	ctx := context.Background()
	now := time.Now()
	old := now.Add(-40 * 24 * time.Hour).UnixMilli()
	future := now.Add(24 * time.Hour).UnixMilli()
	ls := tributary.Metric("temp", "room", "a")
	for _, p := range []struct {
		t int64
		v float64
	}{{now.UnixMilli(), 1}, {old, 2}, {future, 3}, {now.UnixMilli() + 1, math.NaN()}} {
		if err := w.Add(ctx, ls, p.t, p.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rejected) != 2 {
		t.Fatalf("rejections %v", rejected)
	}
	if r := rejected[0]; r.Reason != tributary.RejectTooOld || r.TimestampMs != old || r.Value != 2 || r.Labels.String() != ls.String() {
		t.Errorf("first rejection %+v", r)
	}
	if r := rejected[1]; r.Reason != tributary.RejectTooFarInFuture || r.TimestampMs != future || r.Value != 3 {
		t.Errorf("second rejection %+v", r)
	}
	if st := w.Stats(); st.Accepted != 2 || st.Rejected != 2 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestWriter_RefusesInvalidSeriesAtAdd(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	w := newWriter(t, c, tributary.WriterOptions{})
	ctx := context.Background()
	now := time.Now().UnixMilli()
	for name, ls := range map[string]tributary.Labels{
		"no metric name":    tributary.NewLabels("host", "a"),
		"bad label name":    tributary.Metric("cpu", "1host", "a"),
		"duplicate label":   {{"__name__", "cpu"}, {"host", "a"}, {"host", "b"}},
		"invalid utf-8":     tributary.Metric("cpu", "host", "\xff"),
		"empty metric name": tributary.Metric(""),
	} {
		if err := w.Add(ctx, ls, now, 1); !errors.Is(err, tributary.ErrInvalidSeries) {
			t.Errorf("%s: %v, want ErrInvalidSeries", name, err)
		}
	}
	if err := w.AddSeries(ctx, tributary.Metric("cpu"), []int64{1, 2}, []float64{1}); err == nil {
		t.Error("length mismatch accepted")
	}
	// Unsorted labels with empty values are fine: the empty one is dropped.
	if err := w.Add(ctx, tributary.Labels{{"z", "1"}, {"__name__", "cpu"}, {"empty", ""}}, now, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Added != 1 || st.Accepted != 1 {
		t.Errorf("stats %+v", st)
	}
	if series, err := c.Series(ctx, "cpu", 0); err != nil || len(series) != 1 || series[0].String() != `cpu{z="1"}` {
		t.Errorf("series %v %v", series, err)
	}
}

func TestWriter_RetriesRetryableFailures(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	w := newWriter(t, c, tributary.WriterOptions{})
	s.fail("Write", codes.Unavailable, codes.ResourceExhausted)
	ctx := context.Background()
	if err := w.AddSeries(ctx, tributary.Metric("r"), []int64{time.Now().UnixMilli()}, []float64{1}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Accepted != 1 || st.Retries != 2 || st.Requests != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestWriter_ReportsRequestsThatFailForGood(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	var reported []error
	var mu sync.Mutex
	w := newWriter(t, c, tributary.WriterOptions{OnError: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	}})
	s.fail("Write", codes.InvalidArgument)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	if err := w.AddSeries(ctx, tributary.Metric("f"), []int64{now, now + 1}, []float64{1, 2}); err != nil {
		t.Fatal(err)
	}
	err := w.Flush(ctx)
	var we *tributary.WriteError
	if !errors.As(err, &we) || we.Points != 2 || we.Requests != 1 || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("flush error %v", err)
	}
	// Reported once: the next flush is clean.
	if err := w.Add(ctx, tributary.Metric("f"), now+2, 3); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatalf("second flush: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !errors.As(reported[0], &we) || we.Points != 2 {
		t.Errorf("OnError got %v", reported)
	}
	if st := w.Stats(); st.Failed != 2 || st.Accepted != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestWriter_ConcurrentAddsUnderBackpressure(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	w, err := c.NewWriter(tributary.WriterOptions{MaxBatchPoints: 64, MaxBufferedPoints: 256})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const writers, each = 8, 1000
	base := time.Now().Add(-time.Minute).UnixMilli()
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			ls := tributary.Metric("conc", "g", fmt.Sprint(g))
			for i := range each {
				if err := w.Add(ctx, ls, base+int64(i), float64(i)); err != nil {
					t.Error(err)
					return
				}
				if st := w.Stats(); st.Buffered > 256 {
					t.Errorf("buffered %d points, bound is 256", st.Buffered)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Accepted != writers*each || st.Buffered != 0 {
		t.Fatalf("stats %+v", st)
	}
	if series, points := countPoints(t, c, "conc"); series != writers || points != writers*each {
		t.Fatalf("stored %d series, %d points", series, points)
	}
}

func TestWriter_LastAddedValueWins(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	w := newWriter(t, c, tributary.WriterOptions{MaxBatchPoints: 1})
	ctx := context.Background()
	ts := time.Now().UnixMilli()
	for v := range 5 {
		if err := w.Add(ctx, tributary.Metric("lww"), ts, float64(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.Query(ctx, tributary.Last("lww")).Collect()
	if err != nil || len(got) != 1 || got[0].Points[0].Value != 4 {
		t.Fatalf("last %v %v", got, err)
	}
}

func TestWriter_ClosedWriterRefusesWork(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	w, err := c.NewWriter(tributary.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := w.Add(ctx, tributary.Metric("c"), time.Now().UnixMilli(), 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Accepted != 1 {
		t.Errorf("close did not send the buffered point: %+v", st)
	}
	if err := w.Add(ctx, tributary.Metric("c"), time.Now().UnixMilli(), 1); !errors.Is(err, tributary.ErrWriterClosed) {
		t.Errorf("add after close: %v", err)
	}
	if err := w.Flush(ctx); !errors.Is(err, tributary.ErrWriterClosed) {
		t.Errorf("flush after close: %v", err)
	}
	if err := w.Close(ctx); !errors.Is(err, tributary.ErrWriterClosed) {
		t.Errorf("second close: %v", err)
	}
	if _, err := c.NewWriter(tributary.WriterOptions{MaxBatchPoints: -1}); err == nil {
		t.Error("negative batch size accepted")
	}
}

// fakeSender records requests; it answers each with everything accepted,
// after waiting for gate (when not nil) or for the context.
type fakeSender struct {
	mu   sync.Mutex
	reqs []*pb.WriteRequest
	gate chan struct{}
}

func (f *fakeSender) send(ctx context.Context, req *pb.WriteRequest, _ func(error)) (*pb.WriteResponse, error) {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	var n int64
	for _, b := range req.Batches {
		n += int64(len(b.TimestampsMs))
	}
	return &pb.WriteResponse{Accepted: n}, nil
}

func (f *fakeSender) requests() []*pb.WriteRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

func TestWriter_IntervalFlushTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSender{}
		w, err := tributary.NewWriterWithSend(f.send, tributary.WriterOptions{FlushInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		time.Sleep(100 * time.Millisecond)
		if err := w.Add(ctx, tributary.Metric("a"), 1, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(800 * time.Millisecond)
		synctest.Wait()
		if n := len(f.requests()); n != 0 {
			t.Fatalf("%d requests before the interval", n)
		}
		time.Sleep(100 * time.Millisecond) // the tick at 1 s
		synctest.Wait()
		if n := len(f.requests()); n != 1 {
			t.Fatalf("%d requests at the interval, want 1", n)
		}
		// Nothing buffered: later ticks send nothing.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(f.requests()); n != 1 {
			t.Fatalf("%d requests after idle ticks, want 1", n)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWriter_GroupsPointsPerSeriesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSender{}
		w, err := tributary.NewWriterWithSend(f.send, tributary.WriterOptions{MaxBatchPoints: 10, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		a, b := tributary.Metric("m", "s", "a"), tributary.Labels{{"s", "b"}, {"__name__", "m"}}
		for i := range 4 {
			w.Add(ctx, a, int64(i), float64(i))
			w.Add(ctx, b, int64(i), float64(10+i))
		}
		// A long series is split across batches of 10.
		ts, vs := make([]int64, 25), make([]float64, 25)
		for i := range ts {
			ts[i], vs[i] = int64(100+i), float64(i)
		}
		if err := w.AddSeries(ctx, a, ts, vs); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		reqs := f.requests()
		var sizes []int
		for _, r := range reqs {
			n := 0
			for _, sb := range r.Batches {
				n += len(sb.TimestampsMs)
			}
			sizes = append(sizes, n)
		}
		if !slices.Equal(sizes, []int{10, 10, 10, 3}) {
			t.Fatalf("batch sizes %v", sizes)
		}
		first := reqs[0]
		if len(first.Batches) != 2 || !slices.Equal(first.Batches[0].TimestampsMs, []int64{0, 1, 2, 3, 100, 101}) ||
			!slices.Equal(first.Batches[1].Values, []float64{10, 11, 12, 13}) || first.Batches[1].Series.Labels[1].Value != "b" {
			t.Fatalf("first request %v", first)
		}
		var all []int64
		for _, r := range reqs {
			for _, sb := range r.Batches {
				if sb.Series.Labels[1].Value == "a" {
					all = append(all, sb.TimestampsMs...)
				}
			}
		}
		if len(all) != 29 || !slices.IsSorted(all) {
			t.Fatalf("points of a out of order: %v", all)
		}
	})
}

func TestWriter_MemoryIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSender{gate: make(chan struct{})}
		w, err := tributary.NewWriterWithSend(f.send, tributary.WriterOptions{MaxBatchPoints: 10, MaxBufferedPoints: 100, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for i := range 100 {
			if err := w.Add(ctx, tributary.Metric("m"), int64(i), 1); err != nil {
				t.Fatal(err)
			}
		}
		// The sender is stuck: the 101st point waits, then gives up.
		short, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		start := time.Now()
		err = w.Add(short, tributary.Metric("m"), 100, 1)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
			t.Fatalf("add to a full buffer: %v after %s", err, time.Since(start))
		}
		if st := w.Stats(); st.Buffered != 100 || st.Added != 100 {
			t.Fatalf("stats %+v", st)
		}
		// A blocked Add resumes as soon as the sender makes room.
		done := make(chan error)
		go func() { done <- w.Add(ctx, tributary.Metric("m"), 100, 1) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("add returned while the buffer is full: %v", err)
		default:
		}
		f.gate <- struct{}{} // one batch of 10 goes
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		close(f.gate)
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if st := w.Stats(); st.Accepted != 101 || st.Buffered != 0 {
			t.Fatalf("final stats %+v", st)
		}
	})
}

func TestWriter_MemoryIsBoundedInBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSender{gate: make(chan struct{})}
		w, err := tributary.NewWriterWithSend(f.send, tributary.WriterOptions{MaxBufferedBytes: 64 << 10, MaxBatchBytes: 16 << 10, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		// Hostile input: every point a new series with 1 KiB labels.
		big := string(make([]byte, 1000))
		added := 0
		for i := 0; ; i++ {
			ls := tributary.Metric("m", "id", fmt.Sprint(i), "pad", "x"+big[:999])
			if err := w.Add(ctx, ls, int64(i), 1); err != nil {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatal(err)
				}
				break
			}
			added++
		}
		if added < 32 || added > 64 {
			t.Fatalf("%d series of 1 KiB buffered under a 64 KiB bound", added)
		}
		close(f.gate)
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, r := range f.requests() {
			if n := len(r.Batches); n > 16 {
				t.Errorf("a request of %d series of 1 KiB under a 16 KiB batch bound", n)
			}
		}
	})
}

func TestWriter_CloseGivesUpWhenItsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSender{gate: make(chan struct{})} // never opened
		var lost int64
		w, err := tributary.NewWriterWithSend(f.send, tributary.WriterOptions{MaxBatchPoints: 4, OnError: func(err error) {
			var we *tributary.WriteError
			if errors.As(err, &we) {
				lost += we.Points
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			w.Add(context.Background(), tributary.Metric("m"), int64(i), 1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		err = w.Close(ctx)
		var we *tributary.WriteError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &we) || we.Points != 10 {
			t.Fatalf("close error %v", err)
		}
		if lost != 10 {
			t.Fatalf("OnError reported %d lost points, want 10", lost)
		}
		if st := w.Stats(); st.Failed != 10 || st.Buffered != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}
