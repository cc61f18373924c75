package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/tributarydb/tributary/node"
)

// ErrConflict: the index holds (edge, seq) with another crc32c. Wrap it.
var ErrConflict = errors.New("replica: segment conflicts with a stored one")

// ErrInvalidSegment is wrapped by every Apply error caused by the request
// itself: a file that does not verify or decode, or that contradicts the
// edge, seq or crc32c it came with. Retrying the same bytes cannot succeed.
var ErrInvalidSegment = errors.New("replica: invalid segment")

// Store holds the replicated data of the edges placed on this coordinator.
type Store struct {
	opts Options
	log  *slog.Logger
	eng  *node.Node

	// locks serialise Applies of the same (edge, seq), striped by hash.
	locks [64]sync.Mutex
	seed  maphash.Seed

	stats struct {
		applied, duplicates, conflicts, invalid, failed, points, rejected atomic.Int64
	}
}

// Stats counts what the Store did since Open.
type Stats struct {
	SegmentsApplied int64 // segments written (not duplicates)
	Duplicates      int64 // segments already held with the same crc32c
	Conflicts       int64 // segments refused with ErrConflict
	Invalid         int64 // segments refused with ErrInvalidSegment
	Failed          int64 // segments not stored for another error (disk, overload, context)
	Points          int64 // points written
	Rejected        int64 // points the engine refused
	Series          int   // series in the engine (all edges)
}

// Open opens (or creates) the replica engine in o.Dir.
func Open(o Options) (*Store, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	eng, err := node.Open(o.nodeOptions())
	if err != nil {
		return nil, fmt.Errorf("open replica engine in %s: %w", o.Dir, err)
	}
	return &Store{opts: o, log: o.Logger, eng: eng, seed: maphash.MakeSeed()}, nil
}

// Close flushes and closes the engine. Safe to call twice.
func (s *Store) Close() error {
	if err := s.eng.Close(); err != nil {
		return fmt.Errorf("close replica engine: %w", err)
	}
	return nil
}

// Stats reports counters since Open.
func (s *Store) Stats() Stats {
	return Stats{
		SegmentsApplied: s.stats.applied.Load(),
		Duplicates:      s.stats.duplicates.Load(),
		Conflicts:       s.stats.conflicts.Load(),
		Invalid:         s.stats.invalid.Load(),
		Failed:          s.stats.failed.Load(),
		Points:          s.stats.points.Load(),
		Rejected:        s.stats.rejected.Load(),
		Series:          s.eng.Status().Series,
	}
}

// SegmentCRC reports whether (edge, seq) was applied here and with which crc.
func (s *Store) SegmentCRC(edge string, seq uint64) (crc uint32, ok bool, err error) {
	v, ok, err := s.eng.GetReplicaMeta(indexKey(edge, seq))
	if err != nil {
		return 0, false, fmt.Errorf("read index of segment %d of %q: %w", seq, edge, err)
	}
	if !ok {
		return 0, false, nil
	}
	if len(v) != 4 {
		return 0, false, fmt.Errorf("read index of segment %d of %q: record of %d bytes, want 4", seq, edge, len(v))
	}
	return binary.LittleEndian.Uint32(v), true, nil
}

// recordCRC durably records that (edge, seq) was applied with crc.
// REQUIRES: the segment's points are durable (their Write returned).
func (s *Store) recordCRC(edge string, seq uint64, crc uint32) error {
	if err := s.eng.PutReplicaMeta(indexKey(edge, seq), binary.LittleEndian.AppendUint32(nil, crc)); err != nil {
		return fmt.Errorf("record index of segment %d of %q: %w", seq, edge, err)
	}
	return nil
}

// indexKey is "seg." + edge + 0x00 + seq (big-endian). Edge ids never hold
// 0x00 (validEdge), so keys of different edges cannot collide.
func indexKey(edge string, seq uint64) string {
	b := make([]byte, 0, 4+len(edge)+1+8)
	b = append(b, "seg."...)
	b = append(b, edge...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, seq)
	return string(b)
}

func (s *Store) lockFor(edge string, seq uint64) *sync.Mutex {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(edge)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seq)
	h.Write(b[:])
	return &s.locks[h.Sum64()%uint64(len(s.locks))]
}

// Ready reports whether the store serves: nil from Open until Close
// starts.
func (s *Store) Ready() error {
	if err := s.eng.Ready(); err != nil {
		return fmt.Errorf("replica store: %w", err)
	}
	return nil
}
