package intake_test

import (
	"context"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/intake"
)

func TestIntake_WelcomeCarriesTheFleetConfigAndAChangeReachesAnOpenStream(t *testing.T) {
	e := startEnv(t, func(o *intake.Options) { o.ConfigPollInterval = 20 * time.Millisecond })
	c := open(t, dial(t, e.addr), "pi-cfg")
	w := c.welcome()
	def := e.fsm.Config()
	if got := w.GetConfig(); got == nil || got.Version != def.Version || got.RetentionRawMs != def.RetentionRawMs ||
		got.Retention_1DMs != def.Retention1dMs || got.RateLimitPointsPerSec != 0 || got.LagBudgetMs != catalog.DefaultLagBudgetMs {
		t.Fatalf("welcome config %v, want the catalog's %+v", got, def)
	}

	cfg := def
	cfg.RateLimitPointsPerSec, cfg.RateLimitBurstPoints = 500, 1000
	cfg.RetentionRawMs = 3 * 24 * 3600 * 1000
	cfg.LagBudgetMs, cfg.MinSegmentPoints = 60_000, 480
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.SetConfig{Config: cfg})); err != nil {
		t.Fatal(err)
	}
	want := e.fsm.Config()
	if want.Version <= def.Version {
		t.Fatalf("version %d after SetConfig, was %d", want.Version, def.Version)
	}
	got := c.recv().GetConfig()
	if got == nil || got.Version != want.Version || got.RateLimitPointsPerSec != 500 || got.RateLimitBurstPoints != 1000 ||
		got.RetentionRawMs != cfg.RetentionRawMs || got.LagBudgetMs != 60_000 || got.MinSegmentPoints != 480 {
		t.Fatalf("config on the stream %v, want %+v", got, want)
	}
	// The same version is not sent twice: the next message is the ack of a
	// segment, not another config.
	segs := makeSegments(t, "pi-cfg", 1, 1)
	time.Sleep(60 * time.Millisecond) // a few polls
	c.send(segs[0].parts...)
	if r := c.recv(); r.GetAck() == nil {
		t.Fatalf("after the config, got %v, want the segment's ack", r)
	}
}
