package main

import (
	"context"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/coordinator/membership"
	"github.com/tributarydb/tributary/internal/k8sapi"
	"github.com/tributarydb/tributary/internal/telemetry"
)

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

func TestCoordinatorFlags_ExpectedMembers(t *testing.T) {
	const peers = "1=co-0@co-0.h:7444,2=co-1@co-1.h:7444,3=co-2@co-2.h:7444"
	if _, err := identityOptions(coordinatorFlags{peers: peers, expectedMembers: 3, autoLeaveAfter: time.Minute}, "co-1"); err != nil {
		t.Fatalf("--expected-members with --identity-from-hostname: %v", err)
	}
	if _, err := identityOptions(coordinatorFlags{peers: peers, expectedMembers: 3}, "co-1"); !errors.Is(err, errUsage) {
		t.Fatalf("--auto-leave-after 0: err = %v, want a usage error", err)
	}
	o := coordinator.Options{NodeID: "c1", RaftID: 1, DataDir: "d", ClusterListen: "127.0.0.1:7444", IntakeListen: "127.0.0.1:7443"}
	f := coordinatorFlags{insecureCluster: true, expectedMembers: 3, autoLeaveAfter: time.Minute,
		retainRaw: time.Hour, retain1h: time.Hour, retain1d: time.Hour}
	if err := f.apply(&o, false); !errors.Is(err, errUsage) {
		t.Fatalf("--expected-members without --identity-from-hostname: err = %v, want a usage error", err)
	}
}

func TestCoordinatorFlags_MembershipOptions(t *testing.T) {
	o := coordinator.Options{RaftID: 4, NodeID: "co-3", ClusterAddr: "co-3.h.ns.svc:7444", Insecure: true,
		JoinPeers: []coordinator.Peer{{RaftID: 1, NodeID: "co-0", Addr: "co-0.h.ns.svc:7444"}}}
	sf := serveFlags{grpcListen: "0.0.0.0:7070"}
	log := slog.New(slog.DiscardHandler)
	if _, members, err := (&coordinatorFlags{}).membership(o, "[::]:7444", &sf, log); members || err != nil {
		t.Fatalf("without --auto-join, --rejoin or --expected-members: members %v, %v; want none", members, err)
	}
	f := coordinatorFlags{autoJoin: true}
	mo, members, err := f.membership(o, "[::]:7444", &sf, log)
	if err != nil || !members {
		t.Fatalf("--auto-join: members %v, %v", members, err)
	}
	if mo.Self != (membership.Peer{RaftID: 4, NodeID: "co-3", Addr: "co-3.h.ns.svc:7444"}) {
		t.Errorf("self %+v: want the advertised cluster address", mo.Self)
	}
	if len(mo.Join) != 1 || mo.Join[0].NodeID != "co-0" || mo.Expected != nil {
		t.Errorf("join %+v, expected set %v: want co-0 and no leaving", mo.Join, mo.Expected != nil)
	}
	gc, ok := mo.Cluster.(*membership.GRPCCluster)
	if !ok {
		t.Fatalf("cluster %T, want a GRPCCluster", mo.Cluster)
	}
	if a, err := gc.ClientAddr(o.JoinPeers[0].Addr); err != nil || a != "co-0.h.ns.svc:7070" {
		t.Errorf("client address of co-0 = %q, %v; want its host at this --listen port", a, err)
	}
	o.ClusterAddr = ""
	if mo, _, _ = f.membership(o, "10.0.0.4:7444", &sf, log); mo.Self.Addr != "10.0.0.4:7444" {
		t.Errorf("without an advertised address: %q, want the bound one", mo.Self.Addr)
	}
	// --expected-members alone leaves, and does not join.
	f = coordinatorFlags{expectedMembers: 3, autoLeaveAfter: time.Minute}
	if mo, members, err = f.membership(o, "10.0.0.4:7444", &sf, log); err != nil || !members || len(mo.Join) != 0 || mo.Expected == nil {
		t.Errorf("--expected-members: members %v join %v expected set %v, %v", members, mo.Join, mo.Expected != nil, err)
	} else if n, err := mo.Expected(context.Background()); n != 3 || err != nil {
		t.Errorf("--expected-members 3: the count reads %d, %v", n, err)
	}
	sf.grpcListen = "nonsense"
	if _, _, err := f.membership(o, "x:1", &sf, log); !errors.Is(err, errUsage) {
		t.Errorf("--listen without a port: err = %v, want a usage error", err)
	}
}

func TestCoordinatorFlags_ExpectedMembersFromStatefulSet(t *testing.T) {
	const peers = "1=co-0@co-0.h:7444,2=co-1@co-1.h:7444,3=co-2@co-2.h:7444"
	ok := coordinatorFlags{peers: peers, expectedFromStatefulSet: "co", autoLeaveAfter: time.Minute}
	if _, err := identityOptions(ok, "co-1"); err != nil {
		t.Fatalf("the pod's own StatefulSet: %v", err)
	}
	ok.expectedFromStatefulSet = "tsdb/co"
	if _, err := identityOptions(ok, "co-4"); err != nil {
		t.Fatalf("NAMESPACE/NAME: %v", err)
	}
	for name, f := range map[string]coordinatorFlags{
		"another StatefulSet's pod": {peers: peers, expectedFromStatefulSet: "c", autoLeaveAfter: time.Minute},
		"a longer name":             {peers: peers, expectedFromStatefulSet: "co-1", autoLeaveAfter: time.Minute},
		"with --expected-members":   {peers: peers, expectedFromStatefulSet: "co", expectedMembers: 3, autoLeaveAfter: time.Minute},
		"no --auto-leave-after":     {peers: peers, expectedFromStatefulSet: "co"},
	} {
		if _, err := identityOptions(f, "co-1"); !errors.Is(err, errUsage) {
			t.Errorf("%s: err = %v, want a usage error", name, err)
		}
	}
}

func TestCoordinatorFlags_MembershipReadsTheStatefulSet(t *testing.T) {
	var path string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		w.Write([]byte(`{"kind":"Scale","apiVersion":"autoscaling/v1","spec":{"replicas":5}}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	must(os.WriteFile(filepath.Join(dir, "token"), []byte("tok"), 0o600))
	cfg := k8sapi.Config{Server: srv.URL, TokenFile: filepath.Join(dir, "token"), CAFile: filepath.Join(dir, "ca.crt"), Namespace: "tsdb"}
	f := coordinatorFlags{expectedFromStatefulSet: "co", autoLeaveAfter: time.Minute,
		k8sConfig: func() (k8sapi.Config, error) { return cfg, nil }}
	o := coordinator.Options{RaftID: 2, NodeID: "co-1", ClusterAddr: "co-1.h.tsdb.svc:7444", Insecure: true}
	sf := serveFlags{grpcListen: "0.0.0.0:7070"}
	mo, members, err := f.membership(o, "x:1", &sf, slog.New(slog.DiscardHandler))
	if err != nil || !members || mo.Expected == nil {
		t.Fatalf("members %v expected set %v, %v", members, mo.Expected != nil, err)
	}
	if n, err := mo.Expected(context.Background()); n != 5 || err != nil {
		t.Fatalf("count = %d, %v; want 5", n, err)
	}
	if path != "/apis/apps/v1/namespaces/tsdb/statefulsets/co/scale" {
		t.Fatalf("asked %q, want the scale of tsdb/co", path)
	}
	// Not in a pod: the start fails, saying why.
	f.k8sConfig = func() (k8sapi.Config, error) {
		return k8sapi.Config{}, errors.New("KUBERNETES_SERVICE_HOST is not set")
	}
	if _, _, err := f.membership(o, "x:1", &sf, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--expected-members-from-statefulset: KUBERNETES_SERVICE_HOST") {
		t.Fatalf("outside a pod: err = %v", err)
	}
}

func TestCountExpectedReads_ExportsResultsAndTheLastCount(t *testing.T) {
	tp, err := telemetry.Setup(context.Background(), telemetry.Config{Role: "coordinator", Instance: "co-0", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	var n uint64 = 5
	var fail error
	read := countExpectedReads(func(context.Context) (uint64, error) { return n, fail }, tp.MeterProvider().Meter("test"))
	scrape := func() string {
		rec := httptest.NewRecorder()
		tp.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	if body := scrape(); strings.Contains(body, "tributary_membership_expected_members ") {
		t.Fatalf("a count exported before any was read:\n%s", body)
	}
	read(context.Background())
	n = 3
	read(context.Background())
	fail = errors.New("403 Forbidden")
	if _, err := read(context.Background()); err != fail {
		t.Fatalf("the read's error was not passed on: %v", err)
	}
	body := scrape()
	for _, want := range []string{
		"tributary_membership_expected_reads_total{result=\"ok\"} 2\n",
		"tributary_membership_expected_reads_total{result=\"error\"} 1\n",
		"tributary_membership_expected_members 3\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
