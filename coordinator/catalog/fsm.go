package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tributarydb/tributary/node/labels"
)

// The classes of a rejected command; a *CommandError wraps one of them.
var (
	// ErrBadCommand: the command is malformed or asks for something invalid.
	ErrBadCommand = errors.New("bad command")
	// ErrNotFound: the command names a node that is not registered.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the command contradicts the catalog (a role or identity
	// change, a range overlapping a held run).
	ErrConflict = errors.New("conflict")
	// ErrLimit: applying the command would exceed a catalog limit.
	ErrLimit = errors.New("limit exceeded")
	// ErrStale: the command was built from a state that changed before it
	// applied (a segment stored on replicas no longer placed); building it
	// again from the current state may succeed.
	ErrStale = errors.New("stale")
)

// CommandError is a command that was applied and rejected: the catalog did
// not change (apart from its applied index). Every member rejects it the
// same way, with the same message.
type CommandError struct {
	Kind Kind
	Err  error // ErrBadCommand, ErrNotFound, ErrConflict, ErrLimit or ErrStale
	Msg  string
}

func (e *CommandError) Error() string { return fmt.Sprintf("catalog %s: %s", e.Kind, e.Msg) }

// Unwrap returns the class of the error.
func (e *CommandError) Unwrap() error { return e.Err }

func cmdErr(k Kind, class error, format string, args ...any) *CommandError {
	return &CommandError{Kind: k, Err: class, Msg: fmt.Sprintf(format, args...)}
}

// RegisterNodeResult is the result of RegisterNode.
type RegisterNodeResult struct {
	Created bool
}

// HeartbeatResult is the result of Heartbeat.
type HeartbeatResult struct {
	Updated int
	// Unknown lists the first 64 ids that are not registered.
	Unknown []string
}

// RegisterSeriesResult is the result of RegisterSeries.
type RegisterSeriesResult struct {
	// IDs holds one id per series of the command, 0 for a rejected one.
	IDs []uint64
	// Created counts series new to the fleet.
	Created int
	// Rejected describes the first 64 rejected series.
	Rejected []Rejection
}

// Rejection says why one item of a batch was rejected.
type Rejection struct {
	Index  int
	Reason string
}

// RecordHeldResult is the result of RecordHeld.
type RecordHeldResult struct {
	// Added counts ranges newly recorded, Duplicates ranges already held.
	Added, Duplicates int
	// AckedThrough is the edge's EdgeProgress.AckedThrough after the
	// command.
	AckedThrough uint64
	// The edge's watermark after the command.
	WatermarkSeq    uint64
	WatermarkTimeMs int64
	// Holders counts the replicas recorded as holding the segments.
	Holders int
}

// RecordReplicatedResult is the result of RecordReplicated.
type RecordReplicatedResult struct {
	// Changed: the replica's lacks changed; Dropped: leaving replicas were
	// dropped as a result; Lacks: the lack runs the replica has left.
	Changed, Dropped bool
	Lacks            int
}

// SetNodeStateResult is the result of SetNodeState.
type SetNodeStateResult struct {
	// Changed: the state changed; Moved counts placements that changed.
	Changed bool
	Moved   int
}

// RecordGapResult is the result of RecordGap.
type RecordGapResult struct {
	// Added counts gaps of which something was recorded, Duplicates gaps
	// with nothing left to record (held, or recorded before).
	Added, Duplicates int
	// AckedThrough is the edge's EdgeProgress.AckedThrough after the
	// command.
	AckedThrough uint64
	// The edge's watermark after the command.
	WatermarkSeq    uint64
	WatermarkTimeMs int64
}

// RebalanceResult is the result of Rebalance.
type RebalanceResult struct {
	// Changed counts placements whose replicas changed.
	Changed int
}

const maxReported = 64

// FSM is the series catalog: a deterministic state machine. Applying the
// same commands at the same indexes to two FSMs leaves them with
// byte-identical snapshots.
//
// Concurrency: one goroutine (raft's apply loop) calls Apply,
// ApplyMembership and Restore; any number of goroutines may call the read
// methods and Snapshot at the same time.
type FSM struct {
	mu sync.RWMutex
	st *state // REQUIRES: mu held to read or write
}

type state struct {
	applied uint64
	config  FleetConfig
	members map[uint64]*Member
	nodes   map[string]*Node
	// series holds the labels of every series by id: ids are dense, start
	// at 1 and are never reused. A series' label names and values are the
	// strings of its postings (interned), not copies of its own.
	series seriesStore
	// seriesKeyBytes counts the bytes of the series' canonical keys as the
	// snapshot writes them (derived).
	seriesKeyBytes int
	// byHash finds a series by the hash of its canonical key
	// (labels.AppendKey); collided, by key, the few whose hash an earlier
	// series took. Together they index every series once (derived).
	byHash   map[uint64]uint64
	collided map[string]uint64
	// postings[name] lists, per value of the label, the ids of series with
	// that label, sorted (derived).
	postings map[string]*namePostings
	// edgeSeries[edge] lists the ids of series registered by the edge, sorted.
	edgeSeries map[string][]uint64
	placement  map[string]*Placement
	progress   map[string]*EdgeProgress
	// registered[edge] is the edge's registration watermark
	// (AnnounceSeries), for the edges that announced.
	registered map[string]int64
	// ruleGroups are the fleet's rule groups by name; rulesVersion is the
	// index of the last change to them (0: none ever).
	ruleGroups   map[string]*RuleGroup
	rulesVersion uint64
	// load[coordinator] counts the placements holding it (derived).
	load map[string]int
	// eligibleCache holds eligible() while eligibleOK (derived).
	eligibleCache []string
	eligibleOK    bool
}

// keyHash hashes a series' canonical key for byHash (a variable so that
// tests can force collisions).
var keyHash = labels.Hash

func newState() *state {
	return &state{
		config:     DefaultConfig,
		members:    map[uint64]*Member{},
		nodes:      map[string]*Node{},
		byHash:     map[uint64]uint64{},
		collided:   map[string]uint64{},
		postings:   map[string]*namePostings{},
		edgeSeries: map[string][]uint64{},
		placement:  map[string]*Placement{},
		progress:   map[string]*EdgeProgress{},
		registered: map[string]int64{},
		ruleGroups: map[string]*RuleGroup{},
		load:       map[string]int{},
	}
}

// New returns an empty catalog with DefaultConfig.
func New() *FSM { return &FSM{st: newState()} }

// Apply decodes and applies one command at raft index index. Several
// commands may share an index (one raft entry may carry a batch); index
// must not go back. A rejected command returns a *CommandError and leaves
// the catalog unchanged; the result's type depends on the command (see
// each command).
func (f *FSM) Apply(index uint64, cmd []byte) (any, error) {
	c, err := DecodeCommand(cmd)
	if err != nil {
		k := Kind(0)
		if len(cmd) > 1 {
			k = Kind(cmd[1])
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if index > f.st.applied {
			f.st.applied = index
		}
		return nil, &CommandError{Kind: k, Err: ErrBadCommand, Msg: err.Error()}
	}
	return f.ApplyCommand(index, c)
}

// Reproposable reports whether cmd may be proposed again when its first
// proposal may have been lost with a leader (raftnode re-proposes such
// commands; a re-proposed command can be applied twice, the second time
// after other commands). Only commands whose second application changes
// nothing whatever came between are: RegisterSeries (known series keep
// their ids), RecordHeld (held runs only grow; a replay adds no lacks,
// since its ranges are then duplicates), RecordGap (held segments and the
// first declaration win), Heartbeat (times never go back) and
// RecordReplicated (bound to the replica's placement index: cutting
// the same lacks again changes nothing, and a later placement ignores it)
// and RecordMissing (adding lacks again only makes the replica be repaired
// again, which is safe), AnnounceSeries (known series keep their ids, the
// registration watermark never goes back), and RecordBatch (it carries
// only commands of those kinds, each applied as on its own). The
// others — a RegisterNode after a RemoveNode, a SetConfig after a newer
// one — could undo what came between, so their proposers wait and retry.
func (f *FSM) Reproposable(cmd []byte) bool {
	if len(cmd) < 2 || cmd[0] != CommandVersion {
		return false
	}
	switch Kind(cmd[1]) {
	case KindRegisterSeries, KindRecordHeld, KindRecordStored, KindRecordGap, KindHeartbeat, KindRecordReplicated, KindRecordMissing, KindAnnounceSeries, KindRecordBatch:
		return true
	}
	return false
}

// ApplyCommand applies a decoded command; see Apply.
func (f *FSM) ApplyCommand(index uint64, c Command) (any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.st
	if index < s.applied {
		return nil, cmdErr(c.Kind(), ErrBadCommand, "index %d is behind the applied index %d", index, s.applied)
	}
	s.applied = index
	return s.apply(index, c)
}

// apply applies c at index (a command of its own, or a record of a
// RecordBatch). REQUIRES: f.mu held for writing, s.applied == index.
func (s *state) apply(index uint64, c Command) (any, error) {
	switch c := c.(type) {
	case RegisterNode:
		return s.registerNode(index, c)
	case RemoveNode:
		return nil, s.removeNode(index, c)
	case Heartbeat:
		return s.heartbeat(c), nil
	case RegisterSeries:
		return s.registerSeries(c)
	case RecordHeld:
		return s.recordHeld(c)
	case SetPlacement:
		return s.setPlacement(index, c)
	case Rebalance:
		moves := -1
		if c.MaxMoves > 0 {
			moves = int(c.MaxMoves)
		}
		return RebalanceResult{Changed: s.rebalance(index, moves)}, nil
	case RecordReplicated:
		return s.recordReplicated(index, c)
	case RecordMissing:
		return s.recordMissing(c)
	case SetNodeState:
		return s.setNodeState(index, c)
	case SetRevoked:
		return nil, s.setRevoked(c)
	case SetConfig:
		return s.setConfig(index, c)
	case RecordGap:
		return s.recordGap(c)
	case AnnounceSeries:
		return s.announceSeries(c)
	case SetRuleGroup:
		return s.setRuleGroup(index, c)
	case DeleteRuleGroup:
		return nil, s.deleteRuleGroup(index, c)
	case RecordBatch:
		return s.recordBatch(index, c), nil
	}
	return nil, cmdErr(c.Kind(), ErrBadCommand, "unknown command")
}

// ApplyMembership records the raft configuration after a configuration
// change applied at index, and rebalances placements if the set of
// coordinators able to hold or keep replicas changed.
func (f *FSM) ApplyMembership(index uint64, m Membership) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.st
	if index < s.applied {
		return fmt.Errorf("catalog membership: index %d is behind the applied index %d", index, s.applied)
	}
	next := map[uint64]*Member{}
	for _, id := range m.Voters {
		if id == 0 {
			return fmt.Errorf("catalog membership: raft id 0")
		}
		next[id] = &Member{RaftID: id}
	}
	for _, id := range m.Learners {
		if id == 0 {
			return fmt.Errorf("catalog membership: raft id 0")
		}
		if next[id] == nil {
			next[id] = &Member{RaftID: id, Learner: true}
		}
	}
	for id, mb := range next {
		if old := s.members[id]; old != nil {
			mb.Addr = old.Addr
		}
	}
	for _, a := range m.Addrs {
		if mb := next[a.RaftID]; mb != nil {
			if len(a.Addr) > MaxAddrBytes {
				return fmt.Errorf("catalog membership: member %d: address is %d bytes, limit is %d", a.RaftID, len(a.Addr), MaxAddrBytes)
			}
			mb.Addr = a.Addr
		}
	}
	before, presentBefore := s.eligible(), s.presentCoordinators()
	s.applied = index
	s.members = next
	s.invalidateEligible()
	if !slices.Equal(before, s.eligible()) || !slices.Equal(presentBefore, s.presentCoordinators()) {
		s.rebalance(index, 0)
	}
	return nil
}

func (s *state) registerNode(index uint64, c RegisterNode) (any, error) {
	k := c.Kind()
	if err := validNodeID(c.ID); err != nil {
		return nil, cmdErr(k, ErrBadCommand, "%v", err)
	}
	if !c.Role.valid() {
		return nil, cmdErr(k, ErrBadCommand, "node %q: unknown role %d", c.ID, uint8(c.Role))
	}
	switch {
	case c.Role == RoleCoordinator && c.RaftID == 0:
		return nil, cmdErr(k, ErrBadCommand, "coordinator %q: raft id 0", c.ID)
	case c.Role == RoleEdge && c.RaftID != 0:
		return nil, cmdErr(k, ErrBadCommand, "edge %q: raft id %d given; only coordinators have one", c.ID, c.RaftID)
	case len(c.Addr) > MaxAddrBytes:
		return nil, cmdErr(k, ErrBadCommand, "node %q: address is %d bytes, limit is %d", c.ID, len(c.Addr), MaxAddrBytes)
	case len(c.Identity) > MaxIdentityBytes:
		return nil, cmdErr(k, ErrBadCommand, "node %q: identity is %d bytes, limit is %d", c.ID, len(c.Identity), MaxIdentityBytes)
	case !utf8.ValidString(c.Addr) || !utf8.ValidString(c.Identity):
		return nil, cmdErr(k, ErrBadCommand, "node %q: address or identity is not valid UTF-8", c.ID)
	}
	ls, err := nodeLabels(c.Labels)
	if err != nil {
		return nil, cmdErr(k, ErrBadCommand, "node %q: %v", c.ID, err)
	}
	if c.Role == RoleCoordinator {
		for _, n := range s.nodes {
			if n.ID != c.ID && n.RaftID == c.RaftID {
				return nil, cmdErr(k, ErrConflict, "coordinator %q: raft id %d belongs to %q", c.ID, c.RaftID, n.ID)
			}
		}
	}
	if c.Role == RoleEdge && c.StoreID != "" {
		return nil, cmdErr(k, ErrBadCommand, "edge %q: store id given; only coordinators have one", c.ID)
	}
	if len(c.StoreID) > MaxIDBytes {
		return nil, cmdErr(k, ErrBadCommand, "coordinator %q: store id is %d bytes, limit is %d", c.ID, len(c.StoreID), MaxIDBytes)
	}
	n := s.nodes[c.ID]
	if n != nil {
		// A coordinator whose raft member was removed may come back under
		// a new raft id (a member that lost its disk joins anew): it is
		// then a new member with a new store, holding nothing yet.
		rejoin := n.Role == RoleCoordinator && c.Role == RoleCoordinator && n.RaftID != c.RaftID && s.members[n.RaftID] == nil
		switch {
		case n.Role != c.Role:
			return nil, cmdErr(k, ErrConflict, "node %q is registered as %s, not %s", c.ID, n.Role, c.Role)
		case n.RaftID != c.RaftID && !rejoin:
			return nil, cmdErr(k, ErrConflict, "coordinator %q has raft id %d, not %d", c.ID, n.RaftID, c.RaftID)
		case n.Identity != "" && n.Identity != c.Identity:
			return nil, cmdErr(k, ErrConflict, "node %q is bound to another certificate identity; remove it first", c.ID)
		}
		n.Addr, n.Identity, n.Labels = c.Addr, c.Identity, ls
		n.LastHeartbeatMs = max(n.LastHeartbeatMs, c.TimeMs)
		if c.StoreID != "" && n.StoreID != c.StoreID {
			if n.StoreID != "" && !rejoin {
				// Another replica store under the same member (its replica
				// directory was replaced): it holds none of what the old
				// one held, whatever the placements said.
				s.resetHoldings(index, c.ID)
			}
			n.StoreID = c.StoreID
		}
		if rejoin {
			n.RaftID, n.State, n.StateIndex, n.RegisteredIndex = c.RaftID, NodeActive, index, index
			s.invalidateEligible()
			s.rebalance(index, 0)
		}
		return RegisterNodeResult{}, nil
	}
	s.nodes[c.ID] = &Node{
		ID: c.ID, Role: c.Role, RaftID: c.RaftID, Addr: c.Addr, Identity: c.Identity,
		Labels: ls, RegisteredIndex: index, LastHeartbeatMs: c.TimeMs, StoreID: c.StoreID,
	}
	switch c.Role {
	case RoleEdge:
		p := &Placement{Edge: c.ID}
		s.placement[c.ID] = p
		s.fill(index, p, s.eligible())
	case RoleCoordinator:
		s.invalidateEligible()
		if s.members[c.RaftID] != nil {
			s.rebalance(index, 0)
		}
	}
	return RegisterNodeResult{Created: true}, nil
}

// NodeLabels validates and sorts a node's labels as RegisterNode does
// (see nodeLabels), for a caller that compares them with the catalog's.
func NodeLabels(in labels.Labels) (labels.Labels, error) { return nodeLabels(in) }

// nodeLabels validates and sorts a node's labels: names as for series
// labels, no duplicates, values valid UTF-8, empty values dropped, the
// series limits on lengths and at most MaxNodeLabels labels.
func nodeLabels(in labels.Labels) (labels.Labels, error) {
	if len(in) > MaxNodeLabels {
		return nil, fmt.Errorf("%d labels, limit is %d", len(in), MaxNodeLabels)
	}
	ls := make(labels.Labels, 0, len(in))
	for _, l := range in {
		if l.Value != "" {
			ls = append(ls, l)
		}
	}
	slices.SortFunc(ls, func(a, b labels.Label) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	lim := labels.DefaultLimits
	for i, l := range ls {
		if err := validLabelName(l.Name); err != nil {
			return nil, err
		}
		if i > 0 && ls[i-1].Name == l.Name {
			return nil, fmt.Errorf("duplicate label name %q", l.Name)
		}
		if len(l.Name) > lim.MaxNameBytes || len(l.Value) > lim.MaxValueBytes {
			return nil, fmt.Errorf("label %.32q: name or value too long (limits %d and %d bytes)", l.Name, lim.MaxNameBytes, lim.MaxValueBytes)
		}
		if !utf8.ValidString(l.Value) {
			return nil, fmt.Errorf("label %q: value is not valid UTF-8", l.Name)
		}
	}
	if len(ls) == 0 {
		return nil, nil
	}
	return ls, nil
}

// validLabelName accepts the names node/labels accepts.
func validLabelName(n string) error {
	if n == "" {
		return fmt.Errorf("empty label name")
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(i > 0 && ((c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':'))
		if !ok {
			return fmt.Errorf("label name %.32q: character %q at %d is not allowed", n, c, i)
		}
	}
	return nil
}

func (s *state) removeNode(index uint64, c RemoveNode) error {
	n := s.nodes[c.ID]
	if n == nil {
		return cmdErr(c.Kind(), ErrNotFound, "node %q is not registered", c.ID)
	}
	delete(s.nodes, c.ID)
	switch n.Role {
	case RoleEdge:
		if p := s.placement[c.ID]; p != nil {
			s.setReplicas(index, p, nil)
			delete(s.placement, c.ID)
		}
		delete(s.progress, c.ID)
		delete(s.edgeSeries, c.ID)
		delete(s.registered, c.ID)
	case RoleCoordinator:
		s.invalidateEligible()
		s.rebalance(index, 0)
	}
	return nil
}

// resetHoldings makes every replica of coordinator id, active or leaving,
// lack everything its edge holds (a new, empty store).
func (s *state) resetHoldings(index uint64, id string) {
	for _, e := range sortedKeys(s.placement) {
		p := s.placement[e]
		fresh := s.freshHolding(e, index)
		touched := false
		for i, r := range p.Replicas {
			if r == id {
				p.Holdings[i] = fresh
				touched = true
			}
		}
		for i := range p.Leaving {
			if p.Leaving[i].ID == id {
				p.Leaving[i].Holding = fresh
				touched = true
			}
		}
		if touched {
			p.Epoch = index
		}
	}
}

func (s *state) setNodeState(index uint64, c SetNodeState) (any, error) {
	k := c.Kind()
	n := s.nodes[c.ID]
	switch {
	case n == nil:
		return nil, cmdErr(k, ErrNotFound, "node %q is not registered", c.ID)
	case n.Role != RoleCoordinator:
		return nil, cmdErr(k, ErrBadCommand, "node %q is a %s; only coordinators have a placement state", c.ID, n.Role)
	case !c.State.valid():
		return nil, cmdErr(k, ErrBadCommand, "coordinator %q: unknown state %d", c.ID, uint8(c.State))
	}
	var res SetNodeStateResult
	if n.State == c.State || (c.HeartbeatBeforeMs != 0 && n.LastHeartbeatMs >= c.HeartbeatBeforeMs) {
		return res, nil
	}
	n.State, n.StateIndex = c.State, index
	res.Changed = true
	s.invalidateEligible()
	res.Moved = s.rebalance(index, 0)
	return res, nil
}

func (s *state) setRevoked(c SetRevoked) error {
	k := c.Kind()
	n := s.nodes[c.ID]
	switch {
	case n == nil:
		return cmdErr(k, ErrNotFound, "node %q is not registered", c.ID)
	case n.Role != RoleEdge:
		return cmdErr(k, ErrBadCommand, "node %q is a %s; only edges can be revoked", c.ID, n.Role)
	}
	n.Revoked = c.Revoked
	return nil
}

func (s *state) heartbeat(c Heartbeat) HeartbeatResult {
	var r HeartbeatResult
	for _, b := range c.Beats {
		n := s.nodes[b.ID]
		if n == nil {
			if len(r.Unknown) < maxReported {
				r.Unknown = append(r.Unknown, b.ID)
			}
			continue
		}
		n.LastHeartbeatMs = max(n.LastHeartbeatMs, b.TimeMs)
		r.Updated++
	}
	return r
}

func (s *state) setConfig(index uint64, c SetConfig) (any, error) {
	cfg := c.Config
	if err := cfg.validate(); err != nil {
		return nil, cmdErr(c.Kind(), ErrBadCommand, "%v", err)
	}
	cfg.Version = s.config.Version
	if cfg == s.config {
		// The configuration in force already (a command applied twice):
		// changing nothing keeps SetConfig idempotent.
		return cfg, nil
	}
	cfg.Version = index
	rfChanged := cfg.ReplicationFactor != s.config.ReplicationFactor
	s.config = cfg
	if rfChanged {
		s.rebalance(index, 0)
	}
	return cfg, nil
}
