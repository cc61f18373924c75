package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	promrules "github.com/prometheus/prometheus/rules"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/replicator"
)

const fleetRulesYAML = `
groups:
  - name: fleet
    interval: 500ms
    rules:
      - record: dev:temp:max
        expr: max by (dev) (temp)
      - alert: Hot
        expr: temp > 100
        for: 10s
        annotations:
          summary: "{{ $labels.dev }} is hot"
`

// ruleMember is one coordinator of the test cluster with its rules.
type ruleMember struct {
	c       *coordinator.Coordinator
	r       *coordinatorRules
	api     *prom.API // queries over the member's front end
	stopped bool
}

func (m *ruleMember) stop(t *testing.T) {
	if m.stopped {
		return
	}
	m.stopped = true
	if err := m.r.stop(); err != nil {
		t.Errorf("stop rules: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	m.c.Stop(ctx)
}

// instant evaluates expr over the member's front end now.
func (m *ruleMember) instant(t *testing.T, expr string) promql.Vector {
	t.Helper()
	q, err := m.api.Engine().NewInstantQuery(context.Background(), m.api.Queryable(), nil, expr, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		return nil // a member still catching up
	}
	v, _ := res.Vector()
	return v
}

func ruleTestFreeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return out
}

// startRuleCluster starts three coordinators bootstrapped together, each
// with the rules of file, as runCoordinator wires them.
func startRuleCluster(t *testing.T, file string) []*ruleMember {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	addrs := ruleTestFreeAddrs(t, 3)
	var peers []coordinator.Peer
	for i, a := range addrs {
		peers = append(peers, coordinator.Peer{RaftID: uint64(i + 1), NodeID: fmt.Sprintf("coord-%d", i+1), Addr: a})
	}
	var ms []*ruleMember
	for _, p := range peers {
		var rf rulesFlags
		fs := newFlagSet("test", io.Discard, "")
		rf.register(fs)
		if err := fs.Parse([]string{"--rules", file, "--rules-for-grace-period", "1m"}); err != nil {
			t.Fatal(err)
		}
		var crf coordRulesFlags
		if err := crf.validate(&rf, true); err != nil {
			t.Fatal(err)
		}
		var edge edgeSource
		dir := t.TempDir()
		c, err := coordinator.Open(coordinator.Options{NodeID: p.NodeID, RaftID: p.RaftID, DataDir: dir,
			ClusterListen: p.Addr, IntakeListen: "127.0.0.1:0", Peers: peers, Insecure: true,
			TickInterval: 50 * time.Millisecond, LocalEdge: edge.source, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		sf := serveFlags{prom: prom.Options{MaxSamples: 1_000_000, QueryTimeout: 10 * time.Second,
			LookbackDelta: 5 * time.Minute, MaxConcurrentQueries: 4}}
		r, err := openCoordinatorRules(c, &rf, &sf, coordinatorRulesOptions{dataDir: dir, local: &edge,
			sealAge: 100 * time.Millisecond, log: log})
		if err != nil {
			t.Fatal(err)
		}
		if sf.rules != r || !sf.rulesWithSeriesAlerts {
			t.Fatal("the rules do not answer the rules and alerts API")
		}
		api, err := prom.New(c.Backend(), &httpapi.Config{}, sf.prom)
		if err != nil {
			t.Fatal(err)
		}
		r.start()
		m := &ruleMember{c: c, r: r, api: api}
		t.Cleanup(func() { m.stop(t) })
		ms = append(ms, m)
	}
	return ms
}

// startHotEdge starts an edge shipping to every member that writes
// temp{dev="pump"} = 150 every 100 ms until the test ends.
func startHotEdge(t *testing.T, ms []*ruleMember) {
	var targets []string
	for _, m := range ms {
		targets = append(targets, m.c.IntakeAddr())
	}
	dir := t.TempDir()
	s, err := replicator.New(replicator.Options{Targets: targets, Insecure: true, SoftwareVersion: "test",
		CursorPath: filepath.Join(dir, "replication.cursor"), BackoffInitial: 10 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: filepath.Join(dir, "node"), NodeID: "pump-edge",
		WALSegmentAge: 50 * time.Millisecond, WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.Run(ctx, n) })
	wg.Go(func() { writeEvery100ms(ctx, n, labels.FromStrings(labels.MetricName, "temp", "dev", "pump"), 150) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		n.Close()
	})
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// evaluating returns the member whose rules run (the raft leader's).
func evaluating(ms []*ruleMember) *ruleMember {
	for _, m := range ms {
		if m.stopped {
			continue
		}
		m.r.mu.Lock()
		running := m.r.running
		m.r.mu.Unlock()
		if running {
			return m
		}
	}
	return nil
}

// hotAlert returns the Hot alert of m's rules, if active.
func hotAlert(m *ruleMember) (promrules.Alert, bool) {
	for _, g := range m.r.RuleGroups() {
		for _, r := range g.AlertingRules() {
			for _, a := range r.ActiveAlerts() {
				if a.Labels.Get("alertname") == "Hot" {
					return *a, true
				}
			}
		}
	}
	return promrules.Alert{}, false
}

// TestCoordinatorRules_LeaderEvaluatesOverTheFleetAndHandsOver runs three
// coordinators with the same --rules and one edge: only the raft leader
// evaluates; the recording rule's series is fleet-wide and equals its
// expression; an alert pending when the leader stops fires on the next
// leader at its original active time plus `for`.
func TestCoordinatorRules_LeaderEvaluatesOverTheFleetAndHandsOver(t *testing.T) {
	file := filepath.Join(t.TempDir(), "fleet.yml")
	if err := os.WriteFile(file, []byte(fleetRulesYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	ms := startRuleCluster(t, file)
	startHotEdge(t, ms)

	var leader *ruleMember
	waitUntil(t, "a member evaluates the rules", 20*time.Second, func() bool { leader = evaluating(ms); return leader != nil })
	var follower *ruleMember
	for _, m := range ms {
		if m != leader {
			follower = m
			break
		}
	}
	// The followers list the groups without evaluating them.
	if gs := follower.r.RuleGroups(); len(gs) != 1 || gs[0].Name() != "fleet" || !gs[0].GetLastEvaluation().IsZero() {
		t.Fatalf("follower's groups: %v", gs)
	}

	// The recording rule's series reaches every member (the rules edge
	// replicates) and equals its expression.
	waitUntil(t, "the recorded series on a follower", 20*time.Second, func() bool {
		got := follower.instant(t, `dev:temp:max{dev="pump"}`)
		want := follower.instant(t, `max by (dev) (temp)`)
		return len(got) == 1 && len(want) == 1 && got[0].F == want[0].F && got[0].F == 150
	})

	var pending promrules.Alert
	waitUntil(t, "the alert pending on the leader", 20*time.Second, func() bool {
		a, ok := hotAlert(leader)
		pending = a
		return ok
	})
	if pending.State != promrules.StatePending {
		t.Fatalf("alert %v: state %v, want pending (for: 10s)", pending.Labels, pending.State)
	}
	activeAt := pending.ActiveAt
	if pending.Annotations.Get("summary") != "pump is hot" {
		t.Errorf("annotations %v", pending.Annotations)
	}
	// Its `for` state reaches the followers before the leader stops.
	waitUntil(t, "ALERTS_FOR_STATE replicated", 20*time.Second, func() bool {
		v := follower.instant(t, `ALERTS_FOR_STATE{alertname="Hot"}`)
		return len(v) == 1 && int64(v[0].F) == activeAt.Unix()
	})
	if time.Since(activeAt) > 8*time.Second {
		t.Skipf("the machine is too slow for the hand-over to happen while the alert is pending (%s since it became active)", time.Since(activeAt))
	}
	leader.stop(t)
	stoppedAt := time.Now()

	var next *ruleMember
	waitUntil(t, "a new member evaluates the rules", 20*time.Second, func() bool { next = evaluating(ms); return next != nil })
	var firing promrules.Alert
	waitUntil(t, "the alert firing on the new leader", 30*time.Second, func() bool {
		a, ok := hotAlert(next)
		firing = a
		return ok && a.State == promrules.StateFiring
	})
	firedAt := time.Now()
	if firing.ActiveAt.Unix() != activeAt.Unix() {
		t.Fatalf("the new leader's alert is active since %s, the first leader's since %s: the `for` state was not kept", firing.ActiveAt, activeAt)
	}
	// Started over, it would fire no earlier than 10 s after the hand-over.
	if firedAt.After(stoppedAt.Add(10 * time.Second)) {
		t.Errorf("fired %s after the leader stopped, activeAt + for was %s after", firedAt.Sub(stoppedAt), activeAt.Add(10*time.Second).Sub(stoppedAt))
	}
	// The fleet sees it firing, and /api/v1/alerts of the new leader
	// lists it once.
	waitUntil(t, "ALERTS firing fleet-wide", 20*time.Second, func() bool {
		for _, m := range ms {
			if m.stopped || m == next {
				continue
			}
			return len(m.instant(t, `ALERTS{alertname="Hot", alertstate="firing"}`)) == 1
		}
		return false
	})
}

func TestCoordRulesFlags_Refused(t *testing.T) {
	for name, tc := range map[string]struct {
		args     []string
		insecure bool
	}{
		"edge cert without rules":    {[]string{"--rules-edge-cert", "c.pem", "--rules-edge-key", "k.pem"}, false},
		"segment age without rules":  {[]string{"--rules-edge-wal-segment-age", "1s"}, true},
		"negative segment age":       {[]string{"--rules", "x.yml", "--rules-edge-wal-segment-age", "-1s"}, true},
		"TLS without edge cert":      {[]string{"--rules", "x.yml"}, false},
		"edge cert with insecure":    {[]string{"--rules", "x.yml", "--rules-edge-cert", "c.pem", "--rules-edge-key", "k.pem"}, true},
		"alertmanager without rules": {[]string{"--alertmanager-url", "http://127.0.0.1:9093"}, true},
	} {
		var rf rulesFlags
		var crf coordRulesFlags
		fs := newFlagSet("test", io.Discard, "")
		rf.register(fs)
		crf.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := crf.validate(&rf, tc.insecure); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	var rf rulesFlags
	var crf coordRulesFlags
	fs := newFlagSet("test", io.Discard, "")
	rf.register(fs)
	crf.register(fs)
	if err := fs.Parse([]string{"--rules", "x.yml", "--rules-edge-wal-segment-age", "1s"}); err != nil {
		t.Fatal(err)
	}
	if err := crf.validate(&rf, true); err != nil {
		t.Errorf("insecure cluster with --rules: %v", err)
	}
	// Without the flag the rules edge seals every second, whatever the
	// fleet's lag budget.
	rf, crf = rulesFlags{}, coordRulesFlags{}
	fs = newFlagSet("test", io.Discard, "")
	rf.register(fs)
	crf.register(fs)
	if err := fs.Parse([]string{"--rules", "x.yml"}); err != nil {
		t.Fatal(err)
	}
	if err := crf.validate(&rf, true); err != nil || crf.sealAge != time.Second {
		t.Errorf("the rules edge's default segment age is %v (%v), want 1s", crf.sealAge, err)
	}
}

// writeEvery100ms writes v to the series ls of n, stamped now, every
// 100 ms until ctx ends.
func writeEvery100ms(ctx context.Context, n *node.Node, ls labels.Labels, v float64) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		b := model.Batch{Labels: ls, Ts: []int64{time.Now().UnixMilli()}, Vs: []float64{v}}
		n.Write(ctx, []model.Batch{b})
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
