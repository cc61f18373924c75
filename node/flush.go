package node

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tributarydb/tributary/internal/pace"
	"github.com/tributarydb/tributary/node/chunk"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/rollup"
)

// maxStoredChunkSamples bounds a chunk rewritten by the merge path.
const maxStoredChunkSamples = 1024

// flushBatchBytes is the size at which a flush writes its batch to the
// store and starts the next: about a quarter of a default memtable.
const flushBatchBytes = 1 << 20

// flushLoop flushes the head every FlushInterval, and when woken, until
// the node stops.
func (n *Node) flushLoop() {
	defer n.wg.Done()
	pace.Every(n.stop, n.opts.FlushInterval, n.flushWake, n.periodicFlush)
}

// periodicFlush is one turn of flushLoop: it seals an aged WAL segment,
// flushes the head's closed chunks, and records how the store took it.
func (n *Node) periodicFlush() {
	n.sealAgedSegment()
	err := n.flush(false, false)
	if err == nil {
		err = n.idleFlush()
	}
	if err != nil {
		n.stats.flushErrors.Add(1)
		n.log.Error("flush head to store failed; will retry", "err", err)
	}
	wasHealthy := !n.health.unhealthy.Load()
	n.health.observe(err)
	switch healthy := !n.health.unhealthy.Load(); {
	case wasHealthy && !healthy:
		st := n.health.state()
		n.log.Error("store cannot flush: the node is not ready; writes go to the WAL while unflushed data stays within its bounds",
			"reason", st.Reason, "failing_since", st.FailingSince, "failures", st.Failures, "err", err)
	case !wasHealthy && healthy:
		n.log.Info("store takes flushes again: the node is ready")
	}
	n.updateUnflushedWAL()
	if err := n.persistWALQuarantines(); err != nil {
		n.log.Error("record WAL quarantines failed; will retry", "err", err)
	}
}

// sealAgedSegment seals the open WAL segment once it is WALSegmentAge old,
// also when no write comes along to do it: otherwise an edge whose writes
// stop would never ship (or release) its last points.
func (n *Node) sealAgedSegment() {
	// NB: under the write lock, as in the write path: a writer decides which
	// series to define in a record from the segment MaybeCut left open, so a
	// cut between its MaybeCut and its Append would leave a segment using
	// series it does not define.
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		return
	}
	if _, _, err := n.wal.MaybeCut(); err != nil {
		n.log.Error("seal aged WAL segment failed; will retry", "err", err)
	}
}

// idleFlush makes the data directory converge to the compressed store once
// the node has taken no write for Options.IdleFlush: it seals the open
// segment, flushes the whole head and the store, and releases every WAL
// segment that replication (WALRetention) no longer needs. It runs once per
// idle period (flush loop only).
func (n *Node) idleFlush() error {
	last := n.lastAppendNs.Load()
	if n.opts.IdleFlush < 0 || last == n.idleDoneNs || n.opts.Now().UnixNano()-last < n.opts.IdleFlush.Nanoseconds() {
		return nil
	}
	n.mu.Lock() // NB: as in sealAgedSegment
	if n.closed.Load() {
		n.mu.Unlock()
		return nil
	}
	_, err := n.wal.Cut()
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("idle flush: seal wal segment: %w", err)
	}
	if err := n.flush(true, true); err != nil {
		return fmt.Errorf("idle flush: %w", err)
	}
	n.idleDoneNs = last
	n.stats.idleFlushes.Add(1)
	if !n.opts.NoIdleCompact {
		select {
		case n.compactWake <- struct{}{}:
		default: // one is pending already
		}
	}
	return nil
}

// decoded is a closed head chunk's samples.
type decoded struct {
	ts []int64
	vs []float64
}

// flushScratch holds the buffers one flush round reuses from series to
// series.
type flushScratch struct {
	buf []byte    // an encoded chunk or rollup pack
	ts  []int64   // a series' closed chunks, decoded
	vs  []float64 // (with ts)
}

// maxScratchKeptSamples bounds the decode buffers a flush round keeps for
// the next series: a series that held many chunks (after a long store
// outage, say) does not pin their size.
const maxScratchKeptSamples = 1 << 16

// keep makes ts and vs the decode buffers of the next series, unless they
// grew past maxScratchKeptSamples.
func (sc *flushScratch) keep(ts []int64, vs []float64) {
	if cap(ts) > maxScratchKeptSamples || cap(vs) > maxScratchKeptSamples {
		ts, vs = nil, nil
	}
	sc.ts, sc.vs = ts, vs
}

// decode decodes every closed chunk into the scratch buffers, which the
// result's slices share until the next call.
func (sc *flushScratch) decode(closed []headChunk) []decoded {
	ts, vs := sc.ts[:0], sc.vs[:0]
	ends := make([]int, len(closed)) // ends[i]: where chunk i's samples end
	for i, hc := range closed {
		ts, vs = hc.c.AppendSamples(ts, vs)
		ends[i] = len(ts)
	}
	sc.keep(ts, vs)
	out := make([]decoded, len(closed))
	from := 0
	for i, end := range ends {
		out[i] = decoded{ts: ts[from:end:end], vs: vs[from:end:end]}
		from = end
	}
	return out
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
// chunk first (shutdown, replay, memory pressure). force flushes the store
// to disk so that every segment whose samples it now holds can go
// (truncateWAL).
func (n *Node) flush(all, force bool) error {
	n.flushMu.Lock()
	defer n.flushMu.Unlock()
	n.stats.flushes.Add(1)
	for {
		err := n.flushRound(all, force)
		var se *seriesFlushError
		if !errors.As(err, &se) {
			return err
		}
		// One series' stored data cannot be read back (a checksum error,
		// say): keep its samples in the head and its WAL segments on disk,
		// say so, and let every other series flush.
		n.flushSkip[se.id] = se.err
		n.stats.flushErrors.Add(1)
		n.noteStoreErr(se.err)
		n.log.Error("series cannot be flushed; its samples stay in the head and WAL until restart", "series", se.lset.String(), "err", se.err)
	}
}

// seriesFlushError is a flush failure confined to one series.
type seriesFlushError struct {
	id   uint64
	lset fmt.Stringer
	err  error
}

func (e *seriesFlushError) Error() string {
	return fmt.Sprintf("flush series %d %s: %v", e.id, e.lset, e.err)
}

// flushRound is one attempt at a flush. REQUIRES: n.flushMu held.
func (n *Node) flushRound(all, force bool) error {
	// While the WAL refuses writes (a full disk, an I/O error) the store is
	// left alone too: nothing new reaches the head, and a store write on a
	// full disk would only put RocksDB into its own error state.
	if err := n.wal.Err(); err != nil {
		return fmt.Errorf("wal unavailable: %w", err)
	}
	nowNs := n.opts.Now().UnixNano()
	maxAgeNs := n.opts.ChunkMaxAge.Nanoseconds()
	if n.headBytes.Load() > n.opts.HeadMaxBytes {
		all = true
	}
	n.idxMu.RLock()
	list := make([]*memSeries, 0, len(n.byID))
	for _, s := range n.byID {
		list = append(list, s)
	}
	n.idxMu.RUnlock()

	// The store is written in batches of at most about flushBatchBytes,
	// each holding whole series (a series' chunks and rollups must reach
	// the store together): RocksDB copies a batch into its memtables, which
	// grow past their size to take it, so one batch for a whole head would
	// cost the process the head's size twice more.
	b := n.db.NewBatch()
	defer b.Close()
	var (
		work   []taken
		stored int // work[:stored] is in the store
		sc     flushScratch
	)
	commit := func() error {
		if b.Len() == 0 {
			return nil
		}
		// Every sample taken was appended to the WAL before it reached the
		// head. Make those records durable first (under an interval sync
		// policy they may not be yet), or a power cut could leave the store
		// holding points the WAL, and so the cloud, never gets. Before every
		// batch: series taken after the last sync may hold newer samples
		// (a sync that finds everything durable returns at once).
		if err := n.wal.SyncAll(); err != nil {
			return fmt.Errorf("sync wal before writing to the store: %w", err)
		}
		err := n.injectedFault()
		if err == nil {
			// Unlogged: the WAL segments holding these samples stay until
			// truncateWAL has flushed the store.
			err = n.db.WriteUnlogged(b)
		}
		if err != nil {
			return fmt.Errorf("write batch: %w", err)
		}
		n.stats.flushBatches.Add(1)
		b.Reset()
		stored = len(work)
		return nil
	}
	// What reached the store leaves the head, also when a later batch
	// fails: a flush that took it again would only merge it again.
	released := false
	defer func() {
		if !released {
			n.releaseTaken(work[:stored])
		}
	}()
	for _, s := range list {
		if n.flushSkip[s.id] != nil {
			continue
		}
		s.mu.Lock()
		// Out-of-order samples may repeat timestamps of the open chunk and
		// are newer than it: flush them together, or the store would hold
		// a newer value than the head.
		if all || len(s.ooo) > 0 || (s.open.Len() > 0 && nowNs-s.openedAtNs > maxAgeNs) {
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
		if err = n.flushSeries(b, &work[len(work)-1], &sc); err != nil {
			return &seriesFlushError{id: s.id, lset: s.lset, err: err}
		}
		if b.Bytes() >= flushBatchBytes {
			if err := commit(); err != nil {
				return err
			}
		}
	}
	if err := commit(); err != nil {
		return err
	}
	n.releaseTaken(work)
	released = true
	return n.truncateWAL(list, force)
}

// releaseTaken removes from the head what tks took, once it is in the
// store. REQUIRES: n.flushMu held.
func (n *Node) releaseTaken(tks []taken) {
	var removed, freed int64
	for _, tk := range tks {
		s := tk.s
		s.mu.Lock()
		for _, c := range tk.closed {
			s.closedBytes -= int64(c.c.SizeBytes())
		}
		s.closed = slices.Delete(s.closed, 0, len(tk.closed))
		s.ooo = s.ooo[len(tk.ooo):]
		if len(s.ooo) == 0 {
			s.ooo = nil // let the buffer go
		}
		freed -= s.resize()
		s.mu.Unlock()
		removed += tk.nSample
		n.stats.flushedChunks.Add(int64(len(tk.closed)))
	}
	n.headSamples.Add(-removed)
	n.headBytes.Add(-freed)
}

// truncateWAL records how far the WAL is flushed and removes the segments
// older than the oldest one still holding a sample that is not durable in
// RocksDB, except those Options.WALRetention keeps.
//
// Flushes write to RocksDB without its WAL, so a sample is durable there
// only once the store's memtables are flushed. That costs a small SST per
// store flush, so the store is flushed, and the flushed-through record
// advanced, only when force is set (shutdown, idle) or when the segments it
// would release hold at least Options.StoreFlushWALBytes; until then they
// stay on disk and are replayed after a crash.
func (n *Node) truncateWAL(list []*memSeries, force bool) error {
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
	if low > n.flushedLow && (force || n.walBytesIn(n.flushedLow, low) >= n.opts.StoreFlushWALBytes) {
		// INVARIANT: the flushed-through record and the removal of a
		// segment come after the store flush that makes its samples
		// durable; otherwise a crash would lose samples that are in
		// neither the memtables (gone) nor the WAL (released).
		if err := n.db.Flush(); err != nil {
			return fmt.Errorf("flush store before releasing wal segments: %w", err)
		}
		n.stats.storeFlushes.Add(1)
		if err := n.recordFlushedThrough(low - 1); err != nil {
			return err
		}
		n.flushedLow = low
	}
	keep := n.flushedLow
	if n.opts.WALRetention != nil {
		keep = min(keep, n.opts.WALRetention())
	}
	if keep <= n.walLow {
		return nil
	}
	if err := n.wal.RemoveBefore(keep); err != nil {
		return fmt.Errorf("remove wal segments below %d: %w", keep, err)
	}
	n.walLow = keep
	return nil
}

// walBytesIn is the size of the WAL segments with a sequence in [from, to).
func (n *Node) walBytesIn(from, to uint64) int64 {
	var total int64
	for _, s := range n.wal.Segments() {
		if s.Seq >= from && s.Seq < to {
			total += s.Bytes
		}
	}
	return total
}

// flushSeries adds to b the chunks and rollups for what tk took. Hours are
// handled in time order, a day's packed hourly rollups loaded once.
func (n *Node) flushSeries(b *store.Batch, tk *taken, sc *flushScratch) error {
	buf := sc.buf
	defer func() { sc.buf = buf }()
	s := tk.s
	type hourWork struct {
		hour   int64
		chunks []decoded
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
	for _, c := range sc.decode(tk.closed) {
		hw := at(rollup.BucketStart(c.ts[0], rollup.Hour))
		hw.chunks = append(hw.chunks, c)
		tk.nSample += int64(len(c.ts))
	}
	for _, o := range tk.ooo {
		hw := at(rollup.BucketStart(o.t, rollup.Hour))
		hw.ooo = append(hw.ooo, o)
		tk.nSample++
	}
	slices.SortFunc(hours, func(a, b hourWork) int { return cmp.Compare(a.hour, b.hour) })

	var (
		day     rollup.Hourly // hourly rollups of curDay
		pack    rollup.Daily  // daily rollups of curPack
		curDay  = int64(math.MinInt64)
		curPack = int64(math.MinInt64)
	)
	finishPack := func() {
		if curPack != math.MinInt64 {
			buf = pack.AppendBinary(buf[:0], curPack)
			b.PutRollup(store.KindRollup1d, s.id, curPack, buf)
		}
	}
	// finishDay stores curDay's hours and folds its total into its pack.
	finishDay := func() error {
		if curDay == math.MinInt64 {
			return nil
		}
		buf = day.AppendBinary(buf[:0], curDay)
		b.PutRollup(store.KindRollup1h, s.id, curDay, buf)
		if p := rollup.PackStart(curDay); p != curPack {
			finishPack()
			var err error
			if pack, err = n.readDaily(s.id, p); err != nil {
				return err
			}
			curPack = p
		}
		pack.Days[(curDay-curPack)/rollup.Day] = day.Total()
		return nil
	}
	for _, hw := range hours {
		if d := rollup.BucketStart(hw.hour, rollup.Day); d != curDay {
			if err := finishDay(); err != nil {
				return err
			}
			var err error
			if day, err = n.readHourly(s.id, d); err != nil {
				return err
			}
			curDay = d
		}
		stored := &day.Hours[(hw.hour-curDay)/rollup.Hour]
		// Fast path: in-order chunks all newer than anything stored in the
		// hour are written as they are and merged into its rollup.
		fast := len(hw.ooo) == 0
		last := stored.LastT
		for _, c := range hw.chunks {
			if !fast || (stored.Count > 0 && c.ts[0] <= last) {
				fast = false
				break
			}
			last = c.ts[len(c.ts)-1]
		}
		if !fast {
			agg, nbuf, err := n.mergeHour(b, s, hw.hour, hw.chunks, hw.ooo, buf)
			buf = nbuf
			if err != nil {
				return err
			}
			*stored = agg
			continue
		}
		for _, c := range hw.chunks {
			buf = chunk.Encode(buf[:0], c.ts, c.vs)
			b.PutChunk(s.id, c.ts[0], c.ts[len(c.ts)-1], buf)
			for i, t := range c.ts {
				stored.Add(t, c.vs[i])
			}
		}
	}
	if err := finishDay(); err != nil {
		return err
	}
	finishPack()
	return nil
}

// readDaily loads the packed daily rollups of one series for one pack.
func (n *Node) readDaily(id uint64, packStart int64) (rollup.Daily, error) {
	return readPack(n, store.KindRollup1d, id, packStart, rollup.DecodeDaily, "daily rollups from")
}

// readHourly loads the packed hourly rollups of one series for one day.
func (n *Node) readHourly(id uint64, day int64) (rollup.Hourly, error) {
	return readPack(n, store.KindRollup1h, id, day, rollup.DecodeHourly, "hourly rollups of")
}

// readPack loads the pack of rollup tier k of one series that starts at
// start, decoded by decode (an empty pack when none is stored); what
// names it in the error.
func readPack[P any](n *Node, k store.Kind, id uint64, start int64, decode func([]byte, int64) (P, error), what string) (P, error) {
	var p P
	val, found, err := n.db.Rollup(k, id, start)
	if err == nil && found {
		p, err = decode(val, start)
	}
	if err != nil {
		return p, fmt.Errorf("%s %s: %w", what, fmtMs(start), err)
	}
	return p, nil
}

// mergeHour rewrites one hour of a series: stored samples, then the taken
// chunks, then the out-of-order samples, last write wins; and recomputes
// the hour's rollup from the result.
func (n *Node) mergeHour(b *store.Batch, s *memSeries, hour int64, chunks []decoded, ooo []sample, buf []byte) (rollup.Agg, []byte, error) {
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
		return rollup.Agg{}, buf, err
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
	return agg, buf, nil
}
