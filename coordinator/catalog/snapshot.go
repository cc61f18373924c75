package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"

	"github.com/tributarydb/tributary/internal/binread"
	"github.com/tributarydb/tributary/node/labels"
)

// Snapshot framing; see the package documentation.
const (
	snapshotMagic   = "TCAT"
	SnapshotVersion = 6
	// snapshotVersionNoRules is version 6 without the rule groups
	// section (and with a registration section only when not empty).
	// Snapshot writes it, or version 4, while no rule group was ever set,
	// so that members of the versions before can restore the catalog.
	snapshotVersionNoRules = 5
	// snapshotVersionNoRegistration is version 5 without the registration
	// section. Snapshot writes it while no edge has announced series, so
	// that members of the version before (which read up to 4) can still
	// restore the catalog until AnnounceSeries is enabled.
	snapshotVersionNoRegistration = 4
	// snapshotVersionFrom is the previous version, which Restore still
	// reads: placements carry per replica a FromSeq and LacksThroughMs
	// instead of lack runs and leaving replicas, nodes no store id, state
	// or revocation, and the configuration no write quorum or dead-after.
	snapshotVersionFrom = 3
	// Version 2 (also read) is version 3 with placements listing
	// coordinator ids only: every replica holds the whole history.
	// snapshotVersionNoGaps is the version before it, also read: as
	// version 2, and its progress entries have no gap list.
	snapshotVersionNoGaps = 1
)

// Section tags, in the order they appear.
const (
	secConfig     = 1
	secMembers    = 2
	secNodes      = 3
	secSeries     = 4
	secEdgeSeries = 5
	secPlacements = 6
	secProgress   = 7
	// secRegistration is in versions 5 and 6.
	secRegistration = 8
	// secRuleGroups is in version 6 only.
	secRuleGroups = 9
)

// ErrCorruptSnapshot is wrapped by every error Restore returns for bytes
// that are not a valid snapshot.
var ErrCorruptSnapshot = errors.New("corrupt catalog snapshot")

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// Snapshot encodes the whole catalog. Two catalogs holding the same state
// encode to the same bytes: everything is written in sorted order, and
// nothing derived (postings, loads) is written.
func (f *FSM) Snapshot() []byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.appendSnapshot(nil)
}

// AppliedIndex returns the raft index of the last command or membership
// change applied (or restored).
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.applied
}

func appendSection(b []byte, tag byte, body []byte) []byte {
	b = append(b, tag)
	b = appendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

func (s *state) appendSnapshot(b []byte) []byte {
	b = append(b, snapshotMagic...)
	version := byte(SnapshotVersion)
	switch {
	case s.rulesVersion != 0:
	case len(s.registered) != 0:
		version = snapshotVersionNoRules
	default:
		version = snapshotVersionNoRegistration
	}
	b = append(b, version)
	b = appendUvarint(b, s.applied)

	var sec []byte
	sec = appendConfig(sec, s.config)
	sec = appendConfigExt(sec, s.config)
	sec = appendUvarint(sec, s.config.Version)
	if s.config.hasSealPolicy() {
		sec = appendConfigExt2(sec, s.config)
	}
	b = appendSection(b, secConfig, sec)

	sec = appendUvarint(sec[:0], uint64(len(s.members)))
	for _, id := range slices.Sorted(maps.Keys(s.members)) {
		m := s.members[id]
		sec = appendUvarint(sec, m.RaftID)
		sec = appendBool(sec, m.Learner)
		sec = appendString(sec, m.Addr)
	}
	b = appendSection(b, secMembers, sec)

	sec = appendUvarint(sec[:0], uint64(len(s.nodes)))
	for _, id := range sortedKeys(s.nodes) {
		n := s.nodes[id]
		sec = appendString(sec, n.ID)
		sec = append(sec, byte(n.Role))
		sec = appendUvarint(sec, n.RaftID)
		sec = appendString(sec, n.Addr)
		sec = appendString(sec, n.Identity)
		sec = appendLabels(sec, n.Labels)
		sec = appendUvarint(sec, n.RegisteredIndex)
		sec = appendVarint(sec, n.LastHeartbeatMs)
		sec = appendString(sec, n.StoreID)
		sec = append(sec, byte(n.State))
		sec = appendUvarint(sec, n.StateIndex)
		sec = appendBool(sec, n.Revoked)
	}
	b = appendSection(b, secNodes, sec)

	// The sections after the series are built first, so that b, which
	// holds the series, grows once.
	tail := s.appendTailSections(nil, sec[:0], version)

	// The series section is the big one: write it straight into b, grown
	// once for it and the sections after it.
	size := binary.AppendUvarint(nil, uint64(s.series.len()))
	total := len(size) + s.seriesKeyBytes
	b = slices.Grow(b, 1+binary.MaxVarintLen64+total+len(tail)+4)
	b = append(b, secSeries)
	b = appendUvarint(b, uint64(total))
	b = append(b, size...)
	end := len(b) + s.seriesKeyBytes
	s.series.each(func(_ uint64, ls labels.Labels) { b = appendKeyString(b, ls) })
	if len(b) != end {
		panic(fmt.Sprintf("BUG: catalog snapshot: the series keys took %d bytes, not the %d counted", len(b)-end+s.seriesKeyBytes, s.seriesKeyBytes))
	}

	b = append(b, tail...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// appendTailSections appends to tail the sections that follow the series
// in a snapshot of the given version (edges' series, placements,
// progress, registration, rule groups), building each in sec (scratch
// space).
func (s *state) appendTailSections(tail, sec []byte, version byte) []byte {
	sec = appendUvarint(sec, uint64(len(s.edgeSeries)))
	for _, e := range sortedKeys(s.edgeSeries) {
		ids := s.edgeSeries[e]
		sec = appendString(sec, e)
		sec = appendUvarint(sec, uint64(len(ids)))
		prev := uint64(0)
		for _, id := range ids {
			sec = appendUvarint(sec, id-prev)
			prev = id
		}
	}
	tail = appendSection(tail, secEdgeSeries, sec)

	sec = appendUvarint(sec[:0], uint64(len(s.placement)))
	for _, e := range sortedKeys(s.placement) {
		p := s.placement[e]
		sec = appendString(sec, p.Edge)
		sec = appendUvarint(sec, p.Epoch)
		sec = appendBool(sec, p.Pinned)
		sec = appendUvarint(sec, uint64(len(p.Replicas)))
		for i, r := range p.Replicas {
			sec = appendString(sec, r)
			sec = appendHolding(sec, p.Holdings[i])
		}
		sec = appendList(sec, p.Leaving, func(b []byte, l LeavingReplica) []byte {
			return appendHolding(appendString(b, l.ID), l.Holding)
		})
	}
	tail = appendSection(tail, secPlacements, sec)

	sec = appendUvarint(sec[:0], uint64(len(s.progress)))
	for _, e := range sortedKeys(s.progress) {
		p := s.progress[e]
		sec = appendString(sec, p.Edge)
		sec = appendUvarint(sec, p.WatermarkSeq)
		sec = appendVarint(sec, p.WatermarkTimeMs)
		sec = appendList(sec, p.Held, appendHeldRange)
		sec = appendList(sec, p.Gaps, appendGapRange)
	}
	tail = appendSection(tail, secProgress, sec)

	if version >= snapshotVersionNoRules {
		sec = appendUvarint(sec[:0], uint64(len(s.registered)))
		for _, e := range sortedKeys(s.registered) {
			sec = appendString(sec, e)
			sec = appendVarint(sec, s.registered[e])
		}
		tail = appendSection(tail, secRegistration, sec)
	}
	if version >= SnapshotVersion {
		tail = appendSection(tail, secRuleGroups, s.appendRuleGroups(sec[:0]))
	}
	return tail
}

func appendHolding(b []byte, h Holding) []byte {
	b = appendUvarint(b, h.Index)
	return appendList(b, h.Lacks, func(b []byte, l LackRange) []byte {
		b = appendUvarint(b, l.FirstSeq)
		b = appendUvarint(b, l.LastSeq)
		b = appendVarint(b, l.MinTimeMs)
		return appendVarint(b, l.MaxTimeMs)
	})
}

func (d *decoder) holding() Holding {
	h := Holding{Index: d.uvarint()}
	n := d.count("lack run", 4)
	if d.err == nil && n > MaxLackRuns {
		d.failf("%d lack runs, limit is %d", n, MaxLackRuns)
	}
	for i := 0; i < n && d.err == nil; i++ {
		h.Lacks = append(h.Lacks, LackRange{FirstSeq: d.uvarint(), LastSeq: d.uvarint(), MinTimeMs: d.varint(), MaxTimeMs: d.varint()})
	}
	return h
}

// Restore replaces the catalog with a snapshot. The snapshot is checked in
// full (checksum, encoding, and every invariant the catalog keeps) before
// anything changes; on error the catalog is left as it was.
func (f *FSM) Restore(data []byte) error {
	s, err := decodeSnapshot(data)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st = s
	return nil
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
}

func decodeSnapshot(data []byte) (*state, error) {
	if len(data) < len(snapshotMagic)+1+4 {
		return nil, corruptf("%d bytes is too short", len(data))
	}
	if string(data[:4]) != snapshotMagic {
		return nil, corruptf("bad magic %q", data[:4])
	}
	version := data[4]
	if version < snapshotVersionNoGaps || version > SnapshotVersion {
		return nil, corruptf("version %d, want %d..%d", version, snapshotVersionNoGaps, SnapshotVersion)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, corruptf("checksum %08x, want %08x", got, sum)
	}
	d := &decoder{b: body, off: 5, what: "catalog snapshot"}
	s := newState()
	s.applied = d.uvarint()
	sections := []struct {
		tag    byte
		decode func(*decoder) error
	}{
		{secConfig, func(d *decoder) error { return s.decodeConfig(d, version > snapshotVersionFrom) }},
		{secMembers, s.decodeMembers},
		{secNodes, func(d *decoder) error { return s.decodeNodes(d, version > snapshotVersionFrom) }},
		{secSeries, s.decodeSeries},
		{secEdgeSeries, s.decodeEdgeSeries},
		{secPlacements, func(d *decoder) error { return s.decodePlacements(d, version) }},
		{secProgress, func(d *decoder) error { return s.decodeProgress(d, version > snapshotVersionNoGaps) }},
	}
	if version > snapshotVersionNoRegistration {
		sections = append(sections, struct {
			tag    byte
			decode func(*decoder) error
		}{secRegistration, func(d *decoder) error { return s.decodeRegistration(d, version == snapshotVersionNoRules) }})
	}
	if version >= SnapshotVersion {
		sections = append(sections, struct {
			tag    byte
			decode func(*decoder) error
		}{secRuleGroups, s.decodeRuleGroups})
	}
	for _, sec := range sections {
		tag := d.byte()
		if d.err == nil && tag != sec.tag {
			d.failf("section tag %d, want %d", tag, sec.tag)
		}
		b := d.bytes("section")
		if d.err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, d.err)
		}
		sd := &decoder{b: b, what: fmt.Sprintf("catalog snapshot section %d", sec.tag)}
		if err := sec.decode(sd); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
		}
		if err := sd.finish(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
		}
	}
	if err := d.finish(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	for _, p := range s.placement {
		for _, r := range p.Replicas {
			s.load[r]++
		}
	}
	// NB: decodeSeries built the key index itself, refusing duplicates:
	// probing it again for every series would only repeat that, at a
	// random memory access a series (a third of a 10 M-series restore).
	if err := s.check(false); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorruptSnapshot, err)
	}
	return s, nil
}

func (s *state) decodeConfig(d *decoder, ext bool) error {
	c := d.config()
	if ext {
		d.configExt(&c)
	} else {
		// Catalogs before version 4 knew neither: the automatic quorum and
		// the default dead-after are what they had (write-all aside).
		c.DeadAfterMs = DefaultDeadAfterMs
	}
	c.Version = d.uvarint()
	if d.err == nil && d.remaining() > 0 {
		d.configExt2(&c)
	}
	if d.err != nil {
		return d.err
	}
	if err := c.validate(); err != nil {
		return fmt.Errorf("config: %v", err)
	}
	s.config = c
	return nil
}

func (s *state) decodeMembers(d *decoder) error {
	n := d.count("member", 3)
	prev := uint64(0)
	for i := 0; i < n && d.err == nil; i++ {
		m := &Member{RaftID: d.uvarint(), Learner: d.bool(), Addr: d.string("member address", MaxAddrBytes)}
		if d.err == nil && m.RaftID <= prev {
			return fmt.Errorf("member %d: raft id %d not after %d", i, m.RaftID, prev)
		}
		prev = m.RaftID
		s.members[m.RaftID] = m
	}
	return d.err
}

func (s *state) decodeNodes(d *decoder, ext bool) error {
	n := d.count("node", 7)
	order := keyOrder{what: "node"}
	for i := 0; i < n && d.err == nil; i++ {
		nd := &Node{
			ID:       d.string("node id", MaxIDBytes),
			Role:     Role(d.byte()),
			RaftID:   d.uvarint(),
			Addr:     d.string("node address", MaxAddrBytes),
			Identity: d.string("node identity", MaxIdentityBytes),
		}
		ls := d.labels()
		nd.RegisteredIndex = d.uvarint()
		nd.LastHeartbeatMs = d.varint()
		if ext {
			nd.StoreID = d.string("store id", MaxIDBytes)
			nd.State = NodeState(d.byte())
			nd.StateIndex = d.uvarint()
			nd.Revoked = d.bool()
		}
		if d.err != nil {
			break
		}
		if !nd.State.valid() || (nd.Role == RoleEdge && (nd.State != NodeActive || nd.StoreID != "")) || (nd.Role == RoleCoordinator && nd.Revoked) {
			return fmt.Errorf("node %q: %s in state %s with store id %q, revoked %v", nd.ID, nd.Role, nd.State, nd.StoreID, nd.Revoked)
		}
		if err := order.next(nd.ID); err != nil {
			return err
		}
		if err := validNodeID(nd.ID); err != nil {
			return err
		}
		if !nd.Role.valid() || (nd.Role == RoleCoordinator) != (nd.RaftID != 0) {
			return fmt.Errorf("node %q: role %s with raft id %d", nd.ID, nd.Role, nd.RaftID)
		}
		norm, err := nodeLabels(ls)
		if err != nil {
			return fmt.Errorf("node %q: %v", nd.ID, err)
		}
		if !labels.Equal(norm, ls) {
			return fmt.Errorf("node %q: labels are not in canonical form", nd.ID)
		}
		nd.Labels = norm
		s.nodes[nd.ID] = nd
	}
	return d.err
}

func (s *state) decodeSeries(d *decoder) error {
	n := d.count("series", 2)
	s.byHash = make(map[uint64]uint64, n)
	var canon []byte
	var scratch labels.Labels
	for i := 0; i < n && d.err == nil; i++ {
		key := d.lengthPrefixed("series key", 1<<20)
		if d.err != nil {
			break
		}
		raw, err := s.decodeKey(key, scratch[:0])
		if err != nil {
			return fmt.Errorf("series %d: %v", i+1, err)
		}
		scratch = raw
		ls, err := labels.New(raw, labels.DefaultLimits)
		if err != nil {
			return fmt.Errorf("series %d: %v", i+1, err)
		}
		canon = ls.AppendKey(canon[:0])
		if !bytes.Equal(canon, key) {
			return fmt.Errorf("series %d: labels are not in canonical form", i+1)
		}
		h := keyHash(key)
		id, dup, taken := s.find(h, key, ls)
		if dup {
			return fmt.Errorf("series %d: duplicate of series %d", i+1, id)
		}
		s.addSeries(h, key, ls, taken)
	}
	return d.err
}

// keyLen returns len(ls.AppendKey(nil)).
func keyLen(ls labels.Labels) int {
	n := binread.UvarintLen(uint64(len(ls)))
	for _, l := range ls {
		n += binread.UvarintLen(uint64(len(l.Name))) + len(l.Name) + binread.UvarintLen(uint64(len(l.Value))) + len(l.Value)
	}
	return n
}

// keyStringLen returns the bytes of a series' canonical key as a
// snapshot writes it (a string: uvarint(len), then the key).
func keyStringLen(key []byte) int { return binread.UvarintLen(uint64(len(key))) + len(key) }

// appendKeyString appends the canonical key of ls as a string
// (uvarint(len), then ls.AppendKey), in one pass: keys are mostly under
// 128 bytes, so the length is written after the key, in the byte saved
// for it, and the key moved only when its length needs more.
func appendKeyString(b []byte, ls labels.Labels) []byte {
	at := len(b)
	b = ls.AppendKey(append(b, 0))
	n := len(b) - at - 1
	if n < 0x80 {
		b[at] = byte(n)
		return b
	}
	var pre [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(pre[:], uint64(n))
	b = append(b, pre[:k-1]...)
	copy(b[at+k:], b[at+1:at+1+n])
	copy(b[at:], pre[:k])
	return b
}

// decodeKey parses a canonical key as labels.DecodeKey does, appending
// to dst, but takes the strings the catalog already holds where it can
// instead of copying them (a snapshot's series mostly share their names
// and values).
func (s *state) decodeKey(b []byte, dst labels.Labels) (labels.Labels, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("decode labels: bad count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		name, rest, ok := splitKeyString(b)
		if !ok {
			return nil, fmt.Errorf("decode labels: label %d name: truncated", i)
		}
		value, rest, ok := splitKeyString(rest)
		if !ok {
			return nil, fmt.Errorf("decode labels: label %d value: truncated", i)
		}
		b = rest
		var l labels.Label
		// NB: string(bytes) as a map key does not allocate.
		if np := s.postings[string(name)]; np != nil {
			l.Name = np.name
			if ids := np.vals[string(value)]; len(ids) > 0 {
				l.Value = s.series.at(ids[0]).Get(l.Name)
			}
		} else {
			l.Name = string(name)
		}
		if l.Value == "" {
			l.Value = string(value)
		}
		dst = append(dst, l)
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("decode labels: %d trailing bytes", len(b))
	}
	return dst, nil
}

// splitKeyString splits a length-prefixed string off b.
func splitKeyString(b []byte) (str, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, nil, false
	}
	return b[k : k+int(n)], b[k+int(n):], true
}

func (s *state) decodeEdgeSeries(d *decoder) error {
	n := d.count("edge", 2)
	order := keyOrder{what: "edge series: edge"}
	for i := 0; i < n && d.err == nil; i++ {
		e := d.string("edge id", MaxIDBytes)
		k := d.count("series id", 1)
		if d.err != nil {
			break
		}
		if err := order.next(e); err != nil {
			return err
		}
		if s.nodes[e] == nil {
			return fmt.Errorf("edge series: node %q is not registered", e)
		}
		if k == 0 {
			return fmt.Errorf("edge series: %q has an empty list", e)
		}
		ids := make([]uint64, 0, k)
		id := uint64(0)
		for j := 0; j < k && d.err == nil; j++ {
			delta := d.uvarint()
			if d.err == nil && (delta == 0 || delta > uint64(s.series.len())-id) {
				return fmt.Errorf("edge series: %q: series id %d+%d is not a series after the previous", e, id, delta)
			}
			id += delta
			ids = append(ids, id)
		}
		s.edgeSeries[e] = ids
	}
	return d.err
}

func (s *state) decodePlacements(d *decoder, version byte) error {
	n := d.count("placement", 4)
	order := keyOrder{what: "placement"}
	for i := 0; i < n && d.err == nil; i++ {
		p := &Placement{Edge: d.string("edge id", MaxIDBytes), Epoch: d.uvarint(), Pinned: d.bool()}
		k := d.count("replica", 1)
		if d.err == nil && k > MaxReplicationFactor {
			return fmt.Errorf("placement %q: %d replicas", p.Edge, k)
		}
		for j := 0; j < k && d.err == nil; j++ {
			p.Replicas = append(p.Replicas, d.string("replica id", MaxIDBytes))
			var h Holding // older catalogs without ReplicaFrom: the whole history
			switch {
			case version > snapshotVersionFrom:
				h = d.holding()
			case version == snapshotVersionFrom:
				// FromSeq and LacksThroughMs: the replica lacks what is
				// numbered below FromSeq, with data up to LacksThroughMs.
				from, lacksThrough := d.uvarint(), d.varint()
				h.Index = d.uvarint()
				if d.err == nil && from > 1 {
					h.Lacks = []LackRange{{FirstSeq: 1, LastSeq: from - 1, MinTimeMs: math.MinInt64, MaxTimeMs: lacksThrough}}
				}
			}
			p.Holdings = append(p.Holdings, h)
		}
		if version > snapshotVersionFrom {
			l := d.count("leaving replica", 2)
			for j := 0; j < l && d.err == nil; j++ {
				id := d.string("leaving replica id", MaxIDBytes)
				p.Leaving = append(p.Leaving, LeavingReplica{ID: id, Holding: d.holding()})
			}
		}
		if d.err != nil {
			break
		}
		if err := order.next(p.Edge); err != nil {
			return err
		}
		s.placement[p.Edge] = p
	}
	return d.err
}

func (s *state) decodeProgress(d *decoder, withGaps bool) error {
	n := d.count("edge progress", 4)
	order := keyOrder{what: "edge progress"}
	for i := 0; i < n && d.err == nil; i++ {
		p := &EdgeProgress{Edge: d.string("edge id", MaxIDBytes), WatermarkSeq: d.uvarint(), WatermarkTimeMs: d.varint()}
		k := d.count("held run", 5)
		if d.err == nil && k > MaxHeldRuns {
			return fmt.Errorf("edge %q: %d held runs, limit is %d", p.Edge, k, MaxHeldRuns)
		}
		for j := 0; j < k && d.err == nil; j++ {
			p.Held = append(p.Held, d.heldRange())
		}
		if withGaps {
			g := d.count("gap", 7)
			if d.err == nil && g > MaxGapRuns {
				return fmt.Errorf("edge %q: %d gaps, limit is %d", p.Edge, g, MaxGapRuns)
			}
			for j := 0; j < g && d.err == nil; j++ {
				p.Gaps = append(p.Gaps, d.gapRange())
			}
		}
		if d.err != nil {
			break
		}
		if err := order.next(p.Edge); err != nil {
			return err
		}
		s.progress[p.Edge] = p
	}
	return d.err
}

// decodeRegistration reads the registration section (versions 5 and 6):
// the registration watermark of each edge that announced, sorted by edge;
// nonEmpty (version 5) refuses an empty section.
func (s *state) decodeRegistration(d *decoder, nonEmpty bool) error {
	n := d.count("registration", 2)
	order := keyOrder{what: "registration of"}
	for i := 0; i < n && d.err == nil; i++ {
		e, ms := d.string("edge id", MaxIDBytes), d.varint()
		if d.err != nil {
			break
		}
		if err := order.next(e); err != nil {
			return err
		}
		if nd := s.nodes[e]; nd == nil || nd.Role != RoleEdge {
			return fmt.Errorf("registration of %q, which is not a registered edge", e)
		}
		s.registered[e] = ms
	}
	if d.err == nil && n == 0 && nonEmpty {
		return fmt.Errorf("an empty registration section is written; version 4 leaves it out")
	}
	return d.err
}

// checkGaps verifies an edge's gaps: each valid, sorted, disjoint,
// adjacent ones of different reasons, none overlapping a held run.
func checkGaps(p *EdgeProgress) error {
	if len(p.Gaps) > MaxGapRuns {
		return fmt.Errorf("%d gaps, limit is %d", len(p.Gaps), MaxGapRuns)
	}
	for j, g := range p.Gaps {
		if err := g.validate(); err != nil {
			return fmt.Errorf("gap (%d,%d]: %v", g.AfterSeq, g.ThroughSeq, err)
		}
		if j > 0 {
			prev := p.Gaps[j-1]
			if prev.ThroughSeq > g.AfterSeq || (prev.ThroughSeq == g.AfterSeq && prev.Reason == g.Reason) {
				return fmt.Errorf("gaps (%d,%d] and (%d,%d] overlap or are unmerged", prev.AfterSeq, prev.ThroughSeq, g.AfterSeq, g.ThroughSeq)
			}
		}
		if heldOverlaps(p.Held, g.AfterSeq+1, g.ThroughSeq) {
			return fmt.Errorf("gap (%d,%d] overlaps a held run", g.AfterSeq, g.ThroughSeq)
		}
	}
	return nil
}

// Check verifies every invariant of the catalog: ids dense and unique,
// postings and edge lists consistent with the series, placements on
// eligible coordinators and loads matching them, held runs sorted and
// disjoint, gaps sorted, disjoint, merged and clear of held runs,
// watermarks held or in a gap. Tests call it; Restore runs it on every
// snapshot (all but the look-up of every series in the key index, which
// the restore built itself, refusing duplicates).
func (f *FSM) Check() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.check(true)
}

// check checks every invariant; probeKeys also looks every series up in
// the key index.
func (s *state) check(probeKeys bool) error {
	for _, check := range []func() error{func() error { return s.checkSeries(probeKeys) }, s.checkNodes, s.checkPlacements, s.checkProgress, s.checkRegistration} {
		if err := check(); err != nil {
			return err
		}
	}
	if s.config.Version > s.applied {
		return fmt.Errorf("config version %d after applied index %d", s.config.Version, s.applied)
	}
	return nil
}

// checkRegistration checks that only registered edges have a
// registration watermark.
func (s *state) checkRegistration() error {
	for e := range s.registered {
		if n := s.nodes[e]; n == nil || n.Role != RoleEdge {
			return fmt.Errorf("registration watermark of %q, which is not a registered edge", e)
		}
	}
	return nil
}

// checkSeries checks the series, their keys, the postings and the edges'
// series lists; probeKeys also looks every series up in the key index.
func (s *state) checkSeries(probeKeys bool) error {
	if len(s.byHash)+len(s.collided) != s.series.len() {
		return fmt.Errorf("%d series but %d keys", s.series.len(), len(s.byHash)+len(s.collided))
	}
	postings, keyBytes := 0, 0
	var bad error
	var key []byte
	s.series.each(func(id uint64, ls labels.Labels) {
		postings += len(ls)
		if !probeKeys {
			n := keyLen(ls)
			keyBytes += binread.UvarintLen(uint64(n)) + n
			return
		}
		key = ls.AppendKey(key[:0])
		keyBytes += keyStringLen(key)
		if got, ok := s.lookup(key, ls); (!ok || got != id) && bad == nil {
			bad = fmt.Errorf("series %d: key maps to %d", id, got)
		}
	})
	if bad != nil {
		return bad
	}
	if keyBytes != s.seriesKeyBytes {
		return fmt.Errorf("the series keys take %d bytes, %d counted", keyBytes, s.seriesKeyBytes)
	}
	n := 0
	for name, np := range s.postings {
		if np.name != name {
			return fmt.Errorf("postings of %q hold the name %q", name, np.name)
		}
		for v, ids := range np.vals {
			if len(ids) == 0 {
				return fmt.Errorf("postings %s=%q: empty list", name, v)
			}
			for j, id := range ids {
				if id == 0 || id > uint64(s.series.len()) || (j > 0 && ids[j-1] >= id) {
					return fmt.Errorf("postings %s=%q: bad or unsorted id %d", name, v, id)
				}
				if s.series.at(id).Get(name) != v {
					return fmt.Errorf("postings %s=%q list series %d, which lacks it", name, v, id)
				}
			}
			n += len(ids)
		}
	}
	if n != postings {
		return fmt.Errorf("postings hold %d entries, series have %d labels", n, postings)
	}
	for e, ids := range s.edgeSeries {
		if s.nodes[e] == nil {
			return fmt.Errorf("edge series of unregistered node %q", e)
		}
		for j, id := range ids {
			if id == 0 || id > uint64(s.series.len()) || (j > 0 && ids[j-1] >= id) {
				return fmt.Errorf("edge %q: bad or unsorted series id %d", e, id)
			}
		}
	}
	return nil
}

// checkNodes checks that coordinators have distinct raft ids and every
// edge a placement.
func (s *state) checkNodes() error {
	raftIDs := map[uint64]string{}
	for id, nd := range s.nodes {
		if nd.Role == RoleCoordinator {
			if other, dup := raftIDs[nd.RaftID]; dup {
				return fmt.Errorf("coordinators %q and %q share raft id %d", id, other, nd.RaftID)
			}
			raftIDs[nd.RaftID] = id
		}
	}
	for id, nd := range s.nodes {
		if nd.Role == RoleEdge && s.placement[id] == nil {
			return fmt.Errorf("edge %q has no placement", id)
		}
	}
	return nil
}

// checkPlacements checks every placement: of a registered edge, on
// eligible coordinators, sorted, with sound holdings and leaving replicas,
// and the coordinators' loads matching them.
func (s *state) checkPlacements() error {
	var eligible []string
	for id, nd := range s.nodes {
		if nd.Role == RoleCoordinator && s.members[nd.RaftID] != nil && nd.State == NodeActive {
			eligible = append(eligible, id)
		}
	}
	slices.Sort(eligible)
	load := map[string]int{}
	for e, p := range s.placement {
		if nd := s.nodes[e]; nd == nil || nd.Role != RoleEdge {
			return fmt.Errorf("placement of %q, which is not a registered edge", e)
		}
		if p.Edge != e || !slices.IsSorted(p.Replicas) || len(slices.Compact(slices.Clone(p.Replicas))) != len(p.Replicas) {
			return fmt.Errorf("placement of %q: replicas not sorted and unique", e)
		}
		if len(p.Holdings) != len(p.Replicas) {
			return fmt.Errorf("placement of %q: %d replicas but %d holdings", e, len(p.Replicas), len(p.Holdings))
		}
		next := s.nextSeq(e)
		for i, r := range p.Replicas {
			if _, ok := slices.BinarySearch(eligible, r); !ok {
				return fmt.Errorf("placement of %q: %q is not an eligible coordinator", e, r)
			}
			load[r]++
			if err := checkHolding(p, r, p.Holdings[i], next); err != nil {
				return err
			}
		}
		for j, l := range p.Leaving {
			if j > 0 && p.Leaving[j-1].ID >= l.ID {
				return fmt.Errorf("placement of %q: leaving replicas not sorted and unique", e)
			}
			if _, active := slices.BinarySearch(p.Replicas, l.ID); active {
				return fmt.Errorf("placement of %q: %q is both active and leaving", e, l.ID)
			}
			if !s.present(l.ID) {
				return fmt.Errorf("placement of %q: leaving replica %q is not a coordinator that is a raft member", e, l.ID)
			}
			if err := checkHolding(p, l.ID, l.Holding, next); err != nil {
				return err
			}
		}
	}
	if !maps.Equal(load, s.load) {
		return fmt.Errorf("coordinator loads %v, placements say %v", s.load, load)
	}
	return nil
}

// checkHolding checks replica r's holding h of placement p, whose edge has
// recorded everything below next.
func checkHolding(p *Placement, r string, h Holding, next uint64) error {
	e := p.Edge
	if err := checkLacks(h.Lacks); err != nil {
		return fmt.Errorf("placement of %q: replica %q: %v", e, r, err)
	}
	if h.Index > p.Epoch {
		return fmt.Errorf("placement of %q: replica %q placed at index %d, after the placement's epoch %d", e, r, h.Index, p.Epoch)
	}
	if n := len(h.Lacks); n > 0 && h.Lacks[n-1].FirstSeq >= next {
		return fmt.Errorf("placement of %q: replica %q lacks sequence %d, past everything recorded (%d)", e, r, h.Lacks[n-1].FirstSeq, next-1)
	}
	return nil
}

// checkProgress checks every edge's progress: held runs sorted and
// disjoint, gaps sound, the watermark held or in a gap.
func (s *state) checkProgress() error {
	for e, p := range s.progress {
		if nd := s.nodes[e]; nd == nil || nd.Role != RoleEdge {
			return fmt.Errorf("progress of %q, which is not a registered edge", e)
		}
		if p.Edge != e || len(p.Held) > MaxHeldRuns {
			return fmt.Errorf("progress of %q: bad edge or too many runs", e)
		}
		for j, h := range p.Held {
			if h.FirstSeq == 0 || h.FirstSeq > h.LastSeq || h.MinTimeMs > h.MaxTimeMs {
				return fmt.Errorf("progress of %q: bad run [%d,%d]", e, h.FirstSeq, h.LastSeq)
			}
			if j > 0 && p.Held[j-1].LastSeq+1 >= h.FirstSeq {
				return fmt.Errorf("progress of %q: runs [%d,%d] and [%d,%d] overlap or touch", e,
					p.Held[j-1].FirstSeq, p.Held[j-1].LastSeq, h.FirstSeq, h.LastSeq)
			}
		}
		if err := checkGaps(p); err != nil {
			return fmt.Errorf("progress of %q: %v", e, err)
		}
		if p.WatermarkSeq != 0 && !heldContains(p.Held, p.WatermarkSeq) && !gapContains(p.Gaps, p.WatermarkSeq) {
			return fmt.Errorf("progress of %q: watermark %d is neither held nor in a gap", e, p.WatermarkSeq)
		}
	}
	return nil
}
