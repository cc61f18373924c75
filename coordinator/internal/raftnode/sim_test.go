package raftnode_test

// The deterministic cluster simulator: N members of the production Node
// (its Ready loop, its raft log on an in-memory crash-model file system,
// the catalog FSM) driven by one goroutine and one seeded PRNG. It
// delivers, drops, duplicates and reorders messages, ticks members at
// skewed rates, kills members (losing unsynced bytes, sometimes tearing
// writes) and restarts them from their files, partitions and heals the
// network, isolates a member until it needs a snapshot, transfers
// leadership, and adds, promotes and removes members, while a client
// registers series, records held segment ranges and does linearizable
// reads. At the end it heals everything, waits for the cluster to
// converge, and checks that every member's catalog snapshot is
// byte-identical and holds every acknowledged write.
//
// Determinism: the only randomness is the seeded PRNG, plus raft's own
// election-timeout randomness, which reads crypto/rand; the test makes
// that deterministic with testing/cryptotest.SetGlobalRandom (seeded
// with the same seed), and raft draws from it in the order the single
// goroutine drives the members. No wall clock is read. So a seed replays
// exactly: TRIBUTARY_SIM_SEED=<seed> runs one seed.

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/cryptotest"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/node/labels"
	"go.etcd.io/raft/v3/raftpb"
)

// Tunables of one simulated run.
const (
	simFaultSteps    = 1500 // steps with faults and client load
	simConvergeSteps = 6000 // bound on steps to converge after healing
	simMaxMembers    = 5
	simElectionTicks = 10
	simOpDeadline    = 400 // steps before the client gives up on a request
)

// errorLog is a slog handler that keeps error records: a member that logs
// an error (a damaged entry, a refused membership change) fails the run,
// except for the failure a simulated power cut causes.
type errorLog struct{ msgs *[]string }

func (h errorLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h errorLog) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		msg += " " + a.String()
		return true
	})
	*h.msgs = append(*h.msgs, msg)
	return nil
}
func (h errorLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h errorLog) WithGroup(string) slog.Handler      { return h }

// simSeeds returns the seeds to run: TRIBUTARY_SIM_SEED replays one,
// TRIBUTARY_SIM_SEEDS sets how many (make soak), otherwise a default
// sized for `go test` (smaller under -race and -short).
func simSeeds(t *testing.T) []uint64 {
	if s := os.Getenv("TRIBUTARY_SIM_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TRIBUTARY_SIM_SEED=%q: %v", s, err)
		}
		return []uint64{seed}
	}
	n := 200
	switch {
	case raceEnabled:
		n = 16
	case testing.Short():
		n = 40
	}
	if s := os.Getenv("TRIBUTARY_SIM_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("TRIBUTARY_SIM_SEEDS=%q: want a positive count", s)
		}
		n = v
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds
}

func TestSim_RandomSchedulesConverge(t *testing.T) {
	seeds := simSeeds(t)
	var total simStats
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			st, _ := runSim(t, seed)
			total.add(st)
		})
		if t.Failed() {
			break
		}
	}
	t.Logf("%d seeds: %s", len(seeds), total)
	if len(seeds) >= 16 && !t.Failed() {
		// The schedules must actually exercise what they claim to.
		for name, v := range map[string]int{
			"leader changes": total.leaderChanges, "kills": total.kills, "partitions": total.partitions,
			"snapshots installed": total.snapshotsDelivered, "members added": total.added,
			"members removed": total.removed, "learners promoted": total.promoted,
			"acknowledged proposals": total.acked, "linearizable reads checked": total.readsChecked,
			"leadership transfers": total.transfers, "crashes inside a disk write": total.diskCrashes,
		} {
			if v == 0 {
				t.Errorf("no %s in %d seeds", name, len(seeds))
			}
		}
	}
}

// TestSim_SameSeedSameRun runs seeds twice and requires identical traces
// (every message delivered, every fault, the final snapshot): a failing
// seed replays exactly.
func TestSim_SameSeedSameRun(t *testing.T) {
	traces := map[uint64]uint64{}
	for _, seed := range []uint64{3, 3, 4, 4} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			_, trace := runSim(t, seed)
			if prev, ok := traces[seed]; ok && prev != trace {
				t.Fatalf("seed %d: trace %x, earlier run %x: the simulation is not deterministic", seed, trace, prev)
			}
			traces[seed] = trace
		})
	}
	if traces[3] == traces[4] {
		t.Fatal("seeds 3 and 4 produced the same trace: the seed does not drive the run")
	}
}

func runSim(t *testing.T, seed uint64) (simStats, uint64) {
	t.Helper()
	cryptotest.SetGlobalRandom(t, seed)
	c := newCluster(t, seed)
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("panic at step %d: %v", c.step, r)
		}
		if t.Failed() {
			t.Logf("replay this run: TRIBUTARY_SIM_SEED=%d go test -run 'TestSim_RandomSchedulesConverge' ./coordinator/internal/raftnode", seed)
		}
	}()
	c.run()
	return c.stats, c.trace.Sum64()
}

type simStats struct {
	leaderChanges, kills, restarts, partitions, isolations, transfers int
	snapshotsDelivered, added, promoted, removed, diskCrashes         int
	acked, rejected, unknown, readsChecked                            int
	steps                                                             int
}

func (s *simStats) add(o simStats) {
	s.leaderChanges += o.leaderChanges
	s.kills += o.kills
	s.restarts += o.restarts
	s.partitions += o.partitions
	s.isolations += o.isolations
	s.transfers += o.transfers
	s.snapshotsDelivered += o.snapshotsDelivered
	s.added += o.added
	s.promoted += o.promoted
	s.removed += o.removed
	s.diskCrashes += o.diskCrashes
	s.acked += o.acked
	s.rejected += o.rejected
	s.unknown += o.unknown
	s.readsChecked += o.readsChecked
	s.steps += o.steps
}

func (s simStats) String() string {
	return fmt.Sprintf("%d steps, %d leader changes, %d kills, %d restarts, %d partitions, %d isolations, %d transfers, "+
		"%d snapshots installed, %d added, %d promoted, %d removed, %d disk crashes, %d acked, %d rejected, %d unknown, %d reads checked",
		s.steps, s.leaderChanges, s.kills, s.restarts, s.partitions, s.isolations, s.transfers,
		s.snapshotsDelivered, s.added, s.promoted, s.removed, s.diskCrashes, s.acked, s.rejected, s.unknown, s.readsChecked)
}

// member is one simulated coordinator process and its disk.
type member struct {
	id        uint64
	fs        *vfs.CrashFS
	node      *raftnode.Node // nil while down
	fsm       *recordingFSM
	bootstrap bool // an initial member: started with Peers
	downUntil int  // restart at this step (while down)
	gone      bool // removed from the cluster and stopped for good
	// armed: the disk fails an upcoming write or fsync, as if the power
	// went in the middle of it; fired: it did, and the member dies with
	// the machine at the end of the step.
	armed, fired bool
}

type link struct{ from, to uint64 }

type cluster struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	step    int
	members map[uint64]*member
	ids     []uint64 // every member ever created, ascending
	nextID  uint64
	peers   []raftnode.Peer

	net         netQueue
	sendSeq     uint64
	cut         map[link]bool
	healAt      int
	dropPct     int
	dupPct      int
	maxDelay    int
	lastLeader  uint64
	lastTerm    uint64
	confOp      *confOp
	applied     map[[2]uint64]uint64 // (index, position) -> command hash, across members
	client      *client
	trace       hash.Hash64
	stats       simStats
	faultsOn    bool
	errors      []string // error records logged by members
	transferTo  uint64
	transferDue int
}

type confOp struct {
	f        *raftnode.Future
	deadline int
	typ      raftnode.ChangeType
	target   uint64
}

func newCluster(t *testing.T, seed uint64) *cluster {
	c := &cluster{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x7261667473696d)),
		members: map[uint64]*member{}, cut: map[link]bool{}, applied: map[[2]uint64]uint64{},
		maxDelay: 3, trace: fnv.New64a(),
	}
	for id := uint64(1); id <= 3; id++ {
		c.peers = append(c.peers, raftnode.Peer{ID: id, Addr: addrOf(id)})
	}
	c.nextID = 4
	for _, p := range c.peers {
		m := &member{id: p.ID, fs: vfs.NewCrashFS(), bootstrap: true}
		c.members[p.ID] = m
		c.ids = append(c.ids, p.ID)
		c.start(m)
	}
	c.client = newClient(c)
	return c
}

func addrOf(id uint64) string { return fmt.Sprintf("coord-%d.tributary:7071", id) }

func (c *cluster) start(m *member) {
	m.fsm = &recordingFSM{FSM: catalog.New(), c: c, id: m.id}
	opts := raftnode.Options{
		ID: m.id, Dir: "/data/raft", FS: m.fs, SegmentBytes: 16 << 10,
		StateMachine: m.fsm, Transport: &simTransport{c: c, from: m.id},
		ElectionTicks: simElectionTicks, HeartbeatTicks: 1,
		SnapshotEntries: 24, KeepEntries: 6,
		MaxEntryBytes: 16 << 10, MaxSizePerMsg: 8 << 10, MaxInflightMsgs: 16,
		Logger: slog.New(errorLog{&c.errors}),
	}
	if m.bootstrap {
		opts.Peers = c.peers
	}
	n, err := raftnode.Open(opts)
	if err != nil {
		if m.armed {
			c.stats.diskCrashes++
			c.kill(m, 10+c.rng.IntN(100)) // the power went while it started
			return
		}
		c.t.Fatalf("step %d: member %d cannot start from its files: %v", c.step, m.id, err)
	}
	m.node = n
}

func (c *cluster) fatalf(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("step %d: %s", c.step, fmt.Sprintf(format, args...))
}

// live returns the running members, by id.
func (c *cluster) live() []*member {
	var out []*member
	for _, id := range c.ids {
		if m := c.members[id]; m.node != nil && !m.gone {
			out = append(out, m)
		}
	}
	return out
}

func (c *cluster) pick(ms []*member) *member {
	if len(ms) == 0 {
		return nil
	}
	return ms[c.rng.IntN(len(ms))]
}

// leader returns the live member that leads in the highest term.
func (c *cluster) leader() (*member, raftnode.Status) {
	var best *member
	var bs raftnode.Status
	for _, m := range c.live() {
		if s := m.node.Status(); s.IsLeader && (best == nil || s.Term > bs.Term) {
			best, bs = m, s
		}
	}
	return best, bs
}

func (c *cluster) run() {
	c.faultsOn = true
	for range simFaultSteps {
		c.stepOnce()
	}
	c.faultsOn = false
	c.converge()
	c.check()
}

func (c *cluster) stepOnce() {
	c.step++
	c.stats.steps++
	fmt.Fprintf(c.trace, "s%d;", c.step)
	for _, id := range c.ids {
		m := c.members[id]
		if m.node == nil && !m.gone && m.downUntil <= c.step {
			c.start(m)
			c.stats.restarts++
			fmt.Fprintf(c.trace, "up%d;", id)
		}
	}
	if c.healAt > 0 && c.step >= c.healAt {
		c.heal()
	}
	for _, m := range c.live() {
		// Clocks drift: each member ticks on its own schedule.
		if c.rng.IntN(4) == 0 {
			m.node.Tick()
		}
	}
	c.deliver()
	if c.faultsOn {
		c.client.act()
		c.fault()
	}
	c.client.poll()
	c.pollConfOp()
	c.pollTransfer()
	live := c.live()
	for _, i := range c.rng.Perm(len(live)) {
		m := live[i]
		if err := m.node.Process(); err != nil {
			if !m.armed {
				c.fatalf("member %d failed: %v", m.id, err)
			}
			c.stats.diskCrashes++
			c.kill(m, 10+c.rng.IntN(100))
		}
	}
	for _, m := range live {
		if m.fired && m.node != nil {
			c.stats.diskCrashes++
			c.kill(m, 10+c.rng.IntN(100))
		}
	}
	if l, s := c.leader(); l != nil && (l.id != c.lastLeader || s.Term != c.lastTerm) {
		c.lastLeader, c.lastTerm = l.id, s.Term
		c.stats.leaderChanges++
	}
}

// The network.

type inflight struct {
	at  int
	seq uint64
	msg raftpb.Message
}

type netQueue []inflight

func (q netQueue) Len() int { return len(q) }
func (q netQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || (q[i].at == q[j].at && q[i].seq < q[j].seq)
}
func (q netQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *netQueue) Push(x any)   { *q = append(*q, x.(inflight)) }
func (q *netQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

type simTransport struct {
	c    *cluster
	from uint64
}

// Send implements raftnode.Transport: each message is dropped,
// delayed (which reorders) and sometimes duplicated, by the seeded PRNG.
func (tr *simTransport) Send(msgs []raftpb.Message) {
	c := tr.c
	for _, m := range msgs {
		if c.rng.IntN(100) < c.dropPct {
			c.dropped(m)
			continue
		}
		copies := 1
		if c.rng.IntN(100) < c.dupPct {
			copies = 2
		}
		for range copies {
			delay := 1 + c.rng.IntN(c.maxDelay)
			if c.faultsOn && c.rng.IntN(50) == 0 {
				delay += c.rng.IntN(60) // a straggler
			}
			c.sendSeq++
			heap.Push(&c.net, inflight{at: c.step + delay, seq: c.sendSeq, msg: m})
		}
	}
}

// dropped handles a message that will not arrive: the sender of a
// snapshot learns that it failed, as a real transport would tell it.
func (c *cluster) dropped(m raftpb.Message) {
	if m.Type == raftpb.MsgSnap {
		if s := c.members[m.From]; s != nil && s.node != nil && !s.gone {
			s.node.ReportSnapshot(m.To, false)
		}
	}
}

func (c *cluster) deliver() {
	for c.net.Len() > 0 && c.net[0].at <= c.step {
		it := heap.Pop(&c.net).(inflight)
		m := it.msg
		to := c.members[m.To]
		if to == nil || to.node == nil || to.gone || c.cut[link{m.From, m.To}] {
			c.dropped(m)
			continue
		}
		fmt.Fprintf(c.trace, "m%d>%d:%d:%d:%d:%d:%d:%d;", m.From, m.To, m.Type, m.Term, m.Index, m.Commit, len(m.Entries), boolInt(m.Reject))
		_ = to.node.Step(m)
		if m.Type == raftpb.MsgSnap {
			c.stats.snapshotsDelivered++
			if s := c.members[m.From]; s != nil && s.node != nil && !s.gone {
				s.node.ReportSnapshot(m.To, true)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Faults.

func (c *cluster) fault() {
	r := c.rng.IntN(1000)
	switch {
	case r < 1: // kill the leader
		if l, _ := c.leader(); l != nil {
			c.kill(l, 20+c.rng.IntN(300))
		}
	case r < 2: // kill anyone
		c.kill(c.pick(c.live()), 20+c.rng.IntN(600))
	case r < 3: // a clean restart (the process closes its log)
		if m := c.pick(c.live()); m != nil {
			fmt.Fprintf(c.trace, "close%d;", m.id)
			if c.close(m) {
				m.node, m.downUntil = nil, c.step+1+c.rng.IntN(40)
			}
		}
	case r < 4: // the power goes during one of the next disk writes
		if m := c.pick(c.live()); m != nil && !m.armed {
			c.armCrash(m)
		}
	case r < 6: // a partition
		if len(c.cut) == 0 {
			c.partition(50 + c.rng.IntN(400))
		}
	case r < 7: // isolate one member long enough to need a snapshot
		if len(c.cut) == 0 {
			c.isolate(c.pick(c.live()), 400+c.rng.IntN(500))
		}
	case r < 9: // a graceful leadership transfer
		c.transfer()
	case r < 11:
		c.addMember()
	case r < 14:
		c.promote()
	case r < 16:
		c.removeMember()
	case r < 20: // the network changes character
		c.dropPct, c.dupPct, c.maxDelay = c.rng.IntN(15), c.rng.IntN(10), 1+c.rng.IntN(8)
		fmt.Fprintf(c.trace, "net%d/%d/%d;", c.dropPct, c.dupPct, c.maxDelay)
	}
}

func (c *cluster) kill(m *member, downFor int) {
	if m == nil {
		return
	}
	fmt.Fprintf(c.trace, "kill%d;", m.id)
	c.stats.kills++
	// The machine loses power: unsynced bytes go, some writes tear.
	if c.rng.IntN(2) == 0 {
		m.fs = m.fs.CrashTorn(c.rng)
	} else {
		m.fs = m.fs.Crash()
	}
	m.node, m.fsm, m.armed, m.fired = nil, nil, false, false
	m.downUntil = c.step + downFor
}

// close stops m cleanly; if its disk was armed to fail and the final sync
// fails, the member crashes instead. It reports whether the close was clean.
func (c *cluster) close(m *member) bool {
	if err := m.node.Close(); err != nil {
		if !m.armed {
			c.fatalf("close member %d: %v", m.id, err)
		}
		c.stats.diskCrashes++
		c.kill(m, 10+c.rng.IntN(100))
		return false
	}
	return true
}

// armCrash makes the n-th next write or fsync of m's disk fail.
func (c *cluster) armCrash(m *member) {
	left := 1 + c.rng.IntN(12)
	m.armed = true
	fmt.Fprintf(c.trace, "arm%d/%d;", m.id, left)
	m.fs.SetFault(func(op vfs.Op, _ string) error {
		if op != vfs.OpWrite && op != vfs.OpSync && op != vfs.OpSyncDir && op != vfs.OpRename {
			return nil
		}
		if left--; left > 0 {
			return nil
		}
		m.fired = true
		return errPowerCut
	})
}

var errPowerCut = errors.New("power cut")

func (c *cluster) partition(dur int) {
	live := c.live()
	if len(live) < 2 {
		return
	}
	side := map[uint64]bool{}
	for _, m := range live {
		side[m.id] = c.rng.IntN(2) == 0
	}
	oneWay := c.rng.IntN(5) == 0
	for _, a := range c.ids {
		for _, b := range c.ids {
			if side[a] && !side[b] {
				c.cut[link{a, b}] = true
				if !oneWay {
					c.cut[link{b, a}] = true
				}
			}
		}
	}
	c.healAt = c.step + dur
	c.stats.partitions++
	fmt.Fprintf(c.trace, "part%v;", oneWay)
}

func (c *cluster) isolate(m *member, dur int) {
	if m == nil {
		return
	}
	for _, o := range c.ids {
		if o != m.id {
			c.cut[link{m.id, o}], c.cut[link{o, m.id}] = true, true
		}
	}
	c.healAt = c.step + dur
	c.stats.isolations++
	fmt.Fprintf(c.trace, "iso%d;", m.id)
}

func (c *cluster) heal() {
	clear(c.cut)
	c.healAt = 0
	fmt.Fprint(c.trace, "heal;")
}

func (c *cluster) transfer() {
	l, s := c.leader()
	if l == nil || c.transferTo != 0 {
		return
	}
	var to []uint64
	for _, v := range s.Voters {
		if v != l.id {
			to = append(to, v)
		}
	}
	if len(to) == 0 {
		return
	}
	c.transferTo = to[c.rng.IntN(len(to))]
	c.transferDue = c.step + 10*simElectionTicks*6
	l.node.TransferLeadershipAsync(c.transferTo)
	fmt.Fprintf(c.trace, "xfer%d>%d;", l.id, c.transferTo)
}

func (c *cluster) pollTransfer() {
	if c.transferTo == 0 {
		return
	}
	if l, _ := c.leader(); l != nil && l.id == c.transferTo {
		c.stats.transfers++
		c.transferTo = 0
	} else if c.step > c.transferDue {
		c.transferTo = 0 // the transfer was aborted (a fault got in the way)
	}
}

func (c *cluster) addMember() {
	l, s := c.leader()
	if l == nil || c.confOp != nil || len(s.Voters)+len(s.Learners) >= simMaxMembers {
		return
	}
	id := c.nextID
	c.nextID++
	m := &member{id: id, fs: vfs.NewCrashFS()}
	c.members[id] = m
	c.ids = append(c.ids, id)
	c.start(m) // joins: no Peers, waits to be added
	c.confOp = &confOp{deadline: c.step + simOpDeadline, f: l.node.ChangeMembershipAsync(raftnode.AddLearner, id, addrOf(id)), typ: raftnode.AddLearner, target: id}
	fmt.Fprintf(c.trace, "add%d;", id)
}

func (c *cluster) promote() {
	l, s := c.leader()
	if l == nil || c.confOp != nil || len(s.Learners) == 0 {
		return
	}
	id := s.Learners[c.rng.IntN(len(s.Learners))]
	if s.Match[id]+5 < s.Commit {
		return // not caught up yet
	}
	c.confOp = &confOp{deadline: c.step + simOpDeadline, f: l.node.ChangeMembershipAsync(raftnode.PromoteLearner, id, ""), typ: raftnode.PromoteLearner, target: id}
	fmt.Fprintf(c.trace, "promote%d;", id)
}

func (c *cluster) removeMember() {
	l, s := c.leader()
	if l == nil || c.confOp != nil {
		return
	}
	var cands []uint64
	if len(s.Voters) > 3 {
		cands = append(cands, s.Voters...)
	}
	cands = append(cands, s.Learners...)
	if len(cands) == 0 {
		return
	}
	id := cands[c.rng.IntN(len(cands))]
	c.confOp = &confOp{deadline: c.step + simOpDeadline, f: l.node.ChangeMembershipAsync(raftnode.RemoveMember, id, ""), typ: raftnode.RemoveMember, target: id}
	fmt.Fprintf(c.trace, "remove%d;", id)
}

func (c *cluster) pollConfOp() {
	op := c.confOp
	if op == nil {
		return
	}
	if !done(op.f) {
		if c.step > op.deadline {
			op.f.Cancel() // the proposer died or lost leadership; outcome unknown
			c.confOp = nil
		}
		return
	}
	c.confOp = nil
	_, err := op.f.Result()
	fmt.Fprintf(c.trace, "conf%d:%v;", op.target, err == nil)
	if err != nil {
		return // refused, or not applied on the proposer (e.g. it was killed)
	}
	switch op.typ {
	case raftnode.AddLearner:
		c.stats.added++
		c.client.registerCoordinator(op.target)
	case raftnode.PromoteLearner:
		c.stats.promoted++
	case raftnode.RemoveMember:
		c.stats.removed++
		if m := c.members[op.target]; m != nil && !m.gone {
			if m.node != nil {
				c.close(m)
			}
			m.node, m.gone = nil, true
		}
	}
}

// converge heals everything, restarts every member and drives the
// cluster without faults until every member of the configuration has
// applied everything the leader committed.
func (c *cluster) converge() {
	c.heal()
	c.dropPct, c.dupPct, c.maxDelay = 0, 0, 2
	for _, id := range c.ids {
		m := c.members[id]
		if m.node == nil && !m.gone {
			m.downUntil = c.step
		}
		if m.armed && !m.fired {
			m.fs.SetFault(nil)
			m.armed = false
		}
	}
	for i := range simConvergeSteps {
		c.stepOnce()
		if i%10 == 0 && c.converged() {
			c.client.final()
			return
		}
	}
	var sb []string
	for _, m := range c.live() {
		s := m.node.Status()
		sb = append(sb, fmt.Sprintf("%d: lead %d term %d commit %d applied %d voters %v learners %v removed %v",
			m.id, s.Lead, s.Term, s.Commit, s.Applied, s.Voters, s.Learners, s.Removed))
	}
	c.fatalf("no convergence after %d steps of calm:\n%v", simConvergeSteps, sb)
}

func (c *cluster) config() []uint64 {
	_, s := c.leader()
	return slices.Concat(s.Voters, s.Learners)
}

func (c *cluster) converged() bool {
	l, s := c.leader()
	if l == nil || s.Joint || s.Commit != s.LastLog || c.confOp != nil || c.client.busy() {
		return false
	}
	for _, id := range slices.Concat(s.Voters, s.Learners) {
		m := c.members[id]
		if m == nil || m.gone {
			c.fatalf("member %d is in the configuration but was removed", id)
		}
		if m.node == nil {
			return false
		}
		if ms := m.node.Status(); ms.Applied != s.Commit || ms.Removed {
			return false
		}
	}
	return true
}

// check compares the members' catalogs and the client's acknowledgements.
func (c *cluster) check() {
	for _, e := range c.errors {
		if !strings.Contains(e, errPowerCut.Error()) {
			c.fatalf("a member logged an error: %s", e)
		}
	}
	cfg := c.config()
	var ref []byte
	var refID uint64
	for _, id := range cfg {
		m := c.members[id]
		snap := m.fsm.Snapshot()
		if ref == nil {
			ref, refID = snap, id
			continue
		}
		if string(snap) != string(ref) {
			c.fatalf("catalog snapshots differ: member %d (applied %d) vs member %d (applied %d)",
				id, m.fsm.AppliedIndex(), refID, c.members[refID].fsm.AppliedIndex())
		}
	}
	fmt.Fprintf(c.trace, "final%x;", fnvSum(ref))
	fsm := c.members[refID].fsm.FSM
	if err := fsm.Check(); err != nil {
		c.fatalf("catalog invariants: %v", err)
	}
	restored := catalog.New()
	if err := restored.Restore(ref); err != nil {
		c.fatalf("restore the final snapshot: %v", err)
	}
	if string(restored.Snapshot()) != string(ref) {
		c.fatalf("the final snapshot does not survive a restore unchanged")
	}
	c.client.verify(fsm, cfg)
	for _, m := range c.live() {
		if !slices.Contains(cfg, m.id) {
			continue // removed without learning it; not compared
		}
		if s := m.node.Status(); s.Failed != nil {
			c.fatalf("member %d failed: %v", m.id, s.Failed)
		}
	}
}

// recordingFSM checks State Machine Safety as it happens: every member
// that applies the command at (index, position) applies the same bytes.
type recordingFSM struct {
	*catalog.FSM
	c         *cluster
	id        uint64
	lastIndex uint64
	pos       uint64
}

func (r *recordingFSM) Apply(index uint64, cmd []byte) (any, error) {
	if index != r.lastIndex {
		r.lastIndex, r.pos = index, 0
	}
	r.pos++
	r.record(index, r.pos, fnvSum(cmd))
	return r.FSM.Apply(index, cmd)
}

func (r *recordingFSM) ApplyMembership(index uint64, m catalog.Membership) error {
	r.record(index, 1<<32, fnvSum(fmt.Appendf(nil, "%v", m)))
	return r.FSM.ApplyMembership(index, m)
}

func (r *recordingFSM) Restore(data []byte) error {
	r.lastIndex, r.pos = 0, 0
	return r.FSM.Restore(data)
}

func (r *recordingFSM) record(index, pos, h uint64) {
	k := [2]uint64{index, pos}
	if prev, ok := r.c.applied[k]; ok && prev != h {
		r.c.fatalf("member %d applied a different command at index %d position %d than another member", r.id, index, pos)
	}
	r.c.applied[k] = h
}

func fnvSum(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// The client: registers edges and coordinators, series and held ranges,
// and checks linearizable reads.

type client struct {
	c     *cluster
	edges []string
	ops   []*op
	reads []*readOp
	// Acknowledged effects.
	seriesID  map[string]uint64 // canonical key -> id
	idSeries  map[uint64]string
	ackLog    []ackedSeries
	nodes     map[string]bool
	heldChunk map[string]map[uint64]bool // edge -> acked chunk numbers
	watermark map[string]uint64
	nextChunk map[string]uint64
	coordsDue []uint64 // coordinators to register
}

type ackedSeries struct {
	ls labels.Labels
	id uint64
}

type opKind uint8

const (
	opNode opKind = iota
	opSeries
	opHeld
	opOther
)

type op struct {
	f        *raftnode.Future
	kind     opKind
	deadline int
	series   []labels.Labels
	edge     string
	chunk    uint64
	node     string
}

type readOp struct {
	f        *raftnode.Future
	fsm      *recordingFSM
	acked    int
	deadline int
}

const chunkSeqs = 4

func newClient(c *cluster) *client {
	cl := &client{
		c: c, seriesID: map[string]uint64{}, idSeries: map[uint64]string{}, nodes: map[string]bool{},
		heldChunk: map[string]map[uint64]bool{}, watermark: map[string]uint64{}, nextChunk: map[string]uint64{},
		coordsDue: []uint64{1, 2, 3},
	}
	for i := range 4 {
		e := fmt.Sprintf("edge-%d", i)
		cl.edges = append(cl.edges, e)
		cl.heldChunk[e] = map[uint64]bool{}
	}
	return cl
}

func (cl *client) registerCoordinator(id uint64) { cl.coordsDue = append(cl.coordsDue, id) }

func (cl *client) busy() bool { return len(cl.ops) > 0 || len(cl.reads) > 0 }

func chunkRange(k uint64) catalog.HeldRange {
	first := k*chunkSeqs + 1
	return catalog.HeldRange{FirstSeq: first, LastSeq: first + chunkSeqs - 1, Points: 100 + k%7,
		MinTimeMs: int64(first) * 1000, MaxTimeMs: int64(first+chunkSeqs)*1000 - 1}
}

func (cl *client) act() {
	c := cl.c
	if c.rng.IntN(100) < 4 {
		cl.read()
	}
	if c.rng.IntN(100) >= 30 {
		return
	}
	target := c.pick(c.live())
	if target == nil {
		return
	}
	// Sometimes a burst: concurrent proposals that the member packs into
	// one raft entry.
	n := 1
	if c.rng.IntN(4) == 0 {
		n = 2 + c.rng.IntN(6)
	}
	for range n {
		cl.propose(target)
	}
}

func (cl *client) propose(target *member) {
	c := cl.c
	o := &op{deadline: c.step + simOpDeadline}
	var cmd catalog.Command
	switch r := c.rng.IntN(100); {
	case r < 8 || len(cl.coordsDue) > 0 && r < 15:
		if len(cl.coordsDue) > 0 && c.rng.IntN(2) == 0 {
			id := cl.coordsDue[0]
			cl.coordsDue = cl.coordsDue[1:]
			o.kind, o.node = opNode, fmt.Sprintf("coord-%d", id)
			cmd = catalog.RegisterNode{ID: o.node, Role: catalog.RoleCoordinator, RaftID: id, Addr: addrOf(id)}
			// Registered once acknowledged; re-queued if not.
			cl.coordsDue = append(cl.coordsDue, id)
		} else {
			e := cl.edges[c.rng.IntN(len(cl.edges))]
			o.kind, o.node = opNode, e
			cmd = catalog.RegisterNode{ID: e, Role: catalog.RoleEdge, Addr: e + ":7070", TimeMs: int64(c.step),
				Labels: labels.Labels{{Name: "site", Value: fmt.Sprintf("s%d", len(e)%3)}}}
		}
	case r < 60:
		e := cl.edges[c.rng.IntN(len(cl.edges))]
		o.kind, o.edge = opSeries, e
		for range 1 + c.rng.IntN(6) {
			o.series = append(o.series, labels.FromStrings("__name__", fmt.Sprintf("m%d", c.rng.IntN(8)),
				"host", fmt.Sprintf("h%d", c.rng.IntN(16)), "dc", fmt.Sprintf("d%d", c.rng.IntN(3))))
		}
		cmd = catalog.RegisterSeries{Edge: e, Series: o.series}
	case r < 88:
		e := cl.edges[c.rng.IntN(len(cl.edges))]
		k := cl.nextChunk[e]
		if k > 0 && c.rng.IntN(4) == 0 {
			k = uint64(c.rng.IntN(int(k))) // a replay of an earlier segment range
		} else {
			cl.nextChunk[e]++
		}
		rg := chunkRange(k)
		o.kind, o.edge, o.chunk = opHeld, e, k
		held := catalog.RecordHeld{Edge: e, Ranges: []catalog.HeldRange{rg}, WatermarkSeq: rg.LastSeq, WatermarkTimeMs: rg.MaxTimeMs}
		cmd = held
		if k%2 == 1 {
			// As an intake batches records: the op's record first, then
			// a replay of it, which must change nothing.
			cmd = catalog.RecordBatch{Records: []catalog.Command{held, held}}
		}
	case r < 95:
		var beats []catalog.Beat
		for _, e := range cl.edges {
			beats = append(beats, catalog.Beat{ID: e, TimeMs: int64(c.step)})
		}
		o.kind, cmd = opOther, catalog.Heartbeat{Beats: beats}
	default:
		cfg := catalog.DefaultConfig
		cfg.ReplicationFactor = uint32(1 + c.rng.IntN(3))
		o.kind, cmd = opOther, catalog.SetConfig{Config: cfg}
	}
	o.f = target.node.ProposeAsync(catalog.EncodeCommand(cmd))
	cl.ops = append(cl.ops, o)
}

// final proposes one command through every member of the healed
// cluster: each must be acknowledged (liveness), and the cluster must
// converge again.
func (cl *client) final() {
	c := cl.c
	var fs []*raftnode.Future
	for _, id := range c.config() {
		m := c.members[id]
		ls := labels.FromStrings("__name__", "final", "member", strconv.FormatUint(id, 10))
		cmd := catalog.EncodeCommand(catalog.RegisterSeries{Edge: fmt.Sprintf("coord-%d", id), Series: []labels.Labels{ls}})
		fs = append(fs, m.node.ProposeAsync(cmd))
	}
	for range simConvergeSteps {
		c.stepOnce()
		if !slices.ContainsFunc(fs, func(f *raftnode.Future) bool { return !done(f) }) && c.converged() {
			break
		}
	}
	for i, f := range fs {
		if !done(f) {
			c.fatalf("a proposal through member %d of the healed cluster was never applied", c.config()[i])
		}
		if _, err := f.Result(); err != nil && !errors.Is(err, catalog.ErrNotFound) {
			c.fatalf("a proposal through member %d of the healed cluster failed: %v", c.config()[i], err)
		}
	}
	if !c.converged() {
		c.fatalf("the cluster did not converge again after the final proposals")
	}
}

func (cl *client) read() {
	c := cl.c
	m := c.pick(c.live())
	if m == nil {
		return
	}
	cl.reads = append(cl.reads, &readOp{f: m.node.ReadAsync(), fsm: m.fsm, acked: len(cl.ackLog), deadline: c.step + simOpDeadline})
}

func done(f *raftnode.Future) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

func (cl *client) poll() {
	c := cl.c
	cl.ops = slices.DeleteFunc(cl.ops, func(o *op) bool {
		if !done(o.f) {
			if c.step > o.deadline {
				o.f.Cancel()
				c.stats.unknown++
				return true
			}
			return false
		}
		res, err := o.f.Result()
		cl.settle(o, res, err)
		return true
	})
	cl.reads = slices.DeleteFunc(cl.reads, func(r *readOp) bool {
		if !done(r.f) {
			if c.step > r.deadline {
				r.f.Cancel()
				return true
			}
			return false
		}
		if _, err := r.f.Result(); err != nil {
			return true
		}
		// A linearizable read sees every write acknowledged before it began.
		for _, a := range cl.ackLog[:r.acked] {
			if id, ok := r.fsm.Lookup(a.ls); !ok || id != a.id {
				c.fatalf("linearizable read on member %d misses series %v (id %d; found %d, %v)", r.fsm.id, a.ls, a.id, id, ok)
			}
		}
		c.stats.readsChecked++
		return true
	})
}

func (cl *client) settle(o *op, res any, err error) {
	c := cl.c
	if b, ok := res.(catalog.RecordBatchResult); ok && err == nil {
		// The op's record is the batch's first.
		res, err = b.Records[0].Result, b.Records[0].Err
		if dup, _ := b.Records[1].Result.(catalog.RecordHeldResult); err == nil && (b.Records[1].Err != nil || dup.Added != 0) {
			c.fatalf("the replay inside a batch: %+v, %v; want a duplicate", b.Records[1].Result, b.Records[1].Err)
		}
	}
	var ce *catalog.CommandError
	switch {
	case err == nil:
		c.stats.acked++
	case errors.As(err, &ce):
		c.stats.rejected++
		if errors.Is(err, catalog.ErrNotFound) {
			return // the edge was not registered yet
		}
		c.fatalf("command rejected unexpectedly: %v", err)
	default:
		c.stats.unknown++ // not applied here: dropped, or the member stopped
		return
	}
	switch o.kind {
	case opNode:
		cl.nodes[o.node] = true
		var id uint64
		if _, err := fmt.Sscanf(o.node, "coord-%d", &id); err == nil {
			cl.coordsDue = slices.DeleteFunc(cl.coordsDue, func(x uint64) bool { return x == id })
		}
	case opSeries:
		r := res.(catalog.RegisterSeriesResult)
		if len(r.IDs) != len(o.series) {
			c.fatalf("register-series returned %d ids for %d series", len(r.IDs), len(o.series))
		}
		for i, ls := range o.series {
			id := r.IDs[i]
			key := ls.String()
			if id == 0 {
				c.fatalf("valid series %v rejected: %+v", ls, r.Rejected)
			}
			if prev, ok := cl.seriesID[key]; ok && prev != id {
				c.fatalf("series %v acknowledged with id %d, earlier with %d", ls, id, prev)
			}
			if prev, ok := cl.idSeries[id]; ok && prev != key {
				c.fatalf("id %d acknowledged for %v and for %v", id, ls, prev)
			}
			if _, ok := cl.seriesID[key]; !ok {
				cl.seriesID[key], cl.idSeries[id] = id, key
				cl.ackLog = append(cl.ackLog, ackedSeries{ls, id})
			}
		}
	case opHeld:
		r := res.(catalog.RecordHeldResult)
		cl.heldChunk[o.edge][o.chunk] = true
		cl.watermark[o.edge] = max(cl.watermark[o.edge], chunkRange(o.chunk).LastSeq)
		if r.WatermarkSeq < chunkRange(o.chunk).LastSeq {
			c.fatalf("record-held of %s chunk %d: watermark %d below the chunk", o.edge, o.chunk, r.WatermarkSeq)
		}
	}
}

// verify requires every acknowledged effect in the final catalog.
func (cl *client) verify(fsm *catalog.FSM, cfg []uint64) {
	c := cl.c
	for _, a := range cl.ackLog {
		if id, ok := fsm.Lookup(a.ls); !ok || id != a.id {
			c.fatalf("acknowledged series %v (id %d) is not in the final catalog (found %d, %v)", a.ls, a.id, id, ok)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cl.nodes)) {
		n, ok := fsm.Node(name)
		if !ok {
			c.fatalf("acknowledged node %s is not registered", name)
		}
		if n.Role == catalog.RoleCoordinator && !slices.Contains(cfg, n.RaftID) && !cl.removedMember(n.RaftID) {
			c.fatalf("coordinator %s (raft %d) is neither a member nor removed", name, n.RaftID)
		}
	}
	for _, e := range cl.edges {
		p, _ := fsm.Progress(e)
		if p.WatermarkSeq < cl.watermark[e] {
			c.fatalf("edge %s: watermark %d, acknowledged %d", e, p.WatermarkSeq, cl.watermark[e])
		}
		for _, k := range slices.Sorted(maps.Keys(cl.heldChunk[e])) {
			rg := chunkRange(k)
			in := false
			for _, h := range p.Held {
				in = in || (h.FirstSeq <= rg.FirstSeq && rg.LastSeq <= h.LastSeq)
			}
			if !in {
				c.fatalf("edge %s: acknowledged range [%d,%d] is not held: %+v", e, rg.FirstSeq, rg.LastSeq, p.Held)
			}
		}
	}
	for _, m := range fsm.Members() {
		if !slices.Contains(cfg, m.RaftID) {
			c.fatalf("catalog member %d is not in the raft configuration %v", m.RaftID, cfg)
		}
		if m.Addr != addrOf(m.RaftID) {
			c.fatalf("catalog member %d has address %q", m.RaftID, m.Addr)
		}
	}
	if len(fsm.Members()) != len(cfg) {
		c.fatalf("catalog has %d members, raft %d", len(fsm.Members()), len(cfg))
	}
}

func (cl *client) removedMember(id uint64) bool {
	m := cl.c.members[id]
	return m == nil || m.gone || !slices.Contains(cl.c.config(), id)
}
