package node

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tributarydb/tributary/model"
	"maps"
	"slices"
	"time"
)

// Records the node keeps in its store's meta about damage and loss, so
// that they survive restarts (and a repair: Repair carries them over when
// the meta file itself was damaged).
const (
	// metaWALQuarantined: WAL files quarantined as corrupt, ever (u64 LE).
	metaWALQuarantined = "node.wal_quarantined"
	// metaStoreLosses: the StoreLosses ledger (JSON).
	metaStoreLosses = "node.store_losses"
	// metaSeriesIDFloor: new series take ids at or above it (u64 LE); a
	// repair that lost part of the series dictionary raises it past every
	// id the lost files held, so that no new series is given the id of
	// chunks still in the store.
	metaSeriesIDFloor = "node.series_id_floor"
)

// maxLostRanges bounds StoreLosses.Ranges; older ranges beyond it are
// counted in DroppedRanges.
const maxLostRanges = 512

// StoreLosses is the node's ledger of store damage repaired and of what it
// lost: kept in the store's meta, reported by Status and on /metrics.
type StoreLosses struct {
	// Repairs counts repairs that quarantined something; QuarantinedFiles
	// the table files they moved to quarantine.
	Repairs          int64 `json:"repairs"`
	QuarantinedFiles int64 `json:"quarantined_files"`
	// LostEntries counts the key-value entries of the quarantined files,
	// by column family (a chunk, an hourly or daily rollup pack, a series,
	// a posting, a meta record).
	LostEntries map[string]int64 `json:"lost_entries,omitempty"`
	// LostPoints counts raw points the audit after a repair found gone
	// from the store and not brought back by the WAL replay: a surviving
	// hourly rollup counts more points than the raw data holds, or the
	// series they belong to lost its dictionary entry.
	LostPoints int64 `json:"lost_points"`
	// RebuiltHours counts hourly rollups the audit rebuilt from raw data.
	RebuiltHours int64 `json:"rebuilt_hours"`
	// Ranges are the key ranges of the quarantined files, newest last.
	Ranges []LostRange `json:"ranges,omitempty"`
	// DroppedRanges counts ranges dropped from Ranges (its bound).
	DroppedRanges int64 `json:"dropped_ranges,omitempty"`
	// NextRangeID numbers ranges.
	NextRangeID uint64 `json:"next_range_id"`
}

// LostRange is the key range of one quarantined table file.
type LostRange struct {
	ID         uint64    `json:"id"`
	RepairedAt time.Time `json:"repaired_at"`
	// File is the quarantined file, under Quarantine (relative to the
	// data dir).
	File       string `json:"file"`
	Quarantine string `json:"quarantine"`
	// ColumnFamily is "chunks" (raw samples), "rollup_1h", "rollup_1d",
	// "series", "postings" or "meta" ("" when unknown).
	ColumnFamily string `json:"column_family"`
	Entries      int64  `json:"entries"`
	// KeysKnown: the range below is known. For chunks and rollups: the
	// partitions [FromMs, ToMs), series ids from FirstSeries in the first
	// partition to LastSeries in the last (every series in between). For
	// series: ids FirstSeries to LastSeries.
	KeysKnown         bool   `json:"keys_known"`
	FromMs            int64  `json:"from_ms,omitempty"`
	ToMs              int64  `json:"to_ms,omitempty"`
	FirstSeries       uint64 `json:"first_series,omitempty"`
	LastSeries        uint64 `json:"last_series,omitempty"`
	FirstKey, LastKey string `json:",omitempty"`
	// WALFlushedThrough is the node's flushed-through WAL sequence when
	// the repair ran: replayed segments up to it had every sample in the
	// store, so their samples the audit finds missing before the replay
	// are counted restored, not lost.
	WALFlushedThrough uint64 `json:"wal_flushed_through,omitempty"`
	Audited           bool   `json:"audited"`
	// LostPoints: raw points the audit found lost. UpperBound: more points
	// than the audit could track were involved, and LostPoints counts the
	// WAL replay's restorations as lost (an upper bound).
	LostPoints     int64     `json:"lost_points"`
	UpperBound     bool      `json:"upper_bound,omitempty"`
	RebuiltHours   int64     `json:"rebuilt_hours"`
	Restored       bool      `json:"restored,omitempty"`
	RestoredAt     time.Time `json:"restored_at,omitzero"`
	RestoredPoints int64     `json:"restored_points,omitempty"`
}

// Raw reports whether the range held raw samples or rollups: the data a
// restore from the cloud's replicas can bring back.
func (r LostRange) Raw() bool {
	return r.ColumnFamily == "chunks" || r.ColumnFamily == "rollup_1h" || r.ColumnFamily == "rollup_1d"
}

func (l *StoreLosses) clone() StoreLosses {
	c := *l
	c.LostEntries = maps.Clone(l.LostEntries)
	c.Ranges = slices.Clone(l.Ranges)
	return c
}

// addRange appends r with the next id, dropping the oldest beyond the
// bound.
func (l *StoreLosses) addRange(r LostRange) {
	l.NextRangeID++
	r.ID = l.NextRangeID
	l.Ranges = append(l.Ranges, r)
	if over := len(l.Ranges) - maxLostRanges; over > 0 {
		l.Ranges = slices.Delete(l.Ranges, 0, over)
		l.DroppedRanges += int64(over)
	}
}

// pendingAudit reports whether a range awaits the audit at Open.
func (l *StoreLosses) pendingAudit() bool {
	return slices.ContainsFunc(l.Ranges, func(r LostRange) bool { return !r.Audited })
}

// unrestored counts the ranges of raw data or rollups not restored.
func (l *StoreLosses) unrestored() int {
	n := 0
	for _, r := range l.Ranges {
		if r.Raw() && !r.Restored {
			n++
		}
	}
	return n
}

// metaStore is the part of the store the records are read from and
// written to.
type metaStore interface {
	GetMeta(key string) ([]byte, bool, error)
}

func readU64Meta(db metaStore, key string) (uint64, error) {
	b, ok, err := db.GetMeta(key)
	switch {
	case err != nil:
		return 0, fmt.Errorf("read %s: %w", key, err)
	case !ok:
		return 0, nil
	case len(b) != 8:
		return 0, fmt.Errorf("read %s: %d bytes, want 8", key, len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

func readLosses(db metaStore) (StoreLosses, error) {
	var l StoreLosses
	b, ok, err := db.GetMeta(metaStoreLosses)
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("read %s: %w", metaStoreLosses, err)
		}
		return l, err
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("read %s: %w", metaStoreLosses, err)
	}
	return l, nil
}

func encodeLosses(l StoreLosses) []byte {
	b, err := json.Marshal(l)
	if err != nil {
		panic("BUG: node: encode store losses: " + err.Error())
	}
	return b
}

// lossState is the node's copy of its records. Safe for concurrent use.
type lossState struct {
	// walQuarantinedBase is the persisted WAL quarantine count before this
	// WAL opened; walQuarantinedSaved is the total last persisted.
	walQuarantinedBase  int64
	walQuarantinedSaved int64
	losses              StoreLosses // REQUIRES: Node.lossMu held
}

// loadLossRecords reads the records at Open and persists the WAL
// quarantines the WAL's Open found.
func (n *Node) loadLossRecords() error {
	base, err := readU64Meta(n.db, metaWALQuarantined)
	if err != nil {
		n.log.Error("WAL quarantine count unreadable; counting from 0", "err", err)
	}
	n.loss.walQuarantinedBase = int64(base)
	n.loss.walQuarantinedSaved = int64(base)
	l, err := readLosses(n.db)
	if err != nil {
		return err
	}
	n.lossMu.Lock()
	n.loss.losses = l
	n.lossMu.Unlock()
	floor, err := readU64Meta(n.db, metaSeriesIDFloor)
	if err != nil {
		return err
	}
	if floor > n.nextID {
		n.nextID = floor
	}
	return n.persistWALQuarantines()
}

// walQuarantined is the total of WAL files ever quarantined.
func (n *Node) walQuarantined() int64 {
	return n.loss.walQuarantinedBase + n.wal.Stats().CorruptQuarantined
}

// persistWALQuarantines writes the total of WAL quarantines when it grew
// (Open, and the flush loop: the WAL quarantines files when it recovers
// from a failure too).
func (n *Node) persistWALQuarantines() error {
	total := n.walQuarantined()
	if total == n.loss.walQuarantinedSaved {
		return nil
	}
	if err := n.putMeta(metaWALQuarantined, binary.LittleEndian.AppendUint64(nil, uint64(total))); err != nil {
		return fmt.Errorf("record WAL quarantines: %w", err)
	}
	n.loss.walQuarantinedSaved = total
	return nil
}

// putMeta writes one meta record and syncs it.
func (n *Node) putMeta(key string, val []byte) error {
	b := n.db.NewBatch()
	defer b.Close()
	b.PutMeta(key, val)
	if err := n.db.Write(b); err != nil {
		return err
	}
	return n.db.SyncWAL()
}

// StoreLosses returns the node's ledger of store damage and loss.
func (n *Node) StoreLosses() StoreLosses {
	n.lossMu.Lock()
	defer n.lossMu.Unlock()
	return n.loss.losses.clone()
}

// ErrNoSuchRange is returned by ResolveLostRange for an unknown id.
var ErrNoSuchRange = errors.New("node: no such lost range")

// ResolveLostRange records that the data of lost range id was restored
// (restoredPoints points written back, e.g. from the cloud's replicas).
//
// This is the hook of a restore from the cloud: it reads StoreLosses,
// and for each range with Raw() and not Restored, writes back the node's
// series' raw points of [FromMs, ToMs) through Write (duplicates are
// harmless: last write wins, rollups are recomputed), then calls
// ResolveLostRange. The range stays in the ledger, marked restored.
func (n *Node) ResolveLostRange(id uint64, restoredPoints int64) error {
	// The write lock keeps Close from closing the store under the write.
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		return model.ErrClosed
	}
	n.lossMu.Lock()
	defer n.lossMu.Unlock()
	l := n.loss.losses.clone()
	i := slices.IndexFunc(l.Ranges, func(r LostRange) bool { return r.ID == id })
	if i < 0 {
		return fmt.Errorf("resolve lost range %d: %w", id, ErrNoSuchRange)
	}
	l.Ranges[i].Restored, l.Ranges[i].RestoredAt, l.Ranges[i].RestoredPoints = true, n.opts.Now().UTC(), restoredPoints
	if err := n.putMeta(metaStoreLosses, encodeLosses(l)); err != nil {
		return fmt.Errorf("resolve lost range %d: %w", id, err)
	}
	n.loss.losses = l
	return nil
}
