package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The healing scenarios of issue 15 (see healfleet_test.go for the fleet
// and its watchers). Each ends with settleAndCheck: every replica store
// asked alone answers every acknowledged point of its edge exactly once,
// and every coordinator's query front end does too.

// TestHeal_CoordinatorDiskLoss: 3 coordinators, 10 edges at 4,000
// points/s in total; one coordinator (TRIBUTARY_E2E_HEAL_VICTIMS:
// follower, leader, or both) is killed with SIGKILL and its data
// directory deleted; after each of TRIBUTARY_E2E_HEAL_RESTART_DELAYS
// (default 40s: past dead-after, so that the leader marks it down first)
// it is started again with its original flags plus --rejoin, as the Helm
// chart starts a pod (no command typed). Acknowledgements must not pause
// longer than TRIBUTARY_E2E_HEAL_MAX_ACK_PAUSE (3 s), every edge must be
// back at RF healthy replicas within dead-after (30 s) + 60 s of the
// kill, and every edge's whole history at RF again within 10 minutes.
func TestHeal_CoordinatorDiskLoss(t *testing.T) {
	victims := envList(t, "TRIBUTARY_E2E_HEAL_VICTIMS", "follower")
	delays := envList(t, "TRIBUTARY_E2E_HEAL_RESTART_DELAYS", "40s")
	for _, role := range victims {
		if role != "follower" && role != "leader" {
			t.Fatalf("TRIBUTARY_E2E_HEAL_VICTIMS=%q: want follower, leader or both, comma-separated", os.Getenv("TRIBUTARY_E2E_HEAL_VICTIMS"))
		}
		for _, ds := range delays {
			delay, err := time.ParseDuration(ds)
			if err != nil || delay < 0 {
				t.Fatalf("TRIBUTARY_E2E_HEAL_RESTART_DELAYS=%q: want durations, comma-separated", os.Getenv("TRIBUTARY_E2E_HEAL_RESTART_DELAYS"))
			}
			t.Run(fmt.Sprintf("%s/restart-after-%v", role, delay), func(t *testing.T) { diskLoss(t, role, delay) })
		}
	}
}

// envList reads a comma-separated knob.
func envList(t *testing.T, name, def string) []string {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		s = def
	}
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s=%q: empty list", name, s)
	}
	return out
}

func diskLoss(t *testing.T, role string, delay time.Duration) {
	warm := envDuration(t, "TRIBUTARY_E2E_HEAL_WARMUP", 30*time.Second)
	maxPause := envDuration(t, "TRIBUTARY_E2E_HEAL_MAX_ACK_PAUSE", 3*time.Second)
	ctx := context.Background()
	h := startHealFleet(t, healOptions{coordinators: 3, edges: 10})
	deadAfter := h.o.deadAfter
	time.Sleep(warm)
	leader, err := h.c.Leader(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	victim := leader
	if role == "follower" {
		victim = h.follower(leader)
	}
	oldRaft, oldStore := victim.RaftID, h.storeID(victim)
	h.markWiped(victim, oldStore)
	killedAt := time.Now()
	victim.Kill()
	if err := victim.Wipe(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s %s (raft %d, store %s) with SIGKILL and deleted its data directory; load average %s", role, victim.ID, oldRaft, oldStore, loadAvg())
	time.Sleep(time.Until(killedAt.Add(delay)))
	victim.Args = append(victim.Args, "--rejoin")
	if err := victim.Start(h.c.Opts.ReadyTimeout); err != nil {
		t.Fatal(err)
	}
	newRaft, err := victim.RefreshRaftID()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s started again with --rejoin %v after the kill: raft id %d (was %d)", victim.ID, time.Since(killedAt).Round(time.Millisecond), newRaft, oldRaft)
	if newRaft <= oldRaft {
		t.Errorf("%s rejoined under raft id %d, not a new one above %d", victim.ID, newRaft, oldRaft)
	}
	replacedAt := h.waitEdges("every edge back at RF healthy replicas", deadAfter+60*time.Second+3*time.Minute, func(v cluster.EdgesView) string {
		return h.healthy(v, healRF, false)
	})
	replaced := replacedAt.Sub(killedAt)
	restoredAt := h.waitEdges("every edge's whole history at RF", 10*time.Minute+5*time.Minute, func(v cluster.EdgesView) string {
		return h.healthy(v, healRF, true)
	})
	restored := restoredAt.Sub(killedAt)
	t.Logf("every edge at RF healthy replicas %v after the kill (bound: dead-after %v + 60 s); whole history at RF %v after it (bound 10 min); load average %s",
		replaced.Round(time.Millisecond), deadAfter, restored.Round(time.Millisecond), loadAvg())
	if replaced > deadAfter+60*time.Second {
		t.Errorf("edges back at RF healthy replicas %v after the kill, over dead-after + 60 s (%v)", replaced.Round(time.Millisecond), deadAfter+60*time.Second)
	}
	if restored > 10*time.Minute {
		t.Errorf("whole history at RF again %v after the kill, over 10 minutes", restored.Round(time.Millisecond))
	}
	time.Sleep(5 * time.Second) // acknowledgements go on after the heal
	h.acks.Stop()
	pauses := h.acks.Pauses(time.Time{}, time.Time{})
	t.Log(h.acks.Summary(time.Time{}, time.Time{}))
	if len(pauses) != len(h.c.Edges) {
		t.Errorf("acknowledgements seen for %d of %d edges", len(pauses), len(h.c.Edges))
	}
	if len(pauses) > 0 && pauses[0].Pause > maxPause {
		t.Errorf("acknowledgements paused %v (%s), over %v", pauses[0].Pause.Round(10*time.Millisecond), pauses[0], maxPause)
	}
	requireMemberReplaced(t, h, victim, oldRaft, oldStore)
	checks := h.settleAndCheck(healRF, 5*time.Minute)
	probes, wrong := h.probe.report(t)
	h.sampler.report(t)
	worst := time.Duration(0)
	if len(pauses) > 0 {
		worst = pauses[0].Pause
	}
	t.Logf("summary: %s %s lost its disk; ack pause worst %v; RF healthy after %v; whole history after %v; %d replica stores checked alone, lost %d, duplicated %d, phantom %d; %d answers compared, %d wrong; load average %s",
		role, victim.ID, worst.Round(10*time.Millisecond), replaced.Round(time.Millisecond), restored.Round(time.Millisecond),
		len(checks), sumChecks(checks, "lost"), sumChecks(checks, "dup"), sumChecks(checks, "phantom"), probes, wrong, loadAvg())
}

// requireMemberReplaced requires the raft members to list co under a new
// raft id with a new store, as a voter, and no longer the old raft id.
func requireMemberReplaced(t *testing.T, h *healFleet, co *cluster.Coordinator, oldRaft uint64, oldStore string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var m *pb.MembersResponse
		leader, err := h.c.Leader(context.Background(), 10*time.Second)
		if err == nil {
			m, err = cluster.Members(context.Background(), leader)
		}
		ok, view := false, fmt.Sprint(err)
		if err == nil {
			ok = true
			var parts []string
			for _, mem := range m.Members {
				parts = append(parts, fmt.Sprintf("%d=%s learner=%v store=%s state=%s", mem.RaftId, mem.NodeId, mem.Learner, mem.StoreId, mem.State))
				if mem.RaftId == oldRaft {
					ok = false
				}
			}
			i := slices.IndexFunc(m.Members, func(mem *clusterMember) bool { return mem.RaftId == co.RaftID })
			if i < 0 || m.Members[i].NodeId != co.ID || m.Members[i].Learner || m.Members[i].StoreId == oldStore || m.Members[i].StoreId == "" {
				ok = false
			}
			view = strings.Join(parts, "; ")
		}
		if ok {
			t.Logf("members: %s", view)
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s is not a voter under its new raft id %d with a new store, or raft id %d is still a member: %s", co.ID, co.RaftID, oldRaft, view)
			return
		}
		time.Sleep(time.Second)
	}
}

func sumChecks(cs []replicaCheck, what string) int {
	n := 0
	for _, c := range cs {
		switch what {
		case "lost":
			n += c.r.Lost
		case "dup":
			n += c.r.Duplicated
		case "phantom":
			n += c.r.Phantom + c.r.WrongValue
		}
	}
	return n
}

// TestHeal_EmptyDiskSameID: a follower's data directory is deleted and
// it is started again with its old flags, under the same leader and after
// a leader change (leadership transferred while it was down). It must
// refuse to start, with the documented message and a non-zero exit, every
// time it is started (no crash loop on raft's "tocommit out of range", no
// bootstrap, no use of its old raft id), answer no query meanwhile; then
// the one documented command, a start with --rejoin, makes it a voter
// under a new raft id that gets its share back; once settled every
// replica and every coordinator answers every edge's acknowledged points
// exactly once.
func TestHeal_EmptyDiskSameID(t *testing.T) {
	t.Run("same-leader", func(t *testing.T) { emptyDisk(t, false) })
	t.Run("leader-change", func(t *testing.T) { emptyDisk(t, true) })
}

func emptyDisk(t *testing.T, leaderChange bool) {
	warm := envDuration(t, "TRIBUTARY_E2E_HEAL_WARMUP", 30*time.Second)
	ctx := context.Background()
	h := startHealFleet(t, healOptions{coordinators: 3, edges: 4})
	time.Sleep(warm / 2)
	leader, err := h.c.Leader(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	victim := h.follower(leader)
	oldRaft, oldStore := victim.RaftID, h.storeID(victim)
	before, err := cluster.Members(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	h.markWiped(victim, oldStore)
	victim.Kill()
	if err := victim.Wipe(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed follower %s (raft %d) with SIGKILL and deleted its data directory; leader %s (raft %d, term %d)", victim.ID, oldRaft, leader.ID, leader.RaftID, before.Term)
	if leaderChange {
		var other *cluster.Coordinator
		for _, co := range h.c.Coordinators {
			if co != leader && co != victim {
				other = co
			}
		}
		if _, _, err := h.c.Admin(ctx, leader, "transfer", fmt.Sprint(other.RaftID)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			l, err := h.c.Leader(ctx, 10*time.Second)
			if err == nil && l == other {
				leader = l
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("leadership not transferred to %s within 30 s: %v %v", other.ID, l, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("leadership transferred to %s (raft %d) while %s was down", leader.ID, leader.RaftID, victim.ID)
	}
	before, err = cluster.Members(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	for try := 1; try <= 3; try++ {
		exitErr, out, err := victim.StartExit(60 * time.Second)
		if err != nil {
			t.Fatalf("start %d of wiped %s without --rejoin: %v", try, victim.ID, err)
		}
		refusal := lastLineWith(out, "does not start")
		t.Logf("start %d of wiped %s without --rejoin: exit %v: %s", try, victim.ID, exitErr, refusal)
		if exitErr == nil {
			t.Errorf("start %d: the wiped %s exited with status 0; want a non-zero exit", try, victim.ID)
		}
		for _, want := range []string{fmt.Sprintf("coordinator %q does not start", victim.ID), fmt.Sprintf("raft id %d", oldRaft),
			"its disk was lost or replaced", "Restart it with --rejoin"} {
			if !strings.Contains(refusal, want) {
				t.Errorf("start %d: the refusal does not say %q: %q", try, want, refusal)
			}
		}
		for _, bad := range []string{"coordinator ready", "tocommit", "panic", "became leader", "became candidate", "bootstrapping"} {
			if strings.Contains(strings.ToLower(out), bad) {
				t.Errorf("start %d: the wiped %s's output contains %q:\n%s", try, victim.ID, bad, out)
			}
		}
		if ents, _ := filepath.Glob(filepath.Join(victim.DataDir(), "raft", "*.rlog")); len(ents) > 0 {
			t.Errorf("start %d: the wiped %s wrote a raft log %v", try, victim.ID, ents)
		}
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if _, err := cluster.QueryRaw(qctx, victim.GRPC, metricOf(h.c.Edges[0].ID), 0, time.Now().UnixMilli()); err == nil {
			t.Errorf("start %d: the wiped %s answered a query", try, victim.ID)
		}
		cancel()
		after, err := cluster.Members(ctx, leader)
		if err != nil {
			t.Fatal(err)
		}
		if after.LeaderRaftId != before.LeaderRaftId || after.Term != before.Term || len(after.Members) != len(before.Members) {
			t.Errorf("start %d: the members changed: leader %d term %d, %d members; before: leader %d term %d, %d members",
				try, after.LeaderRaftId, after.Term, len(after.Members), before.LeaderRaftId, before.Term, len(before.Members))
		}
		time.Sleep(2 * time.Second)
	}
	// The one documented command.
	started := time.Now()
	victim.Args = append(victim.Args, "--rejoin")
	if err := victim.Start(h.c.Opts.ReadyTimeout); err != nil {
		t.Fatal(err)
	}
	newRaft, err := victim.RefreshRaftID()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s started with --rejoin: raft id %d (was %d)", victim.ID, newRaft, oldRaft)
	if newRaft <= oldRaft {
		t.Errorf("%s rejoined under raft id %d, not a new one above %d", victim.ID, newRaft, oldRaft)
	}
	requireMemberReplaced(t, h, victim, oldRaft, oldStore)
	restoredAt := h.waitEdges("every edge's whole history at RF", 10*time.Minute, func(v cluster.EdgesView) string {
		return h.healthy(v, healRF, true)
	})
	t.Logf("its share back (every edge at RF, lacking nothing) %v after the start with --rejoin", restoredAt.Sub(started).Round(time.Millisecond))
	v, err := h.edges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := loads(v)[victim.ID]; n != len(h.c.Edges) {
		t.Errorf("%s holds %d active replicas, want its share %d (RF %d on 3 coordinators)", victim.ID, n, len(h.c.Edges), healRF)
	}
	time.Sleep(5 * time.Second)
	h.acks.Stop()
	t.Log(h.acks.Summary(time.Time{}, time.Time{}))
	checks := h.settleAndCheck(healRF, 5*time.Minute)
	probes, wrong := h.probe.report(t)
	h.sampler.report(t)
	t.Logf("summary: leader change %v; 3 refused starts; rejoined as raft %d; %d replica stores checked alone, lost %d, duplicated %d, phantom %d; %d answers compared, %d wrong",
		leaderChange, newRaft, len(checks), sumChecks(checks, "lost"), sumChecks(checks, "dup"), sumChecks(checks, "phantom"), probes, wrong)
}

// lastLineWith returns the last line of out containing s, or all of out.
func lastLineWith(out, s string) string {
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return lines[i]
		}
	}
	return out
}

// TestHeal_CoordinatorDownThenBack: a follower is killed and kept down for
// TRIBUTARY_E2E_COORD_DOWN (60 s; make e2e: 30m) while 4 edges write 1,000
// points/s in total, then started again on its disk. Shipping never stops
// (acknowledgements pause at most TRIBUTARY_E2E_HEAL_MAX_ACK_PAUSE), the
// leader marks it down after dead-after, and once back it is marked
// active and caught up: every edge at RF lacking nothing within 10
// minutes, every replica answering every acknowledged point.
func TestHeal_CoordinatorDownThenBack(t *testing.T) {
	down := envDuration(t, "TRIBUTARY_E2E_COORD_DOWN", 60*time.Second)
	maxPause := envDuration(t, "TRIBUTARY_E2E_HEAL_MAX_ACK_PAUSE", 3*time.Second)
	ctx := context.Background()
	h := startHealFleet(t, healOptions{coordinators: 3, edges: 4, series: 5, points: 10, interval: 200 * time.Millisecond})
	time.Sleep(20 * time.Second)
	leader, err := h.c.Leader(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	victim := h.follower(leader)
	killedAt := time.Now()
	victim.Kill()
	t.Logf("killed follower %s with SIGKILL; down for %v; load average %s", victim.ID, down, loadAvg())
	if down > h.o.deadAfter+10*time.Second {
		markedAt := h.waitEdges(victim.ID+" marked down before it is back", min(down-5*time.Second, h.o.deadAfter+60*time.Second), func(v cluster.EdgesView) string {
			for _, ev := range v.Edges {
				for _, r := range ev.Replicas {
					if r.Coordinator == victim.ID && r.State != "down" {
						return fmt.Sprintf("%s: %s", ev.NodeID, replicaLine(ev))
					}
				}
			}
			return ""
		})
		t.Logf("%s marked down %v after the kill (dead-after %v, counted from its last heartbeat, which comes every quarter of it)", victim.ID, markedAt.Sub(killedAt).Round(time.Millisecond), h.o.deadAfter)
	}
	time.Sleep(time.Until(killedAt.Add(down)))
	if err := victim.Start(h.c.Opts.ReadyTimeout); err != nil {
		t.Fatal(err)
	}
	backAt := time.Now()
	caughtAt := h.waitEdges("every edge's whole history at RF again", 10*time.Minute, func(v cluster.EdgesView) string {
		return h.healthy(v, healRF, true)
	})
	caught := caughtAt.Sub(backAt)
	t.Logf("%s back after %v; every edge at RF lacking nothing %v later; load average %s", victim.ID, backAt.Sub(killedAt).Round(time.Millisecond), caught.Round(time.Millisecond), loadAvg())
	time.Sleep(5 * time.Second)
	h.acks.Stop()
	pauses := h.acks.Pauses(time.Time{}, time.Time{})
	t.Log(h.acks.Summary(time.Time{}, time.Time{}))
	if len(pauses) != len(h.c.Edges) {
		t.Errorf("acknowledgements seen for %d of %d edges", len(pauses), len(h.c.Edges))
	}
	if len(pauses) > 0 && pauses[0].Pause > maxPause {
		t.Errorf("shipping stopped: acknowledgements paused %v (%s), over %v", pauses[0].Pause.Round(10*time.Millisecond), pauses[0], maxPause)
	}
	checks := h.settleAndCheck(healRF, 5*time.Minute)
	probes, wrong := h.probe.report(t)
	h.sampler.report(t)
	worst := time.Duration(0)
	if len(pauses) > 0 {
		worst = pauses[0].Pause
	}
	t.Logf("summary: %s down %v; ack pause worst %v; caught up %v after it came back; %d replica stores checked alone, lost %d, duplicated %d, phantom %d; %d answers compared, %d wrong",
		victim.ID, down, worst.Round(10*time.Millisecond), caught.Round(time.Millisecond), len(checks),
		sumChecks(checks, "lost"), sumChecks(checks, "dup"), sumChecks(checks, "phantom"), probes, wrong)
}

// TestHeal_EdgeOffline30Days: an edge whose link to every coordinator is
// cut writes 30 days of history (10 series, a point a minute, timestamps
// from 30 days ago to now), then the link heals and it ships. The
// coordinators run with --replica-retention-raw 960h (40 days: the
// replica's raw retention must cover the delay) and the edge with
// --retention-raw 960h. The cloud ends holding all of it: every replica
// alone answers every point, and its daily counts (rollups) equal the
// ledger's, as does every coordinator's.
func TestHeal_EdgeOffline30Days(t *testing.T) {
	var proxies []*cluster.FaultProxy
	t.Cleanup(func() {
		for _, p := range proxies {
			p.Close()
		}
	})
	ctx := context.Background()
	h := startHealFleet(t, healOptions{coordinators: 3, edges: 1, noLoad: true,
		coordinatorArgs: []string{"--replica-retention-raw", "960h"},
		edgeArgs:        []string{"--retention-raw", "960h"},
		edgeTargets: func(edge string, intakes []string) ([]string, error) {
			var out []string
			for i, in := range intakes {
				p, err := cluster.NewFaultProxy(fmt.Sprintf("%s-to-%d", edge, i), in)
				if err != nil {
					return nil, err
				}
				p.Cut()
				proxies = append(proxies, p)
				out = append(out, p.Listen)
			}
			return out, nil
		}})
	e := h.c.Edge
	const day = 24 * time.Hour
	now := time.Now().Truncate(time.Minute)
	startMs := now.Add(-30 * day).UnixMilli()
	w, err := cluster.NewWriter(cluster.WriterOptions{Addr: e.GRPC, Metric: metricOf(e.ID), Series: 10, PointsPerSeries: 720,
		StepMs: time.Minute.Milliseconds(), StartMs: startMs, RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	h.writers[e.ID] = w
	wrote := time.Now()
	for i := range 60 { // 60 × 12 hours
		if err := w.WriteOnce(ctx); err != nil {
			t.Fatalf("write %d of the history: %v", i, err)
		}
	}
	l := w.Ledger
	t.Logf("wrote %d points (10 series, a point a minute from %s to %s) with the link cut in %v",
		l.Acked(), time.UnixMilli(l.OldestAckedMs()).UTC().Format(time.RFC3339), time.UnixMilli(l.NewestAckedMs()).UTC().Format(time.RFC3339), time.Since(wrote).Round(time.Millisecond))
	if l.Acked() != 30*24*60*10 {
		t.Fatalf("%d points acknowledged, want %d", l.Acked(), 30*24*60*10)
	}
	endMs := l.NewestAckedMs()
	if r, err := cluster.Check(ctx, e.GRPC, metricOf(e.ID), l, 0, endMs); err != nil || !r.OK() {
		t.Fatalf("the edge itself does not answer its history: %v %v", r, err)
	}
	time.Sleep(3 * time.Second) // segments sealed while the link is still cut
	healed := time.Now()
	for _, p := range proxies {
		if err := p.Heal(); err != nil {
			t.Fatal(err)
		}
	}
	h.waitEdges(e.ID+" connected", time.Minute, func(v cluster.EdgesView) string {
		if ev, ok := v.Edge(e.ID); !ok || ev.AckedThrough == 0 {
			return "nothing acknowledged yet"
		}
		return ""
	})
	h.probe = startProber(h)
	t.Cleanup(h.probe.stop)
	heldAt := h.waitEdges("the whole history held", 10*time.Minute, func(v cluster.EdgesView) string {
		ev, _ := v.Edge(e.ID)
		if ev.HeldPoints < uint64(l.Acked()) {
			return fmt.Sprintf("%d of %d points held", ev.HeldPoints, l.Acked())
		}
		return h.healthy(v, healRF, true)
	})
	t.Logf("the link healed; the cloud held all %d points at RF %v later; load average %s", l.Acked(), heldAt.Sub(healed).Round(time.Millisecond), loadAvg())
	time.Sleep(3 * time.Second) // a few more probes of the whole history
	h.acks.Stop()
	// Daily counts, which come from rollups: every replica alone, then every
	// front end, against the ledger.
	want := l.Counts(startMs, endMs, day.Milliseconds())
	v, err := h.edges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := v.Edge(e.ID)
	for _, r := range ev.Replicas {
		co := h.coordinator(r.Coordinator)
		got, err := cluster.ReplicaCounts(ctx, co.Cluster, e.ID, metricOf(e.ID), startMs, endMs, day.Milliseconds())
		if err != nil {
			t.Errorf("replica %s daily counts: %v", co.ID, err)
			continue
		}
		if diffs, n := cluster.DiffCounts(got.Values, want, 5); n > 0 {
			t.Errorf("replica %s alone: %d daily counts differ from the ledger's (source %s): %v", co.ID, n, got.Source, diffs)
		} else {
			t.Logf("replica %s alone: %d series × 31 daily counts equal the ledger's (source %q)", co.ID, len(got.Values), got.Source)
		}
	}
	for _, co := range h.c.Coordinators {
		got, err := cluster.QueryCounts(ctx, co.GRPC, metricOf(e.ID), startMs, endMs, day.Milliseconds())
		if err != nil {
			t.Errorf("%s daily counts: %v", co.ID, err)
			continue
		}
		if diffs, n := cluster.DiffCounts(got.Values, want, 5); n > 0 {
			t.Errorf("%s: %d daily counts differ from the ledger's (source %s, warnings %q): %v", co.ID, n, got.Source, got.Warnings, diffs)
		}
	}
	checks := h.settleAndCheck(healRF, 5*time.Minute)
	probes, wrong := h.probe.report(t)
	h.sampler.report(t)
	t.Logf("summary: 30 days (%d points) written offline, held at RF %v after the link healed; %d replica stores checked alone, lost %d, duplicated %d, phantom %d; daily counts checked on every replica and coordinator; %d answers compared, %d wrong",
		l.Acked(), heldAt.Sub(healed).Round(time.Millisecond), len(checks), sumChecks(checks, "lost"), sumChecks(checks, "dup"), sumChecks(checks, "phantom"), probes, wrong)
}

// TestHeal_ScaleAndReplace: 3 coordinators and 10 edges at 4,000
// points/s; scale to 5 (two members join with --auto-join), back to 3
// (drain, wait until `cluster edges` lists no replica on it, `cluster
// remove`, as documented), then replace a member by removing it first and
// adding the new one after, and another by adding first and removing
// after. After each change the healer's automatic rebalance must bring
// every coordinator's share of active replicas within ±10% of even with
// the whole history at RF; throughout, the placement sampler requires
// every held segment on a live replica not lacking it (no range loses its
// last cloud copy), and nothing acknowledged is lost.
func TestHeal_ScaleAndReplace(t *testing.T) {
	ctx := context.Background()
	h := startHealFleet(t, healOptions{coordinators: 3, maxCoordinators: 8, edges: 10})
	time.Sleep(20 * time.Second)
	var steps []string
	settle := func(what string, begun time.Time) {
		t.Helper()
		ids := h.runningIDs()
		rf := min(healRF, len(ids))
		at := h.waitEdges(what+": balanced within ±10% with the whole history at RF", 10*time.Minute, func(v cluster.EdgesView) string {
			if s := h.healthy(v, rf, true); s != "" {
				return s
			}
			return balanceError(v, ids)
		})
		v, _ := h.edges(ctx)
		step := fmt.Sprintf("%s: settled %v after it began, active replicas %v (load average %s)", what, at.Sub(begun).Round(time.Millisecond), loads(v), loadAvg())
		steps = append(steps, step)
		t.Log(step)
	}
	add := func() *cluster.Coordinator {
		t.Helper()
		co, err := h.c.AddCoordinator()
		if err != nil {
			t.Fatal(err)
		}
		if err := co.Start(h.c.Opts.ReadyTimeout); err != nil {
			t.Fatal(err)
		}
		h.waitVoter(co)
		return co
	}
	remove := func(co *cluster.Coordinator) {
		t.Helper()
		if _, _, err := h.c.Admin(ctx, h.anyOther(co), "drain", co.ID); err != nil {
			t.Fatal(err)
		}
		h.waitEdges("no replica on "+co.ID, 10*time.Minute, func(v cluster.EdgesView) string {
			for _, ev := range v.Edges {
				for _, r := range ev.Replicas {
					if r.Coordinator == co.ID {
						return fmt.Sprintf("%s: %s", ev.NodeID, replicaLine(ev))
					}
				}
			}
			return ""
		})
		leader, err := h.c.Leader(ctx, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if leader == co {
			if _, _, err := h.c.Admin(ctx, leader, "transfer"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second)
			if leader, err = h.c.Leader(ctx, 30*time.Second); err != nil || leader == co {
				t.Fatalf("leadership not handed over from %s: %v", co.ID, err)
			}
		}
		if _, stderr, err := h.c.Admin(ctx, leader, "remove", fmt.Sprint(co.RaftID)); err != nil {
			t.Fatalf("remove %s after draining it: %v", co.ID, err)
		} else if stderr != "" {
			t.Logf("cluster remove %d: %s", co.RaftID, strings.TrimSpace(stderr))
		}
		if err := co.Stop(30 * time.Second); err != nil {
			t.Logf("stop removed %s: %v", co.ID, err)
		}
	}

	begun := time.Now()
	c4, c5 := add(), add()
	settle("scale 3 → 5 ("+c4.ID+", "+c5.ID+" added)", begun)
	begun = time.Now()
	remove(c5)
	remove(c4)
	settle("scale 5 → 3 ("+c5.ID+", "+c4.ID+" drained and removed)", begun)
	begun = time.Now()
	old := h.coordinator("c2")
	remove(old)
	settle("replace, remove first: c2 removed", begun)
	begun = time.Now()
	n1 := add()
	settle("replace, remove first: "+n1.ID+" added", begun)
	begun = time.Now()
	n2 := add()
	settle("replace, add first: "+n2.ID+" added", begun)
	begun = time.Now()
	remove(h.coordinator("c1"))
	settle("replace, add first: c1 removed", begun)

	h.acks.Stop()
	t.Log(h.acks.Summary(time.Time{}, time.Time{}))
	checks := h.settleAndCheck(healRF, 5*time.Minute)
	probes, wrong := h.probe.report(t)
	h.sampler.report(t)
	t.Logf("summary: %s; %d replica stores checked alone, lost %d, duplicated %d, phantom %d; %d answers compared, %d wrong",
		strings.Join(steps, "; "), len(checks), sumChecks(checks, "lost"), sumChecks(checks, "dup"), sumChecks(checks, "phantom"), probes, wrong)
}

// runningIDs lists the running coordinators' ids.
func (h *healFleet) runningIDs() []string {
	var ids []string
	for _, co := range h.c.Coordinators {
		if co.Running() {
			ids = append(ids, co.ID)
		}
	}
	return ids
}

// anyOther returns a running coordinator other than co.
func (h *healFleet) anyOther(co *cluster.Coordinator) *cluster.Coordinator {
	for _, o := range h.c.Coordinators {
		if o != co && o.Running() {
			return o
		}
	}
	h.t.Fatalf("no running coordinator besides %s", co.ID)
	return nil
}

// waitVoter waits until the leader lists co as a voter that registered.
func (h *healFleet) waitVoter(co *cluster.Coordinator) {
	h.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		leader, err := h.c.Leader(context.Background(), 10*time.Second)
		if err == nil {
			m, err := cluster.Members(context.Background(), leader)
			if err == nil && slices.ContainsFunc(m.Members, func(mem *clusterMember) bool {
				return mem.RaftId == co.RaftID && mem.NodeId == co.ID && !mem.Learner
			}) {
				return
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s (raft %d) is not a voter 2 minutes after it started: %v", co.ID, co.RaftID, err)
		}
		time.Sleep(time.Second)
	}
}

// clusterMember is a raft member as ClusterService/Members lists it.
type clusterMember = pb.Member
