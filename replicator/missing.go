package replicator

import (
	"github.com/tributarydb/tributary/node/wal"
	"github.com/tributarydb/tributary/replicator/internal/cursor"
	"github.com/tributarydb/tributary/replicator/internal/segsum"
)

// Missing segments: a sealed segment the cloud does not hold may vanish
// from the node's disk or rot there (quarantined when the node opens, or
// unreadable while it runs). It is declared a MISSING gap so the cloud's
// acked_through moves on; then, if the node's store holds every one of
// its points and their count and time span are known, it is backfilled
// from the store exactly like a BACKLOG_OVERFLOW gap (backfill.go).
//
// The store holds a lost segment's samples when
//
//   - the segment is below the node's WALReplayFrom: every sample of it
//     was durable in the store before the node opened; or
//   - the node listed the segment in this process: it was intact when
//     the node opened (and replayed if needed) or was written by it, so
//     its samples are in the head or the store.
//
// Otherwise (a segment above the flushed-through point that was lost
// before this process opened, its samples only in a head that died with
// the previous process) the store may hold some of its points and not
// others, which cannot be told apart from the points of neighbouring
// segments in the same time span: the gap is marked unrecoverable and
// stays a gap in the catalog with its count, never backfilled.
//
// The count and span come from the node's listing (a segment it still
// lists) or from the summaries file (segsum), where every sealed segment
// the Shipper saw above Released is recorded, fsynced, before it could be
// lost; a segment never seen (lost before the Shipper first listed it)
// has no known count and is unrecoverable.

// summariesSuffix names the summaries file beside the cursor.
const summariesSuffix = ".segments"

// openSummaries opens the summaries file; without it, lost segments whose
// file is gone have no known count (logged, not fatal).
func (l *loop) openSummaries() {
	f, note, err := segsum.Open(l.o.FS, l.o.CursorPath+summariesSuffix, l.nodeID)
	if err != nil {
		l.log.Error("segment summaries unusable: segments lost from the node's disk will be recorded with unknown counts and not re-shipped",
			"err", err)
		return
	}
	if note != "" {
		l.log.Warn("segment summaries file replaced", "path", l.o.CursorPath+summariesSuffix, "reason", note)
	}
	l.sums = f
}

func (l *loop) closeSummaries() {
	if l.sums != nil {
		if err := l.sums.Close(); err != nil {
			l.log.Warn("close segment summaries", "err", err)
		}
		l.sums = nil
	}
}

// noteListed records the sealed segments the node lists for the first
// time in this process: their numbers in listed, their summaries in the
// file. On the first listing it judges the cursor's missing gaps.
func (l *loop) noteListed(all []wal.SegmentInfo) {
	var fresh []segsum.Summary
	for _, s := range all {
		if !s.Sealed || s.Seq <= l.listedMax {
			continue
		}
		l.listed.Add(s.PrevSeq+1, s.Seq)
		l.listedMax = s.Seq
		if s.Seq > l.cur.Released && s.PrevSeq < s.Seq && s.Points >= 0 && s.MinT <= s.MaxT {
			fresh = append(fresh, segsum.Summary{Seq: s.Seq, PrevSeq: s.PrevSeq, Points: s.Points, MinT: s.MinT, MaxT: s.MaxT})
		}
	}
	if l.sums != nil {
		if err := l.sums.Add(fresh...); err != nil {
			l.lastErr = err.Error()
			l.log.Error("recording segment summaries failed; segments lost from disk later may not be re-shipped", "err", err)
		}
		if l.cur.Released > l.sumsPruned {
			if err := l.sums.DropThrough(l.cur.Released); err != nil {
				l.log.Warn("compacting segment summaries failed", "err", err)
			}
			l.sumsPruned = l.cur.Released
		}
	}
	if !l.judged {
		l.judged = true
		l.judgeCursorGaps()
	}
}

// judgeCursorGaps marks unrecoverable the missing gaps of the cursor that
// still wait for a backfill but whose points this process's store may not
// hold (recorded by an earlier process whose head died with it).
func (l *loop) judgeCursorGaps() {
	for i := range l.cur.Gaps {
		g := &l.cur.Gaps[i]
		if g.Reason != cursor.ReasonMissing || g.Backfilled || g.Unrecoverable {
			continue
		}
		l.judge(g)
		if g.Unrecoverable {
			l.dirty, l.gapsChanged = true, true
			l.log.Error("missing segments' points are not all in the node's store any more (lost before they were flushed); the gap stays, not re-shipped",
				"after_seq", g.After, "through_seq", g.Through, "points", g.Points, "replay_from", l.replayFrom)
		}
	}
}

// storeHolds reports whether the node's store holds every sample of the
// segments covering after+1..through (see the comment at the top): the
// numbers below WALReplayFrom, and the others listed in this process.
func (l *loop) storeHolds(after, through uint64) bool {
	if through < l.replayFrom {
		return true
	}
	if l.replayFrom > 0 {
		after = max(after, l.replayFrom-1)
	}
	return l.listed.Through(after) >= through
}

// judge marks g unrecoverable unless its count and time span are known
// and the store holds its points.
func (l *loop) judge(g *cursor.Gap) {
	known := g.Points == 0 || g.Points > 0 && g.SpanKnown()
	if !known || !l.storeHolds(g.After, g.Through) {
		g.Unrecoverable = true
	}
}

// missingGap describes the MISSING gap after+1..through of segments the
// node does not list: their count and span from the summaries when every
// one of them is known, judged against the store.
func (l *loop) missingGap(after, through uint64) cursor.Gap {
	g := cursor.Gap{After: after, Through: through, Reason: cursor.ReasonMissing, Points: -1}
	if l.sums != nil {
		if chain, ok := l.sums.Chain(after, through); ok {
			g.Points, g.Segments = 0, uint64(len(chain))
			for _, e := range chain {
				if e.Points == 0 {
					continue
				}
				if g.Points == 0 {
					g.MinT, g.MaxT = e.MinT, e.MaxT
				}
				g.Points += e.Points
				g.MinT, g.MaxT = min(g.MinT, e.MinT), max(g.MaxT, e.MaxT)
			}
		}
	}
	l.judge(&g)
	return g
}
