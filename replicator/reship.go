package replicator

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

// Reship: a coordinator asks (ShipResponse.reship) for a run first..last
// of segments the cloud holds but no live replica can copy to the
// replicas that lack it (its only holder died or left). The edge ships
// the run again at backfill priority, from one of two sources, decided
// when the request arrives:
//
//   - its WAL, when sealed segment files still on disk chain over
//     first..last exactly (the first one's prev_seq is first-1, each
//     next one's prev_seq the previous seq, the last seq is last): each
//     file is sent as it is, a normal segment with its own numbers, so
//     its CRC is the one the cloud recorded;
//   - otherwise its local store: files built from every point in the
//     run's time span, in pieces that cover first..last exactly, each a
//     slice of the numbers and of the span (as a gap's backfill), marked
//     as backfills with backfill_points 0 (the cloud counted those points
//     when it first acknowledged them).
//
// Or it answers ShipReshipUnavailable with the reason, instead of
// shipping less than the run held (which the cloud would record as held).
// The store cannot give the whole run when:
//
//   - the run's segments were lost from the WAL before their samples
//     reached the store (the rule of missing.go: not below WALReplayFrom
//     and not listed in this process);
//   - its time span starts before the raw retention horizon (now minus
//     the node's raw retention; a Source that is no RetentionSource
//     cannot tell): retention may have dropped some of it;
//   - the segment summaries (segsum; kept above Released) know the run's
//     segments and the store returns fewer points in a segment's time span
//     than the segment held.
//
// The retention horizon is checked again before each rebuilt piece (a
// piece whose span passed it meanwhile is answered unavailable for its
// numbers alone); a WAL file that vanishes or rots before it is sent is
// rebuilt from the store instead, under the same checks.
//
// Jobs live in memory: a restart forgets them, and the coordinator asks
// again within its reship interval. At most maxReshipJobs are queued; a
// request overlapping a queued one, or beyond the limit, is ignored (the
// coordinator asks again).

const (
	// maxReshipJobs bounds the runs queued for shipping again.
	maxReshipJobs = 64
	// maxReshipNotes bounds the unavailable answers waiting for a stream.
	maxReshipNotes = 256
	// maxReasonBytes bounds the reason of an unavailable answer.
	maxReasonBytes = 512
	// maxSummaryChecks bounds the segments whose summaries are compared
	// with the store's counts for one run.
	maxSummaryChecks = 1 << 16
)

// reshipJob is one run being shipped again.
type reshipJob struct {
	first, last uint64
	minT, maxT  int64
	fromWAL     bool // planned from WAL files
	items       []*reshipItem
	attempts    int
	notBefore   time.Time
}

// reshipItem is one file of a job: a WAL segment, or a piece rebuilt from
// the store.
type reshipItem struct {
	pc  *backfillPiece // numbers prev+1..seq, time span (a WAL segment's own)
	wal bool           // send the WAL file of segment pc.seq
	// points is the WAL segment's points (0 when rebuilt): a WAL segment
	// without points has no time span to rebuild.
	points   int64
	inflight bool
	done     bool // acknowledged, or answered unavailable
}

// onReship takes a reship request.
func (l *loop) onReship(s *session, r *pb.ShipReship) {
	l.reshipRequests++
	first, last, minT, maxT := r.GetFirstSeq(), r.GetLastSeq(), r.GetMinTimeMs(), r.GetMaxTimeMs()
	switch {
	case first == 0 || first > last:
		l.reshipUnavailable(first, last, fmt.Sprintf("run %d..%d is empty", first, last))
		return
	case l.beyondWAL(last):
		l.reshipUnavailable(first, last, fmt.Sprintf("the node never sealed segment %d (its WAL is at %d)", last, max(l.maxSeq, l.openSeq)))
		return
	}
	for _, j := range l.reships {
		if j.first <= last && first <= j.last {
			l.reshipIgnored++
			l.log.Debug("reship request overlaps a run already being shipped again; ignored", "first_seq", first, "last_seq", last,
				"queued_first_seq", j.first, "queued_last_seq", j.last)
			return
		}
	}
	if len(l.reships) >= maxReshipJobs {
		l.reshipIgnored++
		l.log.Warn("too many runs queued to ship again; request ignored (the coordinator asks again)", "first_seq", first, "last_seq", last,
			"queued", len(l.reships))
		return
	}
	j := &reshipJob{first: first, last: last, minT: minT, maxT: maxT}
	if chain := l.walChain(first, last); chain != nil {
		j.fromWAL = true
		for _, seg := range chain {
			j.items = append(j.items, &reshipItem{pc: &backfillPiece{prev: seg.PrevSeq, seq: seg.Seq, minT: seg.MinT, maxT: seg.MaxT},
				wal: true, points: seg.Points})
		}
	} else {
		if reason := l.storeLacks(first, last, minT, maxT); reason != "" {
			l.reshipUnavailable(first, last, reason)
			return
		}
		// One piece, cut in two while it is too large for one file: the
		// request carries no point count to plan with.
		j.items = []*reshipItem{{pc: &backfillPiece{prev: first - 1, seq: last, minT: minT, maxT: maxT}}}
	}
	l.reships = append(l.reships, j)
	source := "store"
	if j.fromWAL {
		source = "wal"
	}
	l.log.Info("the cloud asked to ship segments again (no live replica holds them); queued", "first_seq", first, "last_seq", last,
		"min_time_ms", minT, "max_time_ms", maxT, "source", source, "files", len(j.items), "coordinator", s.coordinator)
}

// walChain returns the sealed segments on the node's disk that cover
// first..last exactly, or nil.
func (l *loop) walChain(first, last uint64) []wal.SegmentInfo {
	all := l.src.WALSegments()
	i := sort.Search(len(all), func(i int) bool { return all[i].Seq >= first })
	var out []wal.SegmentInfo
	expect := first - 1
	for ; i < len(all) && expect < last; i++ {
		s := all[i]
		if !s.Sealed || s.PrevSeq != expect || s.Seq > last {
			return nil
		}
		out = append(out, s)
		expect = s.Seq
	}
	if expect != last {
		return nil
	}
	return out
}

// emptySpan reports whether [minT, maxT] is the span of segments without
// points (both 0).
func emptySpan(minT, maxT int64) bool { return minT == 0 && maxT == 0 }

// retentionLacks returns why the store may not hold every raw point in
// [minT, maxT] because of its raw retention, or "".
func (l *loop) retentionLacks(minT, maxT int64) string {
	if emptySpan(minT, maxT) {
		return ""
	}
	rs, ok := l.src.(RetentionSource)
	if !ok {
		return "the node does not report how long its store keeps raw points, so it cannot vouch for the time span"
	}
	raw, _, _ := rs.Retention()
	horizon := l.o.Now().Add(-raw)
	if minT < horizon.UnixMilli() {
		return fmt.Sprintf("the time span starts at %s, before the node's raw retention horizon %s (raw retention %s): its store may have dropped some of it",
			fmtMs(minT), horizon.UTC().Format(time.RFC3339Nano), raw)
	}
	return ""
}

// storeLacks returns why the node's store cannot give every point of
// segments first..last in [minT, maxT], or "" when it can.
func (l *loop) storeLacks(first, last uint64, minT, maxT int64) string {
	if minT > maxT {
		return fmt.Sprintf("no time span to rebuild from the store (min %d after max %d)", minT, maxT)
	}
	if !l.storeHolds(first-1, last) {
		return fmt.Sprintf("segments %d..%d left the node's WAL before their samples were all flushed to its store (replay started at %d)",
			first, last, l.replayFrom)
	}
	if reason := l.retentionLacks(minT, maxT); reason != "" {
		return reason
	}
	return l.summariesLack(first, last)
}

// summariesLack compares the summaries of the segments covering
// first..last, when every one is known, with what the store returns in
// each one's time span, and returns why the store lacks points, or "".
// A segment's points are among the points in its span, so fewer there
// means some are gone (a point written twice with the same timestamp is
// one point in the store: such a segment is reported short too).
func (l *loop) summariesLack(first, last uint64) string {
	if l.sums == nil {
		return ""
	}
	chain, ok := l.sums.Chain(first-1, last)
	if !ok || len(chain) > maxSummaryChecks {
		return ""
	}
	counts := make([]int64, len(chain))
	lo, hi := int64(0), int64(0)
	found := false
	for _, e := range chain {
		if e.Points == 0 {
			continue
		}
		if !found {
			lo, hi, found = e.MinT, e.MaxT, true
		}
		lo, hi = min(lo, e.MinT), max(hi, e.MaxT)
	}
	if !found {
		return ""
	}
	err := l.src.ExportRange(l.ctx, lo, hi, func(_ labels.Labels, ts []int64, _ []float64) error {
		for i, e := range chain {
			if e.Points == 0 {
				continue
			}
			a := sort.Search(len(ts), func(k int) bool { return ts[k] >= e.MinT })
			b := sort.Search(len(ts), func(k int) bool { return ts[k] > e.MaxT })
			counts[i] += int64(b - a)
		}
		return nil
	})
	if err != nil {
		return fmt.Sprintf("reading the node's store to check the run failed: %v", err)
	}
	for i, e := range chain {
		if counts[i] < e.Points {
			return fmt.Sprintf("segment %d held %d points in [%s, %s]; the node's store now returns %d there",
				e.Seq, e.Points, fmtMs(e.MinT), fmtMs(e.MaxT), counts[i])
		}
	}
	return ""
}

// reshipUnavailable queues the answer that first..last cannot be shipped
// again.
func (l *loop) reshipUnavailable(first, last uint64, reason string) {
	if len(reason) > maxReasonBytes {
		reason = reason[:maxReasonBytes]
	}
	l.reshipUnavail++
	l.lastErr = fmt.Sprintf("cannot ship segments %d..%d again: %s", first, last, reason)
	l.log.Warn("cannot ship segments again as the cloud asked; answering unavailable", "first_seq", first, "last_seq", last, "reason", reason)
	if len(l.reshipNotes) >= maxReshipNotes {
		l.reshipNotes = l.reshipNotes[1:] // the coordinator asks again for what it missed
	}
	l.reshipNotes = append(l.reshipNotes, &pb.ShipReshipUnavailable{FirstSeq: first, LastSeq: last, Reason: reason})
}

// pumpReshipNote sends the oldest pending unavailable answer; false when
// none is pending.
func (l *loop) pumpReshipNote(s *session) bool {
	if len(l.reshipNotes) == 0 {
		return false
	}
	n := l.reshipNotes[0]
	l.reshipNotes[0] = nil
	l.reshipNotes = l.reshipNotes[1:]
	l.send(s, &outgoing{msgs: []*pb.ShipRequest{{Body: &pb.ShipRequest_ReshipUnavailable{ReshipUnavailable: n}}}})
	return true
}

// pumpReship sends the next file of a reship job, when nothing else is
// due (the caller checked the window).
func (l *loop) pumpReship(s *session, now time.Time) {
	var wake time.Time
	for _, j := range l.reships {
		if now.Before(j.notBefore) {
			if wake.IsZero() || j.notBefore.Before(wake) {
				wake = j.notBefore
			}
			continue
		}
		for _, it := range j.items {
			if it.done || it.inflight || s.inflight[it.pc.seq] != nil {
				continue
			}
			if wait := max(l.rateAll.Delay(now), l.rateBack.Delay(now)); wait > 0 {
				l.rateTimer.Reset(wait)
				return
			}
			l.sendReship(s, j, it, now)
			return
		}
	}
	if !wake.IsZero() {
		l.rateTimer.Reset(wake.Sub(now))
	}
}

// sendReship reads or builds item it of job j and sends it.
func (l *loop) sendReship(s *session, j *reshipJob, it *reshipItem, now time.Time) {
	pc := it.pc
	var file []byte
	var info wal.SegmentInfo
	var err error
	if it.wal {
		file, info, err = l.src.ReadWALSegment(pc.seq)
		if err == nil && info.PrevSeq != pc.prev {
			err = fmt.Errorf("segment %d follows %d on disk, %d when listed: %w", pc.seq, info.PrevSeq, pc.prev, wal.ErrCorrupt)
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, wal.ErrCorrupt) {
			l.reshipFromStore(j, it, fmt.Sprintf("its WAL file is gone or damaged (%v)", err))
			l.rateTimer.Reset(0) // build it on the next step
			return
		}
		if err == nil && !s.reads(info.Version) {
			// A backfill built from the store is of format 1, which
			// every coordinator reads.
			l.reshipFromStore(j, it, fmt.Sprintf("its WAL file is of format %d, which coordinator %q does not read", info.Version, s.coordinator))
			l.rateTimer.Reset(0)
			return
		}
	} else {
		if reason := l.retentionLacks(pc.minT, pc.maxT); reason != "" {
			l.reshipGiveUp(j, it, reason)
			l.rateTimer.Reset(0)
			return
		}
		file, info, err = l.buildBackfill(pc, s.backfillLimit())
		if errors.Is(err, errPieceTooLarge) {
			if pc.canSplit() {
				l.splitReship(j, it)
			} else {
				l.reshipGiveUp(j, it, fmt.Sprintf("rebuilt from the node's store, segments %d..%d do not fit in one segment of at most %d bytes",
					pc.prev+1, pc.seq, s.backfillLimit()))
			}
			l.rateTimer.Reset(0)
			return
		}
	}
	if err == nil && it.wal {
		// The form a first shipment took (and a conflict falls back to
		// the store, as for a file the cloud holds otherwise).
		file, info, _ = l.compact(file, info)
	}
	var enc wire.Encoded
	if err == nil {
		enc, err = l.encode(s, info, file)
	}
	if err != nil {
		j.attempts++
		j.notBefore = now.Add(l.retryDelay(j.attempts, l.ctx.Err() == nil))
		l.lastErr = fmt.Sprintf("ship segments %d..%d again: %v", pc.prev+1, pc.seq, err)
		l.log.Error("reading or building segments to ship again failed; will retry", "prev_seq", pc.prev, "seq", pc.seq,
			"wal", it.wal, "err", err)
		return
	}
	if !it.wal {
		enc.MarkBackfill(0)
	}
	it.inflight = true
	l.sendSegment(s, &flight{seq: pc.seq, prev: pc.prev, reship: true}, enc, true, now)
}

// reshipFromStore turns WAL item it into a piece rebuilt from the store
// over the segment's time span, or answers it unavailable when the store
// cannot give it.
func (l *loop) reshipFromStore(j *reshipJob, it *reshipItem, why string) {
	pc := it.pc
	if it.points == 0 {
		pc.minT, pc.maxT = 0, 0
	}
	if reason := l.storeLacks(pc.prev+1, pc.seq, pc.minT, pc.maxT); reason != "" {
		l.reshipGiveUp(j, it, why+"; "+reason)
		return
	}
	l.log.Warn("segment to ship again is rebuilt from the node's store", "prev_seq", pc.prev, "seq", pc.seq, "why", why)
	it.wal = false
	it.points = 0
}

// splitReship replaces rebuilt item it by two halves.
func (l *loop) splitReship(j *reshipJob, it *reshipItem) {
	for i, x := range j.items {
		if x == it {
			halves := splitPiece(it.pc, 2)
			repl := []*reshipItem{{pc: halves[0]}, {pc: halves[1]}}
			j.items = append(j.items[:i], append(repl, j.items[i+1:]...)...)
			l.log.Info("segments to ship again split in two", "prev_seq", it.pc.prev, "seq", it.pc.seq,
				"min_time_ms", it.pc.minT, "max_time_ms", it.pc.maxT)
			return
		}
	}
}

// reshipGiveUp answers item it unavailable and marks it done.
func (l *loop) reshipGiveUp(j *reshipJob, it *reshipItem, reason string) {
	it.inflight, it.done = false, true
	l.reshipUnavailable(it.pc.prev+1, it.pc.seq, reason)
	l.reshipFinish(j)
}

// reshipItemAt returns the job and the item in flight ending at seq.
func (l *loop) reshipItemAt(seq uint64) (*reshipJob, *reshipItem) {
	for _, j := range l.reships {
		if seq < j.first || seq > j.last {
			continue
		}
		for _, it := range j.items {
			if it.pc.seq == seq && it.inflight {
				return j, it
			}
		}
	}
	return nil, nil
}

// reshipAcked records that the cloud took item f.
func (l *loop) reshipAcked(f *flight) {
	j, it := l.reshipItemAt(f.seq)
	if it == nil {
		return
	}
	it.inflight, it.done = false, true
	l.reshipBytes += f.bytes
	if it.wal {
		l.reshipWAL++
	} else {
		l.reshipRebuilt++
	}
	j.attempts = 0
	l.reshipFinish(j)
}

// reshipRefused handles a refusal of item f, as a backfill piece's.
func (l *loop) reshipRefused(f *flight, e *wire.Error, now time.Time) {
	j, it := l.reshipItemAt(f.seq)
	if it == nil {
		return
	}
	it.inflight = false
	pc := it.pc
	switch {
	case it.wal && (e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT || e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_TOO_LARGE):
		// The cloud holds these numbers with another CRC (an earlier
		// backfill of them, say), or the file is too large for it now: a
		// backfill rebuilt from the store is not compared by CRC, and is
		// cut to size.
		l.reshipFromStore(j, it, fmt.Sprintf("the coordinator refused the WAL file (%v)", e))
	case (e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT || e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_TOO_LARGE) && pc.canSplit():
		// As a backfill's piece: halves narrow the numbers that conflict
		// down, and the others go through.
		l.splitReship(j, it)
	case e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT, e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_TOO_LARGE, !e.Retryable:
		// One number (or one millisecond) the cloud will not take: what
		// it holds stands, and the replicas that lack it stay without.
		l.reshipGiveUp(j, it, fmt.Sprintf("the coordinator refused segments %d..%d: %v", pc.prev+1, pc.seq, e))
	default:
		j.attempts++
		j.notBefore = now.Add(l.retryDelay(j.attempts, true))
	}
}

// reshipFinish drops job j once every item is done.
func (l *loop) reshipFinish(j *reshipJob) {
	for _, it := range j.items {
		if !it.done {
			return
		}
	}
	for i, x := range l.reships {
		if x == j {
			l.reships = append(l.reships[:i], l.reships[i+1:]...)
			break
		}
	}
	l.log.Info("finished shipping segments again", "first_seq", j.first, "last_seq", j.last, "files", len(j.items), "from_wal", j.fromWAL)
}

// reshipLost makes the items in flight on a stream that ended due again.
func (l *loop) reshipLost() {
	for _, j := range l.reships {
		for _, it := range j.items {
			it.inflight = false
		}
	}
}

// fmtMs formats a time in ms since the epoch for messages.
func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
