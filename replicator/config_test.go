package replicator_test

import (
	"sync"
	"testing"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

func TestShipper_OnConfigIsCalledOncePerNewerVersion(t *testing.T) {
	c := newCloud(t)
	c.config = &pb.EdgeConfig{Version: 5, RetentionRawMs: 3_600_000, Retention_1HMs: 7_200_000, Retention_1DMs: 86_400_000,
		RateLimitPointsPerSec: 100, RateLimitBurstPoints: 200, RollupHourly: true}
	// The same version again, an older one (from a lagging coordinator),
	// then a newer one.
	c.afterWelcome = []*pb.EdgeConfig{{Version: 5}, {Version: 3, RateLimitPointsPerSec: 1}, {Version: 7, RetentionRawMs: 7_200_000,
		Retention_1HMs: 7_200_000, Retention_1DMs: 86_400_000, LagBudgetMs: 30_000, MinSegmentPoints: 240}}
	a, b := startIntake(t, "coord-a", c), startIntake(t, "coord-b", c)
	w := openWAL(t, "pi-cfg")
	var mu sync.Mutex
	var got []replicator.EdgeConfig
	o := options(t, cursorPath(t), a.addr, b.addr)
	o.OnConfig = func(cfg replicator.EdgeConfig) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, cfg)
	}
	s := newShipper(t, o)
	stop := start(t, s, w)
	calls := func() []replicator.EdgeConfig {
		mu.Lock()
		defer mu.Unlock()
		return append([]replicator.EdgeConfig(nil), got...)
	}
	eventually(t, "versions 5 and 7 applied", func() bool { return len(calls()) >= 2 })
	// Another coordinator welcomes with the same configs: nothing new.
	a.srv.Stop()
	streams := b.streams.Load()
	eventually(t, "a stream to coord-b", func() bool { return b.streams.Load() > streams })
	sealN(t, w, 1)
	eventually(t, "the segment acknowledged", func() bool { return s.Stats().AckedThrough >= 1 })
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	want := []replicator.EdgeConfig{
		{Version: 5, RetentionRaw: time.Hour, Retention1h: 2 * time.Hour, Retention1d: 24 * time.Hour, RollupHourly: true,
			RateLimitPointsPerSec: 100, RateLimitBurstPoints: 200},
		{Version: 7, RetentionRaw: 2 * time.Hour, Retention1h: 2 * time.Hour, Retention1d: 24 * time.Hour,
			LagBudget: 30 * time.Second, MinSegmentPoints: 240},
	}
	g := calls()
	if len(g) != len(want) {
		t.Fatalf("OnConfig calls %+v, want %+v", g, want)
	}
	for i := range want {
		if g[i] != want[i] {
			t.Fatalf("OnConfig call %d: %+v, want %+v", i, g[i], want[i])
		}
	}
}
