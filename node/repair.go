package node

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/wal"
)

// RepairOptions configure Repair.
type RepairOptions struct {
	// DataDir is the data directory of a stopped node.
	DataDir string
	// NodeID, if set, is recorded as the node's id when the store lost its
	// record of it (and nothing else names it).
	NodeID string
	// DryRun only inspects: nothing is moved or written.
	DryRun bool
	Logger *slog.Logger
	Now    func() time.Time
}

// RepairReport is what Repair found and did.
type RepairReport struct {
	DataDir string `json:"data_dir"`
	DryRun  bool   `json:"dry_run,omitempty"`
	// Files is every table file of the store, as verified.
	Files []RepairFile `json:"files"`
	// OpenError is why the store could not be opened before the repair.
	OpenError string `json:"open_error,omitempty"`
	// DamageRecord is the corruption the running node recorded, if any.
	DamageRecord string `json:"damage_record,omitempty"`
	// Quarantine is the directory (relative to DataDir) the damaged files
	// were moved to; empty when nothing was.
	Quarantine string `json:"quarantine,omitempty"`
	// Lost are the key ranges of the quarantined files, as recorded in
	// the node's ledger (StoreLosses).
	Lost []LostRange `json:"lost,omitempty"`
	// LostEntries counts the quarantined entries by column family.
	LostEntries map[string]int64 `json:"lost_entries,omitempty"`
	// SeriesIDFloor is the lowest id a new series may take from now on.
	SeriesIDFloor uint64 `json:"series_id_floor,omitempty"`
	// PostingsRebuilt counts the series whose postings were rebuilt from
	// the dictionary (0: not needed).
	PostingsRebuilt int `json:"postings_rebuilt,omitempty"`
	// CarriedOver are the node's own records the damage had taken and the
	// repair wrote back (node id, counters, the loss ledger).
	CarriedOver []string `json:"carried_over,omitempty"`
	// NodeIDLost: the store no longer names the node and nothing else did.
	NodeIDLost bool `json:"node_id_lost,omitempty"`
	// WAL describes the segments the next start replays, all of them.
	WALSegments   int   `json:"wal_segments"`
	WALUnreadable int   `json:"wal_unreadable"`
	WALPoints     int64 `json:"wal_points"`
	WALMinT       int64 `json:"wal_min_t,omitempty"`
	WALMaxT       int64 `json:"wal_max_t,omitempty"`
	walNodeID     string
}

// RepairFile is one table file of the store.
type RepairFile struct {
	Name         string `json:"name"`
	ColumnFamily string `json:"column_family"`
	Bytes        int64  `json:"bytes"`
	Entries      int64  `json:"entries"`
	Damage       string `json:"damage,omitempty"`
}

// Damaged reports whether the repair found (or would quarantine) damage.
func (r *RepairReport) Damaged() bool {
	for _, f := range r.Files {
		if f.Damage != "" {
			return true
		}
	}
	return r.OpenError != ""
}

// reportFileName is the report Repair leaves in the quarantine directory.
const reportFileName = "REPORT.json"

// Repair checks the store of a stopped node and repairs it: every table
// file is verified (RocksDB block checksums), damaged ones are moved to
// DataDir/quarantine/store-<time>/ and the store's manifest is rebuilt
// without them. The node's own records the damage took are written back,
// the label postings rebuilt when postings or series were lost, new series
// ids raised past every id the store still names, and the flushed-through
// record reset, so the next start replays every WAL segment on disk. The
// quarantined key ranges go into the node's loss ledger; the next Open
// audits them after the replay and counts what neither the WAL nor the
// rollups brought back (see audit.go). Finally the damage record the
// running node left (store.damaged) is removed: the node becomes ready
// again.
//
// A store that is open in another process is refused (store.ErrInUse).
func Repair(o RepairOptions) (RepairReport, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	rep := RepairReport{DataDir: o.DataDir, DryRun: o.DryRun}
	if o.DataDir == "" {
		return rep, errors.New("repair: the data directory is required")
	}
	opts := Options{DataDir: o.DataDir}
	dbDir := opts.dbDir()
	if _, err := os.Stat(dbDir); err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	if b, err := os.ReadFile(filepath.Join(o.DataDir, damageFileName)); err == nil {
		rep.DamageRecord = strings.TrimSpace(string(b))
	}
	sopts := store.Options{Dir: dbDir, Logger: o.Logger}

	// The node's records as they were: a damaged meta file takes them with
	// it, and they are written back after the repair.
	before := map[string][]byte{}
	if db, err := store.Open(sopts); err == nil {
		for _, k := range []string{metaNodeID, metaWALQuarantined, metaStoreLosses, metaSeriesIDFloor} {
			if v, ok, err := db.GetMeta(k); err == nil && ok {
				before[k] = v
			}
		}
		db.Close()
	} else if errors.Is(err, store.ErrInUse) {
		return rep, fmt.Errorf("repair: %w", err)
	}

	var res store.RepairResult
	var err error
	stamp := o.Now().UTC().Format("20060102T150405Z")
	qRel := filepath.Join("quarantine", "store-"+stamp)
	if o.DryRun {
		res.Before, err = store.Inspect(sopts)
	} else {
		res, err = store.Repair(sopts, filepath.Join(o.DataDir, qRel))
	}
	for _, f := range res.Before.Files {
		rf := RepairFile{Name: f.Name, ColumnFamily: f.ColumnFamily, Bytes: f.Bytes, Entries: int64(f.Entries)}
		if f.Damage != nil {
			rf.Damage = f.Damage.Error()
		}
		rep.Files = append(rep.Files, rf)
	}
	if res.Before.OpenErr != nil {
		rep.OpenError = res.Before.OpenErr.Error()
	}
	rep.describeWAL(opts.walDir())
	if err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	if o.DryRun {
		return rep, nil
	}
	if len(res.Quarantined) > 0 {
		rep.Quarantine = qRel
	}
	if err := rep.fixRecords(sopts, res, before, o, qRel); err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	if rep.Quarantine != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := writeFileDurable(filepath.Join(o.DataDir, qRel, reportFileName), append(b, '\n')); err != nil {
			return rep, fmt.Errorf("repair: %w", err)
		}
	}
	if err := removeFileDurable(filepath.Join(o.DataDir, damageFileName)); err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	return rep, nil
}

// fixRecords opens the repaired store and puts the node's records in
// order (see Repair).
func (rep *RepairReport) fixRecords(sopts store.Options, res store.RepairResult, before map[string][]byte, o RepairOptions, qRel string) error {
	db, err := store.Open(sopts)
	if err != nil {
		return fmt.Errorf("open the repaired store: %w", err)
	}
	defer db.Close()
	put := func(key string, val []byte) error {
		b := db.NewBatch()
		defer b.Close()
		b.PutMeta(key, val)
		return db.Write(b)
	}
	// Records the damage took: write back what was read before.
	for _, k := range []string{metaNodeID, metaWALQuarantined, metaStoreLosses, metaSeriesIDFloor} {
		if _, ok, err := db.GetMeta(k); err != nil {
			return err
		} else if ok {
			continue
		}
		v, had := before[k]
		if k == metaNodeID && !had && o.NodeID != "" {
			v, had = []byte(o.NodeID), true
		}
		if k == metaNodeID && !had && rep.walNodeID != "" {
			v, had = []byte(rep.walNodeID), true // the WAL's segment headers name it
		}
		if !had {
			if k == metaNodeID {
				rep.NodeIDLost = true
			}
			continue
		}
		if err := put(k, v); err != nil {
			return fmt.Errorf("write back %s: %w", k, err)
		}
		rep.CarriedOver = append(rep.CarriedOver, k)
	}

	// New series must not take the id of anything the store still holds,
	// nor of the ids the lost files held.
	maxID, err := db.MaxSeriesID()
	if err != nil {
		return err
	}
	floor := maxID + 1
	if b, ok, err := db.GetMeta(metaSeriesIDFloor); err == nil && ok && len(b) == 8 {
		floor = max(floor, binary.LittleEndian.Uint64(b))
	}
	postings := false
	chunkWidth := store.DefaultPartitionDuration.Milliseconds()
	for _, f := range res.Quarantined {
		sp := f.Span(chunkWidth)
		if sp.Known && (sp.Timed || f.ColumnFamily == "series") {
			floor = max(floor, sp.LastSeries+1, sp.FirstSeries+1)
		}
		if f.ColumnFamily == "series" || f.ColumnFamily == "postings" || f.ColumnFamily == "" {
			postings = true
		}
	}
	if err := put(metaSeriesIDFloor, binary.LittleEndian.AppendUint64(nil, floor)); err != nil {
		return fmt.Errorf("record the series id floor: %w", err)
	}
	rep.SeriesIDFloor = floor
	if postings {
		if rep.PostingsRebuilt, err = db.RebuildPostings(); err != nil {
			return err
		}
	}

	l, err := readLosses(db)
	if err != nil {
		return err
	}
	through, err := readU64Meta(db, metaFlushedThrough)
	if err != nil {
		through = 0 // unknown: nothing replayed counts as restored
	}
	if len(res.Quarantined) > 0 {
		l.Repairs++
		l.QuarantinedFiles += int64(len(res.Quarantined))
		if l.LostEntries == nil {
			l.LostEntries = map[string]int64{}
		}
		rep.LostEntries = map[string]int64{}
		now := o.Now().UTC()
		for _, f := range res.Quarantined {
			cf := f.ColumnFamily
			if cf == "" {
				cf = "unknown"
			}
			l.LostEntries[cf] += int64(f.Entries)
			rep.LostEntries[cf] += int64(f.Entries)
			sp := f.Span(chunkWidth)
			r := LostRange{RepairedAt: now, File: f.Name, Quarantine: qRel, ColumnFamily: f.ColumnFamily,
				Entries: int64(f.Entries), KeysKnown: sp.Known, FromMs: sp.FromMs, ToMs: sp.ToMs,
				FirstSeries: sp.FirstSeries, LastSeries: sp.LastSeries, FirstKey: sp.FirstKey, LastKey: sp.LastKey,
				WALFlushedThrough: through}
			// Postings and meta need no audit: rebuilt, written back.
			r.Audited = f.ColumnFamily == "postings" || f.ColumnFamily == "meta"
			l.addRange(r)
			rep.Lost = append(rep.Lost, l.Ranges[len(l.Ranges)-1])
		}
	}
	if err := put(metaStoreLosses, encodeLosses(l)); err != nil {
		return fmt.Errorf("record the losses: %w", err)
	}
	// Replay every WAL segment on disk at the next start: the quarantined
	// files may have held samples of segments flushed long ago.
	if err := put(metaFlushedThrough, binary.LittleEndian.AppendUint64(nil, 0)); err != nil {
		return fmt.Errorf("reset the flushed-through record: %w", err)
	}
	return db.SyncWAL()
}

// describeWAL summarises the WAL segments the next start replays.
func (rep *RepairReport) describeWAL(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".seg") {
			continue
		}
		rep.WALSegments++
		info, err := wal.ReadSegment(nil, filepath.Join(dir, e.Name()), nil)
		if err != nil {
			// The open segment of a stopped node is sealed at the next
			// start; a damaged one is quarantined then.
			rep.WALUnreadable++
			continue
		}
		rep.WALPoints += info.Points
		rep.walNodeID = info.NodeID
		if info.Points > 0 {
			if rep.WALMinT == 0 || info.MinT < rep.WALMinT {
				rep.WALMinT = info.MinT
			}
			rep.WALMaxT = max(rep.WALMaxT, info.MaxT)
		}
	}
}
