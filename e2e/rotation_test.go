package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	"github.com/tributarydb/tributary/internal/hostile"
	"github.com/tributarydb/tributary/internal/testcert"
)

// ackTracker polls the fleet every 100 ms and records, for each edge, the
// times its acked_through rose.
type ackTracker struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	last  map[string]uint64
	rises map[string][]time.Time
}

func trackAcks(c *cluster.Cluster, edges ...string) *ackTracker {
	a := &ackTracker{stop: make(chan struct{}), last: map[string]uint64{}, rises: map[string][]time.Time{}}
	a.wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			f, _, err := c.AnyFleet(ctx)
			cancel()
			now := time.Now()
			if err == nil {
				a.mu.Lock()
				for _, e := range edges {
					if n := edgeOf(f, e).AckedThrough; n > a.last[e] {
						a.last[e] = n
						a.rises[e] = append(a.rises[e], now)
					}
				}
				a.mu.Unlock()
			}
			select {
			case <-a.stop:
				return
			case <-t.C:
			}
		}
	})
	return a
}

func (a *ackTracker) Stop() {
	close(a.stop)
	a.wg.Wait()
}

// acked returns edge's acked_through as last seen.
func (a *ackTracker) acked(edge string) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[edge]
}

// lastRise is the time edge's acked_through last rose.
func (a *ackTracker) lastRise(edge string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rises[edge]
	if len(r) == 0 {
		return time.Time{}
	}
	return r[len(r)-1]
}

// maxPause is the longest time in [from, to) during which edge's
// acked_through did not rise.
func (a *ackTracker) maxPause(edge string, from, to time.Time) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	prev, longest := from, time.Duration(0)
	for _, r := range a.rises[edge] {
		if r.Before(from) || !r.Before(to) {
			continue
		}
		longest = max(longest, r.Sub(prev))
		prev = r
	}
	return max(longest, to.Sub(prev))
}

// waitReloaded waits until every process in ps has read its TLS material
// again after since (tributary_credentials_last_load_timestamp_seconds
// of kind tls), and returns how long after since the last one did.
func waitReloaded(t *testing.T, cl cluster.Client, since time.Time, timeout time.Duration, ps map[*cluster.Process]string) time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var slowest time.Duration
	for p, httpAddr := range ps {
		for {
			m, err := cl.Metrics(context.Background(), httpAddr, "tributary_credentials_")
			if err == nil {
				if ts := m[`tributary_credentials_last_load_timestamp_seconds{kind="tls"}`]; ts > float64(since.UnixNano())/1e9 {
					slowest = max(slowest, time.Duration(ts*1e9-float64(since.UnixNano())))
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not read its TLS material again within %v of %v (metrics %v, %v)", p.Name, timeout, since.Format(time.TimeOnly), m, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return slowest
}

// processes maps every process of f to its HTTP listener.
func (f *secureFleet) httpOf() map[*cluster.Process]string {
	out := map[*cluster.Process]string{}
	for _, co := range f.Coordinators {
		out[co.Process] = co.HTTP
	}
	for _, e := range f.edges() {
		out[e.Process] = e.HTTP
	}
	return out
}

// counters sums, per process, the refusal and failure counters that a
// rotation must leave alone: listener and intake refusals on
// coordinators, refused segments and ended streams on edges.
func (f *secureFleet) counters(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	cl := f.Client()
	for p, addr := range f.httpOf() {
		m, err := cl.Metrics(context.Background(), addr, "tributary_")
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			for _, name := range []string{"tributary_listener_refusals_total", "tributary_intake_refusals_total", "tributary_intake_revoked_total",
				"tributary_replication_refusals_total", "tributary_replication_session_failures_total"} {
				if strings.HasPrefix(k, name) {
					out[p.Name+" "+k] += v
				}
			}
		}
	}
	return out
}

// changed lists the counters that differ between two readings.
func changed(before, after map[string]float64) []string {
	var out []string
	for k, v := range after {
		if before[k] != v {
			out = append(out, fmt.Sprintf("%s %v -> %v", k, before[k], v))
		}
	}
	return out
}

// presented returns the leaf certificate the TLS listener at addr
// presents (the client shows none: a listener demanding one still shows
// its own first).
func presented(addr string) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // only the presented certificate is read
	if err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// signedBy says whether c chains to ca.
func signedBy(c *x509.Certificate, ca *testcert.CA) bool {
	_, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err == nil
}

// handshakeAccepted requires the mutual-TLS gRPC listener at addr to
// accept cert: the handshake ends without an alert (a refusal arrives,
// with TLS 1.3, on the first read) and the server's first frames follow.
// NB: gRPC servers close a connection that did not negotiate HTTP/2 by
// ALPN.
func handshakeAccepted(addr string, cert tls.Certificate) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}}) //nolint:gosec // the client's certificate is under test
	if err != nil {
		return fmt.Errorf("handshake with %s: %w", addr, err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := conn.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil // nothing to read, no alert
		}
		return fmt.Errorf("handshake with %s: %w", addr, err)
	}
	return nil // the server's first frames
}

// TestRotation_CAAndCertificatesWithoutRestart rotates both CAs and every
// certificate of a running fleet (three coordinators, edge-1 and edge-2,
// TLS and tokens everywhere; every link through a proxy) as an operator
// would, with writers on both edges: add the new CAs to every bundle and
// wait for the reload poll; reissue every certificate from the new CAs
// and send SIGHUP; remove the old CAs and wait for the poll. No process
// restarts, no write fails, no coordinator refuses anyone and no
// shipping stream ends; each step is checked from outside (new-CA
// certificates accepted, the new certificates presented, old-CA ones
// refused at the end). Then every link is cut for a second and healed, so
// that they all reconnect with the new material only, and both edges ship
// again. The cloud holds every acknowledged point of each edge exactly
// once.
func TestRotation_CAAndCertificatesWithoutRestart(t *testing.T) {
	requireSecurityScenarios(t)
	f := startSecureFleet(t, true, 0, "edge-2")
	edge2 := f.More[0]
	w1, start1 := startSecureLoad(t, f, f.Edge, metric)
	w2, start2 := startSecureLoad(t, f, edge2, metric+"_2")
	acks := trackAcks(f.Cluster, f.Edge.ID, edge2.ID)
	defer acks.Stop()
	quietFrom := time.Now()
	time.Sleep(10 * time.Second)
	quietTo := time.Now()
	before := f.counters(t)
	oldPeer, oldEdge := f.pki.CAs()
	procs := f.httpOf()
	cl := f.Client()
	hup := func() {
		for p := range procs {
			if err := p.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
	}

	// 1. Both CAs in every bundle; the reload poll (5 s) reads them.
	step1 := time.Now()
	newPeer, newEdge := f.pki.NewCA(), f.pki.NewCA()
	f.pki.WriteBundles([]*testcert.CA{oldPeer, newPeer}, []*testcert.CA{oldEdge, newEdge})
	took1 := waitReloaded(t, cl, time.Now(), 20*time.Second, procs)
	for _, co := range f.Coordinators {
		if err := handshakeAccepted(co.Cluster, newPeer.IssueDNS(t, "c1")); err != nil {
			t.Errorf("step 1: %s's cluster listener refuses a certificate of the new peer CA: %v", co.ID, err)
		}
		if err := handshakeAccepted(co.Intake, newEdge.IssueDNS(t, f.Edge.ID)); err != nil {
			t.Errorf("step 1: %s's intake refuses a certificate of the new edge CA: %v", co.ID, err)
		}
	}
	t.Logf("step 1: new CAs added to every bundle, read by every process %v after the write (poll)", took1.Round(time.Millisecond))

	// 2. Every certificate reissued by the new CAs; SIGHUP.

	f.pki.SetCAs(newPeer, newEdge)
	for p := range procs {
		f.pki.Issue(p.Name)
	}
	written := time.Now()
	hup()
	took2 := waitReloaded(t, cl, written, 20*time.Second, procs)
	type lis struct{ name, addr string }
	var all []lis
	for _, co := range f.Coordinators {
		all = append(all, lis{co.ID + " grpc", co.GRPC}, lis{co.ID + " http", co.HTTP}, lis{co.ID + " cluster", co.Cluster}, lis{co.ID + " intake", co.Intake})
	}
	for _, e := range f.edges() {
		all = append(all, lis{e.ID + " grpc", e.GRPC}, lis{e.ID + " http", e.HTTP})
	}
	for _, l := range all {
		c, err := presented(l.addr)
		switch {
		case err != nil:
			t.Errorf("step 2: %s: %v", l.name, err)
		case !signedBy(c, newPeer) && !signedBy(c, newEdge):
			t.Errorf("step 2: %s presents a certificate of %q, not of a new CA", l.name, c.Issuer)
		}
	}
	t.Logf("step 2: every certificate reissued by the new CAs, read by every process %v after SIGHUP; all %d listeners present them", took2.Round(time.Millisecond), len(all))

	// 3. The old CAs removed; the reload poll.

	f.pki.WriteBundles([]*testcert.CA{newPeer}, []*testcert.CA{newEdge})
	took3 := waitReloaded(t, cl, time.Now(), 20*time.Second, procs)
	stepsTo := time.Now()
	for _, co := range f.Coordinators {
		if err := handshakeRefusal(co.Cluster, f.pki.ClientTLS(), oldPeer.IssueDNS(t, "c1")); err != nil {
			t.Errorf("step 3: %s's cluster listener, a certificate of the old peer CA naming c1: %v", co.ID, err)
		}
		if err := handshakeRefusal(co.Intake, f.pki.ClientTLS(), oldEdge.IssueDNS(t, f.Edge.ID)); err != nil {
			t.Errorf("step 3: %s's intake, a certificate of the old edge CA naming %s: %v", co.ID, f.Edge.ID, err)
		}
	}
	t.Logf("step 3: old CAs removed from every bundle, read %v after the write (poll); old-CA certificates refused on every cluster listener and intake", took3.Round(time.Millisecond))
	// The probes of steps 2 and 3 are refused themselves, each once on
	// every cluster listener and intake (mutual TLS): no certificate, then
	// an old CA's. Nothing else may be.
	probed := maps.Clone(before)
	for _, co := range f.Coordinators {
		for _, l := range []string{"cluster", "intake"} {
			probed[fmt.Sprintf(`%s tributary_listener_refusals_total{listener=%q,stage="handshake"}`, co.ID, l)] += 2
		}
	}
	during := f.counters(t)
	if d := changed(probed, during); len(d) > 0 {
		t.Errorf("the rotation refused or ended something (no stream should end, nothing be refused): %s", strings.Join(d, "; "))
	}

	// 4. Every link cut and healed: they reconnect with the new material
	// only.
	cutAt := time.Now()
	proxies := append([]*cluster.FaultProxy(nil), f.clusterProxies...)
	for _, ps := range f.intakeProxies {
		proxies = append(proxies, ps...)
	}
	for _, p := range proxies {
		p.Cut()
	}
	time.Sleep(time.Second)
	for _, p := range proxies {
		if err := p.Heal(); err != nil {
			t.Fatal(err)
		}
	}
	ackedAtCut := map[string]uint64{f.Edge.ID: acks.acked(f.Edge.ID), edge2.ID: acks.acked(edge2.ID)}
	var recovered []string
	for _, e := range f.edges() {
		deadline := time.Now().Add(60 * time.Second)
		for acks.acked(e.ID) <= ackedAtCut[e.ID] {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no segment acknowledged within 60 s of healing the links cut after the rotation (acked_through %d)", e.ID, acks.acked(e.ID))
			}
			time.Sleep(100 * time.Millisecond)
		}
		recovered = append(recovered, fmt.Sprintf("%s %v", e.ID, acks.lastRise(e.ID).Sub(cutAt).Round(time.Millisecond)))
	}
	if _, err := f.Leader(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("step 4: every link (%d proxies) cut for 1 s and healed; acknowledged again after the cut: %s", len(proxies), strings.Join(recovered, ", "))
	time.Sleep(3 * time.Second)
	st1, st2 := w1.Stop(), w2.Stop()
	after := f.counters(t)
	for k, v := range after {
		if strings.Contains(k, "refusals_total") && v != probed[k] {
			t.Errorf("after the links reconnected: %s %v -> %v (a link refused with the new material)", k, probed[k], v)
		}
	}

	// The edges' acknowledgements through the rotation.
	for _, e := range f.edges() {
		q := acks.maxPause(e.ID, quietFrom, quietTo)
		r := acks.maxPause(e.ID, step1, stepsTo)
		t.Logf("%s: longest pause between acknowledgements: %v before the rotation, %v during its three steps (%v)", e.ID, q.Round(time.Millisecond), r.Round(time.Millisecond), stepsTo.Sub(step1).Round(time.Millisecond))
		if r > q+2*time.Second {
			t.Errorf("%s's acknowledgements paused %v during the rotation, more than %v before it plus 2 s", e.ID, r.Round(time.Millisecond), q.Round(time.Millisecond))
		}
	}
	load1 := requireLoadHeld(t, st1, faultLoad)
	load2 := requireLoadHeld(t, st2, faultLoad)
	for p := range procs {
		if p.CountInLog("=== e2e: start 2") > 0 || !p.Running() {
			t.Errorf("%s restarted or stopped", p.Name)
		}
	}
	lost1, dup1 := checkSecureCloud(t, f, f.Edge, metric, w1.Ledger, st1, start1, 0)
	lost2, dup2 := checkSecureCloud(t, f, edge2, metric+"_2", w2.Ledger, st2, start2, 0)
	var reloadErrs []string
	for p, addr := range procs {
		m, err := cl.Metrics(context.Background(), addr, "tributary_credentials_reloads_total")
		if err == nil {
			reloadErrs = append(reloadErrs, fmt.Sprintf("%s %v ok, %v failed", p.Name, m[`tributary_credentials_reloads_total{kind="tls",result="ok"}`], m[`tributary_credentials_reloads_total{kind="tls",result="error"}`]))
		}
	}
	t.Logf("TLS reloads (a poll between a certificate's and its key's write fails and keeps the old pair): %s", strings.Join(reloadErrs, "; "))
	t.Logf("summary: load average %s; writers %.0f and %.0f points/s, no write failed; new material read %v (poll), %v (SIGHUP), %v (poll) after each step's files were written; refusals or ended streams during the rotation: %d; lost %d, duplicated %d",
		loadAvg(), load1, load2, took1.Round(time.Millisecond), took2.Round(time.Millisecond), took3.Round(time.Millisecond), len(changed(before, during)), lost1+lost2, dup1+dup2)
}

// edgeAdmitted says whether the intake at addr admits a stream from the
// certificate cert: a Ship stream whose first message announces 200 MB is
// refused for its size (ResourceExhausted) once admitted, and
// PERMISSION_DENIED naming the revocation before; nothing of it is read
// either way, so the edge's own session is left alone.
func edgeAdmitted(ctx context.Context, addr string, cert tls.Certificate) (admitted bool, detail string, err error) {
	outs, err := hostile.GRPC(ctx, "probe", hostile.Target{Addr: addr, TLS: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, //nolint:gosec // the client's certificate is under test
		Certificates: []tls.Certificate{cert}}}, hostile.CallShip, 1, 200<<20, hostile.Revoked, 5*time.Second)
	if err != nil {
		return false, "", err
	}
	o := outs[0]
	switch {
	case o.Verdict == hostile.Refused:
		return false, o.Detail, nil
	case strings.Contains(o.Detail, "larger than max"):
		return true, o.Detail, nil
	}
	return false, o.Detail, fmt.Errorf("probe of %s: neither admitted nor refused as revoked: %s", addr, o.Detail)
}

// cli runs the tributary command line against a coordinator's client
// listener, with TLS and the token.
func (f *secureFleet) cli(t *testing.T, co *cluster.Coordinator, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append(args, "--addr", co.GRPC, "--tls-ca", f.pki.PeerCAFile, "--timeout", "10s")...)
	cmd.Env = append(os.Environ(), "TRIBUTARY_TOKEN="+f.pki.Token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tributary %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestRevocation_EdgeRefusedEverywhereWithin5s revokes edge-2 with
// `tributary cluster revoke-edge` while both edges of a TLS fleet write
// and ship: within 5 s every coordinator's intake refuses edge-2's
// certificate (probed on each), every coordinator drops its query tunnel,
// and edge-2's acknowledgements stop; edge-1's acknowledgements do not
// pause longer than they did before (plus one segment age). edge-2's data
// stays: every coordinator still answers what the cloud holds of it, and
// says edge-2 did not answer. After unrevoke-edge, edge-2 ships its
// backlog and the cloud holds every acknowledged point of both edges
// exactly once.
func TestRevocation_EdgeRefusedEverywhereWithin5s(t *testing.T) {
	requireSecurityScenarios(t)
	f := startSecureFleet(t, false, 0, "edge-2")
	edge2 := f.More[0]
	w1, start1 := startSecureLoad(t, f, f.Edge, metric)
	w2, start2 := startSecureLoad(t, f, edge2, metric+"_2")
	acks := trackAcks(f.Cluster, f.Edge.ID, edge2.ID)
	defer acks.Stop()
	quietFrom := time.Now()
	time.Sleep(10 * time.Second)
	quietTo := time.Now()
	cert2, err := tls.LoadX509KeyPair(f.pki.Files(edge2.ID))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, co := range f.Coordinators {
		if ok, detail, err := edgeAdmitted(ctx, co.Intake, cert2); err != nil || !ok {
			t.Fatalf("before the revocation %s does not admit %s: %s %v", co.ID, edge2.ID, detail, err)
		}
	}
	cl := f.Client()

	revokeAt := time.Now()
	out := f.cli(t, f.Coordinators[1], "cluster", "revoke-edge", edge2.ID)
	cmdTook := time.Since(revokeAt)
	type seen struct {
		refused, tunnelGone time.Duration
		detail              string
	}
	seenBy := make([]seen, len(f.Coordinators))
	var wg sync.WaitGroup
	for i, co := range f.Coordinators {
		wg.Go(func() {
			s := &seenBy[i]
			for time.Since(revokeAt) < 10*time.Second && (s.refused == 0 || s.tunnelGone == 0) {
				if s.refused == 0 {
					if ok, detail, err := edgeAdmitted(ctx, co.Intake, cert2); err == nil && !ok {
						s.refused, s.detail = time.Since(revokeAt), detail
					}
				}
				if s.tunnelGone == 0 {
					if m, err := cl.Metrics(ctx, co.HTTP, "tributary_tunnel_open"); err == nil && m["tributary_tunnel_open"] == 1 {
						s.tunnelGone = time.Since(revokeAt)
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	var slowest time.Duration
	for i, s := range seenBy {
		co := f.Coordinators[i]
		t.Logf("%s: refuses %s %v after the command started (%s); its query tunnel gone after %v", co.ID, edge2.ID, s.refused.Round(time.Millisecond), s.detail, s.tunnelGone.Round(time.Millisecond))
		if s.refused == 0 || s.refused > 5*time.Second {
			t.Errorf("%s does not refuse the revoked %s within 5 s", co.ID, edge2.ID)
		}
		if s.tunnelGone == 0 || s.tunnelGone > 5*time.Second {
			t.Errorf("%s keeps %s's query tunnel open more than 5 s after the revocation", co.ID, edge2.ID)
		}
		slowest = max(slowest, s.refused, s.tunnelGone)
	}
	// edge-2's acknowledgements stop; edge-1's go on.
	time.Sleep(time.Until(revokeAt.Add(15 * time.Second)))
	lastRise2 := acks.lastRise(edge2.ID).Sub(revokeAt)
	if lastRise2 > 5*time.Second {
		t.Errorf("%s's segments were still acknowledged %v after the revocation", edge2.ID, lastRise2.Round(time.Millisecond))
	}
	q := acks.maxPause(f.Edge.ID, quietFrom, quietTo)
	r := acks.maxPause(f.Edge.ID, revokeAt, revokeAt.Add(15*time.Second))
	if r > q+time.Second {
		t.Errorf("%s's acknowledgements paused %v after the revocation, more than %v before it plus 1 s", f.Edge.ID, r.Round(time.Millisecond), q.Round(time.Millisecond))
	}
	t.Logf("%s: last acknowledgement %v after the revocation; %s: longest pause between acknowledgements %v before, %v in the 15 s after",
		edge2.ID, lastRise2.Round(time.Millisecond), f.Edge.ID, q.Round(time.Millisecond), r.Round(time.Millisecond))

	// Its data stays, flagged as possibly incomplete.
	fl, err := f.WaitFleet(ctx, 10*time.Second, func(cluster.Fleet) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	held := edgeOf(fl, edge2.ID).HeldPoints
	for _, co := range f.Coordinators {
		ans, err := cluster.QueryRawWith(ctx, cl, co.GRPC, metric+"_2", start2, time.Now().Add(time.Hour).UnixMilli())
		if err != nil {
			t.Errorf("%s: query %s's data while it is revoked: %v", co.ID, edge2.ID, err)
			continue
		}
		n := 0
		for _, pts := range ans.Points {
			n += len(pts)
		}
		warned := strings.Contains(strings.Join(ans.Warnings, " "), edge2.ID)
		t.Logf("%s answers %d points of the revoked %s (the cloud holds %d); warnings %q", co.ID, n, edge2.ID, held, ans.Warnings)
		if uint64(n) < held || !warned {
			t.Errorf("%s answers %d points of the revoked %s, the cloud holds %d; a warning naming it: %v", co.ID, n, edge2.ID, held, warned)
		}
	}
	revokedCount := 0.0
	for _, co := range f.Coordinators {
		if m, err := cl.Metrics(ctx, co.HTTP, "tributary_"); err == nil {
			revokedCount += m["tributary_intake_revoked_total"] + m[`tributary_listener_refusals_total{listener="intake",stage="admission"}`]
		}
	}

	// Lifted: edge-2 ships its backlog.
	out2 := f.cli(t, f.Coordinators[2], "cluster", "unrevoke-edge", edge2.ID)
	unrevokeAt := time.Now()
	before2 := acks.acked(edge2.ID)
	for acks.acked(edge2.ID) <= before2 {
		if time.Since(unrevokeAt) > 60*time.Second {
			t.Fatalf("%s not acknowledged within 60 s of unrevoke-edge", edge2.ID)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resumed := time.Since(unrevokeAt)
	st1, st2 := w1.Stop(), w2.Stop()
	load1 := requireLoadHeld(t, st1, faultLoad)
	load2 := requireLoadHeld(t, st2, faultLoad)
	lost1, dup1 := checkSecureCloud(t, f, f.Edge, metric, w1.Ledger, st1, start1, 0)
	lost2, dup2 := checkSecureCloud(t, f, edge2, metric+"_2", w2.Ledger, st2, start2, 0)
	t.Logf("summary: load average %s; %q in %v; every coordinator refused %s within %v of it (refusals and revoked streams counted: %v); %s's last acknowledgement %v after; %s's longest pause %v (%v before); %q, shipping again after %v; writers %.0f and %.0f points/s; lost %d, duplicated %d",
		loadAvg(), out, cmdTook.Round(time.Millisecond), edge2.ID, slowest.Round(time.Millisecond), revokedCount, edge2.ID, lastRise2.Round(time.Millisecond),
		f.Edge.ID, r.Round(time.Millisecond), q.Round(time.Millisecond), out2, resumed.Round(time.Millisecond), load1, load2, lost1+lost2, dup1+dup2)
}
