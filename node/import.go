package node

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/rollup"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
)

// Imports: a node whose disk was replaced takes its history back from the
// cloud (tributary node restore). Imported points and rollups go straight
// into the store through the flush path, never into the WAL: they are
// not shipped again, and the WAL's sequence numbers stay the node's own.
//
// Precedence: the flush path merges an imported point with what the store
// holds for its hour, last write wins: it replaces a stored point with the
// same timestamp, and a point still in the head (written, not flushed yet)
// replaces it in turn, as the head does with anything stored. Rollups of
// the hours touched are recomputed from the merged points, so importing
// the same points again changes nothing. A restore imports into an empty
// node, where none of this arises.
//
// Durability: imports are written to the store without syncing its log;
// SyncImports makes everything imported so far durable. A crash before
// that may lose some of them: import again.
//
// Imports serialise with the flush loop (Node.flushMu) and are safe for
// concurrent use with writes and queries.

// ErrImport is wrapped by every import error caused by the input: a file
// that does not verify or belongs to another node, labels the node does
// not accept, rollups that do not encode. Importing the same input again
// cannot succeed.
var ErrImport = errors.New("node: invalid import")

// importBatchPoints bounds the points decoded from a segment before they
// are written to the store.
const importBatchPoints = 64 << 10

// Imported says what an import wrote.
type Imported struct {
	Series int   // distinct series in the input
	Points int64 // points written
	// Segment describes the imported file as its footer does (CRC,
	// points, time span); ImportSegment only.
	Segment wal.SegmentInfo
}

// WALDir is the directory of the WAL of a node whose data directory is
// dataDir (a restore starts its sequence there: wal.InitSequence).
func WALDir(dataDir string) string {
	o := Options{DataDir: dataDir}
	return o.walDir()
}

// ImportSegment writes every point of a sealed WAL segment file of this
// node (the WAL's format, as node/segment builds it) into the store. The
// whole file is verified (wal.VerifySegment) and decoded before anything
// is written, so a damaged file imports nothing; its header must name
// this node. Memory: the file's points, importBatchPoints at a time,
// plus one verifying pass.
func (n *Node) ImportSegment(file []byte) (Imported, error) {
	if n.closed.Load() {
		return Imported{}, model.ErrClosed
	}
	series, info, err := n.verifyImport(file)
	if err != nil {
		return Imported{}, err
	}
	type pending struct {
		ls      labels.Labels
		samples []sample
	}
	var (
		batch  = map[uint64]*pending{}
		order  []uint64 // ids in batch, in first-seen order
		queued int
		res    = Imported{Series: len(series), Segment: info}
	)
	write := func() error {
		for _, id := range order {
			p := batch[id]
			if err := n.importSeries(p.ls, p.samples); err != nil {
				return err
			}
			res.Points += int64(len(p.samples))
		}
		clear(batch)
		order, queued = order[:0], 0
		return nil
	}
	var dec record.Decoder
	var werr error
	_, err = wal.VerifySegment("import", file, func(r wal.Record) error {
		return dec.Decode(r.Data, func(uint64, []byte) error { return nil }, func(id uint64, ts []int64, vs []float64) error {
			p := batch[id]
			if p == nil {
				p = &pending{ls: series[id]}
				batch[id] = p
				order = append(order, id)
			}
			for i, t := range ts {
				p.samples = append(p.samples, sample{t, vs[i]})
			}
			queued += len(ts)
			if queued >= importBatchPoints {
				if werr = write(); werr != nil {
					return werr
				}
			}
			return nil
		})
	})
	if werr != nil {
		return res, werr
	}
	if err != nil {
		return res, fmt.Errorf("BUG: import segment %d: the file changed between verifying and importing it: %w", info.Seq, err)
	}
	if err := write(); err != nil {
		return res, err
	}
	return res, nil
}

// verifyImport checks a file to import: it verifies, belongs to this
// node, and every run's series is defined, with labels the node accepts.
// It returns the series by the file's ids.
func (n *Node) verifyImport(file []byte) (map[uint64]labels.Labels, wal.SegmentInfo, error) {
	c, err := segment.Read("import", file, func(ls labels.Labels) (labels.Labels, error) { return labels.New(ls, n.opts.Limits) })
	info := c.Info
	switch {
	case err != nil:
		return nil, info, fmt.Errorf("%w: %w", ErrImport, err)
	case info.NodeID != n.opts.NodeID:
		return nil, info, fmt.Errorf("%w: segment %d belongs to node %q, this node is %q", ErrImport, info.Seq, info.NodeID, n.opts.NodeID)
	case c.Points != info.Points:
		return nil, info, fmt.Errorf("%w: segment %d: its records hold %d points, its footer says %d", ErrImport, info.Seq, c.Points, info.Points)
	}
	return c.Series, info, nil
}

// importSeries writes samples (in precedence order: a later one wins over
// an earlier one with the same timestamp) of series ls into the store,
// one day of them per store batch.
func (n *Node) importSeries(ls labels.Labels, samples []sample) error {
	s, err := n.importTarget(ls)
	if err != nil {
		return err
	}
	// Stable: equal timestamps keep their order, which decides who wins.
	slices.SortStableFunc(samples, func(a, b sample) int { return cmp.Compare(a.t, b.t) })
	n.flushMu.Lock()
	defer n.flushMu.Unlock()
	for len(samples) > 0 {
		end := rollup.BucketStart(samples[0].t, rollup.Day) + rollup.Day
		k, _ := slices.BinarySearchFunc(samples, end, func(x sample, t int64) int { return cmp.Compare(x.t, t) })
		if err := n.importDay(s, samples[:k]); err != nil {
			return fmt.Errorf("import %s: %w", ls, err)
		}
		samples = samples[k:]
	}
	return nil
}

// importDay writes samples of one day of s as the flush writes a head's
// out-of-order samples: merged with the stored chunks of their hours,
// those hours' rollups recomputed, the day's total folded into its daily
// pack. REQUIRES: n.flushMu held.
func (n *Node) importDay(s *memSeries, samples []sample) error {
	b := n.db.NewBatch()
	defer b.Close()
	tk := taken{s: s, ooo: samples}
	if err := n.flushSeries(b, &tk, &flushScratch{}); err != nil {
		return err
	}
	if err := n.db.Write(b); err != nil {
		return fmt.Errorf("write batch: %w", err)
	}
	return nil
}

// importTarget returns the series ls, created (and persisted) if the node
// does not know it yet.
func (n *Node) importTarget(in labels.Labels) (*memSeries, error) {
	ls, err := labels.New(in, n.opts.Limits)
	if err != nil {
		return nil, fmt.Errorf("%w: series %s: %w", ErrImport, in, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		return nil, model.ErrClosed
	}
	n.keyBuf = ls.AppendKey(n.keyBuf[:0])
	if s := n.lookupLocked(n.keyBuf, ls); s != nil {
		return s, nil
	}
	if len(n.byID) >= n.opts.MaxSeries {
		return nil, fmt.Errorf("%w: series %s would exceed the node's limit of %d series", ErrImport, ls, n.opts.MaxSeries)
	}
	s := n.addSeriesLocked(n.nextID, ls, n.keyBuf)
	if err := n.persistSeries(s); err != nil {
		return nil, err
	}
	return s, nil
}

// SeriesRollups are the stored rollups of one series, packed as the store
// keeps them: the hours of a UTC day, the days of a daily pack
// (rollup.PackStart). A cell with Count 0 is empty.
type SeriesRollups struct {
	Labels labels.Labels
	Hourly []HourlyRollups // ascending by Day
	Daily  []DailyRollups  // ascending by Pack
}

// HourlyRollups are the hours of the UTC day starting at Day (ms).
type HourlyRollups struct {
	Day   int64
	Hours rollup.Hourly
}

// DailyRollups are the days of the daily pack starting at Pack (ms, a
// multiple of rollup.DailySpan).
type DailyRollups struct {
	Pack int64
	Days rollup.Daily
}

// ImportRollups writes the non-empty cells of r into the store, each
// replacing the stored cell of the same hour or day (the other cells are
// kept): the rollups of periods whose raw points the node does not hold
// (the cloud's raw retention dropped them). Importing the same cells again
// changes nothing. Every pack must start at a day (Hourly) or at a daily
// pack (Daily), and every cell must encode (its samples' times inside its
// hour or day); otherwise nothing is written and the error wraps
// ErrImport.
//
// Known limit: a point later written into an hour that holds only an
// imported rollup makes the flush recompute that hour from the raw points
// the node holds, which replaces the imported cell.
func (n *Node) ImportRollups(r SeriesRollups) error {
	if n.closed.Load() {
		return model.ErrClosed
	}
	for _, h := range r.Hourly {
		if rollup.BucketStart(h.Day, rollup.Day) != h.Day {
			return fmt.Errorf("%w: rollups of %s: hourly pack at %d is not at the start of a day", ErrImport, r.Labels, h.Day)
		}
		if _, err := rollup.DecodeHourly(h.Hours.AppendBinary(nil, h.Day), h.Day); err != nil {
			return fmt.Errorf("%w: rollups of %s: hours of %s: %w", ErrImport, r.Labels, fmtMs(h.Day), err)
		}
	}
	for _, d := range r.Daily {
		if rollup.PackStart(d.Pack) != d.Pack {
			return fmt.Errorf("%w: rollups of %s: daily pack at %d is not at the start of a pack", ErrImport, r.Labels, d.Pack)
		}
		if _, err := rollup.DecodeDaily(d.Days.AppendBinary(nil, d.Pack), d.Pack); err != nil {
			return fmt.Errorf("%w: rollups of %s: days from %s: %w", ErrImport, r.Labels, fmtMs(d.Pack), err)
		}
	}
	if len(r.Hourly) == 0 && len(r.Daily) == 0 {
		return nil
	}
	s, err := n.importTarget(r.Labels)
	if err != nil {
		return err
	}
	n.flushMu.Lock()
	defer n.flushMu.Unlock()
	b := n.db.NewBatch()
	defer b.Close()
	var buf []byte
	for _, h := range r.Hourly {
		stored, err := n.readHourly(s.id, h.Day)
		if err != nil {
			return fmt.Errorf("import rollups of %s: %w", r.Labels, err)
		}
		for i, a := range h.Hours.Hours {
			if a.Count > 0 {
				stored.Hours[i] = a
			}
		}
		buf = stored.AppendBinary(buf[:0], h.Day)
		b.PutRollup(store.KindRollup1h, s.id, h.Day, buf)
	}
	for _, d := range r.Daily {
		stored, err := n.readDaily(s.id, d.Pack)
		if err != nil {
			return fmt.Errorf("import rollups of %s: %w", r.Labels, err)
		}
		for i, a := range d.Days.Days {
			if a.Count > 0 {
				stored.Days[i] = a
			}
		}
		buf = stored.AppendBinary(buf[:0], d.Pack)
		b.PutRollup(store.KindRollup1d, s.id, d.Pack, buf)
	}
	if err := n.db.Write(b); err != nil {
		return fmt.Errorf("import rollups of %s: write batch: %w", r.Labels, err)
	}
	return nil
}

// SyncImports makes every import that returned so far durable (the
// store's own log is fsynced).
func (n *Node) SyncImports() error {
	if n.closed.Load() {
		return model.ErrClosed
	}
	if err := n.db.SyncWAL(); err != nil {
		return fmt.Errorf("sync imports: %w", err)
	}
	return nil
}
