package nodeproc

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlanCoordinators_DistinctLoopbackPorts(t *testing.T) {
	cs, err := PlanCoordinators(3)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, c := range cs {
		if c.Name != []string{"c1", "c2", "c3"}[i] || c.RaftID != i+1 {
			t.Errorf("coordinator %d is %s with raft id %d", i, c.Name, c.RaftID)
		}
		for _, a := range []string{c.Cluster, c.Intake, c.GRPC, c.HTTP} {
			if seen[a] || !strings.HasPrefix(a, "127.0.0.1:") {
				t.Errorf("address %q of %s: want a 127.0.0.1 one used once", a, c.Name)
			}
			seen[a] = true
		}
	}
}

func TestCoordinatorOptions(t *testing.T) {
	cs := []Coordinator{
		{Name: "c1", RaftID: 1, Cluster: "h:1", Intake: "h:2", GRPC: "h:3", HTTP: "h:4"},
		{Name: "c2", RaftID: 2, Cluster: "h:5", Intake: "h:6", GRPC: "h:7", HTTP: "h:8"},
	}
	if got, want := Peers(cs), "1=c1@h:1,2=c2@h:5"; got != want {
		t.Errorf("Peers = %q, want %q", got, want)
	}
	if got, want := Intakes(cs), []string{"h:2", "h:6"}; !slices.Equal(got, want) {
		t.Errorf("Intakes = %q, want %q", got, want)
	}
	o := cs[1].Options(Options{Binary: "bin", Env: []string{"A=1"}, ReadyTimeout: time.Second}, "/d", "--peers", Peers(cs))
	want := []string{"coordinator", "--data-dir", "/d/c2", "--listen", "h:7",
		"--id", "c2", "--raft-id", "2", "--insecure-cluster", "--cluster-listen", "h:5", "--intake-listen", "h:6", "--http-listen", "h:8",
		"--peers", "1=c1@h:1,2=c2@h:5"}
	if got := o.Args(); !slices.Equal(got, want) {
		t.Errorf("Args =\n%q\nwant\n%q", got, want)
	}
	if o.Binary != "bin" || o.LogPath != "/d/c2.log" || o.ReadyTimeout != time.Second || !slices.Equal(o.Env, []string{"A=1"}) {
		t.Errorf("options %+v: base or log path lost", o)
	}
}

func TestReplicatingEdge(t *testing.T) {
	extra := []string{"--x", "1"}
	o := ReplicatingEdge(Options{Binary: "bin"}, "/d", "edge-01", "h:1", "h:2", []string{"i:1", "i:2"}, 5*time.Second, extra...)
	want := []string{"node", "--data-dir", "/d/edge-01", "--listen", "h:1", "--node-id", "edge-01", "--log-level", "info",
		"--http-listen", "h:2", "--replicate-to", "i:1,i:2", "--replicate-insecure", "--advertise-query-addr", "h:1",
		"--wal-segment-age", "5s", "--x", "1"}
	if got := o.Args(); !slices.Equal(got, want) {
		t.Errorf("Args =\n%q\nwant\n%q", got, want)
	}
	if o.Binary != "bin" || o.LogPath != "/d/edge-01.log" {
		t.Errorf("options %+v: base or log path lost", o)
	}
}
