package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// fakeRuleGroups holds rule groups like a coordinator would (no checks).
type fakeRuleGroups struct {
	pb.UnimplementedClusterServiceServer
	mu      sync.Mutex
	groups  map[string]*pb.FleetRuleGroup
	version uint64
}

func (f *fakeRuleGroups) SetRuleGroup(_ context.Context, req *pb.SetRuleGroupRequest) (*pb.SetRuleGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	g := &pb.FleetRuleGroup{Name: req.GetGroup().GetName(), Selector: req.GetGroup().GetSelector(), Yaml: req.GetGroup().GetYaml(), Version: f.version}
	f.groups[g.Name] = g
	return &pb.SetRuleGroupResponse{Group: g}, nil
}

func (f *fakeRuleGroups) GetRuleGroups(_ context.Context, req *pb.GetRuleGroupsRequest) (*pb.GetRuleGroupsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &pb.GetRuleGroupsResponse{Version: f.version}
	for _, name := range []string{"can-bus", "climate"} {
		if g := f.groups[name]; g != nil && (req.GetEdge() == "" || g.Selector == "") {
			r.Groups = append(r.Groups, g)
		}
	}
	return r, nil
}

func (f *fakeRuleGroups) DeleteRuleGroup(_ context.Context, req *pb.DeleteRuleGroupRequest) (*pb.DeleteRuleGroupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groups[req.GetName()] == nil {
		return nil, status.Errorf(codes.NotFound, "no rule group %q", req.GetName())
	}
	delete(f.groups, req.GetName())
	f.version++
	return &pb.DeleteRuleGroupResponse{}, nil
}

func TestClusterRules_SetGetDelete(t *testing.T) {
	f := &fakeRuleGroups{groups: map[string]*pb.FleetRuleGroup{}}
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
		code := run(append([]string{"cluster", "rules", "--addr", addr}, args...), &out, &errOut)
		return out.String() + errOut.String(), code
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "fleet.yml")
	if err := os.WriteFile(file, []byte(`groups:
  - name: can-bus
    rules:
      - alert: CoolantOverheat
        expr: coolant_temp > 105
        for: 30s
  - name: climate
    rules:
      - record: building:temperature:avg
        expr: avg by (building) (temperature)
`), 0o644); err != nil {
		t.Fatal(err)
	}

	out, code := cli("--selector", `site="berlin"`, "set", file)
	if code != 0 || !strings.Contains(out, "rule group can-bus set, version 1") || !strings.Contains(out, "rule group climate set, version 2") {
		t.Fatalf("set: exit %d:\n%s", code, out)
	}
	if g := f.groups["can-bus"]; g.Selector != `site="berlin"` || !strings.Contains(g.Yaml, "coolant_temp > 105") || strings.Contains(g.Yaml, "climate") {
		t.Fatalf("stored group %v", g)
	}
	out, code = cli("get")
	if code != 0 || !strings.Contains(out, "2 rule groups, version 2") || !strings.Contains(out, `can-bus  site="berlin"  0          1`) {
		t.Fatalf("get: exit %d:\n%s", code, out)
	}
	out, code = cli("get", "climate")
	if code != 0 || !strings.Contains(out, "avg by (building) (temperature)") {
		t.Fatalf("get climate: exit %d:\n%s", code, out)
	}
	out, code = cli("--format", "json", "get")
	var got struct {
		Version uint64          `json:"version"`
		Groups  []ruleGroupJSON `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || got.Version != 2 || len(got.Groups) != 2 || got.Groups[1].Name != "climate" {
		t.Fatalf("get json: exit %d, %v:\n%s", code, err, out)
	}
	if out, code = cli("delete", "can-bus"); code != 0 || !strings.Contains(out, "rule group can-bus deleted") || f.groups["can-bus"] != nil {
		t.Fatalf("delete: exit %d:\n%s", code, out)
	}
	if out, code = cli("delete", "can-bus"); code == 0 || !strings.Contains(out, "NotFound") {
		t.Fatalf("delete again: exit %d:\n%s", code, out)
	}

	// An invalid file is refused before anything is sent.
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("groups:\n  - name: g\n    rules:\n      - record: r\n        expr: sum(\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := f.version
	if out, code = cli("set", bad); code != 2 || !strings.Contains(out, "bad.yml") || f.version != before {
		t.Fatalf("set of an invalid file: exit %d:\n%s", code, out)
	}
	if out, code = cli("frobnicate"); code != 2 {
		t.Fatalf("unknown verb: exit %d:\n%s", code, out)
	}
}

func TestEdgeLabelFlag(t *testing.T) {
	var m map[string]string
	f := labelFlag{&m}
	for _, s := range []string{"site=berlin", "model=pi4b"} {
		if err := f.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	if f.String() != "model=pi4b,site=berlin" {
		t.Errorf("String %q", f.String())
	}
	for _, s := range []string{"site=paris", "noequals", "=v", "k="} {
		if err := f.Set(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	var rf replicateFlags
	rf.labels = map[string]string{"site": "berlin"}
	if _, err := rf.options(t.TempDir(), nil); err == nil {
		t.Error("--edge-label without --replicate-to accepted")
	}
	rf.targets, rf.insecure, rf.overflow = "127.0.0.1:7072", true, "keep-in-store"
	rf.labels = map[string]string{"1bad": "x"}
	if _, err := rf.options(t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "1bad") {
		t.Errorf("a bad label name: %v", err)
	}
}
