package node

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tributarydb/tributary/node/chunk"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/rollup"
)

// The audit after a repair.
//
// Repair quarantines damaged table files and records their key ranges as
// unaudited LostRanges; it resets the flushed-through record, so the next
// Open replays every WAL segment still on disk into the head. Then, before
// Open returns, the head is flushed and each unaudited range is audited:
//
//   - raw chunks lost: for every series and whole day of the range inside
//     the raw retention, the hourly rollups are compared with the raw
//     samples the store now holds. An hour whose rollup counts more points
//     than the raw data holds lost that many points (neither the WAL nor
//     anything else brought them back): they are counted as lost, and the
//     rollup, which still describes them, is kept. An hour whose rollup
//     counts fewer points is rebuilt from the raw data.
//   - rollups lost: the same walk rebuilds every hour the raw data can
//     rebuild (within the raw retention); older rollups are gone, counted
//     by their entries.
//   - series dictionary entries lost: a series of the range that neither
//     the dictionary nor the WAL knows any more cannot be reached; the
//     points its chunks still hold are counted as lost.
//   - postings and meta were rebuilt or carried over by Repair.
//
// The results go into the ranges (LostPoints, RebuiltHours) and the
// ledger's totals, on /metrics and in Status.

// auditAfterRepair audits every unaudited range; Open calls it after the
// WAL replay. A failure leaves the ranges unaudited for the next Open.
func (n *Node) auditAfterRepair() error {
	n.lossMu.Lock()
	l := n.loss.losses.clone()
	n.lossMu.Unlock()
	if !l.pendingAudit() {
		return nil
	}
	start := time.Now()
	if err := n.flush(true); err != nil {
		n.health.observe(err)
		return fmt.Errorf("flush the replayed WAL before the audit: %w", err)
	}
	n.idxMu.RLock()
	ids := slices.Sorted(mapKeys(n.byID))
	n.idxMu.RUnlock()
	for i := range l.Ranges {
		r := &l.Ranges[i]
		if r.Audited {
			continue
		}
		lost, rebuilt, err := n.auditRange(*r, ids)
		if err != nil {
			n.noteStoreErr(err)
			return fmt.Errorf("audit lost range %d (%s %s): %w", r.ID, r.ColumnFamily, r.File, err)
		}
		r.Audited, r.LostPoints, r.RebuiltHours = true, lost, rebuilt
		l.LostPoints += lost
		l.RebuiltHours += rebuilt
		n.log.Warn("store repair audit", "range", r.ID, "file", r.File, "column_family", r.ColumnFamily,
			"from", fmtMsIf(r.KeysKnown, r.FromMs), "to", fmtMsIf(r.KeysKnown, r.ToMs),
			"lost_points", lost, "rebuilt_hours", rebuilt)
	}
	if err := n.putMeta(metaStoreLosses, encodeLosses(l)); err != nil {
		return fmt.Errorf("record the audit: %w", err)
	}
	n.lossMu.Lock()
	n.loss.losses = l
	n.lossMu.Unlock()
	n.log.Warn("store repair audit done: points counted lost are neither in the store nor in the WAL",
		"lost_points_total", l.LostPoints, "rebuilt_hours_total", l.RebuiltHours, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func fmtMsIf(ok bool, t int64) string {
	if !ok {
		return "unknown"
	}
	return fmtMs(t)
}

// auditRange audits one range; ids are the series known after the replay,
// ascending.
func (n *Node) auditRange(r LostRange, ids []uint64) (lost, rebuilt int64, err error) {
	if r.ColumnFamily == "series" {
		lost, err = n.countOrphans(r, ids)
		return lost, 0, err
	}
	kind, ok := store.KindOf(r.ColumnFamily)
	if !ok {
		return 0, 0, nil // postings and meta: handled by Repair
	}
	// Raw samples are complete from the start of the partition the raw
	// retention cuts in (whole partitions are dropped), to now; audit
	// whole days in it.
	rawRetention, _, _ := n.Retention()
	now := n.opts.Now().UnixMilli()
	chunkWidth := n.opts.PartitionDuration.Milliseconds()
	from := rollup.BucketStart(now-rawRetention.Milliseconds(), chunkWidth)
	from = rollup.BucketStart(from+rollup.Day-1, rollup.Day)
	countLost := kind == store.KindChunks
	for _, id := range ids {
		lo, hi, ok := affected(r, kind, chunkWidth, id)
		if !ok {
			continue
		}
		lo = max(rollup.BucketStart(lo, rollup.Day), from)
		hi = min(hi, rollup.BucketStart(now, rollup.Day)+rollup.Day)
		if lo >= hi {
			continue
		}
		n.idxMu.RLock()
		s := n.byID[id]
		n.idxMu.RUnlock()
		l, b, err := n.auditSeries(s, lo, hi, countLost)
		if err != nil {
			return lost, rebuilt, err
		}
		lost += l
		rebuilt += b
	}
	return lost, rebuilt, nil
}

// affected returns the time span [lo, hi) of series id that range r of
// kind covered; ok false when none. Without known keys, everything.
func affected(r LostRange, kind store.Kind, chunkWidthMs int64, id uint64) (lo, hi int64, ok bool) {
	if !r.KeysKnown {
		return math.MinInt64 / 2, math.MaxInt64 / 2, true
	}
	w := kind.WidthMs(chunkWidthMs)
	lo, hi = r.FromMs, r.ToMs
	if id < r.FirstSeries {
		lo += w // not in the first partition
	}
	if id > r.LastSeries {
		hi -= w // not in the last partition
	}
	return lo, hi, lo < hi
}

// auditSeries compares, day by day over [from, to) (whole days), the
// hourly rollups of s with its raw samples: an hour whose rollup counts
// fewer points than the raw data is rebuilt from it (with its day's daily
// rollup); with countLost, the points a rollup counts beyond the raw data
// are returned as lost.
func (n *Node) auditSeries(s *memSeries, from, to int64, countLost bool) (lost, rebuilt int64, err error) {
	samples, err := n.rawSamples(s, from, to-1)
	if err != nil {
		return 0, 0, err
	}
	b := n.db.NewBatch()
	defer b.Close()
	var buf []byte
	var pack rollup.Daily
	curPack := int64(math.MinInt64)
	flushPack := func() {
		if curPack != math.MinInt64 {
			buf = pack.AppendBinary(buf[:0], curPack)
			b.PutRollup(store.KindRollup1d, s.id, curPack, buf)
		}
	}
	for day := from; day < to; day += rollup.Day {
		var raw rollup.Hourly
		i, _ := slices.BinarySearchFunc(samples, day, func(x sample, t int64) int { return cmpInt(x.t, t) })
		for ; i < len(samples) && samples[i].t < day+rollup.Day; i++ {
			raw.Hours[(samples[i].t-day)/rollup.Hour].Add(samples[i].t, samples[i].v)
		}
		stored, err := n.readHourly(s.id, day)
		if err != nil {
			return lost, rebuilt, err
		}
		changed := false
		for h := range stored.Hours {
			rc, sc := raw.Hours[h].Count, stored.Hours[h].Count
			switch {
			case rc > sc:
				stored.Hours[h] = raw.Hours[h]
				rebuilt++
				changed = true
			case sc > rc && countLost:
				lost += sc - rc
			}
		}
		if !changed {
			continue
		}
		buf = stored.AppendBinary(buf[:0], day)
		b.PutRollup(store.KindRollup1h, s.id, day, buf)
		if p := rollup.PackStart(day); p != curPack {
			flushPack()
			if pack, err = n.readDaily(s.id, p); err != nil {
				return lost, rebuilt, err
			}
			curPack = p
		}
		pack.Days[(day-curPack)/rollup.Day] = stored.Total()
	}
	flushPack()
	if b.Len() > 0 {
		if err := n.db.Write(b); err != nil {
			return lost, rebuilt, fmt.Errorf("write rebuilt rollups of %s: %w", s.lset, err)
		}
	}
	return lost, rebuilt, nil
}

// countOrphans counts the stored points of the series ids of a lost
// series range that neither the dictionary nor the WAL knows any more
// (ids: the known ones, ascending).
func (n *Node) countOrphans(r LostRange, ids []uint64) (int64, error) {
	first, last := uint64(1), uint64(0)
	if len(ids) > 0 {
		last = ids[len(ids)-1]
	}
	if r.KeysKnown {
		first, last = max(first, r.FirstSeries), r.LastSeries
	}
	if !r.KeysKnown {
		last = n.nextID - 1 // nextID >= 1
	}
	last = min(last, n.nextID-1)
	var points int64
	var it chunk.Iterator
	for id := first; id <= last && id != 0; id++ {
		if _, known := slices.BinarySearch(ids, id); known {
			continue
		}
		err := n.db.Chunks(id, store.MinTimestampMs, store.MaxTimestampMs, func(_ store.ChunkMeta, data []byte) error {
			it.Reset(data)
			for it.Next() {
				points++
			}
			return it.Err()
		})
		if err != nil {
			return points, fmt.Errorf("count the points of series %d: %w", id, err)
		}
	}
	return points, nil
}
