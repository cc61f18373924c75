package main

import (
	"errors"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator"
)

func TestIdentityFromHostname(t *testing.T) {
	good := map[string]struct {
		node string
		raft uint64
	}{
		"tributary-coordinator-0":   {"tributary-coordinator-0", 1},
		"tributary-coordinator-2":   {"tributary-coordinator-2", 3},
		"c-41":                      {"c-41", 42},
		"release-tributary-coord-9": {"release-tributary-coord-9", 10},
	}
	for h, want := range good {
		node, raft, err := identityFromHostname(h)
		if err != nil || node != want.node || raft != want.raft {
			t.Errorf("identityFromHostname(%q) = %q, %d, %v; want %q, %d", h, node, raft, err, want.node, want.raft)
		}
	}
	for _, h := range []string{"", "coordinator", "coordinator-", "-3", "coordinator-x", "coordinator-01", "coordinator-+1", "coordinator-1 ", "coordinator-99999999999999999999"} {
		if _, _, err := identityFromHostname(h); err == nil {
			t.Errorf("identityFromHostname(%q) accepted", h)
		}
	}
}

// identityOptions applies f with the given host name to empty options.
func identityOptions(f coordinatorFlags, hostname string) (coordinator.Options, error) {
	o := coordinator.Options{DataDir: "d", ClusterListen: "127.0.0.1:7444", IntakeListen: "127.0.0.1:7443"}
	f.retainRaw, f.retain1h, f.retain1d = 24*time.Hour, 24*time.Hour, 24*time.Hour
	f.insecureCluster = true
	f.identityFromHostname = true
	f.hostname = func() (string, error) { return hostname, nil }
	err := f.apply(&o, false)
	return o, err
}

func TestCoordinatorFlags_IdentityFromHostname(t *testing.T) {
	const peers = "1=co-0@co-0.h:7444,2=co-1@co-1.h:7444,3=co-2@co-2.h:7444"
	o, err := identityOptions(coordinatorFlags{peers: peers}, "co-1")
	if err != nil {
		t.Fatal(err)
	}
	if o.NodeID != "co-1" || o.RaftID != 2 || len(o.Peers) != 3 || len(o.JoinPeers) != 0 {
		t.Fatalf("bootstrap member: id %q raft %d peers %d join %d; want co-1, 2, 3 peers, no join", o.NodeID, o.RaftID, len(o.Peers), len(o.JoinPeers))
	}
	// Ordinal 3 is beyond the three bootstrap members: it joins them.
	o, err = identityOptions(coordinatorFlags{peers: peers}, "co-3")
	if err != nil {
		t.Fatal(err)
	}
	if o.NodeID != "co-3" || o.RaftID != 4 || len(o.Peers) != 0 || len(o.JoinPeers) != 3 {
		t.Fatalf("scaled member: id %q raft %d peers %d join %d; want co-3, 4, no peers, 3 join", o.NodeID, o.RaftID, len(o.Peers), len(o.JoinPeers))
	}
	// No --peers: waits to be added, as without the flag.
	if o, err = identityOptions(coordinatorFlags{}, "co-7"); err != nil || o.RaftID != 8 || len(o.Peers)+len(o.JoinPeers) != 0 {
		t.Fatalf("no peers: raft %d, %v", o.RaftID, err)
	}
}

func TestCoordinatorFlags_IdentityFromHostnameRefused(t *testing.T) {
	if _, err := identityOptions(coordinatorFlags{}, "coordinator"); !errors.Is(err, errUsage) {
		t.Fatalf("host name without ordinal: err = %v, want a usage error", err)
	}
	// Explicit ids conflict with the flag.
	o := coordinator.Options{NodeID: "c1", DataDir: "d", ClusterListen: "127.0.0.1:7444", IntakeListen: "127.0.0.1:7443"}
	f := coordinatorFlags{insecureCluster: true, identityFromHostname: true, hostname: func() (string, error) { return "co-0", nil }}
	if err := f.apply(&o, false); !errors.Is(err, errUsage) {
		t.Fatalf("--id with --identity-from-hostname: err = %v, want a usage error", err)
	}
	// A scaled pod with --join as well as a --peers list not naming it.
	if _, err := identityOptions(coordinatorFlags{peers: "1=co-0@co-0.h:7444", join: "1=co-0@co-0.h:7444"}, "co-3"); !errors.Is(err, errUsage) {
		t.Fatalf("--peers and --join: err = %v, want a usage error", err)
	}
	// The host name cannot be read.
	f = coordinatorFlags{insecureCluster: true, identityFromHostname: true, hostname: func() (string, error) { return "", errors.New("no uts") }}
	o = coordinator.Options{DataDir: "d", ClusterListen: "127.0.0.1:7444", IntakeListen: "127.0.0.1:7443"}
	if err := f.apply(&o, false); err == nil {
		t.Fatal("unreadable host name accepted")
	}
}
