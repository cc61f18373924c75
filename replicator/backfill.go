package replicator

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/internal/cursor"
	"github.com/tributarydb/tributary/replicator/wire"
)

// Backfill: a BACKLOG_OVERFLOW gap (after, through] that the cloud
// recorded is filled, once the link allows, with segment files built from
// the node's store: every point of every series with a timestamp in the
// gap's time span, in the WAL segment format (built by node/segment),
// covering exactly the gap's sequence numbers. One file (prev_seq=after, seq=through) when it fits;
// otherwise pieces, each a slice of the time span and of the sequence
// numbers. Each piece carries (backfill_points) the points its file
// holds, capped so that the pieces never sum to more than the gap
// declared (a file may also hold points of neighbouring segments in the
// same time span: replaying those changes nothing): the cloud counts what
// the backfill really shipped, and when the node's retention dropped some
// of the gap's points before the backfill, the shortfall is logged and
// counted (Stats.BackfillShortfallPoints) instead of being recorded as
// held. A gap of unknown count credits what its pieces hold.

const (
	// maxBackfillBytes bounds one backfill file (it is built in memory),
	// below the coordinator's max_segment_bytes with headroom.
	maxBackfillBytes = 32 << 20
	// estBytesPerPoint estimates what a point costs in a backfill file (8
	// bytes of value, a timestamp delta, a share of the framing), to cut a
	// gap into pieces up front; a piece that turns out too large is split
	// again.
	estBytesPerPoint = 16
	// maxBackfillPieces bounds the pieces a gap is cut into up front
	// (pieces still too large are split again as they are built).
	maxBackfillPieces = 4096
)

// errPieceTooLarge: the piece's file would exceed the limit.
var errPieceTooLarge = errors.New("backfill piece over the size limit")

// backfillPlan is the backfill of one gap, in pieces.
type backfillPlan struct {
	after, through uint64
	declared       int64 // the gap's points (-1: unknown)
	pieces         []*backfillPiece
	attempts       int
	notBefore      time.Time
}

type backfillPiece struct {
	prev, seq  uint64
	minT, maxT int64 // inclusive
	points     int64 // backfill_points: what its file holds, within what the gap declared
	inflight   bool
	done       bool
}

// planBackfill cuts g into pieces expected to fit in limit bytes each.
func planBackfill(g cursor.Gap, limit int64) *backfillPlan {
	n := g.Through - g.After
	points := max(g.Points, 0)
	perPiece := uint64(max(limit/estBytesPerPoint, 1))
	k := min(uint64(points)/perPiece+1, maxBackfillPieces)
	span := uint64(g.MaxT) - uint64(g.MinT) + 1 // 0 when the span is the whole int64 range
	k = min(k, n)
	if span != 0 {
		k = min(k, span)
	}
	p := &backfillPlan{after: g.After, through: g.Through, declared: g.Points}
	p.pieces = splitPiece(&backfillPiece{prev: g.After, seq: g.Through, minT: g.MinT, maxT: g.MaxT}, k)
	return p
}

// splitPiece cuts pc into k consecutive pieces: the sequence numbers and
// the time span evenly (k must not exceed either). Their points are set
// when each is built.
func splitPiece(pc *backfillPiece, k uint64) []*backfillPiece {
	n := pc.seq - pc.prev
	span := uint64(pc.maxT) - uint64(pc.minT) + 1
	if span == 0 {
		span = math.MaxUint64 // the whole int64 range
	}
	out := make([]*backfillPiece, 0, k)
	prev, t := pc.prev, pc.minT
	for i := range k {
		seq := prev + n/k
		if i < n%k {
			seq++
		}
		end := pc.maxT
		if i+1 < k {
			w := span / k
			if i < span%k {
				w++
			}
			end = t + int64(w) - 1
		}
		out = append(out, &backfillPiece{prev: prev, seq: seq, minT: t, maxT: end})
		prev, t = seq, end+1
	}
	return out
}

// credit returns the backfill_points of pc, whose file holds filePoints:
// what it holds, within what the gap declared less what the plan's other
// pieces sent or hold (a gap of unknown count: what it holds).
func (p *backfillPlan) credit(pc *backfillPiece, filePoints int64) int64 {
	if p.declared < 0 {
		return filePoints
	}
	left := p.declared
	for _, x := range p.pieces {
		if x != pc && (x.done || x.inflight) {
			left -= x.points
		}
	}
	return max(min(filePoints, left), 0)
}

// credited sums the points the plan's pieces carried.
func (p *backfillPlan) credited() int64 {
	var n int64
	for _, x := range p.pieces {
		n += x.points
	}
	return n
}

// canSplit reports whether pc can be cut in two.
func (pc *backfillPiece) canSplit() bool { return pc.seq-pc.prev >= 2 && pc.maxT > pc.minT }

// buildBackfill reads the points of pc's time span from src and builds its
// segment file, or fails with errPieceTooLarge once it passes limit.
func (l *loop) buildBackfill(pc *backfillPiece, limit int64) ([]byte, wal.SegmentInfo, error) {
	b, err := segment.NewBuilder(l.nodeID, limit)
	if err != nil {
		return nil, wal.SegmentInfo{}, err
	}
	err = l.src.ExportRange(l.ctx, pc.minT, pc.maxT, func(ls labels.Labels, ts []int64, vs []float64) error {
		n, err := b.Add(ls, ts, vs)
		if errors.Is(err, segment.ErrSeriesTooLarge) || err == nil && n < len(ts) {
			return errPieceTooLarge
		}
		return err
	})
	if err != nil {
		return nil, wal.SegmentInfo{}, err
	}
	return b.Finish(pc.seq, pc.prev)
}

// backfillLimit is the largest backfill file for session s.
func (s *session) backfillLimit() int64 {
	m := uint64(wire.DefaultMaxSegmentBytes)
	if s.maxSegmentBytes > 0 {
		m = s.maxSegmentBytes
	}
	return int64(min(m/4*3, maxBackfillBytes))
}

// nextBackfill returns the plan of the oldest gap that needs a backfill,
// planning it if needed; nil when none does.
func (l *loop) nextBackfill(limit int64) *backfillPlan {
	if p := l.backfill; p != nil {
		return p
	}
	for i := range l.cur.Gaps {
		if g := l.cur.Gaps[i]; g.NeedsBackfill() {
			l.backfill = planBackfill(g, limit)
			return l.backfill
		}
	}
	return nil
}

// pumpBackfill sends the next piece of a backfill, when nothing else is
// due (the caller checked the window). It returns false when no piece can
// be sent now (none to send, or waiting for a retry), so that something
// else of the same priority may go.
func (l *loop) pumpBackfill(s *session, now time.Time) bool {
	limit := s.backfillLimit()
	p := l.nextBackfill(limit)
	if p == nil {
		return false
	}
	if now.Before(p.notBefore) {
		l.rateTimer.Reset(p.notBefore.Sub(now))
		return false
	}
	var pc *backfillPiece
	for _, x := range p.pieces {
		// A piece whose number is in flight otherwise (a reship of it)
		// waits for its answer.
		if !x.done && !x.inflight && s.inflight[x.seq] == nil {
			pc = x
			break
		}
	}
	if pc == nil {
		return false // every piece sent or done
	}
	if wait := max(l.rateAll.Delay(now), l.rateBack.Delay(now)); wait > 0 {
		l.rateTimer.Reset(wait)
		return true
	}
	file, info, err := l.buildBackfill(pc, limit)
	if errors.Is(err, errPieceTooLarge) && pc.canSplit() {
		l.splitBackfill(p, pc)
		l.rateTimer.Reset(0) // build the first half on the next step
		return true
	}
	var enc wire.Encoded
	if err == nil {
		enc, err = l.encode(s, info, file)
	}
	if err != nil {
		p.attempts++
		p.notBefore = now.Add(l.retryDelay(p.attempts, l.ctx.Err() == nil && !errors.Is(err, errPieceTooLarge)))
		l.lastErr = fmt.Sprintf("backfill of gap %d..%d: %v", p.after+1, p.through, err)
		l.log.Error("building a backfill from the node's store failed; will retry", "after_seq", p.after, "through_seq", p.through,
			"piece_prev_seq", pc.prev, "piece_seq", pc.seq, "err", err)
		return true
	}
	pc.points = p.credit(pc, info.Points)
	enc.MarkBackfill(pc.points)
	pc.inflight = true
	l.sendSegment(s, &flight{seq: pc.seq, prev: pc.prev, points: pc.points, backfill: true}, enc, true, now)
	return true
}

// splitBackfill replaces pc by two halves.
func (l *loop) splitBackfill(p *backfillPlan, pc *backfillPiece) {
	for i, x := range p.pieces {
		if x == pc {
			halves := splitPiece(pc, 2)
			p.pieces = append(p.pieces[:i], append(halves, p.pieces[i+1:]...)...)
			l.log.Info("backfill piece too large for one segment; split in two", "prev_seq", pc.prev, "seq", pc.seq,
				"min_time_ms", pc.minT, "max_time_ms", pc.maxT)
			return
		}
	}
}

// backfillPieceAt returns the piece of the current plan ending at seq.
func (l *loop) backfillPieceAt(seq uint64) *backfillPiece {
	if l.backfill == nil {
		return nil
	}
	for _, x := range l.backfill.pieces {
		if x.seq == seq {
			return x
		}
	}
	return nil
}

// backfillAcked records that the cloud holds piece seq; when every piece
// is held the gap is marked backfilled in the cursor.
func (l *loop) backfillAcked(f *flight) {
	pc := l.backfillPieceAt(f.seq)
	if pc == nil {
		return
	}
	pc.inflight, pc.done = false, true
	p := l.backfill
	for _, x := range p.pieces {
		if !x.done {
			return
		}
	}
	l.backfill = nil
	shipped := p.credited()
	if p.declared >= 0 && shipped < p.declared {
		// The node's retention (or a repair) dropped some of the gap's
		// points before the backfill: the cloud counts what it received.
		l.backfillShortfall += uint64(p.declared - shipped)
		l.log.Warn("backfill shipped fewer points than the gap declared; the cloud counts what it received",
			"after_seq", p.after, "through_seq", p.through, "declared", p.declared, "shipped", shipped)
	}
	for i := range l.cur.Gaps {
		if g := &l.cur.Gaps[i]; g.After == p.after && g.Through == p.through && !g.Backfilled {
			g.Backfilled = true
			l.dirty = true
			l.gapsChanged = true
			l.log.Info("gap backfilled from the node's store", "after_seq", g.After, "through_seq", g.Through,
				"points", g.Points, "shipped_points", shipped, "pieces", len(p.pieces))
		}
	}
}

// backfillRefused handles a refusal of piece f.
func (l *loop) backfillRefused(f *flight, e *wire.Error, now time.Time) {
	pc := l.backfillPieceAt(f.seq)
	if pc == nil {
		return
	}
	pc.inflight = false
	p := l.backfill
	switch {
	case e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT && pc.canSplit():
		// The cloud holds some of these numbers: a segment stored whose
		// ack was lost before the edge released it into the gap. Halves
		// narrow it down; the pieces that do not overlap it go through.
		l.splitBackfill(p, pc)
	case e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT:
		// The cloud holds these numbers already with other contents: that
		// segment, or an earlier backfill whose ack was lost, built when
		// the store held other points. What it holds stands.
		l.log.Warn("backfill piece already held by the cloud with other contents; counting it as backfilled",
			"prev_seq", pc.prev, "seq", pc.seq, "err", e)
		l.backfillAcked(f)
	case e.Code == pb.ShipErrorCode_SHIP_ERROR_CODE_TOO_LARGE && pc.canSplit():
		l.splitBackfill(p, pc)
	default:
		p.attempts++
		p.notBefore = now.Add(l.retryDelay(p.attempts, e.Retryable))
	}
}

// backfillLost makes the pieces in flight on a stream that ended due again.
func (l *loop) backfillLost() {
	if l.backfill == nil {
		return
	}
	for _, x := range l.backfill.pieces {
		x.inflight = false
	}
}
