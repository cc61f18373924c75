package fanoutbench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/tick"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Failover timing.
const (
	probeEvery = 100 * time.Millisecond // the writer's period
	pollEvery  = 50 * time.Millisecond  // acked-through polling
	// settle is how long the window of a kill lasts after the killed
	// coordinator is back with a leader in view, so that a stall while it
	// rejoins is seen too.
	settle = 3 * time.Second
)

// advanceLog records when the edge's acked-through sequence moved.
type advanceLog struct {
	mu    sync.Mutex
	times []time.Time
	last  uint64
	err   error // the last failed poll
}

func (l *advanceLog) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

func (l *advanceLog) lastErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *advanceLog) observe(at time.Time, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq > l.last {
		l.last = seq
		l.times = append(l.times, at)
	}
}

func (l *advanceLog) snapshot() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.times...)
}

// firstAfter reports whether the log has an advance after t.
func (l *advanceLog) firstAfter(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.times) > 0 && l.times[len(l.times)-1].After(t)
}

// worstPause is the longest time replication made no progress in the window
// of one kill: from the kill to the first advance after it, and between
// consecutive advances up to end. With no advance in the window it is
// end - kill.
func worstPause(advances []time.Time, kill, end time.Time) time.Duration {
	prev, seen := kill, false
	var worst time.Duration
	for _, a := range advances {
		if !a.After(kill) {
			continue
		}
		if a.After(end) {
			break
		}
		worst, prev, seen = max(worst, a.Sub(prev)), a, true
	}
	if !seen {
		return end.Sub(kill)
	}
	return worst
}

// failover keeps a writer and a poller on the first edge, SIGKILLs the raft
// leader Kills times, restarting it at once each time, and records the
// worst pause in the edge's acknowledged-through progress per kill.
func (r *runner) failover(ctx context.Context) error {
	if r.o.Kills == 0 {
		return nil
	}
	edge := r.c.edges[0]
	conn, err := nodeclient.Dial(edge.grpcAddr)
	if err != nil {
		return err
	}
	defer conn.Close()

	bgCtx, stopBg := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer func() { stopBg(); bg.Wait() }()
	pw := &probeWriter{wc: tributaryv1.NewWriteServiceClient(conn), edge: edge.Name, callTimeout: r.o.CallTimeout}
	bg.Go(func() { pw.run(bgCtx) })
	var adv advanceLog
	bg.Go(func() { r.poll(bgCtx, edge, &adv) })

	// Replication must be moving before the first kill.
	start := time.Now()
	if err := tick.Until(ctx, pollEvery, r.o.ReplicationTimeout, func() bool { return adv.firstAfter(start) }); err != nil {
		return fmt.Errorf("wait for %s's acked-through sequence to advance: %w (last poll error: %v)", edge.Name, err, adv.lastErr())
	}
	for k := range r.o.Kills {
		if err := r.killLeader(ctx, k, edge, &adv); err != nil {
			return err
		}
	}
	stopBg()
	bg.Wait()
	r.m.probes = pw.probes
	if len(pw.errs) > 0 {
		return fmt.Errorf("the edge refused %d probe writes during failover, e.g.: %w", len(pw.errs), pw.errs[0])
	}
	return nil
}

// probeWriter writes one point every probeEvery to an edge, never pausing,
// and counts the writes it acknowledged and the errors.
type probeWriter struct {
	wc          tributaryv1.WriteServiceClient
	edge        string
	callTimeout time.Duration

	mu     sync.Mutex
	errs   []error
	probes int64
}

// run writes until ctx ends.
func (pw *probeWriter) run(ctx context.Context) {
	series := &tributaryv1.Series{Labels: []*tributaryv1.Label{
		{Name: "__name__", Value: "fanout_probe"}, {Name: "edge", Value: pw.edge}}}
	tick.Every(ctx, probeEvery, func(now time.Time) bool {
		req := &tributaryv1.WriteRequest{Batches: []*tributaryv1.SeriesBatch{{Series: series,
			TimestampsMs: []int64{now.UnixMilli()}, Values: []float64{float64(now.UnixMilli() % 1000)}}}}
		cctx, cancel := context.WithTimeout(ctx, pw.callTimeout)
		resp, err := pw.wc.Write(cctx, req)
		cancel()
		if err == nil {
			err = nodeclient.CheckWrite(resp, 1)
		}
		pw.mu.Lock()
		if err != nil && ctx.Err() == nil {
			pw.errs = append(pw.errs, err)
		} else if err == nil {
			pw.probes++
		}
		pw.mu.Unlock()
		return true
	})
}

// poll records edge's acknowledged-through sequence in adv every
// pollEvery until ctx ends.
func (r *runner) poll(ctx context.Context, edge *proc, adv *advanceLog) {
	tick.Every(ctx, pollEvery, func(time.Time) bool {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		seq, err := r.c.ackedThrough(cctx, edge)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				adv.failed(err)
			}
			return true
		}
		adv.observe(time.Now(), seq)
		return true
	})
}

// killLeader kills the raft leader (kill number k), restarts it at once,
// waits for the edge's replication to advance and the restarted member to
// see a leader, and records the worst pause of the edge's progress.
func (r *runner) killLeader(ctx context.Context, k int, edge *proc, adv *advanceLog) error {
	f, _, err := r.c.waitFleet(ctx, 100*time.Millisecond, r.o.ReplicationTimeout, "a raft leader",
		func(f fleet) bool { return f.Raft.Leader != 0 })
	if err != nil {
		return err
	}
	var leader *proc
	for _, p := range r.c.coords {
		if p.raftID == f.Raft.Leader {
			leader = p
		}
	}
	if leader == nil {
		return fmt.Errorf("the raft leader %d is not one of the coordinators started", f.Raft.Leader)
	}
	r.logger.Info("killing the raft leader", "kill", k+1, "coordinator", leader.Name)
	kill := time.Now()
	if err := leader.Kill(); err != nil {
		return err
	}
	// Restart at once, as a supervisor would: while a coordinator of
	// an edge's placement is down, the others refuse its segments.
	if err := leader.Start(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	r.m.restarts = append(r.m.restarts, time.Since(kill))
	if err := tick.Until(ctx, pollEvery, r.o.ReplicationTimeout, func() bool { return adv.firstAfter(kill) }); err != nil {
		r.m.gaps = append(r.m.gaps, time.Since(kill))
		return fmt.Errorf("after killing and restarting %s, %s's replication did not advance: %w", leader.Name, edge.Name, err)
	}
	if err := tick.Until(ctx, pollEvery, r.o.ReplicationTimeout, func() bool {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		f, err := r.c.fleetOf(cctx, leader)
		return err == nil && f.Raft.Leader != 0
	}); err != nil {
		return fmt.Errorf("restarted %s sees no leader: %w", leader.Name, err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(settle):
	}
	gap := worstPause(adv.snapshot(), kill, time.Now())
	r.logger.Info("failover", "kill", k+1, "coordinator", leader.Name, "gap_s", gap.Seconds())
	r.m.gaps = append(r.m.gaps, gap)
	return nil
}
