package replica

import (
	"encoding/binary"
	"fmt"

	"github.com/tributarydb/tributary/internal/seqset"
	"github.com/tributarydb/tributary/node"
)

// The index: what this store holds of each edge, in the engine's replica
// meta (see the package doc for the key layout).
const (
	segPrefix = "seg." // (edge, seq) → crc32c [, prev seq]: a segment applied
	rngPrefix = "rng." // (edge, first seq) → last seq: a range copied
	cpyPrefix = "cpy." // (edge, first seq, last seq) → progress of a copy
)

// SeqRange is an inclusive run of sequence numbers, First <= Last.
type SeqRange = seqset.Range

// edgeKey is prefix + edge + 0x00 + each of nums (8 bytes, big-endian).
// Edge ids never hold 0x00 (validEdge), so the keys of different edges
// cannot collide, and the keys of one edge sort by their numbers.
func edgeKey(prefix, edge string, nums ...uint64) string {
	b := make([]byte, 0, len(prefix)+len(edge)+1+8*len(nums))
	b = append(b, prefix...)
	b = append(b, edge...)
	b = append(b, 0)
	for _, n := range nums {
		b = binary.BigEndian.AppendUint64(b, n)
	}
	return string(b)
}

// indexKey is the key of (edge, seq)'s segment entry.
func indexKey(edge string, seq uint64) string { return edgeKey(segPrefix, edge, seq) }

// SegmentCRC reports whether (edge, seq) was applied here and with which crc.
func (s *Store) SegmentCRC(edge string, seq uint64) (crc uint32, ok bool, err error) {
	v, ok, err := s.eng.GetReplicaMeta(indexKey(edge, seq))
	if err != nil {
		return 0, false, fmt.Errorf("read index of segment %d of %q: %w", seq, edge, err)
	}
	if !ok {
		return 0, false, nil
	}
	crc, _, err = decodeSegEntry(v, seq)
	if err != nil {
		return 0, false, fmt.Errorf("read index of segment %d of %q: %w", seq, edge, err)
	}
	return crc, true, nil
}

// decodeSegEntry reads a segment entry's value: the crc32c and the first
// sequence number the segment covers (prev seq + 1; seq itself for an
// entry without prev seq).
func decodeSegEntry(v []byte, seq uint64) (crc uint32, first uint64, err error) {
	switch len(v) {
	case 4:
		return binary.LittleEndian.Uint32(v), seq, nil
	case 12:
		prev := binary.LittleEndian.Uint64(v[4:])
		if prev >= seq {
			return 0, 0, fmt.Errorf("entry says prev seq %d, not below its seq", prev)
		}
		return binary.LittleEndian.Uint32(v), prev + 1, nil
	}
	return 0, 0, fmt.Errorf("entry of %d bytes, want 4 or 12", len(v))
}

// recordCRC durably records that (edge, seq), created after prev, was
// applied with crc, in one write with the records of concurrent Applies.
// REQUIRES: the segment's points are durable (their Write returned).
func (s *Store) recordCRC(edge string, seq, prev uint64, crc uint32) error {
	v := binary.LittleEndian.AppendUint32(make([]byte, 0, 12), crc)
	v = binary.LittleEndian.AppendUint64(v, prev)
	if err := s.index.put(node.ReplicaMetaRecord{Key: indexKey(edge, seq), Val: v}); err != nil {
		return fmt.Errorf("record index of segment %d of %q: %w", seq, edge, err)
	}
	return nil
}

// copiedThrough returns the last sequence number of the copied range of
// edge that starts at firstSeq (ok false: none).
func (s *Store) copiedThrough(edge string, firstSeq uint64) (uint64, bool, error) {
	v, ok, err := s.eng.GetReplicaMeta(edgeKey(rngPrefix, edge, firstSeq))
	if err != nil || !ok {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("copied range of %q from %d: entry of %d bytes, want 8", edge, firstSeq, len(v))
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// RecordCopy durably records that this store holds every point of edge's
// segments firstSeq..lastSeq, copied from another replica (Copy calls it
// once the whole range is applied). A range recorded before with the same
// first and a later last stays as it is.
// REQUIRES: every file of an export of the range was applied with
// ApplyCopy (their points are durable).
func (s *Store) RecordCopy(edge string, firstSeq, lastSeq uint64) error {
	if err := checkRange(edge, firstSeq, lastSeq); err != nil {
		return err
	}
	held, ok, err := s.copiedThrough(edge, firstSeq)
	if err != nil {
		return err
	}
	if ok && held >= lastSeq {
		return nil
	}
	if err := s.eng.PutReplicaMeta(edgeKey(rngPrefix, edge, firstSeq), binary.BigEndian.AppendUint64(nil, lastSeq)); err != nil {
		return fmt.Errorf("record copied range %d..%d of %q: %w", firstSeq, lastSeq, edge, err)
	}
	return nil
}

// checkRange checks the arguments naming a range of an edge's segments.
func checkRange(edge string, firstSeq, lastSeq uint64) error {
	if err := validEdge(edge); err != nil {
		return err
	}
	if firstSeq == 0 || lastSeq < firstSeq {
		return fmt.Errorf("%w: sequence range %d..%d", ErrInvalidSegment, firstSeq, lastSeq)
	}
	return nil
}

// Holdings returns the runs of edge's sequence numbers this store holds,
// sorted, disjoint and not adjacent: the segments applied (each covering
// its prev seq + 1 through its seq: the edge's WAL numbers nothing in
// between) and the ranges copied (RecordCopy), merged. A copy still in
// progress holds nothing yet. Memory: the runs, and one entry at a time.
func (s *Store) Holdings(edge string) ([]SeqRange, error) {
	if err := validEdge(edge); err != nil {
		return nil, err
	}
	var set seqset.Set
	seg := edgeKey(segPrefix, edge)
	err := s.eng.ScanReplicaMeta(seg, func(k string, v []byte) error {
		if len(k) != len(seg)+8 {
			return fmt.Errorf("segment entry %q: key of %d bytes", k, len(k))
		}
		seq := binary.BigEndian.Uint64([]byte(k[len(seg):]))
		_, first, err := decodeSegEntry(v, seq)
		if err != nil {
			return fmt.Errorf("segment entry %d: %w", seq, err)
		}
		set.Add(first, seq)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("holdings of %q: %w", edge, err)
	}
	rng := edgeKey(rngPrefix, edge)
	err = s.eng.ScanReplicaMeta(rng, func(k string, v []byte) error {
		if len(k) != len(rng)+8 || len(v) != 8 {
			return fmt.Errorf("copied range entry %q: key of %d bytes, value of %d", k, len(k), len(v))
		}
		first, last := binary.BigEndian.Uint64([]byte(k[len(rng):])), binary.BigEndian.Uint64(v)
		if first == 0 || last < first {
			return fmt.Errorf("copied range entry %d..%d", first, last)
		}
		set.Add(first, last)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("holdings of %q: %w", edge, err)
	}
	return set.Ranges(), nil
}

// Forget drops every index entry of edge: its segments, its copied ranges
// and the progress of its copies. A coordinator taken out of an edge's
// placement forgets it, so that it no longer claims to hold the edge and a
// later placement starts clean. The points stay in the engine until its
// retention drops them; queries read only the replicas the catalog names,
// so they are never read as held. Forget must not run concurrently with
// Apply, ApplyCopy or Copy of the same edge (an entry written meanwhile
// may survive).
func (s *Store) Forget(edge string) error {
	if err := validEdge(edge); err != nil {
		return err
	}
	err := s.eng.DeleteReplicaMetaPrefix(edgeKey(segPrefix, edge), edgeKey(rngPrefix, edge), edgeKey(cpyPrefix, edge))
	if err != nil {
		return fmt.Errorf("forget %q: %w", edge, err)
	}
	return nil
}
