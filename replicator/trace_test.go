package replicator_test

import (
	"context"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// sealTracing is a Source that remembers seal spans, as *node.Node does.
type sealTracing struct {
	walSource
	seals  map[uint64]trace.SpanContext
	forgot atomic.Uint64
}

func (s *sealTracing) SealSpanContext(seq uint64) (trace.SpanContext, bool) {
	sc, ok := s.seals[seq]
	return sc, ok
}

func (s *sealTracing) ForgetSealSpans(through uint64) { s.forgot.Store(through) }

var _ replicator.SealTracer = (*sealTracing)(nil)

func TestShipper_ShipSpansAreChildrenOfTheSealAndEndWithTheAnswer(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	in.refuseOnce.Store(uint64(2), pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE)
	w := openWAL(t, "pi-7")
	segs := sealN(t, w, 3)

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())
	// Seal spans for segments 1 and 2 only: 3 was sealed before a restart.
	src := &sealTracing{walSource: w, seals: map[uint64]trace.SpanContext{}}
	for _, s := range segs[:2] {
		_, span := tp.Tracer("test").Start(context.Background(), "wal.seal")
		span.End()
		src.seals[s.Seq] = span.SpanContext()
	}
	spans.Reset()

	o := options(t, cursorPath(t), in.addr)
	o.TracerProvider = tp
	s := newShipper(t, o)
	start(t, s, src)
	last := segs[2].Seq
	eventually(t, "every segment acknowledged", func() bool { return s.Stats().AckedThrough == last })
	eventually(t, "the acknowledged seal spans forgotten", func() bool { return src.forgot.Load() == last })

	var ok, failed = map[int64]int{}, map[int64]int{}
	eventually(t, "four ship spans (one refused)", func() bool {
		ok, failed = map[int64]int{}, map[int64]int{}
		for _, sp := range spans.GetSpans() {
			if sp.Name != "replicator.ship" {
				continue
			}
			var seq int64
			for _, kv := range sp.Attributes {
				if kv.Key == "tributary.segment.seq" {
					seq = kv.Value.AsInt64()
				}
			}
			if sp.Status.Code == codes.Error {
				failed[seq]++
			} else {
				ok[seq]++
			}
			want, sealed := src.seals[uint64(seq)]
			switch {
			case sealed && sp.Parent.SpanID() != want.SpanID():
				t.Errorf("ship span of segment %d: parent %s, want its seal span %s", seq, sp.Parent.SpanID(), want.SpanID())
			case !sealed && sp.Parent.IsValid():
				t.Errorf("ship span of segment %d without a seal span has parent %s", seq, sp.Parent.SpanID())
			}
		}
		return len(ok) == 3 && len(failed) == 1
	})
	if failed[2] != 1 || ok[1] != 1 || ok[2] != 1 || ok[3] != 1 {
		t.Errorf("acknowledged ship spans %v, failed %v; want 1, 2, 3 once and 2 refused once", ok, failed)
	}
}
