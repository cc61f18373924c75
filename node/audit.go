package node

import (
	"cmp"
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
// Repair quarantines damaged table files, records their key ranges as
// unaudited LostRanges and resets the flushed-through record, so that the
// next Open replays every WAL segment still on disk. That Open audits the
// ranges in two phases around the replay:
//
//  1. Before the replay, for every series and hour of a lost raw (chunks)
//     range inside the raw retention, the hourly rollup, which counts
//     every point ever flushed into the hour, is compared with the raw
//     points the repaired store still holds: the difference is what the
//     store lost, exactly.
//  2. The replay re-applies the WAL. A sample of a segment at or below the
//     flushed-through sequence of the repair was in the store before the
//     damage; if it is one the store no longer held, the replay restored
//     it. A sample of a later segment may or may not have been flushed:
//     outside the time span the hour's rollup covers it was not (it is
//     new); inside, it may have been one of the missing, and the count
//     of that hour becomes an upper bound (LostRange.UpperBound): it errs
//     on the side of "lost", never of "held".
//  3. After the replay and a flush, each hour lost what phase 1 found
//     missing less what the replay restored: counted in LostPoints of its
//     range and of the ledger. The hourly rollup still describes the lost
//     points and is kept (unless the replay's flush rewrote the hour from
//     the raw data). Rollups that count fewer points than the raw
//     data (lost rollup files, older versions resurfaced) are rebuilt from
//     it, inside the raw retention; older rollups are gone, counted by
//     their entries. A lost series dictionary range leaves series that
//     neither the dictionary nor the WAL knows: the points their chunks
//     still hold cannot be reached and count as lost.
//
// Postings and meta need no audit (Repair rebuilt and carried them over).

// maxAuditTimestamps bounds the raw timestamps phase 1 keeps to recognise
// restored samples (8 bytes each). Past it, hours are audited without
// them and their count is an upper bound (LostRange.UpperBound).
const maxAuditTimestamps = 4 << 20

// auditPlan is phase 1's result. Only Open (one goroutine) uses it.
type auditPlan struct {
	losses  StoreLosses
	hours   map[auditKey]*auditHour
	through uint64 // replayed segments up to it were wholly in the store
	kept    int    // timestamps held in present
}

type auditKey struct {
	id   uint64
	hour int64
}

// auditHour is one hour of a series that lost points.
type auditHour struct {
	rng     int   // index in losses.Ranges
	missing int64 // rollup count minus the raw points still stored
	// present are the raw timestamps still stored, sorted; nil past
	// maxAuditTimestamps (then nothing counts as restored).
	present  []int64
	tracked  bool
	restored map[int64]struct{}
	// firstT and lastT bound the points the rollup counts; ambiguous: a
	// replayed sample that may or may not have been flushed fell in them.
	firstT, lastT int64
	ambiguous     bool
}

// planAudit is phase 1; nil when no range awaits an audit. REQUIRES: the
// series dictionary loaded, the WAL not replayed yet.
func (n *Node) planAudit() (*auditPlan, error) {
	n.lossMu.Lock()
	l := n.loss.losses.clone()
	n.lossMu.Unlock()
	if !l.pendingAudit() {
		return nil, nil
	}
	p := &auditPlan{losses: l, hours: map[auditKey]*auditHour{}}
	ids := slices.Sorted(mapKeys(n.byID))
	from, to := n.auditWindow()
	chunkWidth := n.opts.PartitionDuration.Milliseconds()
	for ri, r := range l.Ranges {
		if r.Audited || r.ColumnFamily != store.KindChunks.String() {
			continue
		}
		p.through = max(p.through, r.WALFlushedThrough)
		for _, id := range ids {
			lo, hi, ok := affected(r, store.KindChunks, chunkWidth, id)
			if !ok {
				continue
			}
			lo, hi = max(rollup.BucketStart(lo, rollup.Day), from), min(hi, to)
			for day := lo; day < hi; day += rollup.Day {
				if err := p.planDay(n, ri, id, day); err != nil {
					return nil, err
				}
			}
		}
	}
	return p, nil
}

// planDay compares one day of series id's hourly rollups with its stored
// raw points.
func (p *auditPlan) planDay(n *Node, ri int, id uint64, day int64) error {
	hourly, err := n.readHourly(id, day)
	if err != nil {
		return err
	}
	if hourly.Total().Count == 0 {
		return nil
	}
	stored, err := n.storedSamples(id, day, day+rollup.Day-1)
	if err != nil {
		return err
	}
	ts := make([]int64, len(stored))
	for i, s := range stored {
		ts[i] = s.t
	}
	slices.Sort(ts)
	ts = slices.Compact(ts)
	for h := range hourly.Hours {
		start := day + int64(h)*rollup.Hour
		i, _ := slices.BinarySearch(ts, start)
		j, _ := slices.BinarySearch(ts, start+rollup.Hour)
		missing := hourly.Hours[h].Count - int64(j-i)
		key := auditKey{id, start}
		if missing <= 0 || p.hours[key] != nil {
			continue
		}
		ah := &auditHour{rng: ri, missing: missing, firstT: hourly.Hours[h].FirstT, lastT: hourly.Hours[h].LastT}
		if p.kept+(j-i) <= maxAuditTimestamps {
			ah.present, ah.tracked = slices.Clone(ts[i:j]), true
			p.kept += j - i
		}
		p.hours[key] = ah
	}
	return nil
}

// replayed is phase 2: the replay applied ts of series id from segment seq.
func (p *auditPlan) replayed(seq, id uint64, ts []int64) {
	if p == nil || len(p.hours) == 0 {
		return
	}
	for _, t := range ts {
		ah := p.hours[auditKey{id, rollup.BucketStart(t, rollup.Hour)}]
		if ah == nil || !ah.tracked || int64(len(ah.restored)) >= ah.missing {
			continue
		}
		if _, ok := slices.BinarySearch(ah.present, t); ok {
			continue
		}
		if seq > p.through {
			// Not known to have been flushed: new, unless the rollup's
			// span holds it.
			ah.ambiguous = ah.ambiguous || (t >= ah.firstT && t <= ah.lastT)
			continue
		}
		if ah.restored == nil {
			ah.restored = map[int64]struct{}{}
		}
		ah.restored[t] = struct{}{}
	}
}

// auditWindow is the time the raw data is complete in, whole days: from
// the start of the partition the raw retention cuts in (retention drops
// whole partitions) to the end of today.
func (n *Node) auditWindow() (from, to int64) {
	rawRetention, _, _ := n.Retention()
	now := n.opts.Now().UnixMilli()
	from = rollup.BucketStart(now-rawRetention.Milliseconds(), n.opts.PartitionDuration.Milliseconds())
	from = rollup.BucketStart(from+rollup.Day-1, rollup.Day)
	return from, rollup.BucketStart(now, rollup.Day) + rollup.Day
}

// finishAudit is phase 3, after the replay. A failure leaves the ranges
// unaudited: the next Open audits them again (the points restored by this
// replay are in the store by then, and count as held).
func (n *Node) finishAudit(p *auditPlan) error {
	if p == nil {
		return nil
	}
	start := time.Now()
	if err := n.flush(true, true); err != nil {
		n.health.observe(err)
		return fmt.Errorf("flush the replayed WAL before the audit: %w", err)
	}
	l := p.losses
	for _, ah := range p.hours {
		r := &l.Ranges[ah.rng]
		r.LostPoints += ah.missing - int64(len(ah.restored))
		r.UpperBound = r.UpperBound || !ah.tracked || ah.ambiguous
	}
	ids := slices.Sorted(mapKeys(n.byID))
	for i := range l.Ranges {
		r := &l.Ranges[i]
		if r.Audited {
			continue
		}
		rebuilt, orphaned, err := n.auditRange(*r, ids)
		if err != nil {
			n.noteStoreErr(err)
			return fmt.Errorf("audit lost range %d (%s %s): %w", r.ID, r.ColumnFamily, r.File, err)
		}
		r.LostPoints += orphaned
		r.Audited, r.RebuiltHours = true, rebuilt
		l.LostPoints += r.LostPoints
		l.RebuiltHours += rebuilt
		n.log.Warn("store repair audit", "range", r.ID, "file", r.File, "column_family", r.ColumnFamily,
			"from", fmtMsIf(r.KeysKnown, r.FromMs), "to", fmtMsIf(r.KeysKnown, r.ToMs),
			"lost_points", r.LostPoints, "upper_bound", r.UpperBound, "rebuilt_hours", rebuilt)
	}
	if err := n.putMeta(metaStoreLosses, encodeLosses(l)); err != nil {
		return fmt.Errorf("record the audit: %w", err)
	}
	n.lossMu.Lock()
	n.loss.losses = l
	n.lossMu.Unlock()
	n.log.Warn("store repair audit done: points counted lost are in neither the store nor the WAL",
		"lost_points_total", l.LostPoints, "rebuilt_hours_total", l.RebuiltHours, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func fmtMsIf(ok bool, t int64) string {
	if !ok {
		return "unknown"
	}
	return fmtMs(t)
}

// auditRange rebuilds, for the series and days range r covered inside the
// raw retention, every hourly rollup that counts fewer points than the
// raw data holds; for a lost series range it counts the points of series
// nobody knows any more (orphaned). ids are the known series, ascending.
func (n *Node) auditRange(r LostRange, ids []uint64) (rebuilt, orphaned int64, err error) {
	if r.ColumnFamily == "series" {
		orphaned, err = n.countOrphans(r, ids)
		return 0, orphaned, err
	}
	kind, ok := store.KindOf(r.ColumnFamily)
	if !ok && r.ColumnFamily != "" {
		return 0, 0, nil // postings and meta: handled by Repair
	}
	if !ok {
		kind = store.KindRollup1d // unknown: the widest partitions, everything
	}
	from, to := n.auditWindow()
	chunkWidth := n.opts.PartitionDuration.Milliseconds()
	for _, id := range ids {
		lo, hi, ok := affected(r, kind, chunkWidth, id)
		if !ok {
			continue
		}
		lo, hi = max(rollup.BucketStart(lo, rollup.Day), from), min(hi, to)
		if lo >= hi {
			continue
		}
		n.idxMu.RLock()
		s := n.byID[id]
		n.idxMu.RUnlock()
		b, err := n.rebuildRollups(s, lo, hi)
		if err != nil {
			return rebuilt, 0, err
		}
		rebuilt += b
	}
	if r.ColumnFamily == "" {
		orphaned, err = n.countOrphans(r, ids)
	}
	return rebuilt, orphaned, err
}

// affected returns the time span [lo, hi) of series id that range r of
// kind covered; ok false when none. Without known keys, all time.
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

// rebuildRollups rebuilds, day by day over [from, to) (whole days), each
// hourly rollup of s that counts fewer points than its raw samples, and
// the daily rollups of the days it changed. It returns the hours rebuilt.
func (n *Node) rebuildRollups(s *memSeries, from, to int64) (rebuilt int64, err error) {
	samples, err := n.rawSamples(s, from, to-1)
	if err != nil {
		return 0, err
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
		i, _ := slices.BinarySearchFunc(samples, day, func(x sample, t int64) int { return cmp.Compare(x.t, t) })
		for ; i < len(samples) && samples[i].t < day+rollup.Day; i++ {
			raw.Hours[(samples[i].t-day)/rollup.Hour].Add(samples[i].t, samples[i].v)
		}
		stored, err := n.readHourly(s.id, day)
		if err != nil {
			return rebuilt, err
		}
		changed := false
		for h := range stored.Hours {
			if raw.Hours[h].Count > stored.Hours[h].Count {
				stored.Hours[h] = raw.Hours[h]
				rebuilt++
				changed = true
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
				return rebuilt, err
			}
			curPack = p
		}
		pack.Days[(day-curPack)/rollup.Day] = stored.Total()
	}
	flushPack()
	if b.Len() > 0 {
		if err := n.db.Write(b); err != nil {
			return rebuilt, fmt.Errorf("write rebuilt rollups of %s: %w", s.lset, err)
		}
	}
	return rebuilt, nil
}

// countOrphans counts the stored points of the series ids of a lost
// series range (all ids, keys unknown) that neither the dictionary nor the
// WAL knows any more. ids are the known ones, ascending.
func (n *Node) countOrphans(r LostRange, ids []uint64) (int64, error) {
	first, last := uint64(1), n.nextID-1 // nextID >= 1
	if r.KeysKnown {
		first, last = max(first, r.FirstSeries), min(last, r.LastSeries)
	}
	var points int64
	var it chunk.Iterator
	for id := first; id <= last; id++ {
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
