package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/replicator"
)

// TestTrace_SegmentFromEdgeSealToCloudAck ships segments from an edge
// (node + replicator) to a coordinator, each with its own telemetry
// provider as in two processes, and requires one trace per segment that
// covers its seal on the edge, its shipping, the intake, the store on the
// replica and the catalog commit, with the ship span closed by the ack.
func TestTrace_SegmentFromEdgeSealToCloudAck(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	setup := func(role, id string) *telemetry.Provider {
		p, err := telemetry.Setup(context.Background(), telemetry.Config{Role: role, Instance: id, SpanExporter: spans})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cloud, edgeTel := setup("coordinator", "coord-1"), setup("node", edgeID)
	quiet := func(who string) *slog.Logger {
		return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})).With("test", who)
	}

	addrs := freeAddrs(t, 1)
	c, err := Open(Options{
		NodeID: "coord-1", RaftID: 1, DataDir: t.TempDir(), ClusterListen: addrs[0], IntakeListen: "127.0.0.1:0",
		Peers: []Peer{{RaftID: 1, NodeID: "coord-1", Addr: addrs[0]}}, Insecure: true, TickInterval: 50 * time.Millisecond,
		Logger: quiet("coord-1"), MeterProvider: cloud.MeterProvider(), TracerProvider: cloud.TracerProvider(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c.Stop(ctx)
	}()
	eventually(t, "the coordinator is ready", func() bool { return c.Ready() && len(registeredCoordinators(c)) == 1 })

	s, err := replicator.New(replicator.Options{
		Targets: []string{c.IntakeAddr()}, Insecure: true, CursorPath: filepath.Join(t.TempDir(), "replication.cursor"),
		SoftwareVersion: "test", BackoffInitial: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		AckTimeout: 5 * time.Second, PollInterval: 10 * time.Millisecond, Logger: quiet(edgeID),
		MeterProvider: edgeTel.MeterProvider(), TracerProvider: edgeTel.TracerProvider(),
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: edgeID,
		WALSegmentBytes: 4096, WALSegmentAge: 20 * time.Millisecond, FlushInterval: 10 * time.Millisecond,
		WALRetention: s.RetainFrom, WriteGate: s.WriteGate,
		MeterProvider: edgeTel.MeterProvider(), TracerProvider: edgeTel.TracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		if err := s.Run(ctx, n); err != nil {
			t.Errorf("shipper: %v", err)
		}
	})

	next := time.Now().Add(-time.Hour).UnixMilli()
	for i := range 4 {
		b := node.Batch{Labels: []labels.Label{{Name: "__name__", Value: "temp"}, {Name: "sensor", Value: fmt.Sprint(i)}}}
		for range 100 {
			b.Ts, b.Vs = append(b.Ts, next), append(b.Vs, float64(next%97))
			next++
		}
		if _, err := n.Write([]node.Batch{b}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond) // past WALSegmentAge: the next write seals
	}
	var sealed uint64
	for _, seg := range n.WALSegments() {
		if seg.Sealed {
			sealed = max(sealed, seg.Seq)
		}
	}
	if sealed == 0 {
		t.Fatal("no WAL segment sealed")
	}
	eventually(t, fmt.Sprintf("the cloud acknowledged segment %d", sealed), func() bool { return s.Stats().AckedThrough >= sealed })

	// The ship span ends when the edge handles the ack, just after the
	// cursor moved: wait for it.
	var got []tracetest.SpanStub
	find := func(name string, parent trace.SpanContext) *tracetest.SpanStub {
		for i := range got {
			if got[i].Name == name && got[i].Parent.SpanID() == parent.SpanID() && got[i].SpanContext.TraceID() == parent.TraceID() {
				return &got[i]
			}
		}
		return nil
	}
	var seal, ship, intake *tracetest.SpanStub
	eventually(t, "a segment's spans from seal to ack", func() bool {
		got = spans.GetSpans()
		for i := range got {
			if got[i].Name != "wal.seal" {
				continue
			}
			seal = &got[i]
			if ship = find("replicator.ship", seal.SpanContext); ship == nil {
				continue
			}
			if intake = find("intake.segment", ship.SpanContext); intake == nil {
				continue
			}
			if find("intake.replicate", intake.SpanContext) != nil && find("catalog.commit", intake.SpanContext) != nil {
				return true
			}
		}
		return false
	})
	res := func(s *tracetest.SpanStub) string {
		for _, kv := range s.Resource.Attributes() {
			if kv.Key == "tributary.role" {
				return kv.Value.AsString()
			}
		}
		return ""
	}
	if res(seal) != "node" || res(ship) != "node" || res(intake) != "coordinator" {
		t.Errorf("span roles: seal %q, ship %q, intake %q; want node, node, coordinator", res(seal), res(ship), res(intake))
	}
	if seal.Parent.IsValid() {
		t.Errorf("the seal span has a parent %v: it should start the trace", seal.Parent)
	}
	if !intake.Parent.IsRemote() {
		t.Error("the intake span's parent is not the edge's (remote) ship span")
	}
	seq := func(s *tracetest.SpanStub) int64 {
		for _, kv := range s.Attributes {
			if kv.Key == "tributary.segment.seq" {
				return kv.Value.AsInt64()
			}
		}
		return -1
	}
	if seq(seal) <= 0 || seq(seal) != seq(ship) || seq(ship) != seq(intake) {
		t.Errorf("segment numbers: seal %d, ship %d, intake %d", seq(seal), seq(ship), seq(intake))
	}
	// The ack closed the ship span, after the intake answered.
	if ship.EndTime.Before(intake.EndTime) || ship.Status.Code.String() == "Error" {
		t.Errorf("ship span ended %v (status %v), intake span ended %v", ship.EndTime, ship.Status, intake.EndTime)
	}
	trace := seal.SpanContext.TraceID()
	n1 := 0
	for _, s := range got {
		if s.SpanContext.TraceID() == trace {
			n1++
			t.Logf("span %-18s role %-11s parent %s", s.Name, res(&s), s.Parent.SpanID())
		}
	}
	if n1 < 5 {
		t.Errorf("trace %s has %d spans, want at least 5", trace, n1)
	}
	for _, s := range got {
		if s.Name == "intake.replicate" || s.Name == "catalog.commit" {
			if s.Parent.SpanID() == intake.SpanContext.SpanID() && s.SpanContext.TraceID() != trace {
				t.Errorf("%s is a child of the intake span in another trace", s.Name)
			}
		}
	}
}
