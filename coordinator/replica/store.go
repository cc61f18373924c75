package replica

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
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

	// applying holds the (edge, seq) keys (indexKey) of the Applies
	// running, each with a channel closed when it ends: Applies of the
	// same segment run one after the other, of different ones at once.
	applyMu  sync.Mutex
	applying map[string]chan struct{}

	copyMu  sync.Mutex
	copying map[string]bool // progress keys of the Copies running

	// id is the store's identity (storeIDKey), made when the store was
	// first opened.
	id string

	index indexCommitter // Apply's segment records

	phases *applyPhases // nil but in benchmarks

	stats struct {
		applied, copied, duplicates, conflicts, invalid, failed, points, rejected, indexSyncs atomic.Int64
	}
}

// Stats counts what the Store did since Open.
type Stats struct {
	SegmentsApplied int64 // segments written (not duplicates)
	CopiesApplied   int64 // files of copies written (ApplyCopy; not duplicates)
	Duplicates      int64 // segments already held with the same crc32c, files of ranges already copied
	Conflicts       int64 // segments refused with ErrConflict
	Invalid         int64 // segments and copied files refused with ErrInvalidSegment
	Failed          int64 // segments and copied files not stored for another error (disk, overload, context)
	Points          int64 // points written
	Rejected        int64 // points the engine refused
	Series          int   // series in the engine (all edges)
	// IndexSyncs counts the writes of Apply's segment records into the
	// index, each made durable by one sync of the engine's store WAL.
	IndexSyncs int64
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
	s := &Store{opts: o, log: o.Logger, eng: eng, applying: map[string]chan struct{}{}}
	s.index.write = func(recs []node.ReplicaMetaRecord) error {
		s.stats.indexSyncs.Add(1)
		return eng.PutReplicaMetas(recs)
	}
	if s.id, err = s.loadID(); err != nil {
		eng.Close()
		return nil, err
	}
	return s, nil
}

// storeIDKey is the replica meta record of the store's identity: 16
// random bytes, written (durably) when a store without one is opened, so
// a new or emptied replica directory gets a new identity.
const storeIDKey = "store.id"

func (s *Store) loadID() (string, error) {
	v, ok, err := s.eng.GetReplicaMeta(storeIDKey)
	if err != nil {
		return "", fmt.Errorf("read replica store identity: %w", err)
	}
	if ok {
		if len(v) != 16 {
			return "", fmt.Errorf("replica store identity is %d bytes, want 16", len(v))
		}
		return hex.EncodeToString(v), nil
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", fmt.Errorf("make a replica store identity: %w", err)
	}
	if err := s.eng.PutReplicaMeta(storeIDKey, id); err != nil {
		return "", fmt.Errorf("record the replica store identity: %w", err)
	}
	return hex.EncodeToString(id), nil
}

// ID is the store's identity: 32 hex digits, fixed for the life of its
// directory. The catalog binds it to the coordinator (catalog.Node.StoreID).
func (s *Store) ID() string { return s.id }

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
		CopiesApplied:   s.stats.copied.Load(),
		Duplicates:      s.stats.duplicates.Load(),
		Conflicts:       s.stats.conflicts.Load(),
		Invalid:         s.stats.invalid.Load(),
		Failed:          s.stats.failed.Load(),
		Points:          s.stats.points.Load(),
		Rejected:        s.stats.rejected.Load(),
		Series:          s.eng.Status().Series,
		IndexSyncs:      s.stats.indexSyncs.Load(),
	}
}

// lockSegment waits until no other Apply of (edge, seq) runs and takes
// its place; unlock lets the next one run.
func (s *Store) lockSegment(edge string, seq uint64) (unlock func()) {
	key := indexKey(edge, seq)
	for {
		s.applyMu.Lock()
		running, ok := s.applying[key]
		if !ok {
			done := make(chan struct{})
			s.applying[key] = done
			s.applyMu.Unlock()
			return func() {
				s.applyMu.Lock()
				delete(s.applying, key)
				s.applyMu.Unlock()
				close(done)
			}
		}
		s.applyMu.Unlock()
		<-running
	}
}

// Ready reports whether the store serves: nil from Open until Close
// starts.
func (s *Store) Ready() error {
	if err := s.eng.Ready(); err != nil {
		return fmt.Errorf("replica store: %w", err)
	}
	return nil
}
