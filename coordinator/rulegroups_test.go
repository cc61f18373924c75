package coordinator

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

const berlinGroupYAML = `groups:
  - name: can-bus
    rules:
      - alert: CoolantOverheat
        expr: coolant_temp > 105
        for: 30s
`

// TestRuleGroups_SetOnAFollowerReachesASelectedEdge sets, lists and
// deletes rule groups through a follower's ClusterService; invalid groups
// and selectors are refused before anything is proposed; an edge whose
// labels match receives the group, and the fleet view shows its labels.
func TestRuleGroups_SetOnAFollowerReachesASelectedEdge(t *testing.T) {
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
	eventually(t, "every member applies rule groups", func() bool { return follower.c.fsm.FeatureReady("rule-groups") })

	for name, g := range map[string]*pb.FleetRuleGroup{
		"no name":       {Yaml: berlinGroupYAML},
		"bad selector":  {Name: "can-bus", Selector: `site=`, Yaml: berlinGroupYAML},
		"name mismatch": {Name: "other", Yaml: berlinGroupYAML},
		"bad rule":      {Name: "g", Yaml: "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: sum(\n"},
	} {
		if _, err := follower.cl.SetRuleGroup(ctx, &pb.SetRuleGroupRequest{Group: g}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	if got, _ := follower.cl.GetRuleGroups(ctx, &pb.GetRuleGroupsRequest{}); len(got.GetGroups()) != 0 || got.GetVersion() != 0 {
		t.Fatalf("refused groups were set: %v", got)
	}

	set, err := follower.cl.SetRuleGroup(ctx, &pb.SetRuleGroupRequest{Group: &pb.FleetRuleGroup{
		Name: "can-bus", Selector: `site="berlin"`, Yaml: berlinGroupYAML}})
	if err != nil {
		t.Fatal(err)
	}
	if set.GetGroup().GetVersion() == 0 {
		t.Fatalf("set answered %v", set.GetGroup())
	}

	var mu sync.Mutex
	var received []replicator.RuleGroups
	s, err := replicator.New(replicator.Options{
		Targets: []string{follower.c.IntakeAddr()}, Insecure: true, CursorPath: filepath.Join(t.TempDir(), "replication.cursor"),
		SoftwareVersion: "test", BackoffInitial: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		AckTimeout: 5 * time.Second, PollInterval: 10 * time.Millisecond,
		Labels: map[string]string{"site": "berlin", "model": "pi4b"},
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})),
		OnRuleGroups: func(rg replicator.RuleGroups) {
			mu.Lock()
			received = append(received, rg)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "pi-berlin", WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(sctx, n); err != nil {
			t.Errorf("shipper: %v", err)
		}
	})
	defer func() {
		scancel()
		wg.Wait()
		if err := n.Close(); err != nil {
			t.Errorf("close edge: %v", err)
		}
	}()
	last := func() replicator.RuleGroups {
		mu.Lock()
		defer mu.Unlock()
		if len(received) == 0 {
			return replicator.RuleGroups{}
		}
		return received[len(received)-1]
	}
	eventually(t, "the edge received its group", func() bool {
		rg := last()
		return len(rg.Groups) == 1 && rg.Groups[0].Name == "can-bus" && rg.Groups[0].YAML == berlinGroupYAML
	})

	byEdge, err := lead.cl.GetRuleGroups(ctx, &pb.GetRuleGroupsRequest{Edge: "pi-berlin"})
	if err != nil || len(byEdge.GetGroups()) != 1 {
		t.Fatalf("groups of pi-berlin: %v %v", byEdge, err)
	}
	if _, err := lead.cl.GetRuleGroups(ctx, &pb.GetRuleGroupsRequest{Edge: "nobody"}); status.Code(err) != codes.NotFound {
		t.Fatalf("groups of an unknown edge: %v", err)
	}
	edges, err := lead.cl.Edges(ctx, &pb.EdgesRequest{})
	if err != nil || len(edges.GetEdges()) != 1 || edges.GetEdges()[0].GetLabels()["site"] != "berlin" {
		t.Fatalf("edges %v %v", edges, err)
	}
	fleet, err := lead.c.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(fleet.Nodes, func(n FleetNode) bool { return n.ID == "pi-berlin" }); i < 0 || fleet.Nodes[i].Labels["model"] != "pi4b" {
		t.Fatalf("fleet view %+v", fleet.Nodes)
	}

	if _, err := follower.cl.DeleteRuleGroup(ctx, &pb.DeleteRuleGroupRequest{Name: "can-bus"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the edge dropped the group", func() bool { return len(last().Groups) == 0 && last().Version > set.GetGroup().GetVersion() })
	if _, err := follower.cl.DeleteRuleGroup(ctx, &pb.DeleteRuleGroupRequest{Name: "can-bus"}); status.Code(err) != codes.NotFound {
		t.Fatalf("delete again: %v, want NOT_FOUND", err)
	}
}
