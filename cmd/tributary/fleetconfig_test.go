package main

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/replicator"
)

func TestFleetConfigHook_AppliesTheLagBudgetUnlessTheNodeFixesIt(t *testing.T) {
	if time.Duration(catalog.DefaultLagBudgetMs)*time.Millisecond != node.DefaultWALSegmentAge {
		t.Fatalf("the catalog's default lag budget %d ms differs from the node's default segment age %v", catalog.DefaultLagBudgetMs, node.DefaultWALSegmentAge)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := replicator.EdgeConfig{Version: 3, RetentionRaw: 48 * time.Hour, Retention1h: 48 * time.Hour, Retention1d: 480 * time.Hour,
		LagBudget: 45 * time.Second, MinSegmentPoints: 300}
	for _, tt := range []struct {
		name      string
		sealFixed bool
		lag       time.Duration
		wantAge   time.Duration
		wantMin   int64
	}{
		{"the fleet's", false, 45 * time.Second, 45 * time.Second, 300},
		{"fixed on the node", true, 45 * time.Second, 7 * time.Second, 0},
		{"coordinators without a lag budget", false, 0, 7 * time.Second, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, err := node.Open(node.Options{DataDir: t.TempDir(), WALSegmentAge: 7 * time.Second, Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			var target atomic.Pointer[node.Node]
			target.Store(n)
			c := cfg
			c.LagBudget = tt.lag
			fleetConfigHook(&target, tt.sealFixed, log)(c)
			if age, pts := n.SealPolicy(); age != tt.wantAge || pts != tt.wantMin {
				t.Fatalf("seal policy %v, %d points; want %v, %d", age, pts, tt.wantAge, tt.wantMin)
			}
			if raw, _, _ := n.Retention(); raw != 48*time.Hour {
				t.Fatalf("retention raw %v: the rest of the config was not applied", raw)
			}
		})
	}
}

func TestNodeFlags_SegmentAgeOrMinPointsGivenFixesTheSealPolicy(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--wal-segment-age", "5s"}, true},
		{[]string{"--wal-segment-min-points", "100"}, true},
		{[]string{"--wal-segment-bytes", "8192"}, false},
	} {
		c, err := parseNodeArgs(append([]string{"--data-dir", t.TempDir()}, tt.args...), io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if c.sealFixed != tt.want {
			t.Errorf("%v: sealFixed %v, want %v", tt.args, c.sealFixed, tt.want)
		}
	}
	for _, bad := range [][]string{{"--wal-segment-age", "0s"}, {"--wal-segment-min-points", "-1"}} {
		if _, err := parseNodeArgs(bad, io.Discard); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
