// Package hostile holds what tests and benchmarks of pre-authentication
// paths need to play an attacker without becoming one to themselves: a
// gRPC codec that sends messages of any size from one small buffer (so a
// client in the same process as the server allocates almost nothing for
// its 200 MB messages), and a heap watcher that measures how much a server
// in the same process buffered, and gives up before it takes the machine
// down.
//
// It also holds the attacks of the hostile-clients scenario against real
// processes (the e2e test and tribench hostile): gRPC calls of any size
// with or without credentials (GRPC), long line-protocol bodies
// (HTTPPosts), half-open TLS handshakes (HalfOpenHandshakes), each judged
// against the refusal its listener documents (Refusal, Verdict); a Plan
// of them run at once, in this process or in a niced child process
// (RunPlanProcess, ServePlan); and the scenario itself against a fleet's
// listeners (FleetPlan).
//
// Concurrency: a Codec is immutable and safe for concurrent use; a
// HeapWatch's methods may be called from any goroutine. The attack
// functions may run concurrently; each returns once all it started ended.
package hostile

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"

	"github.com/tributarydb/tributary/internal/pace"
)

// chunkBytes is the buffer every message of a Codec is made of.
const chunkBytes = 1 << 20

var zeros = make([]byte, chunkBytes)

// Codec is a gRPC codec whose Marshal ignores the message and returns Size
// zero bytes made of references to one shared buffer. Its name is "proto",
// so the server decodes (and first reads) with its usual codec.
type Codec struct{ Size int }

// Name implements encoding.CodecV2.
func (Codec) Name() string { return "proto" }

// Marshal implements encoding.CodecV2.
func (c Codec) Marshal(any) (mem.BufferSlice, error) {
	out := make(mem.BufferSlice, 0, c.Size/chunkBytes+1)
	for n := 0; n < c.Size; n += chunkBytes {
		out = append(out, mem.SliceBuffer(zeros[:min(chunkBytes, c.Size-n)]))
	}
	return out, nil
}

// Unmarshal implements encoding.CodecV2: replies are discarded.
func (Codec) Unmarshal(mem.BufferSlice, any) error { return nil }

// CallOption makes a call send messages of size bytes.
func CallOption(size int) grpc.CallOption { return grpc.ForceCodecV2(Codec{Size: size}) }

// HeapWatch samples the Go heap of this process until Stop and remembers
// the highest HeapAlloc above the baseline taken at Start. When the growth
// passes the limit it cancels the context Start returned, so that a test
// against a server that does buffer what it is sent stops its clients
// instead of exhausting the machine.
type HeapWatch struct {
	base  uint64
	peak  atomic.Uint64
	limit uint64
	stop  chan struct{}
	wg    sync.WaitGroup
	over  atomic.Bool
}

// Start collects garbage, takes the baseline and starts sampling every
// interval. The context ends when the growth passes limitBytes or parent
// ends.
func Start(parent context.Context, limitBytes uint64, interval time.Duration) (*HeapWatch, context.Context, context.CancelFunc) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ctx, cancel := context.WithCancel(parent)
	w := &HeapWatch{base: ms.HeapAlloc, limit: limitBytes, stop: make(chan struct{})}
	w.wg.Go(func() { pace.Every(w.stop, interval, nil, func() { w.sample(cancel) }) })
	return w, ctx, cancel
}

// sample reads HeapAlloc once, keeps the peak growth, and calls cancel
// the first time the growth passes the limit.
func (w *HeapWatch) sample(cancel context.CancelFunc) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > w.base {
		g := ms.HeapAlloc - w.base
		for p := w.peak.Load(); g > p && !w.peak.CompareAndSwap(p, g); p = w.peak.Load() {
		}
		if g > w.limit && !w.over.Swap(true) {
			cancel()
		}
	}
}

// Stop ends the sampling and returns the peak growth in bytes.
func (w *HeapWatch) Stop() uint64 {
	close(w.stop)
	w.wg.Wait()
	return w.peak.Load()
}

// Over reports whether the growth passed the limit.
func (w *HeapWatch) Over() bool { return w.over.Load() }

// MiB formats bytes as MiB for messages.
func MiB(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
