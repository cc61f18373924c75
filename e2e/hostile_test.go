package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	"github.com/tributarydb/tributary/internal/hostile"
	"github.com/tributarydb/tributary/internal/testcert"
)

// securityEnv gates the security scenarios (hostile clients, credential
// rotation, revocation): each runs a minute or more and puts hundreds of
// megabytes through loopback, too much for make test. make e2e sets it.
const securityEnv = "TRIBUTARY_E2E_SECURITY"

func requireSecurityScenarios(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	if os.Getenv(securityEnv) != "1" {
		t.Skipf("security scenario: set %s=1 (make e2e does)", securityEnv)
	}
}

// hostileRSSGrowthMax is what any process's resident size may grow by
// during the attacks, over its peak in an equal quiet window before.
const hostileRSSGrowthMax = 64 << 20

// hostileP99Max is the legitimate writer's p99 target during the attacks.
const hostileP99Max = 100 * time.Millisecond

// raiseOpenFiles raises this process's RLIMIT_NOFILE to at least n, or
// skips the test when the hard limit is lower.
func raiseOpenFiles(t *testing.T, n int) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if want := uint64(n); lim.Cur < want {
		lim.Cur = min(want, lim.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatalf("raise RLIMIT_NOFILE to %d: %v", lim.Cur, err)
		}
	}
	if lim.Cur < uint64(n) {
		t.Skipf("RLIMIT_NOFILE hard limit %d is below %d", lim.Max, n)
	}
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// startSecureFleet starts three coordinators and edge-1 with TLS and
// tokens everywhere (two CAs) and, for each id in more, another edge; the
// coordinators' cluster links and the edges' links to the intakes go
// through proxies when proxied is set.
type secureFleet struct {
	*cluster.Cluster
	pki *cluster.PKI
	// clusterProxies are in front of each coordinator's cluster
	// listener; intakeProxies[edge][i] in front of coordinator i's intake
	// for that edge (nil without proxies).
	clusterProxies []*cluster.FaultProxy
	intakeProxies  map[string][]*cluster.FaultProxy
}

func startSecureFleet(t *testing.T, proxied bool, reload time.Duration, more ...string) *secureFleet {
	t.Helper()
	dir := t.TempDir()
	pki := cluster.NewPKI(t, dir)
	pki.ReloadInterval = reload
	f := &secureFleet{pki: pki, intakeProxies: map[string][]*cluster.FaultProxy{}}
	proxy := func(name, upstream string) (string, error) {
		p, err := cluster.NewFaultProxy(name, upstream)
		if err != nil {
			return "", err
		}
		t.Cleanup(p.Close)
		if strings.HasPrefix(name, "cluster-") {
			f.clusterProxies = append(f.clusterProxies, p)
		} else {
			edge, _, _ := strings.Cut(name, "->")
			f.intakeProxies[edge] = append(f.intakeProxies[edge], p)
		}
		return p.Listen, nil
	}
	proxies := func(prefix string) func([]string) ([]string, error) {
		return func(addrs []string) ([]string, error) {
			out := make([]string, len(addrs))
			for i, a := range addrs {
				var err error
				if out[i], err = proxy(fmt.Sprintf("%s%d", prefix, i+1), a); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
	}
	o := cluster.Options{Bin: bin, Dir: dir, Security: pki}
	if proxied {
		o.ClusterTargets = proxies("cluster-c")
		o.EdgeTargets = proxies("edge-1->c")
	}
	c, err := cluster.New(o)
	if err != nil {
		t.Fatal(err)
	}
	f.Cluster = c
	for _, id := range more {
		var targets []string
		if proxied {
			var intakes []string
			for _, co := range c.Coordinators {
				intakes = append(intakes, co.Intake)
			}
			if targets, err = proxies(id + "->c")(intakes); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.AddEdge(id, targets); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(c.KillAll)
	cluster.ReportOnFailure(t, 30, c.Processes()...)
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	for _, e := range c.More {
		if err := e.Start(c.Opts.ReadyTimeout); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("fleet of %d coordinators and %d edges with TLS (peer and edge CA) and tokens ready in %v",
		len(c.Coordinators), 1+len(c.More), time.Since(start).Round(time.Millisecond))
	return f
}

// edges returns every edge of the fleet.
func (f *secureFleet) edges() []*cluster.Edge { return append([]*cluster.Edge{f.Edge}, f.More...) }

// startSecureLoad starts the 4,000 points/s writer on edge (TLS and the
// token), with its own metric, and waits until a segment of the edge is
// acknowledged.
func startSecureLoad(t *testing.T, f *secureFleet, edge *cluster.Edge, metricName string) (*cluster.Writer, int64) {
	t.Helper()
	o := faultLoad
	o.Addr, o.Metric, o.Client = edge.GRPC, metricName, f.pki.Client()
	w, err := cluster.NewWriter(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	startMs := time.Now().UnixMilli() - 1000
	w.Start()
	if _, err := f.WaitFleet(context.Background(), 30*time.Second, func(fl cluster.Fleet) bool {
		return edgeOf(fl, edge.ID).AckedThrough > 0
	}); err != nil {
		w.Stop()
		t.Fatalf("no segment of %s acknowledged: %v", edge.ID, err)
	}
	return w, startMs
}

// checkSecureCloud waits until the cloud holds every acknowledged point of
// edge and requires every coordinator to answer each exactly once
// (through TLS and the token, the edge still running: its fresh tail is
// merged with the replicas).
func checkSecureCloud(t *testing.T, f *secureFleet, edge *cluster.Edge, metricName string, l *cluster.Ledger, st cluster.WriterStats, startMs int64, otherAcked int) (lost, dup int) {
	t.Helper()
	start := time.Now()
	// NB: the catalog counts the edge's points of every metric: otherAcked
	// are those the test wrote to it besides metricName's, so that the
	// wait does not end while the last of metricName's are still on the
	// edge.
	fl, err := f.WaitFleet(context.Background(), 120*time.Second, func(fl cluster.Fleet) bool {
		return edgeOf(fl, edge.ID).HeldPoints >= uint64(st.Acked+otherAcked)
	})
	n := edgeOf(fl, edge.ID)
	if err != nil {
		t.Fatalf("cloud holds %d of %d acknowledged points of %s: %v", n.HeldPoints, st.Acked, edge.ID, err)
	}
	t.Logf("cloud holds %d points of %s (%d acknowledged) %v after the last write", n.HeldPoints, edge.ID, st.Acked, time.Since(start).Round(time.Millisecond))
	if len(n.Gaps) > 0 {
		t.Errorf("%s declared gaps: %+v", edge.ID, n.Gaps)
	}
	endMs := time.Now().Add(time.Hour).UnixMilli()
	for _, co := range f.Coordinators {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r, err := cluster.CheckWith(ctx, f.Client(), co.GRPC, metricName, l, startMs, endMs)
		cancel()
		if err != nil {
			t.Errorf("%s: %v", co.ID, err)
			continue
		}
		t.Logf("%s: %v", co.ID, r)
		if !r.OK() {
			t.Errorf("%s answers wrong: %v", co.ID, r)
		}
		lost += r.Lost
		dup += r.Duplicated
	}
	return lost, dup
}

// TestHostile_ClientsRefusedWithinBounds runs a production-configured
// fleet (three coordinators and edge-1; TLS on every listener, a peer CA
// and an edge CA, tokens; every limit at its default) while the 4,000
// points/s writer writes through edge-1, and attacks it from addresses of
// its own, all at once:
//
//   - 100 concurrent unauthenticated 64 MB Write calls on each process's
//     gRPC listener (4 connections);
//   - 50 raft streams and 50 ReplicaService.Store calls with 200 MB first
//     messages on each coordinator's cluster listener, presenting edge-1's
//     certificate (edge CA), and as many presenting a peer-CA certificate
//     that names no member (what a shared CA would let in);
//   - 50 Ship streams with 200 MB first messages on each intake, with a
//     valid edge certificate (edge-9, never registered);
//   - 20 concurrent 20 MB single-line bodies of 2,000,000 fields with a
//     valid token on edge-1's /write;
//   - 10,000 TCP connections spread over the fleet's 14 TLS listeners,
//     each sending the first bytes of a ClientHello and nothing more.
//
// Every hostile request must be refused with its documented error, every
// process's peak resident size stay within 64 MiB of its peak in an equal
// quiet window before, the writer's p99 stay within 100 ms, no write
// fail, and the cloud hold every acknowledged point exactly once.
func TestHostile_ClientsRefusedWithinBounds(t *testing.T) {
	requireSecurityScenarios(t)
	sizes := hostile.DefaultSizes()
	sizes.Writes = envInt(t, "TRIBUTARY_E2E_HOSTILE_WRITES", sizes.Writes)
	sizes.Lines = envInt(t, "TRIBUTARY_E2E_HOSTILE_LINES", sizes.Lines)
	sizes.HalfOpen = envInt(t, "TRIBUTARY_E2E_HALF_OPEN_CONNS", sizes.HalfOpen)
	quiet := envDuration(t, "TRIBUTARY_E2E_HOSTILE_QUIET", 10*time.Second)
	raiseOpenFiles(t, sizes.HalfOpen+2000)
	load0 := loadAvg()
	f := startSecureFleet(t, false, 0)
	w, startMs := startSecureLoad(t, f, f.Edge, metric)
	ps := f.Processes()
	watch, err := cluster.WatchRSS(100*time.Millisecond, ps...)
	if err != nil {
		t.Fatal(err)
	}
	// The quiet window: its peaks are the baseline.
	quietFrom := time.Now()
	watch.Reset()
	time.Sleep(quiet)
	baseline := watch.Reset()
	quietTo := time.Now()

	ctx := context.Background()
	plan, ls, edgeCert := hostilePlan(t, f, sizes)
	attackFrom := time.Now()
	rep, err := hostile.RunPlanProcess(ctx, plan, t.TempDir(), true,
		[]string{os.Args[0], "-test.run=^TestHostile_AttackerProcess$", "-test.count=1", "-test.v"}, "TRIBUTARY_E2E_BIN="+bin)
	attackTo := time.Now()
	peaks := watch.Stop()
	time.Sleep(2 * time.Second) // the writer after the attacks
	st := w.Stop()
	load1 := loadAvg()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Errors {
		t.Errorf("attack: %s", e)
	}
	t.Logf("attacker process (nice 19): attacks from %v to %v after it started",
		rep.Started.Sub(attackFrom).Round(time.Millisecond), rep.Ended.Sub(attackFrom).Round(time.Millisecond))

	// Every hostile request refused, clearly.
	for _, tl := range rep.Tallies {
		t.Logf("%-52s %-22s refused %4d, accepted %d, unclear %d, slowest %v: %s", tl.Attack, tl.Target, tl.Refused, tl.Accepted, tl.Unclear,
			tl.Slowest.Round(time.Millisecond), clip(tl.Example, 200))
		if tl.Accepted+tl.Unclear > 0 {
			t.Errorf("%s on %s: %d accepted, %d not refused clearly, e.g. %s", tl.Attack, tl.Target, tl.Accepted, tl.Unclear, tl.Example)
		}
	}
	var halfHeldPeak int
	var halfLongest time.Duration
	for _, r := range rep.HalfOpen {
		l := ls[r.Name]
		halfHeldPeak += r.PeakHeld
		halfLongest = max(halfLongest, r.LongestHeld)
		t.Logf("half-open on %-16s %5d: closed at accept %5d, after the handshake timeout %3d (held at most %3d at once, cap %d per address; longest %v), still open %d, dial failed %d %s",
			r.Name, r.Dialled, r.ClosedAtOnce, r.ClosedLater, r.PeakHeld, l.PerIP, r.LongestHeld.Round(time.Millisecond), r.StillOpen, r.DialFailed, r.FirstDialErr)
		if r.StillOpen > 0 || r.DialFailed > 0 {
			t.Errorf("half-open handshakes on %s: %d still open after the hold, %d dials failed (%s): want every one closed by the server", r.Name, r.StillOpen, r.DialFailed, r.FirstDialErr)
		}
		if r.PeakHeld > l.PerIP {
			t.Errorf("half-open handshakes on %s: %d held at once, above the per-address cap %d", r.Name, r.PeakHeld, l.PerIP)
		}
		if r.LongestHeld > 10*time.Second+3*time.Second {
			t.Errorf("half-open handshakes on %s: one was held %v, past the 10 s handshake timeout", r.Name, r.LongestHeld)
		}
	}
	refused, accepted, unclear := rep.Totals()
	// The edge certificate's refusal on the cluster listener, seen by a
	// client that reads the server's alert.
	for _, co := range f.Coordinators {
		if err := handshakeRefusal(co.Cluster, f.pki.ClientTLS(), edgeCert); err != nil {
			t.Errorf("%s cluster listener, edge certificate: %v", co.ID, err)
		}
	}

	// Memory: each process's peak during the attacks against its peak in
	// the quiet window.
	var growthMax int64
	for i, p := range peaks {
		b := baseline[i]
		growth := p.Peak() - b.Peak()
		growthMax = max(growthMax, growth)
		t.Logf("%-7s resident: quiet peak %4d MiB (sampled %d, VmHWM %d), attack peak %4d MiB (sampled %d, VmHWM %d): %+d MiB",
			p.Name, b.Peak()>>20, b.Sampled>>20, b.HWM>>20, p.Peak()>>20, p.Sampled>>20, p.HWM>>20, growth>>20)
		if p.Err != nil {
			t.Errorf("%s: resident size sampling failed: %v", p.Name, p.Err)
		}
		if growth > hostileRSSGrowthMax {
			t.Errorf("%s grew %d MiB during the attacks, above %d MiB", p.Name, growth>>20, hostileRSSGrowthMax>>20)
		}
	}

	// The legitimate writer.
	load := requireLoadHeld(t, st, faultLoad)
	var slow []string
	for _, l := range st.Latencies {
		if l.Took > hostileP99Max/2 {
			slow = append(slow, fmt.Sprintf("%v at %+v", l.Took.Round(time.Millisecond), l.At.Sub(attackFrom).Round(time.Millisecond)))
		}
	}
	t.Logf("writes over %v (at their start, from the attacker's start): %s", hostileP99Max/2, strings.Join(slow, ", "))
	p99q, nq := st.Quantile(0.99, quietFrom, quietTo)
	p99a, na := st.Quantile(0.99, attackFrom, attackTo)
	p50a, _ := st.Quantile(0.5, attackFrom, attackTo)
	maxa, _ := st.Quantile(1, attackFrom, attackTo)
	t.Logf("writer: p99 %v over %d requests in the quiet window; during the attacks (%v) p50 %v, p99 %v, max %v over %d requests",
		p99q.Round(time.Millisecond), nq, attackTo.Sub(attackFrom).Round(time.Millisecond), p50a.Round(time.Millisecond),
		p99a.Round(time.Millisecond), maxa.Round(time.Millisecond), na)
	if p99a > hostileP99Max {
		t.Errorf("writer p99 %v during the attacks, above %v (quiet window: %v; load average %s before, %s after)", p99a.Round(time.Millisecond), hostileP99Max, p99q.Round(time.Millisecond), load0, load1)
	}

	// The processes counted their refusals.
	cl := f.Client()
	for _, p := range []struct{ name, http string }{{f.Edge.ID, f.Edge.HTTP}, {"c1", f.Coordinators[0].HTTP}} {
		m, err := cl.Metrics(ctx, p.http, "tributary_")
		if err != nil {
			t.Error(err)
			continue
		}
		var keys []string
		for k, v := range m {
			if strings.Contains(k, "refus") && v > 0 {
				keys = append(keys, fmt.Sprintf("%s %v", k, v))
			}
		}
		slices.Sort(keys)
		t.Logf("%s refusal counters: %s", p.name, strings.Join(keys, "; "))
	}
	for _, p := range ps {
		if !p.Running() {
			t.Errorf("%s is not running after the attacks", p.Name)
		}
	}
	lost, dup := checkSecureCloud(t, f, f.Edge, metric, w.Ledger, st, startMs, 0)
	t.Logf("summary: load average %s before, %s after; writer %.0f points/s, p99 %v during the attacks (%v quiet); hostile requests and connections refused %d, accepted %d, unclear %d; half-open handshakes: %d, held at most %d at once over %d listeners, longest %v; largest resident growth %d MiB; lost %d, duplicated %d",
		load0, load1, load, p99a.Round(time.Millisecond), p99q.Round(time.Millisecond), refused, accepted, unclear, sizes.HalfOpen, halfHeldPeak, len(ls),
		halfLongest.Round(time.Millisecond), growthMax>>20, lost, dup)
}

// hostilePlan is the attacks of TestHostile_ClientsRefusedWithinBounds
// on f (hostile.FleetPlan), the listeners the half-open handshakes go to,
// by name, and the stolen edge certificate it presents.
func hostilePlan(t *testing.T, f *secureFleet, s hostile.Sizes) (hostile.Plan, map[string]hostile.Listener, tls.Certificate) {
	dir := t.TempDir()
	peerCA, edgeCA := f.pki.CAs()
	stolen := edgeCA.IssueDNS(t, f.Edge.ID)
	write := func(name string, c tls.Certificate) hostile.CertFiles {
		cert, key := testcert.WritePair(t, dir, name, c)
		return hostile.CertFiles{Cert: cert, Key: key}
	}
	hf := hostile.Fleet{Token: f.pki.Token, StolenEdge: write("stolen-"+f.Edge.ID, stolen),
		Stranger: write("c9", peerCA.IssueDNS(t, "c9")), UnknownEdge: write("edge-9", edgeCA.IssueDNS(t, "edge-9"))}
	for _, e := range f.edges() {
		hf.Nodes = append(hf.Nodes, hostile.NodeListeners{Name: e.ID, GRPC: e.GRPC, HTTP: e.HTTP})
	}
	for _, co := range f.Coordinators {
		hf.Coordinators = append(hf.Coordinators, hostile.CoordinatorListeners{Name: co.ID, GRPC: co.GRPC, HTTP: co.HTTP, Cluster: co.Cluster, Intake: co.Intake})
	}
	p, ls := hostile.FleetPlan(hf, s)
	return p, ls, stolen
}

// handshakeRefusal requires the listener at addr to refuse cert in the
// TLS handshake with an alert about its CA. NB: the test CAs share one
// subject name, so the client presents cert whichever CA the server asks
// for, and it is the server's verification that refuses it.
func handshakeRefusal(addr string, cfg *tls.Config, cert tls.Certificate) error {
	cfg.Certificates, cfg.NextProtos = []tls.Certificate{cert}, []string{"h2"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err == nil {
		// TLS 1.3: the alert comes after the client's side of the
		// handshake; a read gets it.
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "unknown certificate authority") && !strings.Contains(err.Error(), "bad certificate") {
		return fmt.Errorf("want the handshake refused with an alert about the certificate's CA, got %v", err)
	}
	return nil
}

// TestHostile_AttackerProcess is the attacker of
// TestHostile_ClientsRefusedWithinBounds, which runs it as a child
// process (hostile.RunPlanProcess); run on its own it is skipped.
func TestHostile_AttackerProcess(t *testing.T) {
	if os.Getenv(hostile.PlanEnv) == "" {
		t.Skip("the attacker process of the hostile scenario, started by it")
	}
	if _, err := hostile.ServePlan(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// TestHostile_FullListenerKeepsEstablishedClients fills edge-1's gRPC
// listener with half-open handshakes from many addresses (1,000 from 20
// addresses, 50 each: under the per-address cap of 64, over the
// listener's cap of 256), as a distributed attacker could. What a
// connection cap can and cannot do is then measured: the connections over
// the cap are closed at accept; the writer, whose connection was
// established before, keeps writing at its pace with no failure and its
// usual latency; a new client is refused while the listener is full (its
// connection closed at accept: the attacker denies new connections for
// as long as it holds the slots) and served once the handshake timeout
// (10 s) has closed the attacker's connections.
func TestHostile_FullListenerKeepsEstablishedClients(t *testing.T) {
	requireSecurityScenarios(t)
	raiseOpenFiles(t, 4000)
	f := startSecureFleet(t, false, 0)
	w, startMs := startSecureLoad(t, f, f.Edge, metric)
	var ips []string
	for i := range 20 {
		ips = append(ips, fmt.Sprintf("127.0.1.%d", i+1))
	}
	var newAcked atomic.Int64 // points of metric_new the edge acknowledged
	newClient := func() error {
		o := faultLoad
		o.Addr, o.Metric, o.Client, o.RequestTimeout = f.Edge.GRPC, metric+"_new", f.pki.Client(), 3*time.Second
		nw, err := cluster.NewWriter(o)
		if err != nil {
			return err
		}
		defer nw.Close()
		err = nw.WriteOnce(context.Background())
		newAcked.Add(int64(nw.Ledger.Acked()))
		return err
	}
	if err := newClient(); err != nil {
		t.Fatalf("a new client before the attack: %v", err)
	}
	time.Sleep(5 * time.Second)
	attackFrom := time.Now()
	done := make(chan hostile.HalfOpenResult, 1)
	go func() {
		done <- hostile.HalfOpenHandshakes(context.Background(), hostile.HalfOpen{Addr: f.Edge.GRPC, LocalIPs: ips, Conns: 1000, Hold: 20 * time.Second})
	}()
	time.Sleep(3 * time.Second)
	refusedErr := newClient()
	var servedAfter time.Duration
	for {
		if err := newClient(); err == nil {
			servedAfter = time.Since(attackFrom)
			break
		}
		if time.Since(attackFrom) > 30*time.Second {
			t.Fatal("a new client is still refused 30 s after the attack began")
		}
		time.Sleep(500 * time.Millisecond)
	}
	r := <-done
	attackTo := time.Now()
	time.Sleep(2 * time.Second)
	st := w.Stop()
	m, err := f.Client().Metrics(context.Background(), f.Edge.HTTP, "tributary_api_events_total")
	if err != nil {
		t.Fatal(err)
	}
	full := m[`tributary_api_events_total{event="grpc_conn_refused_listener_full"}`]
	t.Logf("1,000 half-open handshakes from 20 addresses: closed at accept %d, at the handshake timeout %d (held at most %d at once; longest %v), still open %d; listener_full refusals counted %v",
		r.ClosedAtOnce, r.ClosedLater, r.PeakHeld, r.LongestHeld.Round(time.Millisecond), r.StillOpen, full)
	if r.StillOpen > 0 || r.PeakHeld > 256 || r.ClosedAtOnce == 0 || full == 0 {
		t.Errorf("want the listener's cap of 256 to hold (held %d at once, %d still open) and the connections over it closed at accept (%d, counted %v)", r.PeakHeld, r.StillOpen, r.ClosedAtOnce, full)
	}
	if refusedErr == nil {
		t.Errorf("a new client was served while the listener was full: the cap did not hold")
	}
	t.Logf("a new client while the listener is full: %v; served again %v after the attack began", refusedErr, servedAfter.Round(time.Millisecond))
	if servedAfter > 10*time.Second+5*time.Second {
		t.Errorf("a new client was served only %v after the attack began, want soon after the 10 s handshake timeout", servedAfter.Round(time.Millisecond))
	}
	load := requireLoadHeld(t, st, faultLoad)
	p99, n := st.Quantile(0.99, attackFrom, attackTo)
	maxd, _ := st.Quantile(1, attackFrom, attackTo)
	t.Logf("writer on its established connection during the attack: p99 %v, max %v over %d requests", p99.Round(time.Millisecond), maxd.Round(time.Millisecond), n)
	if p99 > hostileP99Max {
		t.Errorf("writer p99 %v during the attack, above %v", p99.Round(time.Millisecond), hostileP99Max)
	}
	lost, dup := checkSecureCloud(t, f, f.Edge, metric, w.Ledger, st, startMs, int(newAcked.Load()))
	t.Logf("summary: load average %s; listener full for %v; writer %.0f points/s, p99 %v, no failed write; new clients refused while full, served %v after the attack began; lost %d, duplicated %d",
		loadAvg(), servedAfter.Round(time.Millisecond), load, p99.Round(time.Millisecond), servedAfter.Round(time.Millisecond), lost, dup)
}
