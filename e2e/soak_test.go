package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
)

// TestSoak_RandomFaults runs the writer for TRIBUTARY_E2E_SOAK (a
// duration; unset: skipped, make soak sets it) against three coordinators
// and edge-1, whose links to the intakes go through fault proxies, and
// injects a random fault every TRIBUTARY_E2E_SOAK_EVERY (20s): edge kill
// -9, leader kill -9, a link cut, a paused coordinator (SIGSTOP), a slow
// link. After each one a segment must be acknowledged again within a
// minute; at the end every coordinator must answer every acknowledged
// point exactly once, and a writer that held less than 90% of its target
// makes the run INVALID. TRIBUTARY_E2E_SOAK_SEED fixes the fault sequence.
func TestSoak_RandomFaults(t *testing.T) {
	if os.Getenv("TRIBUTARY_E2E_SOAK") == "" {
		t.Skip("the soak runs with TRIBUTARY_E2E_SOAK=<duration> (make soak DURATION=...)")
	}
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	duration := envDuration(t, "TRIBUTARY_E2E_SOAK", time.Hour)
	every := envDuration(t, "TRIBUTARY_E2E_SOAK_EVERY", 20*time.Second)
	seed := uint64(envInt(t, "TRIBUTARY_E2E_SOAK_SEED", int(time.Now().UnixNano()%1_000_000)))
	rng := rand.New(rand.NewPCG(seed, seed))
	t.Logf("soak: %v, a fault every %v, seed %d (TRIBUTARY_E2E_SOAK_SEED)", duration, every, seed)

	var proxies []*cluster.FaultProxy
	c, err := cluster.New(cluster.Options{Bin: bin, Dir: t.TempDir(),
		EdgeArgs: []string{"--replication-backoff-max", "1s", "--replication-ack-timeout", "5s"},
		EdgeTargets: func(intakes []string) ([]string, error) {
			var out []string
			for i, in := range intakes {
				p, err := cluster.NewFaultProxy(fmt.Sprintf("intake-c%d", i+1), in)
				if err != nil {
					return nil, err
				}
				proxies = append(proxies, p)
				out = append(out, p.Listen)
			}
			return out, nil
		}})
	for _, p := range proxies {
		t.Cleanup(p.Close)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	cluster.ReportOnFailure(t, 30, c.Processes()...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w, startMs := startFaultLoad(t, c)

	counts := map[string]int{}
	var recoveries []time.Duration
	fail := func(format string, args ...any) {
		t.Helper()
		w.Stop()
		t.Fatalf(format, args...)
	}
	end := time.Now().Add(duration)
	for n := 1; time.Now().Add(every).Before(end); n++ {
		time.Sleep(every)
		f, _, err := c.AnyFleet(ctx)
		if err != nil {
			fail("fault %d: %v", n, err)
		}
		before := edgeOf(f, c.Edge.ID).AckedThrough
		began := time.Now()
		var what, detail string
		switch k := rng.IntN(5); k {
		case 0:
			what = "edge kill -9"
			c.Edge.Kill()
			if err := c.Edge.Start(c.Opts.ReadyTimeout); err != nil {
				fail("fault %d: restart %s: %v", n, c.Edge.ID, err)
			}
		case 1:
			leader, err := c.Leader(ctx, 30*time.Second)
			if err != nil {
				fail("fault %d: %v", n, err)
			}
			down := time.Duration(rng.IntN(5000)) * time.Millisecond
			what, detail = "leader kill -9", fmt.Sprintf("%s down %v", leader.ID, down)
			leader.Kill()
			time.Sleep(down)
			if err := leader.Start(c.Opts.ReadyTimeout); err != nil {
				fail("fault %d: restart %s: %v", n, leader.ID, err)
			}
		case 2:
			cut := time.Duration(2000+rng.IntN(13000)) * time.Millisecond
			what, detail = "link cut", fmt.Sprintf("for %v", cut)
			for _, p := range proxies {
				p.Cut()
			}
			time.Sleep(cut)
			for _, p := range proxies {
				if err := p.Heal(); err != nil {
					fail("fault %d: heal: %v", n, err)
				}
			}
		case 3:
			co := c.Coordinators[rng.IntN(len(c.Coordinators))]
			pause := time.Duration(2000+rng.IntN(8000)) * time.Millisecond
			what, detail = "coordinator paused", fmt.Sprintf("%s for %v", co.ID, pause)
			pid := co.PID()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				fail("fault %d: SIGSTOP %s: %v", n, co.ID, err)
			}
			time.Sleep(pause)
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				fail("fault %d: SIGCONT %s: %v", n, co.ID, err)
			}
		case 4:
			what, detail = "slow link", "300±100 ms for 5s"
			for _, p := range proxies {
				if err := p.AddToxic("soak-latency", "latency", "upstream", map[string]any{"latency": 300, "jitter": 100}); err != nil {
					fail("fault %d: %v", n, err)
				}
			}
			time.Sleep(5 * time.Second)
			for _, p := range proxies {
				if err := p.RemoveToxic("soak-latency"); err != nil {
					fail("fault %d: %v", n, err)
				}
			}
		}
		counts[what]++
		if _, err := c.WaitFleet(ctx, time.Minute, func(f cluster.Fleet) bool { return edgeOf(f, c.Edge.ID).AckedThrough > before }); err != nil {
			fail("fault %d (%s): no segment of %s acknowledged within a minute: %v", n, what, c.Edge.ID, err)
		}
		rec := time.Since(began)
		recoveries = append(recoveries, rec)
		t.Logf("fault %d: %s %s; a segment acknowledged again %v after it began", n, what, detail, rec.Round(time.Millisecond))
	}
	st := w.Stop()
	written := float64(st.Acked+st.InDoubt) / st.Elapsed.Seconds()
	t.Logf("load: %d requests in %v, %.0f points/s written (target %.0f); %d acknowledged, %d in doubt, %d requests failed (edge restarts)",
		st.Requests, st.Elapsed.Round(time.Second), written, target(faultLoad), st.Acked, st.InDoubt, st.Failed)
	if written < 0.9*target(faultLoad) {
		t.Errorf("INVALID run: the writer held %.0f points/s, below 90%% of its target %.0f", written, target(faultLoad))
	}
	tot := checkCloudAfterFaults(t, c, w.Ledger, st, startMs)
	var kinds []string
	for k, v := range counts {
		kinds = append(kinds, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(kinds)
	sort.Slice(recoveries, func(i, j int) bool { return recoveries[i] < recoveries[j] })
	var p50, worst time.Duration
	if len(recoveries) > 0 {
		p50, worst = recoveries[len(recoveries)/2], recoveries[len(recoveries)-1]
	}
	t.Logf("summary: soak %v (seed %d), load %.0f points/s, faults %s, %d points acknowledged, over %d coordinators lost %d, duplicated %d, phantom %d; recovery median %v, worst %v",
		duration, seed, written, strings.Join(kinds, ", "), st.Acked, tot.checked, tot.lost, tot.dup, tot.phantom, p50.Round(time.Millisecond), worst.Round(time.Millisecond))
}
