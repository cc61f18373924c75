package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/linxGnu/grocksdb"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/node/labels"
)

// Checking and repairing a damaged store, with the node stopped.
//
// Inspect opens RocksDB (taking its LOCK, so a running node is refused
// with ErrInUse) only to read which table files its manifest lists, with
// their column family, level and key range; then it reads every *.sst
// file of the directory on its own and verifies the checksum of every
// block (verify.cc). A file that fails, or that the manifest names but the
// directory lacks, is damaged.
//
// Repair moves each damaged file into a quarantine directory (never
// deleting it), lets RocksDB's repairer rebuild the manifest from the
// files that are left (it also turns RocksDB's own WAL into tables), and
// opens the result: a lost layout record is written again with a chunk
// span as long as a partition (always correct, only slower), every column
// family is compacted (which reads every block once more), and every file
// is verified again. What the quarantined files held is gone from the
// store; the caller decides what can be rebuilt and declares the rest.
//
// NB: keys overwritten or deleted in a quarantined file may show their
// older versions again (a rollup updated since, a chunk a merge had
// replaced): Span says which key ranges to distrust.

// ErrInUse is returned by Inspect and Repair when another process (a
// running node) holds the store open.
var ErrInUse = errors.New("store: in use by another process")

// Inspection is what Inspect found.
type Inspection struct {
	// Files is every table file of the directory, by name, and every file
	// the manifest names that the directory lacks (Damage set, Bytes 0).
	Files []SSTFile
	// OpenErr is why RocksDB could not open the store, if it could not (a
	// damaged manifest, or a file it must read at open); Files then come
	// from the directory alone.
	OpenErr error
	// PartitionDuration is the store's chunk partition width.
	PartitionWidthMs int64
}

// Damaged returns the damaged files.
func (in Inspection) Damaged() []SSTFile {
	var out []SSTFile
	for _, f := range in.Files {
		if f.Damage != nil {
			out = append(out, f)
		}
	}
	return out
}

// Inspect verifies every table file of the stopped store in o.Dir.
func Inspect(o Options) (Inspection, error) {
	if err := o.Validate(); err != nil {
		return Inspection{}, err
	}
	in := Inspection{PartitionWidthMs: o.PartitionDuration.Milliseconds()}
	if _, err := os.Stat(o.Dir); err != nil {
		return in, fmt.Errorf("inspect store: %w", err)
	}
	live := map[string]grocksdb.LiveFileMetadata{}
	db, err := openRocks(&o, false)
	switch {
	case errors.Is(err, ErrInUse):
		return in, fmt.Errorf("inspect store: %w (stop the node first)", err)
	case err != nil:
		in.OpenErr = err
	default:
		for _, f := range db.rdb.GetLiveFilesMetaData() {
			live[filepath.Base(f.Name)] = f
		}
		db.free()
	}
	names, err := sstNames(o.Dir)
	if err != nil {
		return in, err
	}
	for _, name := range names {
		f := verifySST(filepath.Join(o.Dir, name))
		f.Name = name
		if fi, err := os.Stat(filepath.Join(o.Dir, name)); err == nil {
			f.Bytes = fi.Size()
		}
		if m, ok := live[name]; ok {
			// The manifest's view is authoritative, and known even when
			// the file's own index cannot be read.
			f.ColumnFamily, f.Level = m.ColumnFamilyName, m.Level
			f.Smallest, f.Largest = m.SmallestKey, m.LargestKey
			if f.Entries == 0 {
				f.Entries, f.Deletions = m.Entries, m.Deletions
			}
			delete(live, name)
		}
		in.Files = append(in.Files, f)
	}
	for name, m := range live {
		in.Files = append(in.Files, SSTFile{Name: name, ColumnFamily: m.ColumnFamilyName, Level: m.Level,
			Entries: m.Entries, Deletions: m.Deletions, Smallest: m.SmallestKey, Largest: m.LargestKey,
			Damage: fmt.Errorf("%s is listed by the store's manifest but missing from %s", name, o.Dir)})
	}
	slices.SortFunc(in.Files, func(a, b SSTFile) int { return strings.Compare(a.Name, b.Name) })
	return in, nil
}

// sstNames lists the table files of dir, sorted.
func sstNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list store %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".sst") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// isLockError reports whether err is RocksDB failing to take its LOCK
// file, held by another process.
func isLockError(err error) bool {
	for _, l := range leaves(err, nil) {
		if m := l.Error(); strings.HasPrefix(m, "IO error:") && strings.Contains(m, "lock") {
			return true
		}
	}
	return false
}

// RepairResult is what Repair did.
type RepairResult struct {
	// Before is the inspection before the repair.
	Before Inspection
	// Quarantined are the damaged files, now in the quarantine directory
	// (a file the manifest named but the directory lacked is listed, not
	// moved).
	Quarantined []SSTFile
	// LayoutRewritten: the layout record was lost and written again.
	LayoutRewritten bool
}

// Repair quarantines the damaged table files of the stopped store in
// o.Dir into quarantineDir and rebuilds the store without them (see the
// comment at the top of this file). With nothing damaged and a store that
// opens, it changes nothing and returns the inspection.
func Repair(o Options, quarantineDir string) (RepairResult, error) {
	if err := o.Validate(); err != nil {
		return RepairResult{}, err
	}
	in, err := Inspect(o)
	res := RepairResult{Before: in}
	if err != nil {
		return res, err
	}
	damaged := in.Damaged()
	if len(damaged) == 0 && in.OpenErr == nil {
		return res, nil
	}
	// The moves below go through the file-system seam; RocksDB itself
	// does not.
	fsys := vfs.OS{}
	if err := vfs.MkdirAllDurable(fsys, quarantineDir, 0o755); err != nil {
		return res, fmt.Errorf("create quarantine directory: %w", err)
	}
	for _, f := range damaged {
		src := filepath.Join(o.Dir, f.Name)
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			res.Quarantined = append(res.Quarantined, f) // nothing to move
			continue
		}
		if err := fsys.Rename(src, filepath.Join(quarantineDir, f.Name)); err != nil {
			return res, fmt.Errorf("quarantine %s: %w", f.Name, err)
		}
		res.Quarantined = append(res.Quarantined, f)
	}
	// Without these, a power cut could bring the files back under the
	// rebuilt manifest, or lose them from both places.
	for _, d := range []string{quarantineDir, filepath.Dir(quarantineDir), o.Dir} {
		if err := fsys.SyncDir(d); err != nil {
			return res, fmt.Errorf("sync directory %s: %w", d, err)
		}
	}
	ropts := dbOptions(&o)
	err = grocksdb.RepairDb(o.Dir, ropts)
	ropts.Destroy()
	if err != nil {
		return res, fmt.Errorf("rebuild the store's manifest in %s: %w", o.Dir, err)
	}
	db, err := Open(o)
	if err != nil {
		return res, fmt.Errorf("open the repaired store: %w", err)
	}
	defer db.Close()
	if res.LayoutRewritten, err = db.repairLayout(); err != nil {
		return res, err
	}
	if err := db.CompactAll(); err != nil {
		return res, err
	}
	if err := db.Flush(); err != nil {
		return res, err
	}
	if n, _ := db.rdb.GetIntProperty("rocksdb.background-errors"); n > 0 {
		return res, fmt.Errorf("compact the repaired store: %d background errors (see %s/LOG)", n, o.Dir)
	}
	after, err := verifyDir(o.Dir)
	if err != nil {
		return res, err
	}
	if len(after) > 0 {
		return res, fmt.Errorf("the repaired store still has damaged files: %w", after[0].Damage)
	}
	return res, nil
}

// repairLayout makes the layout records safe after a repair: a layout
// record written afresh by Open (the old one was lost) comes with a chunk
// span of 0, which would hide every stored chunk that starts before a
// query's range; and a lost span record is written again. The span
// written is a whole partition: always correct, only slower.
func (db *DB) repairLayout() (rewritten bool, err error) {
	_, spanFound, err := db.getMeta(metaMaxChunkSpan)
	if err != nil {
		return false, err
	}
	if !db.layoutCreated && spanFound {
		return false, nil
	}
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	wb.PutCF(db.meta, []byte(metaMaxChunkSpan), binary.BigEndian.AppendUint64(nil, uint64(db.chunkWidthMs)))
	if err := db.rdb.Write(db.syncOpts, wb); err != nil {
		return false, fmt.Errorf("record chunk span: %w", err)
	}
	db.maxChunkSpanMs.Store(db.chunkWidthMs)
	return true, nil
}

// verifyDir verifies every table file in dir and returns the damaged ones.
func verifyDir(dir string) ([]SSTFile, error) {
	names, err := sstNames(dir)
	if err != nil {
		return nil, err
	}
	var bad []SSTFile
	for _, name := range names {
		if f := verifySST(filepath.Join(dir, name)); f.Damage != nil {
			f.Name = name
			bad = append(bad, f)
		}
	}
	return bad, nil
}

// RebuildPostings replaces the label postings with those of the series
// dictionary, after postings (or series) were lost. It returns the number
// of series.
func (db *DB) RebuildPostings() (series int, err error) {
	wb := grocksdb.NewWriteBatch()
	defer wb.Destroy()
	// Every postings key starts with an escaped label name, whose first
	// byte is below 0xFF. NB: operations of one batch take increasing
	// sequence numbers, so the puts after the range deletion survive it.
	wb.DeleteRangeCF(db.postings, []byte{}, bytes.Repeat([]byte{0xFF}, 16))
	var key []byte
	err = db.ForEachSeries(func(id uint64, ls labels.Labels) error {
		for _, l := range ls {
			if l.Value == "" {
				continue
			}
			key = appendPostingsKey(key[:0], l.Name, l.Value, id)
			wb.PutCF(db.postings, key, nil)
		}
		series++
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("rebuild postings: %w", err)
	}
	if err := db.acquire(); err != nil {
		return 0, err
	}
	defer db.release()
	db.writeMu.RLock()
	defer db.writeMu.RUnlock()
	if err := db.rdb.Write(db.syncOpts, wb); err != nil {
		return 0, fmt.Errorf("rebuild postings: %w", err)
	}
	return series, nil
}

// Span is the part of the key space a table file held, decoded.
type Span struct {
	ColumnFamily string
	// Known: the file's first and last keys are known.
	Known bool
	// Timed: a partitioned column family (chunks, rollups), of Kind.
	// Partitions FromMs (inclusive) to ToMs (exclusive), and in the first
	// of them series from FirstSeries on, in the last up to LastSeries
	// (every series in the partitions between).
	Timed                   bool
	Kind                    Kind
	FromMs, ToMs            int64
	FirstSeries, LastSeries uint64
	// Series dictionary: ids FirstSeries to LastSeries (with Known). For
	// other column families, the first and last key, printable.
	FirstKey, LastKey string
}

// Span decodes f's key range; widthMs is the chunk partition width.
func (f SSTFile) Span(chunkWidthMs int64) Span {
	sp := Span{ColumnFamily: f.ColumnFamily, Known: f.Smallest != nil && f.Largest != nil}
	if k, ok := KindOf(f.ColumnFamily); ok {
		sp.Timed, sp.Kind = true, k
		if !sp.Known || len(f.Smallest) < seriesPrefixLen || len(f.Largest) < seriesPrefixLen {
			sp.Known = false
			return sp
		}
		width := k.WidthMs(chunkWidthMs)
		sp.FromMs = decodeTime(f.Smallest)
		sp.ToMs = decodeTime(f.Largest) + width
		sp.FirstSeries = binary.BigEndian.Uint64(f.Smallest[partitionPrefixLen:])
		sp.LastSeries = binary.BigEndian.Uint64(f.Largest[partitionPrefixLen:])
		return sp
	}
	if !sp.Known {
		return sp
	}
	if f.ColumnFamily == cfSeries && len(f.Smallest) == 8 && len(f.Largest) == 8 {
		sp.FirstSeries = binary.BigEndian.Uint64(f.Smallest)
		sp.LastSeries = binary.BigEndian.Uint64(f.Largest)
	}
	sp.FirstKey, sp.LastKey = printableKey(f.ColumnFamily, f.Smallest), printableKey(f.ColumnFamily, f.Largest)
	return sp
}

// printableKey renders a key of cf for people.
func printableKey(cf string, k []byte) string {
	switch cf {
	case cfSeries:
		if len(k) == 8 {
			return "series " + strconv.FormatUint(binary.BigEndian.Uint64(k), 10)
		}
	case cfPostings:
		if name, rest, err := readTerminated(k); err == nil {
			if value, _, err := readTerminated(rest); err == nil {
				return strconv.Quote(name) + "=" + strconv.Quote(value)
			}
		}
	case cfMeta:
		return strconv.Quote(string(k))
	}
	return fmt.Sprintf("%x", k)
}

// MaxSeriesID returns the highest series id that a chunk or rollup key or
// the series dictionary names (0: none). A repair that lost dictionary
// entries raises the next series id past it.
func (db *DB) MaxSeriesID() (uint64, error) {
	if err := db.acquire(); err != nil {
		return 0, err
	}
	defer db.release()
	var maxID uint64
	s := db.openScan(db.series, scanTotal, nil)
	s.seekLast()
	if k, _, ok := s.next(); ok && len(k) == 8 {
		maxID = binary.BigEndian.Uint64(k)
	}
	err := s.err
	s.close()
	if err != nil {
		return 0, fmt.Errorf("find the last series: %w", err)
	}
	for _, k := range kinds {
		var ps []int64
		if err := db.walkPartitions(k, MaxTimestampMs, func(p int64) { ps = append(ps, p) }); err != nil {
			return 0, err
		}
		for _, p := range ps {
			s := db.openScan(db.timeCFs[k], scanTotal, appendTime(nil, p+db.widthMs(k)))
			s.seekLast()
			if kb, _, ok := s.next(); ok && len(kb) == timeKeyLen {
				maxID = max(maxID, binary.BigEndian.Uint64(kb[partitionPrefixLen:]))
			}
			err := s.err
			s.close()
			if err != nil {
				return 0, fmt.Errorf("find the last series of %s partition %d: %w", k, p, err)
			}
		}
	}
	return maxID, nil
}

// ColumnFamilies lists the store's column families, for messages.
func ColumnFamilies() []string {
	out := make([]string, 0, len(cfSpecs)-1)
	for _, s := range cfSpecs {
		if s.name != cfDefault {
			out = append(out, s.name)
		}
	}
	return out
}
