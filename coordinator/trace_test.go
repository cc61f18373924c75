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
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/replicator"
)

// TestTrace_SegmentFromEdgeSealToCloudAck ships segments from an edge
// (node + replicator) to the first of two coordinators (replication
// factor 2: every segment is stored on both), each with its own telemetry
// provider as in three processes, and requires one trace per segment that
// covers its seal on the edge, its shipping, the intake, the store on
// each replica (the peer's through the ReplicaService, whose gRPC spans
// join) and the catalog commit, with the ship span closed by the ack.
func TestTrace_SegmentFromEdgeSealToCloudAck(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	setup := func(role, id string) *telemetry.Provider {
		p, err := telemetry.Setup(context.Background(), telemetry.Config{Role: role, Instance: id, SpanExporter: spans})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	edgeTel := setup("node", edgeID)
	quiet := func(who string) *slog.Logger {
		return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})).With("test", who)
	}

	addrs := freeAddrs(t, 2)
	peers := []Peer{{RaftID: 1, NodeID: "coord-1", Addr: addrs[0]}, {RaftID: 2, NodeID: "coord-2", Addr: addrs[1]}}
	var cs []*Coordinator
	for _, p := range peers {
		tel := setup("coordinator", p.NodeID)
		c, err := Open(Options{
			NodeID: p.NodeID, RaftID: p.RaftID, DataDir: t.TempDir(), ClusterListen: p.Addr, IntakeListen: "127.0.0.1:0",
			Peers: peers, Insecure: true, TickInterval: 50 * time.Millisecond,
			Logger: quiet(p.NodeID), MeterProvider: tel.MeterProvider(), TracerProvider: tel.TracerProvider(),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c.Stop(ctx)
		}()
		cs = append(cs, c)
	}
	for _, c := range cs {
		eventually(t, "the coordinators are ready", func() bool { return c.Ready() && len(registeredCoordinators(c)) == 2 })
	}
	c := cs[0]

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
		b := model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "temp"}, {Name: "sensor", Value: fmt.Sprint(i)}}}
		for range 100 {
			b.Ts, b.Vs = append(b.Ts, next), append(b.Vs, float64(next%97))
			next++
		}
		if _, err := n.Write(context.Background(), []model.Batch{b}); err != nil {
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
	var seal, ship, intake, peerStore *tracetest.SpanStub
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
			if find("catalog.commit", intake.SpanContext) == nil {
				continue
			}
			// Both replicas; the peer's store is a ReplicaService call
			// whose server span runs in the other coordinator.
			replicas := 0
			for j := range got {
				r := &got[j]
				if r.Name != "intake.replicate" || r.Parent.SpanID() != intake.SpanContext.SpanID() {
					continue
				}
				replicas++
				if call := find("tributary.cluster.v1.ReplicaService/Store", r.SpanContext); call != nil {
					peerStore = find("tributary.cluster.v1.ReplicaService/Store", call.SpanContext)
				}
			}
			if replicas == 2 && peerStore != nil {
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
	if res(seal) != "node" || res(ship) != "node" || res(intake) != "coordinator" || res(peerStore) != "coordinator" {
		t.Errorf("span roles: seal %q, ship %q, intake %q, peer store %q; want node, node, coordinator, coordinator",
			res(seal), res(ship), res(intake), res(peerStore))
	}
	instance := func(s *tracetest.SpanStub) string {
		for _, kv := range s.Resource.Attributes() {
			if kv.Key == "service.instance.id" {
				return kv.Value.AsString()
			}
		}
		return ""
	}
	if instance(intake) != "coord-1" || instance(peerStore) != "coord-2" {
		t.Errorf("intake on %q, peer store on %q; want coord-1 and coord-2", instance(intake), instance(peerStore))
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
	if n1 < 8 {
		t.Errorf("trace %s has %d spans, want at least 8", trace, n1)
	}
	for _, s := range got {
		if s.Name == "intake.replicate" || s.Name == "catalog.commit" {
			if s.Parent.SpanID() == intake.SpanContext.SpanID() && s.SpanContext.TraceID() != trace {
				t.Errorf("%s is a child of the intake span in another trace", s.Name)
			}
		}
	}
}
