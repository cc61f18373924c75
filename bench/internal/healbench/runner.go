package healbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/tick"
	"github.com/tributarydb/tributary/internal/ackwatch"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// copiedBytesMetric counts the segment bytes repairs copied into a
// coordinator's replica store (a copy's bytes once it is done);
// copiesRunningMetric is the number of repair copies running.
const (
	copiedBytesMetric   = "tributary_heal_copied_bytes_total"
	copiesRunningMetric = "tributary_heal_copies_running"
)

// ackedThroughMetric is an edge's newest segment the cloud acknowledged
// contiguously.
const ackedThroughMetric = "tributary_replication_acked_through_seq"

// runner carries one run's state.
type runner struct {
	o      Options
	f      *fleet
	logger *slog.Logger
	m      measurement

	ledgers map[string]*ledger // by edge

	stopLoad     context.CancelFunc
	loadDone     sync.WaitGroup
	loadErrMu    sync.Mutex
	loadErr      error
	stopWatch    context.CancelFunc
	watchDone    sync.WaitGroup
	watchOnce    sync.Once
	victim       *proc
	victimStore  string
	victimActive bool // the catalog registered the victim's new store

	acks *ackwatch.Watch // every edge's acked-through gauge

	mu sync.Mutex
}

func (r *runner) run(ctx context.Context) error {
	o := r.o
	r.ledgers = map[string]*ledger{}
	for _, e := range r.f.edges {
		r.ledgers[e.Name] = newLedger(o.SeriesPerEdge)
	}
	r.logger.Info("starting coordinators", "n", len(r.f.coords))
	if err := nodeproc.StartAll(ctx, r.f.coords); err != nil {
		return err
	}
	r.logger.Info("starting edges", "n", len(r.f.edges))
	if err := nodeproc.StartAll(ctx, r.f.edges); err != nil {
		return err
	}
	if err := r.loadHistory(ctx); err != nil {
		return fmt.Errorf("load history: %w", err)
	}
	r.startLoad()
	r.startWatchers()
	if _, err := waitFor(ctx, time.Second, time.Minute, "every edge placed on RF replicas", func(ctx context.Context) string {
		v, err := r.edges(ctx)
		if err != nil {
			return err.Error()
		}
		return r.healthy(ctx, v, false)
	}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.Warm):
	}
	if err := r.fault(ctx); err != nil {
		return err
	}
	r.m.measured = true
	time.Sleep(5 * time.Second) // acknowledgements after the heal count too
	r.stopLoadAndWait()
	r.m.loadStopped = time.Now()
	r.stopWatchers()
	if ps := r.acks.Pauses(time.Time{}, time.Time{}); len(ps) > 0 {
		r.m.ackPause, r.m.ackPauseEdge = ps[0].Pause, ps[0].Edge
	}
	r.m.failedScrapes += r.acks.Errors()
	var errs []error
	if err := r.loadError(); err != nil {
		errs = append(errs, err)
	}
	if err := r.settle(ctx); err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, r.checkReplicas(ctx), r.checkFronts(ctx))
	if r.m.restoreCmd && errors.Join(errs...) == nil {
		errs = append(errs, r.restoreEdge(ctx))
	}
	return errors.Join(errs...)
}

// loadHistory writes History to every edge, all edges at once, and waits
// until the catalog holds every acknowledged point.
func (r *runner) loadHistory(ctx context.Context) error {
	o := r.o
	if o.History == 0 {
		return nil
	}
	start := time.Now()
	endMs := time.Now().Add(-time.Minute).UnixMilli()
	stepMs := o.HistoryStep.Milliseconds()
	n := int(o.History / o.HistoryStep)
	firstMs := endMs - int64(n)*stepMs
	var wg sync.WaitGroup
	errs := make([]error, len(r.f.edges))
	for i, e := range r.f.edges {
		wg.Go(func() {
			conn, err := dial(e.grpc)
			if err != nil {
				errs[i] = err
				return
			}
			defer conn.Close()
			wc := pb.NewWriteServiceClient(conn)
			for k := 0; k < n && ctx.Err() == nil; k += o.HistoryBatch {
				cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
				err := write(cctx, wc, e.Name, r.ledgers[e.Name], firstMs+int64(k)*stepMs, stepMs, min(o.HistoryBatch, n-k))
				cancel()
				if err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.m.historyWrite = time.Since(start)
	for _, l := range r.ledgers {
		r.m.historyPoints += l.acked()
	}
	r.logger.Info("history written; waiting for the cloud to hold it", "points", r.m.historyPoints, "took", r.m.historyWrite.Round(time.Millisecond))
	err := r.waitHeldAll(ctx, "the cloud holds the history")
	r.m.historyReplicated = time.Since(start)
	return err
}

// waitHeldAll waits (up to LoadTimeout) until heldAll finds every
// acknowledged point held; what names the wait in its error.
func (r *runner) waitHeldAll(ctx context.Context, what string) error {
	_, err := waitFor(ctx, time.Second, r.o.LoadTimeout, what, r.heldAll)
	return err
}

// heldAll says which edge the catalog does not yet credit with every
// acknowledged point on RF replicas lacking nothing ("" when none).
func (r *runner) heldAll(ctx context.Context) string {
	v, err := r.edges(ctx)
	if err != nil {
		return err.Error()
	}
	for _, e := range r.f.edges {
		ev := edgeInfo(v, e.Name)
		if ev == nil {
			return e.Name + " is not in the catalog"
		}
		if want := r.ledgers[e.Name].acked(); int64(ev.HeldPoints) < want {
			return fmt.Sprintf("%s: %d of %d points held", e.Name, ev.HeldPoints, want)
		}
	}
	return r.healthy(ctx, v, true)
}

// startLoad starts one steady writer per edge.
func (r *runner) startLoad() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stopLoad = cancel
	o := r.o
	stepMs := o.Interval.Milliseconds() / int64(o.PointsPerWrite)
	r.m.loadStarted = time.Now()
	for _, e := range r.f.edges {
		r.loadDone.Go(func() {
			conn, err := dial(e.grpc)
			if err != nil {
				r.setLoadErr(err)
				return
			}
			defer conn.Close()
			wc := pb.NewWriteServiceClient(conn)
			l := r.ledgers[e.Name]
			_, last := l.span()
			next := max(time.Now().UnixMilli(), last+stepMs)
			tick.Paced(ctx, o.Interval, func() bool {
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				err := write(cctx, wc, e.Name, l, next, stepMs, o.PointsPerWrite)
				ccancel()
				next += int64(o.PointsPerWrite) * stepMs
				if err != nil && ctx.Err() == nil {
					r.setLoadErr(err)
				}
				return true
			})
		})
	}
}

func (r *runner) setLoadErr(err error) {
	r.loadErrMu.Lock()
	defer r.loadErrMu.Unlock()
	if r.loadErr == nil {
		r.loadErr = err
	}
	r.m.failedWrites++
}

func (r *runner) loadError() error {
	r.loadErrMu.Lock()
	defer r.loadErrMu.Unlock()
	if r.loadErr != nil {
		return fmt.Errorf("%d writes failed (the edges write locally; coordinators do not matter), the first: %w", r.m.failedWrites, r.loadErr)
	}
	return nil
}

func (r *runner) stopLoadAndWait() {
	if r.stopLoad != nil {
		r.stopLoad()
		r.loadDone.Wait()
	}
}

// startWatchers starts the acknowledgement watch, the query prober and the
// copy sampler.
func (r *runner) startWatchers() {
	ctx, cancel := context.WithCancel(context.Background())
	r.stopWatch = cancel
	sources := make([]ackwatch.Source, len(r.f.edges))
	for i, e := range r.f.edges {
		sources[i] = ackwatch.Source{ID: e.Name, Read: func(ctx context.Context) (float64, bool, error) {
			v, err := gauge(ctx, e.http, ackedThroughMetric)
			return v, err == nil, err
		}}
	}
	r.acks = ackwatch.Start(r.o.AckPoll, sources...)
	r.watchDone.Go(func() { r.probe(ctx) })
	r.watchDone.Go(func() { r.watchCopies(ctx) })
}

func (r *runner) stopWatchers() {
	r.watchOnce.Do(func() {
		if r.stopWatch != nil {
			r.stopWatch()
			r.watchDone.Wait()
			r.acks.Stop()
		}
	})
}

// watchCopies samples the restarted coordinator's copied bytes.
func (r *runner) watchCopies(ctx context.Context) {
	tick.Every(ctx, 250*time.Millisecond, func(time.Time) bool {
		r.mu.Lock()
		v := r.victim
		r.mu.Unlock()
		if v == nil || !v.Running() {
			return true
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		m, err := metricsOf(cctx, v.http)
		cancel()
		b, ok := m[copiedBytesMetric]
		if err != nil || !ok {
			return true
		}
		// The copied bytes count a copy once it is done: the first copy
		// starts when a copy is first seen running (a binary without the
		// gauge: when the first is done).
		started := b > 0 || m[copiesRunningMetric] > 0
		now := time.Now()
		r.mu.Lock()
		if started && r.m.firstCopy.IsZero() {
			r.m.firstCopy = r.m.lastNoCopy
		}
		if !started {
			r.m.lastNoCopy = now
		}
		if b > r.m.copiedBytes {
			r.m.copiedBytes, r.m.lastCopy = b, now
		}
		r.mu.Unlock()
		return true
	})
}

// probe compares a query answer with the ledger every second: one
// running coordinator's front end, one edge, a window of acknowledged
// history (the oldest tenth every other time: what a replaced replica
// gets back last).
func (r *runner) probe(ctx context.Context) {
	i := 0
	tick.Every(ctx, time.Second, func(time.Time) bool {
		i++
		return r.probeOnce(ctx, i-1)
	})
}

// probeOnce is probe's i-th comparison; it returns false once ctx has
// ended.
func (r *runner) probeOnce(ctx context.Context, i int) bool {
	var cos []*proc
	for _, c := range r.f.coords {
		if c.Running() {
			cos = append(cos, c)
		}
	}
	if len(cos) == 0 {
		return true
	}
	co := cos[i%len(cos)]
	e := r.f.edges[(i/len(cos))%len(r.f.edges)]
	l := r.ledgers[e.Name]
	first, last := l.span()
	if last == 0 {
		return true
	}
	span := min((last-first)/10, (10 * time.Minute).Milliseconds())
	from := first
	if i%2 == 1 {
		from = first + rand.Int64N(last-first-span+1)
	}
	to := from + span
	conn, err := dial(co.grpc)
	if err != nil {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ans, warnings, err := queryFront(cctx, pb.NewQueryServiceClient(conn), e.Name, from, to)
	cancel()
	conn.Close()
	if ctx.Err() != nil {
		return false
	}
	r.mu.Lock()
	r.m.probes++
	if err != nil {
		r.m.probeErrors++
		r.mu.Unlock()
		return true
	}
	v := l.check(ans, from, to)
	switch {
	case v.duplicated+v.phantom+v.wrongValue > 0 || (v.lost > 0 && len(warnings) == 0):
		r.m.wrong++
		if len(r.m.wrongSamples) < 5 {
			r.m.wrongSamples = append(r.m.wrongSamples, fmt.Sprintf("%s about %s [%d, %d]: %v, warnings %q", co.Name, e.Name, from, to, v, warnings))
		}
	case v.lost > 0:
		r.m.flagged++
	case len(warnings) > 0:
		r.m.falseAlarms++
	}
	r.mu.Unlock()
	return true
}

// fault kills the victim, deletes its data directory, restarts it with
// --rejoin after RestartDelay and measures the heal.
func (r *runner) fault(ctx context.Context) error {
	o := r.o
	v, err := r.pickVictim(ctx)
	if err != nil {
		return err
	}
	store, err := r.storeOf(ctx, v.Name)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.victimStore = store
	r.mu.Unlock()
	r.logger.Info("killing the victim and deleting its data directory", "coordinator", v.Name, "role", o.Victim)
	r.m.loadAtKill = loadAvg()
	killed := time.Now()
	v.Kill()
	if err := os.RemoveAll(v.Opts.DataDir); err != nil {
		return fmt.Errorf("delete %s's data directory: %w", v.Name, err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(killed.Add(o.RestartDelay))):
	}
	v.Opts.ExtraArgs = append(v.Opts.ExtraArgs, "--rejoin")
	if st, err := os.Stat(v.Opts.LogPath); err == nil {
		r.m.victimLogFrom = st.Size() // its copies are logged after this
	}
	if err := v.Start(ctx); err != nil {
		return err
	}
	r.m.restarted = time.Since(killed)
	r.mu.Lock()
	r.victim = v
	r.mu.Unlock()
	at, err := waitFor(ctx, 250*time.Millisecond, o.DeadAfter+60*time.Second+5*time.Minute, "every edge at RF healthy replicas", r.healthyEdges(false))
	if err != nil {
		return err
	}
	r.m.replaced = at.Sub(killed)
	r.logger.Info("every edge at RF healthy replicas", "after", r.m.replaced.Round(time.Millisecond))
	at, err = waitFor(ctx, 250*time.Millisecond, o.HealTimeout, "every edge's history at RF", r.healthyEdges(true))
	if err != nil {
		return err
	}
	r.m.restored = at.Sub(killed)
	r.m.restoredAt = at
	r.m.loadAtRestored = loadAvg()
	if b, err := os.ReadFile(v.Opts.LogPath); err == nil && int64(len(b)) >= r.m.victimLogFrom {
		r.m.copies = parseCopies(string(b[r.m.victimLogFrom:]))
	}
	r.logger.Info("every edge's history at RF", "after", r.m.restored.Round(time.Millisecond))
	return nil
}

// pickVictim finds the leader, or a follower.
func (r *runner) pickVictim(ctx context.Context) (*proc, error) {
	for _, c := range r.f.coords {
		conn, err := dial(c.grpc)
		if err != nil {
			continue
		}
		m, err := pb.NewClusterServiceClient(conn).Members(ctx, &pb.MembersRequest{})
		conn.Close()
		if err != nil || m.LeaderRaftId == 0 {
			continue
		}
		var leader string
		for _, mem := range m.Members {
			if mem.RaftId == m.LeaderRaftId {
				leader = mem.NodeId
			}
		}
		for _, p := range r.f.coords {
			if (r.o.Victim == "leader") == (p.Name == leader) {
				return p, nil
			}
		}
	}
	return nil, errors.New("find the victim: no coordinator names a leader")
}

// storeOf is the store id the catalog registers for coordinator id.
func (r *runner) storeOf(ctx context.Context, id string) (string, error) {
	for _, c := range r.f.coords {
		if !c.Running() {
			continue
		}
		conn, err := dial(c.grpc)
		if err != nil {
			continue
		}
		m, err := pb.NewClusterServiceClient(conn).Members(ctx, &pb.MembersRequest{})
		conn.Close()
		if err != nil {
			continue
		}
		for _, mem := range m.Members {
			if mem.NodeId == id {
				return mem.StoreId, nil
			}
		}
	}
	return "", fmt.Errorf("no coordinator lists %s among the members", id)
}

// live reports whether a replica on coordinator id counts: its process
// runs and, for the victim, the catalog registered its new store.
func (r *runner) live(ctx context.Context, id string) bool {
	p := r.f.coordinator(id)
	if p == nil || !p.Running() {
		return false
	}
	r.mu.Lock()
	isVictim, known, old := r.victim == p, r.victimActive, r.victimStore
	r.mu.Unlock()
	if !isVictim || known {
		return true
	}
	store, err := r.storeOf(ctx, id)
	if err != nil || store == "" || store == old {
		return false
	}
	r.mu.Lock()
	r.victimActive = true
	r.mu.Unlock()
	return true
}

// edges asks a running coordinator for ClusterService.Edges.
func (r *runner) edges(ctx context.Context) (*pb.EdgesResponse, error) {
	var errs []error
	for _, c := range r.f.coords {
		if !c.Running() {
			continue
		}
		conn, err := dial(c.grpc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := pb.NewClusterServiceClient(conn).Edges(cctx, &pb.EdgesRequest{})
		cancel()
		conn.Close()
		if err == nil {
			return v, nil
		}
		errs = append(errs, fmt.Errorf("edges from %s: %w", c.Name, err))
	}
	return nil, fmt.Errorf("no coordinator answered: %w", errors.Join(errs...))
}

func edgeInfo(v *pb.EdgesResponse, id string) *pb.EdgeInfo {
	for _, e := range v.Edges {
		if e.NodeId == id {
			return e
		}
	}
	return nil
}

// healthyEdges is healthy as a condition of waitFor, over the edges the
// catalog lists at each call.
func (r *runner) healthyEdges(whole bool) func(context.Context) string {
	return func(ctx context.Context) string {
		vw, err := r.edges(ctx)
		if err != nil {
			return err.Error()
		}
		return r.healthy(ctx, vw, whole)
	}
}

// healthy says why v does not show every edge at RF active replicas on
// live, active coordinators ("" when it does); with whole, also none of
// its replicas lacking anything and none leaving.
func (r *runner) healthy(ctx context.Context, v *pb.EdgesResponse, whole bool) string {
	for _, e := range r.f.edges {
		ev := edgeInfo(v, e.Name)
		if ev == nil {
			return e.Name + " is not in the catalog"
		}
		n := 0
		for _, rep := range ev.Replicas {
			if !rep.Leaving && rep.State == "active" && r.live(ctx, rep.Coordinator) {
				n++
			}
		}
		if n < r.o.rf() {
			return fmt.Sprintf("%s: %d healthy active replicas of %d", e.Name, n, r.o.rf())
		}
		if !whole {
			continue
		}
		if len(ev.Replicas) != n || ev.UnderReplicatedSegments > 0 || ev.UnsourcedSegments > 0 {
			return fmt.Sprintf("%s: %d replicas (%d healthy), %d segments under-replicated, %d unsourced", e.Name, len(ev.Replicas), n, ev.UnderReplicatedSegments, ev.UnsourcedSegments)
		}
		for _, rep := range ev.Replicas {
			if len(rep.Lacks) > 0 {
				return fmt.Sprintf("%s: %s lacks %d runs", e.Name, rep.Coordinator, len(rep.Lacks))
			}
		}
	}
	return ""
}

// settle waits until the cloud holds every acknowledged point on RF
// replicas lacking nothing.
func (r *runner) settle(ctx context.Context) error {
	start := time.Now()
	err := r.waitHeldAll(ctx, "the cloud holds every acknowledged point")
	r.m.settled = time.Since(start)
	return err
}

// checkReplicas asks every replica store alone about each edge it holds.
func (r *runner) checkReplicas(ctx context.Context) error {
	v, err := r.edges(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range r.f.edges {
		l := r.ledgers[e.Name]
		first, last := l.span()
		for _, rep := range edgeInfo(v, e.Name).Replicas {
			c := r.f.coordinator(rep.Coordinator)
			conn, err := dial(c.cluster)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			ans, err := queryReplica(cctx, clusterv1.NewReplicaServiceClient(conn), e.Name, first, last)
			cancel()
			conn.Close()
			if err != nil {
				errs = append(errs, fmt.Errorf("replica %s of %s: %w", c.Name, e.Name, err))
				continue
			}
			vd := l.check(ans, first, last)
			r.m.replicaChecks++
			r.m.lost += vd.lost
			r.m.duplicated += vd.duplicated
			if vd.phantom+vd.wrongValue > 0 {
				r.m.wrongReplicaAnswers++
			}
			if !vd.ok() {
				errs = append(errs, fmt.Errorf("replica %s of %s, asked alone: %v", c.Name, e.Name, vd))
			}
		}
	}
	return errors.Join(errs...)
}

// checkFronts asks every coordinator's query front end about every edge.
func (r *runner) checkFronts(ctx context.Context) error {
	var errs []error
	for _, c := range r.f.coords {
		conn, err := dial(c.grpc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		qc := pb.NewQueryServiceClient(conn)
		for _, e := range r.f.edges {
			l := r.ledgers[e.Name]
			first, last := l.span()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			ans, warnings, err := queryFront(cctx, qc, e.Name, first, last)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s about %s: %w", c.Name, e.Name, err))
				continue
			}
			vd := l.check(ans, first, last)
			r.m.frontChecks++
			if !vd.ok() {
				r.m.wrongFinal++
				errs = append(errs, fmt.Errorf("%s about %s: %v (warnings %q)", c.Name, e.Name, vd, warnings))
			}
		}
		conn.Close()
	}
	return errors.Join(errs...)
}

// restoreAvailable reports whether the binary has `tributary node restore`.
func restoreAvailable(ctx context.Context, binary string) bool {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(cctx, binary, "node", "restore", "--help")
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	s := out.String()
	return s != "" && !strings.Contains(s, "unexpected argument")
}

// copyLog is one repair copy the restarted coordinator logged.
type copyLog struct {
	edge            string
	firstSeq, bytes int64
}

var copyLine = regexp.MustCompile(`msg="repaired: copied a run this replica lacked".* edge=(\S+) first_seq=(\d+) last_seq=\d+ source=\S+ bytes=(\d+)`)

// parseCopies reads the repair copies from a coordinator's log.
func parseCopies(log string) []copyLog {
	var out []copyLog
	for _, m := range copyLine.FindAllStringSubmatch(log, -1) {
		first, _ := strconv.ParseInt(m[2], 10, 64)
		n, _ := strconv.ParseInt(m[3], 10, 64)
		out = append(out, copyLog{edge: m[1], firstSeq: first, bytes: n})
	}
	return out
}
