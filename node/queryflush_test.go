package node_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// TestQuery_ConcurrentFlushesMissNothing: queries over many series read
// the stored chunks of several series through one store iterator while
// flushes move samples from the head to the store; every query must see
// every sample written before it began, exactly once, and the count of a
// downsampled read must agree.
func TestQuery_ConcurrentFlushesMissNothing(t *testing.T) {
	end := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	n, err := node.Open(node.Options{DataDir: t.TempDir(), Now: func() time.Time { return end }, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	const series = 12
	start := end.Add(-2 * time.Hour).UnixMilli()
	var written atomic.Int64 // every sample at t < written has been written
	written.Store(start)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // writer: 10 s of samples (one a second) per batch
		defer wg.Done()
		for lo := start; lo < end.UnixMilli(); lo += 10_000 {
			var batches []model.Batch
			for i := range series {
				b := model.Batch{Labels: labels.FromStrings("__name__", "m", "i", fmt.Sprint(i))}
				for ts := lo; ts < lo+10_000; ts += 1000 {
					b.Ts, b.Vs = append(b.Ts, ts), append(b.Vs, float64(ts/1000%7))
				}
				batches = append(batches, b)
			}
			if _, err := n.Write(context.Background(), batches); err != nil {
				t.Error(err)
				return
			}
			written.Store(lo + 10_000)
		}
		close(stop)
	}()
	go func() { // flusher
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := n.Flush(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	m, err := labels.NewMatcher(labels.MatchEqual, "__name__", "m")
	if err != nil {
		t.Fatal(err)
	}
	queries := 0
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		default:
		}
		w := written.Load()
		if w == start {
			continue
		}
		want := (w - start) / 1000 // samples per series in [start, w)
		got := map[string]int64{}
		_, err := n.Query(context.Background(), model.Query{Matchers: []*labels.Matcher{m},
			Start: start, End: w - 1, Mode: model.ModeRaw}, func(s model.Series) error {
			got[s.Labels.String()] = int64(len(s.Ts))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != series {
			t.Fatalf("query through %d: %d series, want %d", w, len(got), series)
		}
		for l, c := range got {
			// Samples written after the query began may be seen too, but
			// only those through the next batch.
			if c < want || c > want+10 {
				t.Fatalf("query through %d: %s has %d samples, want %d", w, l, c, want)
			}
		}
		counted := map[string]float64{}
		_, err = n.Query(context.Background(), model.Query{Matchers: []*labels.Matcher{m},
			Start: start, End: w - 1, Mode: model.ModeDownsample, Step: 600_000, Downsample: rollup.FuncCount}, func(s model.Series) error {
			for _, v := range s.Vs {
				counted[s.Labels.String()] += v
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for l, c := range counted {
			if int64(c) < want {
				t.Fatalf("downsampled count through %d: %s counts %v samples, want %d", w, l, c, want)
			}
		}
		queries++
	}
	wg.Wait()
	t.Logf("%d queries beside the flushes", queries)
}
