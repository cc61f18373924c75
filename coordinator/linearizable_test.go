package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/node/labels"
)

// The linearizability check of the series catalog: clients register and
// read series through every coordinator while the leader crashes again
// and again; the history of their operations is checked against a
// sequential model of the catalog's series ids with porcupine.

// The key space: a window of linWindow series that slides through
// linKeys, one series every linSlide, so that at any time few series are
// in use (registrations and reads of one series overlap often) and new
// series are registered all along the history, across the crashes too.
const (
	linKeys   = 256
	linWindow = 40
	linSlide  = 100 * time.Millisecond
)

// linEdge is the edge the clients register series for.
const linEdge = "edge-lin"

// linOp is an operation's input: register or read one series.
type linOp struct {
	register bool
	key      int // 0 ≤ key < linKeys
}

// linOut is an operation's output. unknown: a registration whose outcome
// is unknown (it failed or timed out, it may still be applied); its return
// time is the end of the history and any id matches it.
type linOut struct {
	id      uint64
	found   bool // reads: the series is known
	unknown bool
}

// linState is the model's state: the id of every key (0: not registered)
// and the next id the catalog assigns. An array, so that states compare
// with == and a step copies instead of sharing.
type linState struct {
	ids  [linKeys]uint64
	next uint64
}

// linModel is the sequential specification: a registration of a known
// series returns its id, of a new one the next id (and the next id
// advances); a read returns the id or absent. An unknown registration is
// applied like a successful one: its return is at the end of the history,
// so if it never took effect the checker can order it last, where it
// changes nothing any other operation saw.
func linModel(firstID uint64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return linState{next: firstID} },
		Step: func(state, input, output any) (bool, any) {
			st, in, out := state.(linState), input.(linOp), output.(linOut)
			have := st.ids[in.key]
			if !in.register {
				return out.found == (have != 0) && (!out.found || out.id == have), st
			}
			if have != 0 {
				return out.unknown || out.id == have, st
			}
			if !out.unknown && out.id != st.next {
				return false, st
			}
			st.ids[in.key] = st.next
			st.next++
			return true, st
		},
		Hash: func(state any) uint64 {
			st := state.(linState)
			h := fnv.New64a()
			var b [8]byte
			for _, id := range append(st.ids[:], st.next) {
				for i := range b {
					b[i] = byte(id >> (8 * i))
				}
				h.Write(b[:])
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linOp), output.(linOut)
			switch {
			case in.register && out.unknown:
				return fmt.Sprintf("register(s%d) -> ?", in.key)
			case in.register:
				return fmt.Sprintf("register(s%d) -> %d", in.key, out.id)
			case out.found:
				return fmt.Sprintf("read(s%d) -> %d", in.key, out.id)
			}
			return fmt.Sprintf("read(s%d) -> absent", in.key)
		},
		DescribeState: func(state any) string {
			st := state.(linState)
			var parts []string
			for k, id := range st.ids {
				if id != 0 {
					parts = append(parts, fmt.Sprintf("s%d:%d", k, id))
				}
			}
			return fmt.Sprintf("next %d {%s}", st.next, strings.Join(parts, " "))
		},
	}
}

func linSeries(key int) labels.Labels {
	return labels.Labels{{Name: "__name__", Value: "lin"}, {Name: "key", Value: strconv.Itoa(key)}}
}

// linAnyID is a per-key state: registered by an operation whose outcome
// is unknown, so with an id nobody has seen yet.
const linAnyID = ^uint64(0)

// linKeyModel is linModel seen one series at a time: the first
// registration that takes effect decides the id (any id; which one is
// checked by checkIDOrder and linModel), everything after must agree.
// Partitioned by series, porcupine decides it quickly even when the
// history is not linearizable, where the search of linModel over the
// whole history can take minutes.
func linKeyModel() porcupine.Model {
	m := linModel(1)
	m.Partition = func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(linOp).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for k := range linKeys {
			if len(byKey[k]) > 0 {
				out = append(out, byKey[k])
			}
		}
		return out
	}
	m.Init = func() any { return uint64(0) }
	m.Step = func(state, input, output any) (bool, any) {
		have, in, out := state.(uint64), input.(linOp), output.(linOut)
		switch {
		case !in.register && have == linAnyID:
			// The unknown registration was ordered before this read.
			return out.found, out.id
		case !in.register:
			return out.found == (have != 0) && (!out.found || out.id == have), have
		case out.unknown:
			return true, map[bool]uint64{true: linAnyID, false: have}[have == 0]
		case have == 0 || have == linAnyID:
			return true, out.id
		}
		return out.id == have, have
	}
	m.Hash = nil
	m.DescribeState = func(state any) string {
		switch id := state.(uint64); id {
		case 0:
			return "absent"
		case linAnyID:
			return "registered, id unseen"
		default:
			return fmt.Sprint(id)
		}
	}
	return m
}

// checkIDOrder checks what linKeyModel cannot see: series have distinct
// ids, none below firstID, and a series seen registered before the first
// registration of another was called has the smaller id (ids are
// assigned in apply order).
func checkIDOrder(history []porcupine.Operation, firstID uint64) error {
	type keyTimes struct {
		id       uint64
		seen     int64 // first return that showed the id
		register int64 // first call of a registration
	}
	keys := map[int]*keyTimes{}
	at := func(k int) *keyTimes {
		if keys[k] == nil {
			keys[k] = &keyTimes{seen: math.MaxInt64, register: math.MaxInt64}
		}
		return keys[k]
	}
	owner := map[uint64]int{}
	for _, op := range history {
		in, out := op.Input.(linOp), op.Output.(linOut)
		kt := at(in.key)
		if in.register {
			kt.register = min(kt.register, op.Call)
		}
		if out.unknown || (!in.register && !out.found) {
			continue
		}
		if out.id < firstID {
			return fmt.Errorf("s%d: id %d, below the first id %d of the history", in.key, out.id, firstID)
		}
		if o, ok := owner[out.id]; ok && o != in.key {
			return fmt.Errorf("id %d given to s%d and s%d", out.id, o, in.key)
		}
		owner[out.id] = in.key
		kt.id = out.id
		kt.seen = min(kt.seen, op.Return)
	}
	for a, ka := range keys {
		for b, kb := range keys {
			if ka.id != 0 && kb.id != 0 && ka.seen < kb.register && ka.id > kb.id {
				return fmt.Errorf("s%d (id %d) was seen registered at %d, before s%d was first registered at %d, but has the larger id (s%d has %d)",
					a, ka.id, ka.seen, b, kb.register, b, kb.id)
			}
		}
	}
	return nil
}

// checkLinearizable checks history series by series (linKeyModel), the
// id order (checkIDOrder), then as a whole (linModel). On failure it
// writes porcupine's visualization and names it in the failure.
func checkLinearizable(t *testing.T, firstID uint64, history []porcupine.Operation, seed uint64) {
	t.Helper()
	check := func(what string, model porcupine.Model, timeout time.Duration) {
		t.Helper()
		start := time.Now()
		res, info := porcupine.CheckOperationsVerbose(model, history, timeout)
		t.Logf("porcupine, %s: %d operations, %s in %s", what, len(history), res, time.Since(start).Round(time.Millisecond))
		if res == porcupine.Ok {
			return
		}
		path := filepath.Join(t.TempDir(), "linearizability.html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Errorf("write the visualization: %v", err)
		}
		if res == porcupine.Unknown {
			t.Fatalf("porcupine, %s: not decided within %s (seed %d); partial visualization: %s", what, timeout, seed, path)
		}
		t.Fatalf("porcupine, %s: the catalog history is not linearizable (seed %d); visualization: %s", what, seed, path)
	}
	check("series by series", linKeyModel(), 60*time.Second)
	if err := checkIDOrder(history, firstID); err != nil {
		t.Fatalf("series ids (seed %d): %v", seed, err)
	}
	check("whole history", linModel(firstID), 60*time.Second)
}

// TestCatalogModel checks the checker: hand-made histories that are not
// linearizable are rejected, legal ones (with unknown outcomes) accepted.
func TestCatalogModel(t *testing.T) {
	reg := func(client, key int, call, ret int64, id uint64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: linOp{register: true, key: key}, Call: call, Output: linOut{id: id}, Return: ret}
	}
	lost := func(client, key int, call int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: linOp{register: true, key: key}, Call: call, Output: linOut{unknown: true}, Return: 1000}
	}
	read := func(client, key int, call, ret int64, id uint64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: linOp{key: key}, Call: call, Output: linOut{id: id, found: id != 0}, Return: ret}
	}
	// whole: legal for linModel; perKey: legal for linKeyModel and
	// checkIDOrder (which cannot see a skipped id).
	cases := []struct {
		name          string
		history       []porcupine.Operation
		whole, perKey bool
	}{
		{"read sees an id before its register was called", []porcupine.Operation{
			read(0, 1, 0, 5, 7), reg(1, 1, 10, 20, 7)}, false, false},
		{"read misses an acknowledged register", []porcupine.Operation{
			reg(0, 1, 0, 5, 7), read(1, 1, 10, 20, 0)}, false, false},
		{"two ids for one series", []porcupine.Operation{
			reg(0, 1, 0, 5, 7), reg(1, 1, 10, 20, 8)}, false, false},
		{"an id skipped", []porcupine.Operation{
			reg(0, 1, 0, 5, 7), reg(1, 2, 10, 20, 9)}, false, true},
		{"an id given twice", []porcupine.Operation{
			reg(0, 1, 0, 5, 7), reg(1, 2, 10, 20, 7)}, false, false},
		{"ids against real-time order", []porcupine.Operation{
			reg(0, 1, 0, 5, 8), reg(1, 2, 10, 20, 7)}, false, false},
		{"stale read after a newer read", []porcupine.Operation{
			reg(0, 1, 0, 100, 7), read(1, 1, 10, 20, 7), read(2, 1, 30, 40, 0)}, false, false},
		{"concurrent register and read", []porcupine.Operation{
			reg(0, 1, 0, 100, 7), read(1, 1, 10, 20, 0), read(2, 1, 30, 40, 7)}, true, true},
		{"concurrent registers in either order", []porcupine.Operation{
			reg(0, 1, 0, 100, 8), reg(1, 2, 10, 90, 7), read(2, 1, 95, 99, 8)}, true, true},
		{"unknown register that took effect", []porcupine.Operation{
			lost(0, 1, 0), read(1, 1, 10, 20, 7), reg(2, 2, 30, 40, 8)}, true, true},
		{"unknown register that did not", []porcupine.Operation{
			lost(0, 1, 0), reg(1, 2, 10, 20, 7), read(2, 1, 30, 40, 0)}, true, true},
		{"unknown register seen with two ids", []porcupine.Operation{
			lost(0, 1, 0), read(1, 1, 10, 20, 7), read(2, 1, 30, 40, 8)}, false, false},
		{"unknown register seen, then absent", []porcupine.Operation{
			lost(0, 1, 0), read(1, 1, 10, 20, 7), read(2, 1, 30, 40, 0)}, false, false},
		{"unknown register cannot explain a skipped id", []porcupine.Operation{
			lost(0, 1, 50), reg(1, 2, 10, 20, 8)}, false, true},
	}
	verdict := map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if res := porcupine.CheckOperationsTimeout(linModel(7), c.history, 10*time.Second); res != verdict[c.whole] {
				t.Errorf("whole history: %s, want %s", res, verdict[c.whole])
			}
			res := porcupine.CheckOperationsTimeout(linKeyModel(), c.history, 10*time.Second)
			err := checkIDOrder(c.history, 7)
			if got := res == porcupine.Ok && err == nil; got != c.perKey {
				t.Errorf("series by series: %s, id order: %v; want legal %v", res, err, c.perKey)
			}
		})
	}
}

// linMember is one coordinator that the test crashes and reopens.
type linMember struct {
	opts Options
	mu   sync.Mutex
	c    *Coordinator // nil while crashed
}

func (m *linMember) get() *Coordinator {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c
}

// crash stops c at once, like kill -9 as far as the cluster sees it: no
// leadership transfer, in-flight requests fail with ErrStopped, the
// connections close. NB: unlike kill -9, bytes written but not yet
// synced survive (the page cache stays); the simulator and e2e cover
// that, and the raft log syncs before anything is acknowledged.
func crash(c *Coordinator) error {
	c.stopOnce.Do(func() {
		c.intake.Close()
		c.intakeGRPC.Stop()
		var errs []error
		if err := c.raft.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close raft member: %w", err))
		}
		c.cancel()
		c.clusterSrv.Stop()
		c.wg.Wait()
		c.links.close()
		if err := c.tr.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close raft transport: %w", err))
		}
		if err := c.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close replica store: %w", err))
		}
		c.lock.Close() // a killed process's lock goes with it
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// linClock is the history's clock: monotonic nanoseconds since start.
type linClock struct{ start time.Time }

func (k linClock) now() int64 { return int64(time.Since(k.start)) }

type linRecorder struct {
	mu  sync.Mutex
	ops []porcupine.Operation
}

func (r *linRecorder) add(op porcupine.Operation) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// TestCatalog_LinearizableUnderLeaderCrashes runs three coordinators in
// process. Six clients, each bound to one coordinator (another while
// that one is down), register and read series (a sliding window of 40)
// for about 15 s while the leader is crashed every ~3 s and reopened 1-2 s
// later from its data directory. The history must be linearizable; afterwards every
// acknowledged registration is in every member's catalog with its id, and
// the members' catalogs are byte-identical at the same applied index.
//
// The schedule (crash times, operation mix) replays from the logged seed
// (TRIBUTARY_LIN_SEED); raft's timing and the interleavings do not.
func TestCatalog_LinearizableUnderLeaderCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("three coordinators for ~15 s")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TRIBUTARY_LIN_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("TRIBUTARY_LIN_SEED %q: %v", s, err)
		}
	}
	t.Logf("seed %d (TRIBUTARY_LIN_SEED=%d replays the schedule; raft timing is not replayed)", seed, seed)
	const (
		clients    = 6
		crashes    = 4
		crashEvery = 3 * time.Second
		opTimeout  = 1500 * time.Millisecond
	)

	addrs := freeAddrs(t, 3)
	var peers []Peer
	for i := range 3 {
		peers = append(peers, Peer{RaftID: uint64(i + 1), NodeID: fmt.Sprintf("coord-%d", i+1), Addr: addrs[i]})
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError}))
	ms := make([]*linMember, 3)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()} // removed after the cleanup below
	t.Cleanup(func() {
		for _, m := range ms {
			if m == nil {
				continue // Open failed
			}
			if c := m.get(); c != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				if err := c.Stop(ctx); err != nil {
					t.Errorf("stop %s: %v", m.opts.NodeID, err)
				}
				cancel()
			}
		}
	})
	for i, p := range peers {
		// The default TickInterval (100 ms: elections after 1-2 s), so
		// that the measured gaps are those of a production cluster.
		ms[i] = &linMember{opts: Options{NodeID: p.NodeID, RaftID: p.RaftID, DataDir: dirs[i],
			ClusterListen: p.Addr, IntakeListen: "127.0.0.1:0", Peers: peers, Insecure: true,
			Logger: logger.With("test_member", p.NodeID)}}
		c, err := Open(ms[i].opts)
		if err != nil {
			t.Fatalf("open %s: %v", p.NodeID, err)
		}
		ms[i].c = c
	}
	// leader (cluster_test.go) over the running members.
	view := func() []*member {
		var out []*member
		for _, m := range ms {
			c := m.get()
			out = append(out, &member{c: c, raftID: m.opts.RaftID, nodeID: m.opts.NodeID, stopped: c == nil})
		}
		return out
	}
	leader(t, view())
	for _, m := range ms {
		eventually(t, m.opts.NodeID+" ready", m.get().Ready)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	if _, err := ms[0].get().raft.Propose(ctx, catalog.EncodeCommand(catalog.RegisterNode{ID: linEdge, Role: catalog.RoleEdge,
		Addr: "127.0.0.1:1", TimeMs: time.Now().UnixMilli()})); err != nil {
		t.Fatalf("register %s: %v", linEdge, err)
	}
	if err := ms[0].get().Barrier(ctx); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	cancel()
	// INVARIANT: only the clients below register series from here on.
	firstID := uint64(ms[0].get().Catalog().SeriesCount()) + 1

	clock := linClock{start: time.Now()}
	var rec linRecorder
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Also on a failure below: the clients stop before the coordinators
	// (cleanups run last-in first-out).
	stopClients := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopClients)
	for cl := range clients {
		rng := rand.New(rand.NewPCG(seed, uint64(cl)))
		wg.Go(func() {
			bound := cl % len(ms)
			for {
				select {
				case <-stop:
					return
				default:
				}
				c := ms[bound].get()
				for i := 1; c == nil && i < len(ms); i++ {
					c = ms[(bound+i)%len(ms)].get()
				}
				if c == nil {
					time.Sleep(10 * time.Millisecond)
					continue
				}
				call := clock.now()
				in := linOp{register: rng.IntN(2) == 0, key: min(int(time.Duration(call)/linSlide)+rng.IntN(linWindow), linKeys-1)}
				op := porcupine.Operation{ClientId: cl, Input: in, Call: call}
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				if in.register {
					res, err := c.raft.Propose(ctx, catalog.EncodeCommand(catalog.RegisterSeries{Edge: linEdge, Series: []labels.Labels{linSeries(in.key)}}))
					op.Return = clock.now()
					switch {
					case errors.Is(err, raftnode.ErrProposalDropped):
						// Not applied: no operation took place.
					case err != nil:
						op.Output = linOut{unknown: true}
						rec.add(op)
					default:
						r := res.(catalog.RegisterSeriesResult)
						if len(r.IDs) != 1 || r.IDs[0] == 0 {
							t.Errorf("register s%d: result %+v", in.key, r)
						}
						op.Output = linOut{id: r.IDs[0]}
						rec.add(op)
					}
				} else if err := c.raft.LinearizableRead(ctx); err == nil {
					// A failed read changed nothing and is left out.
					id, ok := c.Catalog().Lookup(linSeries(in.key))
					op.Return = clock.now()
					op.Output = linOut{id: id, found: ok}
					rec.add(op)
				}
				cancel()
			}
		})
	}

	// The crash schedule: crash the leader every ~crashEvery, reopen it
	// 1-2 s later from its data directory on the same port.
	sched := rand.New(rand.NewPCG(seed, 1<<32))
	var crashedAt []int64
	next := time.Duration(0)
	for range crashes {
		next += crashEvery - time.Second/2 + time.Duration(sched.IntN(1000))*time.Millisecond
		time.Sleep(next - time.Duration(clock.now()))
		lead := leader(t, view())
		var victim *linMember
		for _, m := range ms {
			if m.opts.RaftID == lead.raftID {
				victim = m
			}
		}
		victim.mu.Lock()
		c := victim.c
		victim.c = nil
		victim.mu.Unlock()
		crashedAt = append(crashedAt, clock.now())
		if err := crash(c); err != nil {
			t.Errorf("crash %s: %v", victim.opts.NodeID, err)
		}
		t.Logf("%s: crashed leader %s", time.Duration(crashedAt[len(crashedAt)-1]).Round(time.Millisecond), victim.opts.NodeID)
		time.Sleep(time.Second + time.Duration(sched.IntN(1000))*time.Millisecond)
		c, err := Open(victim.opts)
		if err != nil {
			t.Fatalf("reopen %s: %v", victim.opts.NodeID, err)
		}
		victim.mu.Lock()
		victim.c = c
		victim.mu.Unlock()
	}
	// Run on a full interval past the last crash as it happened (it may
	// come late: finding the leader and crashing take time), so that the
	// write gap after it can be measured.
	time.Sleep(max(next, time.Duration(crashedAt[len(crashedAt)-1])) + crashEvery - time.Duration(clock.now()))
	stopClients()
	end := clock.now()
	history := rec.ops
	registered, unknown, reads := 0, 0, 0
	for i := range history {
		switch out := history[i].Output.(linOut); {
		case out.unknown:
			history[i].Return = end
			unknown++
		case history[i].Input.(linOp).register:
			registered++
		default:
			reads++
		}
	}

	// The figures: proposals/s, and per crash the write gap: from the
	// crash to the return of the first successful registration called
	// after it.
	secs := time.Duration(end).Seconds()
	t.Logf("history: %s, %d acknowledged registrations (%.0f/s), %d with unknown outcome, %d linearizable reads (%.0f/s)",
		time.Duration(end).Round(time.Millisecond), registered, float64(registered)/secs, unknown, reads, float64(reads)/secs)
	var worst time.Duration
	for i, at := range crashedAt {
		first := int64(-1)
		for _, op := range history {
			if op.Input.(linOp).register && !op.Output.(linOut).unknown && op.Call >= at && (first < 0 || op.Return < first) {
				first = op.Return
			}
		}
		if first < 0 {
			t.Errorf("crash %d: no registration succeeded after it", i+1)
			continue
		}
		gap := time.Duration(first - at)
		worst = max(worst, gap)
		t.Logf("crash %d: write gap %s", i+1, gap.Round(time.Millisecond))
		if gap > waitFor {
			t.Errorf("crash %d: write gap %s, more than %s", i+1, gap, waitFor)
		}
	}
	t.Logf("worst write gap %s", worst.Round(time.Millisecond))

	checkLinearizable(t, firstID, history, seed)

	// Every acknowledged registration is in every member's catalog with
	// its id.
	acked := map[int]uint64{}
	for _, op := range history {
		if in, out := op.Input.(linOp), op.Output.(linOut); in.register && !out.unknown {
			acked[in.key] = out.id
		}
	}
	for _, m := range ms {
		c := m.get()
		eventually(t, m.opts.NodeID+" answers a linearizable read", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			return c.Barrier(ctx) == nil
		})
		for key, want := range acked {
			if id, ok := c.Catalog().Lookup(linSeries(key)); !ok || id != want {
				t.Errorf("%s: s%d has id %d (known %v), acknowledged as %d", m.opts.NodeID, key, id, ok, want)
			}
		}
	}
	eventually(t, "the members' catalogs byte-identical at the same applied index", func() bool {
		var index uint64
		var snap []byte
		for i, m := range ms {
			f := m.get().Catalog()
			a, s := f.AppliedIndex(), f.Snapshot()
			if f.AppliedIndex() != a || (i > 0 && (a != index || !bytes.Equal(s, snap))) {
				return false
			}
			index, snap = a, s
		}
		return true
	})
	t.Logf("%d series acknowledged; the catalog assigned ids %d..%d", len(acked), firstID, ms[0].get().Catalog().SeriesCount())
}
