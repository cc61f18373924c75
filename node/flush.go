package node

import (
	"fmt"
	"slices"
	"time"

	"github.com/tributarydb/tributary/node/chunk"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/rollup"
)

// maxStoredChunkSamples bounds a chunk rewritten by the merge path.
const maxStoredChunkSamples = 1024

func (n *Node) flushLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-n.flushWake:
		}
		if err := n.flush(false); err != nil {
			n.stats.flushErrors.Add(1)
			n.log.Error("flush head to store failed; will retry", "err", err)
		}
	}
}

// taken is what one flush round took from a series.
type taken struct {
	s       *memSeries
	closed  []headChunk
	ooo     []sample
	nSample int64
}

// flush writes every closed chunk and out-of-order sample to RocksDB with
// the rollups they change, removes them from the head, and deletes the WAL
// segments that no longer hold unflushed samples. all closes every open
// chunk first (shutdown, replay, memory pressure).
func (n *Node) flush(all bool) error {
	n.flushMu.Lock()
	defer n.flushMu.Unlock()
	nowNs := n.opts.Now().UnixNano()
	maxAgeNs := n.opts.ChunkMaxAge.Nanoseconds()
	if n.headSamples.Load()*16 > n.opts.HeadMaxBytes {
		all = true
	}
	n.idxMu.RLock()
	list := make([]*memSeries, 0, len(n.byID))
	for _, s := range n.byID {
		list = append(list, s)
	}
	n.idxMu.RUnlock()

	b := n.db.NewBatch()
	defer b.Close()
	var work []taken
	var buf []byte
	for _, s := range list {
		s.mu.Lock()
		if all || (len(s.ts) > 0 && nowNs-s.openedAtNs > maxAgeNs) {
			s.closeOpen()
		}
		if len(s.closed) == 0 && len(s.ooo) == 0 {
			s.mu.Unlock()
			continue
		}
		// Closed chunks are immutable; the ooo list is appended to, so copy it.
		tk := taken{s: s, closed: slices.Clone(s.closed), ooo: slices.Clone(s.ooo)}
		s.mu.Unlock()
		work = append(work, tk)
		var err error
		if buf, err = n.flushSeries(b, &work[len(work)-1], buf); err != nil {
			invalidateCaches(work)
			return fmt.Errorf("flush series %d %s: %w", s.id, s.lset, err)
		}
	}
	if len(work) > 0 {
		if err := n.db.Write(b); err != nil {
			invalidateCaches(work)
			return fmt.Errorf("write batch: %w", err)
		}
	}
	var removed int64
	for _, tk := range work {
		s := tk.s
		s.mu.Lock()
		s.closed = s.closed[len(tk.closed):]
		s.ooo = s.ooo[len(tk.ooo):]
		s.mu.Unlock()
		removed += tk.nSample
		n.stats.flushedChunks.Add(int64(len(tk.closed)))
	}
	n.headSamples.Add(-removed)
	return n.truncateWAL(list)
}

// invalidateCaches forgets the rollup caches of series whose flush did not
// reach the store, so their next flush recomputes from what is stored.
func invalidateCaches(work []taken) {
	for _, tk := range work {
		tk.s.hourCache.valid = false
		tk.s.dayCache.valid = false
	}
}

// truncateWAL removes WAL segments older than the oldest one still holding
// a sample that is not in RocksDB.
func (n *Node) truncateWAL(list []*memSeries) error {
	low := n.wal.OpenSeq()
	if r := n.replaySeq.Load(); r != 0 && r < low {
		low = r // during replay, later segments are not applied yet
	}
	for _, s := range list {
		s.mu.Lock()
		f := s.firstSeq()
		s.mu.Unlock()
		if f != 0 && f < low {
			low = f
		}
	}
	if low <= n.walLow {
		return nil
	}
	// The samples of the segments about to go are in RocksDB's memtables;
	// sync its WAL so they survive a power cut without our segments.
	if err := n.db.SyncWAL(); err != nil {
		return fmt.Errorf("sync store wal: %w", err)
	}
	if err := n.wal.RemoveBefore(low); err != nil {
		return fmt.Errorf("remove wal segments below %d: %w", low, err)
	}
	n.walLow = low
	return nil
}

// flushSeries adds to b the chunks and rollups for what tk took. It keeps
// the series' rollup caches equal to what b will store.
func (n *Node) flushSeries(b *store.Batch, tk *taken, buf []byte) ([]byte, error) {
	s := tk.s
	type hourWork struct {
		hour   int64
		chunks []headChunk
		ooo    []sample
	}
	var hours []hourWork
	at := func(h int64) *hourWork {
		for i := range hours {
			if hours[i].hour == h {
				return &hours[i]
			}
		}
		hours = append(hours, hourWork{hour: h})
		return &hours[len(hours)-1]
	}
	for _, c := range tk.closed {
		hw := at(rollup.BucketStart(c.ts[0], rollup.Hour))
		hw.chunks = append(hw.chunks, c)
		tk.nSample += int64(len(c.ts))
	}
	for _, o := range tk.ooo {
		hw := at(rollup.BucketStart(o.t, rollup.Hour))
		hw.ooo = append(hw.ooo, o)
		tk.nSample++
	}
	slices.SortFunc(hours, func(a, b hourWork) int { return cmpInt(a.hour, b.hour) })

	written := map[int64]rollup.Agg{} // hour rollups this round, for day recomputes
	for _, hw := range hours {
		fast := len(hw.ooo) == 0 && s.hourCache.valid && s.hourCache.bucket == hw.hour
		last := s.hourCache.agg.LastT
		for _, c := range hw.chunks {
			if !fast || c.ts[0] <= last {
				fast = false
				break
			}
			last = c.ts[len(c.ts)-1]
		}
		var delta rollup.Agg
		if fast {
			for _, c := range hw.chunks {
				buf = chunk.Encode(buf[:0], c.ts, c.vs)
				b.PutChunk(s.id, c.ts[0], c.ts[len(c.ts)-1], buf)
				for i, t := range c.ts {
					delta.Add(t, c.vs[i])
				}
			}
			s.hourCache.agg.Merge(delta)
		} else {
			var err error
			if buf, err = n.mergeHour(b, s, hw.hour, hw.chunks, hw.ooo, buf); err != nil {
				return buf, err
			}
		}
		buf = s.hourCache.agg.AppendBinary(buf[:0], hw.hour)
		b.PutRollup(store.KindRollup1h, s.id, hw.hour, buf)
		written[hw.hour] = s.hourCache.agg

		day := rollup.BucketStart(hw.hour, rollup.Day)
		if fast && s.dayCache.valid && s.dayCache.bucket == day {
			s.dayCache.agg.Merge(delta)
		} else {
			agg, err := n.dayFromHours(s.id, day, written)
			if err != nil {
				return buf, err
			}
			s.dayCache = aggCache{valid: true, bucket: day, agg: agg}
		}
		buf = s.dayCache.agg.AppendBinary(buf[:0], day)
		b.PutRollup(store.KindRollup1d, s.id, day, buf)
	}
	return buf, nil
}

// mergeHour rewrites one hour of a series: stored samples, then the taken
// chunks, then the out-of-order samples, last write wins; and recomputes
// the hour's rollup from the result.
func (n *Node) mergeHour(b *store.Batch, s *memSeries, hour int64, chunks []headChunk, ooo []sample, buf []byte) ([]byte, error) {
	var stored []sample
	var ts []int64
	var vs []float64
	err := n.db.Chunks(s.id, hour, hour+rollup.Hour-1, func(c store.ChunkMeta, data []byte) error {
		var err error
		ts, vs, err = chunk.Decode(data, ts[:0], vs[:0])
		if err != nil {
			return fmt.Errorf("decode stored chunk at %s: %w", fmtMs(c.MinT), err)
		}
		for i, t := range ts {
			stored = append(stored, sample{t, vs[i]})
		}
		b.DeleteChunk(s.id, c.MinT)
		return nil
	})
	if err != nil {
		return buf, err
	}
	var pending []sample
	for _, c := range chunks {
		for i, t := range c.ts {
			pending = append(pending, sample{t, c.vs[i]})
		}
	}
	pending = append(pending, ooo...)
	merged := mergeLWW(sortLWW(stored), sortLWW(pending))

	var agg rollup.Agg
	for len(merged) > 0 {
		k := min(len(merged), maxStoredChunkSamples)
		part := merged[:k]
		merged = merged[k:]
		ts, vs = ts[:0], vs[:0]
		for _, x := range part {
			ts = append(ts, x.t)
			vs = append(vs, x.v)
			agg.Add(x.t, x.v)
		}
		buf = chunk.Encode(buf[:0], ts, vs)
		b.PutChunk(s.id, ts[0], ts[len(ts)-1], buf)
	}
	s.hourCache = aggCache{valid: true, bucket: hour, agg: agg}
	return buf, nil
}

// dayFromHours recomputes a day's rollup from its stored hourly rollups,
// overridden by the hours written in the current round.
func (n *Node) dayFromHours(id uint64, day int64, written map[int64]rollup.Agg) (rollup.Agg, error) {
	var agg rollup.Agg
	seen := map[int64]bool{}
	err := n.db.Rollups(store.KindRollup1h, id, day, day+rollup.Day-1, func(bucket int64, val []byte) error {
		if w, ok := written[bucket]; ok {
			agg.Merge(w)
			seen[bucket] = true
			return nil
		}
		a, err := rollup.Decode(val, bucket)
		if err != nil {
			return fmt.Errorf("hourly rollup at %s: %w", fmtMs(bucket), err)
		}
		agg.Merge(a)
		return nil
	})
	if err != nil {
		return agg, err
	}
	for h, w := range written {
		if h >= day && h < day+rollup.Day && !seen[h] {
			agg.Merge(w)
		}
	}
	return agg, nil
}
