package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// TestFleetConfig_SetOnAFollowerReachesAConnectedEdge sets the fleet
// configuration through a follower's ClusterService and requires that an
// edge already shipping to the cluster applies it: a write above the rate
// limit is refused with model.ErrOverloaded.
func TestFleetConfig_SetOnAFollowerReachesAConnectedEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two coordinators and an edge")
	}
	addrs := freeAddrs(t, 2)
	peers := []Peer{{RaftID: 1, NodeID: "coord-1", Addr: addrs[0]}, {RaftID: 2, NodeID: "coord-2", Addr: addrs[1]}}
	ms := []*member{startMember(t, 1, "coord-1", addrs[0], peers, nil), startMember(t, 2, "coord-2", addrs[1], peers, nil)}
	lead := leader(t, ms)
	follower := ms[0]
	if follower == lead {
		follower = ms[1]
	}
	for _, m := range ms {
		eventually(t, m.nodeID+" ready", m.c.Ready)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()

	got, err := follower.cl.GetFleetConfig(ctx, &pb.GetFleetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := got.GetConfig()
	if cfg.GetVersion() != 0 || cfg.GetRetentionRawMs() != 15*86_400_000 || cfg.GetReplicationFactor() != 3 {
		t.Fatalf("default config %v", cfg)
	}
	bad := &pb.FleetConfig{RetentionRawMs: 0, Retention_1HMs: 1, Retention_1DMs: 1, ReplicationFactor: 2, MaxSeries: 1}
	if _, err := follower.cl.SetFleetConfig(ctx, &pb.SetFleetConfigRequest{Config: bad}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("set an invalid config: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := follower.cl.SetFleetConfig(ctx, &pb.SetFleetConfigRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("set without a config: %v, want INVALID_ARGUMENT", err)
	}

	// An edge ships to the follower's intake before the change.
	var applied atomic.Uint64
	e := startConfiguredEdge(t, []string{follower.c.IntakeAddr()}, &applied)
	eventually(t, "the edge connected", func() bool { return e.s.Stats().Connected })
	if applied.Load() != 0 {
		t.Fatalf("the edge applied version %d of a config nobody set", applied.Load())
	}

	cfg.RateLimitPointsPerSec, cfg.RateLimitBurstPoints = 100, 100
	cfg.RetentionRawMs = 2 * 86_400_000
	set, err := follower.cl.SetFleetConfig(ctx, &pb.SetFleetConfigRequest{Config: cfg})
	if err != nil {
		t.Fatalf("set on a follower: %v", err)
	}
	v := set.GetConfig().GetVersion()
	if v == 0 || set.GetConfig().GetRateLimitPointsPerSec() != 100 {
		t.Fatalf("set answered %v", set.GetConfig())
	}
	eventually(t, "the leader's catalog has the config", func() bool { return lead.c.fsm.Config().Version == v })
	if got, _ := lead.cl.GetFleetConfig(ctx, &pb.GetFleetConfigRequest{}); got.GetConfig().GetRetentionRawMs() != 2*86_400_000 {
		t.Fatalf("get on the leader: %v", got.GetConfig())
	}
	eventually(t, fmt.Sprintf("the edge applied version %d", v), func() bool { return applied.Load() == v })
	if raw, _, _ := e.n.Retention(); raw != 48*time.Hour {
		t.Fatalf("edge raw retention %s, want 48h", raw)
	}
	write := func(points int) error {
		b := model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "limited"}}}
		now := time.Now().UnixMilli()
		for i := range points {
			b.Ts = append(b.Ts, now-int64(points)+int64(i))
			b.Vs = append(b.Vs, 1)
		}
		_, err := e.n.Write(context.Background(), []model.Batch{b})
		return err
	}
	if err := write(101); !errors.Is(err, model.ErrOverloaded) {
		t.Fatalf("a write above the burst: %v, want ErrOverloaded", err)
	}
	if err := write(50); err != nil {
		t.Fatalf("a write within the limit: %v", err)
	}

	// The seal policy: every member applies it (catalog.FeatureSealPolicy),
	// so it may be set; out of range it is refused.
	cfg = set.GetConfig()
	cfg.LagBudgetMs = 500
	if _, err := follower.cl.SetFleetConfig(ctx, &pb.SetFleetConfigRequest{Config: cfg}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("set a lag budget under 1s: %v, want INVALID_ARGUMENT", err)
	}
	cfg.LagBudgetMs, cfg.MinSegmentPoints = 45_000, 300
	eventually(t, "both members registered with their catalog features", func() bool { return follower.c.fsm.FeatureReady(catalog.FeatureSealPolicy) })
	set, err = follower.cl.SetFleetConfig(ctx, &pb.SetFleetConfigRequest{Config: cfg})
	if err != nil || set.GetConfig().GetLagBudgetMs() != 45_000 || set.GetConfig().GetMinSegmentPoints() != 300 {
		t.Fatalf("set the lag budget: %v, %v", set.GetConfig(), err)
	}
	v = set.GetConfig().GetVersion()
	eventually(t, fmt.Sprintf("the edge applied version %d", v), func() bool { return applied.Load() == v })
}

// configuredEdge is a node shipping through a Shipper whose OnConfig
// applies the fleet configuration, as cmd/tributary wires it.
type configuredEdge struct {
	n *node.Node
	s *replicator.Shipper
}

func startConfiguredEdge(t *testing.T, targets []string, applied *atomic.Uint64) *configuredEdge {
	t.Helper()
	var target atomic.Pointer[node.Node]
	s, err := replicator.New(replicator.Options{
		Targets: targets, Insecure: true, CursorPath: filepath.Join(t.TempDir(), "replication.cursor"),
		SoftwareVersion: "test", BackoffInitial: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		AckTimeout: 5 * time.Second, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})).With("test_edge", "edge-cfg"),
		OnConfig: func(c replicator.EdgeConfig) {
			n := target.Load()
			if err := n.SetRetention(c.RetentionRaw, c.Retention1h, c.Retention1d); err != nil {
				t.Errorf("apply retention: %v", err)
			}
			n.SetRateLimit(c.RateLimitPointsPerSec, c.RateLimitBurstPoints)
			applied.Store(c.Version)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "edge-cfg", WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
	if err != nil {
		t.Fatal(err)
	}
	target.Store(n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(ctx, n); err != nil {
			t.Errorf("shipper: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := n.Close(); err != nil {
			t.Errorf("close edge: %v", err)
		}
	})
	return &configuredEdge{n: n, s: s}
}
