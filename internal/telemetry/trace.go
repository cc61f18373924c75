package telemetry

import (
	"context"
	"sync"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

var (
	noopMeter  = metricnoop.NewMeterProvider()
	noopTracer = tracenoop.NewTracerProvider()
)

// traceparentKey is the W3C header (and carrier key) for a span context.
const traceparentKey = "traceparent"

// Traceparent renders the span context of ctx as a W3C traceparent value
// ("00-<trace id>-<span id>-<flags>"), or "" when ctx holds no valid span
// context (traces off).
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c[traceparentKey]
}

// SpanContextTraceparent renders sc as a W3C traceparent value, "" when sc
// is not valid.
func SpanContextTraceparent(sc trace.SpanContext) string {
	return Traceparent(trace.ContextWithSpanContext(context.Background(), sc))
}

// ParseTraceparent reads a W3C traceparent value; ok is false for an empty
// or malformed one (which callers ignore: tracing never fails a request).
func ParseTraceparent(s string) (trace.SpanContext, bool) {
	if s == "" {
		return trace.SpanContext{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{traceparentKey: s})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// SpanMemo remembers the span contexts of the most recent sequence numbers
// (the edge's seal spans, read when the segment is shipped, maybe hours
// later) in bounded memory: past its capacity the lowest numbers are
// forgotten first, and a segment shipped without one starts a new trace.
// It is safe for concurrent use; the zero value remembers nothing.
type SpanMemo struct {
	mu  sync.Mutex
	max int
	m   map[uint64]trace.SpanContext
	low uint64 // no key below it
}

// NewSpanMemo returns a memo holding at most capacity span contexts.
func NewSpanMemo(capacity int) *SpanMemo {
	return &SpanMemo{max: capacity, m: make(map[uint64]trace.SpanContext, min(capacity, 1024))}
}

// Put remembers sc for seq unless sc is invalid (traces off: no cost
// beyond the check).
func (m *SpanMemo) Put(seq uint64, sc trace.SpanContext) {
	if m == nil || m.max <= 0 || !sc.IsValid() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[seq] = sc
	if len(m.m) == 1 || seq < m.low {
		m.low = seq
	}
	for len(m.m) > m.max {
		if _, ok := m.m[m.low]; !ok {
			m.low = m.lowest()
		}
		delete(m.m, m.low)
		m.low++
	}
}

// lowest is the smallest key. REQUIRES: mu held, m.m not empty.
func (m *SpanMemo) lowest() uint64 {
	first := true
	var low uint64
	for s := range m.m {
		if first || s < low {
			low, first = s, false
		}
	}
	return low
}

// Get returns the span context remembered for seq.
func (m *SpanMemo) Get(seq uint64) (trace.SpanContext, bool) {
	if m == nil {
		return trace.SpanContext{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sc, ok := m.m[seq]
	return sc, ok
}

// Forget drops the span contexts of every number up to and including seq
// (the cloud acknowledged them).
func (m *SpanMemo) Forget(through uint64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) == 0 || through < m.low {
		return
	}
	if through-m.low < uint64(len(m.m))*2 {
		for s := m.low; s <= through; s++ {
			delete(m.m, s)
		}
	} else {
		for s := range m.m {
			if s <= through {
				delete(m.m, s)
			}
		}
	}
	m.low = through + 1
}

// Len is the number of span contexts held.
func (m *SpanMemo) Len() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
