package fleetbench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/tick"
	"github.com/tributarydb/tributary/replicator"
)

// The execution of one run: the simulated edges, their generators and the
// poller that finds their acknowledgements, and the phases of the run
// (warm-up, measured window, settle). What the window saw is kept by a
// window (window.go), which turns it into the run's figures.

// edge is one simulated edge of a run.
type edge struct {
	src     *edgeSource
	shipper *replicator.Shipper

	mu      sync.Mutex
	pending []pendingSeg // sealed, not yet released, ascending seq
	lastTo  int64        // end of the last segment's samples (ms)
	acked   bool         // at least one segment released
}

type pendingSeg struct {
	seq    uint64
	points int64
	at     time.Time
}

// release moves the segments below retainFrom out of pending, calling fn
// with each.
func (e *edge) release(retainFrom uint64, fn func(pendingSeg)) {
	e.mu.Lock()
	i := 0
	for i < len(e.pending) && e.pending[i].seq < retainFrom {
		fn(e.pending[i])
		i++
	}
	if i > 0 {
		e.pending = e.pending[i:]
		e.acked = true
	}
	e.mu.Unlock()
	if i > 0 {
		e.src.Release(retainFrom)
	}
}

// fleet is the running edges of one run: each edge's Shipper, a generator
// per edge sealing its segments, and one poller. stop ends them all.
type fleet struct {
	o       Options
	edges   []*edge
	w       window
	runErrs chan error // a Shipper or a generator failed

	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// startFleet starts n edges shipping to the coordinators at intakes.
func startFleet(ctx context.Context, o Options, n int, dir string, intakes []string) (*fleet, error) {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	f := &fleet{o: o, edges: make([]*edge, n), runErrs: make(chan error, n)}
	startMs := time.Now().UnixMilli()
	for i := range f.edges {
		id := fmt.Sprintf("fleet-%04d", i)
		// Each edge lists the coordinators from a different first one, so
		// that the streams spread over them as a real fleet's do.
		targets := append(slices.Clone(intakes[i%len(intakes):]), intakes[:i%len(intakes)]...)
		sh, err := replicator.New(replicator.Options{Targets: targets, Insecure: true,
			CursorPath: filepath.Join(dir, "cursors", id+".cursor"), FS: fewFDs{}, Logger: quiet, SoftwareVersion: "tribench-fleet"})
		if err != nil {
			return nil, fmt.Errorf("edge %s: %w", id, err)
		}
		f.edges[i] = &edge{src: newEdgeSource(id, o.SeriesPerEdge), shipper: sh, lastTo: startMs}
	}
	f.ctx, f.cancel = context.WithCancel(ctx)
	for _, e := range f.edges {
		f.wg.Go(func() {
			if err := e.shipper.Run(f.ctx, e.src); err != nil && f.ctx.Err() == nil {
				f.runErrs <- fmt.Errorf("edge %s: shipper: %w", e.src.id, err)
			}
		})
	}
	// The edges' phases spread evenly over the seal period.
	for i, e := range f.edges {
		f.wg.Go(func() { f.generate(e, o.SealEvery*time.Duration(i)/time.Duration(n)) })
	}
	f.wg.Go(f.poll)
	return f, nil
}

// stop ends the edges and waits for them. Safe to call more than once.
func (f *fleet) stop() {
	f.stopOnce.Do(func() {
		f.cancel()
		f.wg.Wait()
	})
}

// generate seals a segment of e every SealEvery, from phase on.
func (f *fleet) generate(e *edge, phase time.Duration) {
	intervalMs := f.o.Interval.Milliseconds()
	select {
	case <-f.ctx.Done():
		return
	case <-time.After(phase):
	}
	tick.Every(f.ctx, f.o.SealEvery, func(now time.Time) bool {
		to := now.UnixMilli()
		if (to/intervalMs)*intervalMs <= e.lastTo {
			return true
		}
		info, err := e.src.Seal(e.lastTo, to, intervalMs, now)
		if err != nil {
			f.runErrs <- err
			return false
		}
		e.mu.Lock()
		e.lastTo = (to / intervalMs) * intervalMs
		e.pending = append(e.pending, pendingSeg{seq: info.Seq, points: info.Points, at: now})
		e.mu.Unlock()
		f.w.sealed(now, info.Points)
		return true
	})
}

// poll reads every Shipper's RetainFrom each PollInterval; a segment is
// acknowledged at the first poll that finds it released.
func (f *fleet) poll() {
	tick.Every(f.ctx, f.o.PollInterval, func(now time.Time) bool {
		for _, e := range f.edges {
			e.release(e.shipper.RetainFrom(), func(p pendingSeg) { f.w.acked(now, p) })
		}
		return true
	})
}

// wait returns after d, or the first failure of an edge, or the end of
// the run's context.
func (f *fleet) wait(d time.Duration) error {
	select {
	case err := <-f.runErrs:
		return err
	case <-f.ctx.Done():
		return f.ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// warmUp waits until every edge has connected and had a segment
// acknowledged.
func (f *fleet) warmUp(timeout time.Duration) error {
	start := time.Now()
	for {
		all := 0
		for _, e := range f.edges {
			e.mu.Lock()
			if e.acked {
				all++
			}
			e.mu.Unlock()
		}
		if all == len(f.edges) {
			return nil
		}
		if time.Since(start) > timeout {
			return fmt.Errorf("warm-up: %d of %d edges had a segment acknowledged after %v", all, len(f.edges), timeout)
		}
		if err := f.wait(200 * time.Millisecond); err != nil {
			return err
		}
	}
}

// measurement is what the measured window sampled besides the window's
// own counts: the coordinators before and after, this process's CPU and
// the machine's load.
type measurement struct {
	before, after []coordSample
	cpu0, cpu1    time.Duration
	load          [2]float64
	elapsed       float64 // seconds
}

// measure opens the window, waits d, and closes it.
func (f *fleet) measure(cs []*coord, d time.Duration) (measurement, error) {
	var m measurement
	hc := &http.Client{Timeout: 10 * time.Second}
	var err error
	if m.before, err = sampleAll(f.ctx, cs, hc); err != nil {
		return m, err
	}
	m.cpu0, m.load[0] = selfCPU(), report.LoadAverage1m()
	f.w.open(time.Now())
	if err := f.wait(d); err != nil {
		return m, err
	}
	m.elapsed = f.w.close(time.Now()).Seconds()
	if m.after, err = sampleAll(f.ctx, cs, hc); err != nil {
		return m, err
	}
	m.cpu1, m.load[1] = selfCPU(), report.LoadAverage1m()
	return m, nil
}

// settle waits until every segment sealed in the window is released, at
// most timeout; those still pending then count as unresolved.
func (f *fleet) settle(timeout time.Duration) {
	end := time.Now().Add(timeout)
	for {
		var left []pendingSeg
		for _, e := range f.edges {
			e.mu.Lock()
			for _, p := range e.pending {
				if f.w.sealedIn(p.at) {
					left = append(left, p)
				}
			}
			e.mu.Unlock()
		}
		if len(left) == 0 {
			return
		}
		if now := time.Now(); now.After(end) {
			f.w.unresolved(now, left)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// shipperTotals sums the edges' Shipper statistics.
func (f *fleet) shipperTotals() shipperTotals {
	var t shipperTotals
	for _, e := range f.edges {
		st := e.shipper.Stats()
		t.gapPoints += st.GapPoints
		t.refusals += st.Refusals
		t.shippedBytes += st.ShippedBytes
		t.shippedPoints += st.ShippedPoints
	}
	return t
}
