package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// fakeFleetConfig holds a fleet configuration like a coordinator would.
type fakeFleetConfig struct {
	pb.UnimplementedClusterServiceServer
	mu   sync.Mutex
	cfg  *pb.FleetConfig
	sets int
}

func (f *fakeFleetConfig) GetFleetConfig(context.Context, *pb.GetFleetConfigRequest) (*pb.GetFleetConfigResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &pb.GetFleetConfigResponse{Config: proto.Clone(f.cfg).(*pb.FleetConfig)}, nil
}

func (f *fakeFleetConfig) SetFleetConfig(_ context.Context, req *pb.SetFleetConfigRequest) (*pb.SetFleetConfigResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets++
	f.cfg = proto.Clone(req.GetConfig()).(*pb.FleetConfig)
	f.cfg.Version = 100 + uint64(f.sets)
	return &pb.SetFleetConfigResponse{Config: proto.Clone(f.cfg).(*pb.FleetConfig)}, nil
}

func TestClusterConfig_PrintsAndChangesOnlyTheGivenFields(t *testing.T) {
	f := &fakeFleetConfig{cfg: &pb.FleetConfig{RetentionRawMs: 15 * 86_400_000, Retention_1HMs: 3_600_000 * 24 * 730,
		Retention_1DMs: 86_400_000 * 3650, RollupHourly: true, RollupDaily: true, ReplicationFactor: 2, MaxSeries: 1000, Version: 7,
		WriteQuorum: 2, DeadAfterMs: 60_000}}
	g := grpc.NewServer()
	pb.RegisterClusterServiceServer(g, f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	defer g.Stop()
	addr := lis.Addr().String()
	cli := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"cluster", "config", "--addr", addr}, args...), &out, &errOut)
		return out.String() + errOut.String(), code
	}

	out, code := cli()
	if code != 0 || !strings.Contains(out, "retention raw") || !strings.Contains(out, "360h0m0s") || !strings.Contains(out, "unlimited") || f.sets != 0 {
		t.Fatalf("print: exit %d, %d sets:\n%s", code, f.sets, out)
	}
	out, code = cli("--retention-raw", "3d", "--rate-limit", "500", "--rate-burst", "1000", "--rollup-daily=false", "--format", "json")
	if code != 0 {
		t.Fatalf("set: exit %d:\n%s", code, out)
	}
	var got fleetConfigJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	want := fleetConfigJSON{Version: 101, RetentionRawMs: 3 * 86_400_000, Retention1hMs: 3_600_000 * 24 * 730, Retention1dMs: 86_400_000 * 3650,
		RollupHourly: true, RollupDaily: false, RateLimitPointsPerSec: 500, RateLimitBurstPoints: 1000, ReplicationFactor: 2, MaxSeries: 1000,
		WriteQuorum: 2, DeadAfterMs: 60_000}
	if got != want {
		t.Fatalf("after set: %+v, want %+v", got, want)
	}
	if out, code := cli("--retention-raw", "soon"); code == 0 || !strings.Contains(out, "--retention-raw") || f.sets != 1 {
		t.Fatalf("bad duration: exit %d, %d sets:\n%s", code, f.sets, out)
	}
	if out, code := cli("--write-quorum", "1", "--dead-after", "90s"); code != 0 || !strings.Contains(out, "write quorum") || !strings.Contains(out, "1m30s") {
		t.Fatalf("set write quorum and dead-after: exit %d:\n%s", code, out)
	}
	if f.cfg.WriteQuorum != 1 || f.cfg.DeadAfterMs != 90_000 || f.cfg.RetentionRawMs != 3*86_400_000 {
		t.Fatalf("config after set: %v", f.cfg)
	}
	if out, code := cli("--dead-after", "0"); code != 0 || f.cfg.DeadAfterMs != 0 || !strings.Contains(out, "(default)") {
		t.Fatalf("dead-after back to the default: exit %d, %v:\n%s", code, f.cfg, out)
	}
	if out, code := cli("--lag-budget", "2m", "--min-segment-points", "500"); code != 0 || !strings.Contains(out, "lag budget") || !strings.Contains(out, "2m0s") || !strings.Contains(out, "500 (waiting") {
		t.Fatalf("set lag budget: exit %d:\n%s", code, out)
	}
	if f.cfg.LagBudgetMs != 120_000 || f.cfg.MinSegmentPoints != 500 || f.cfg.WriteQuorum != 1 {
		t.Fatalf("config after setting the lag budget: %v", f.cfg)
	}
	sets := f.sets
	for _, bad := range []string{"500ms", "2h", "soon"} {
		if out, code := cli("--lag-budget", bad); code == 0 || !strings.Contains(out, "--lag-budget") || f.sets != sets {
			t.Fatalf("--lag-budget %s: exit %d, %d sets:\n%s", bad, code, f.sets, out)
		}
	}
	if out, code := cli("--lag-budget", "0", "--min-segment-points", "0"); code != 0 || f.cfg.LagBudgetMs != 0 || f.cfg.MinSegmentPoints != 0 ||
		!strings.Contains(out, defaultLagBudget+" (default)") {
		t.Fatalf("lag budget back to the default: exit %d, %v:\n%s", code, f.cfg, out)
	}
}
