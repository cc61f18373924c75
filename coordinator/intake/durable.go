package intake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

// segment makes a verified segment durable (or recognises it as held) and
// returns the ack or refusal to send.
func (s *Server) segment(ctx context.Context, edge string, seg *wire.Segment) (resp *pb.ShipResponse) {
	ctx, span := s.startSegment(ctx, edge, seg)
	defer func() { endSegment(span, resp) }()
	seq := seg.Seq
	if p, ok := s.o.Catalog.Progress(edge); ok && heldContains(p.Held, seq) {
		return s.duplicate(ctx, edge, seg, p)
	}
	pl, ok := s.o.Catalog.Placement(edge)
	if !ok || len(pl.Replicas) == 0 {
		return refusal(unavailable(seq, 0, "edge %q has no replica coordinators", edge))
	}
	series, werr := s.store(ctx, edge, seg, pl.Replicas)
	if werr != nil {
		return refusal(werr)
	}
	if werr := s.registerSeries(ctx, edge, seq, series); werr != nil {
		return refusal(werr)
	}
	// A backfill (built by the edge from its store for a gap) may hold
	// points of neighbouring segments too: the catalog counts what the
	// gap declared for these numbers.
	points := seg.Points
	if seg.Backfill {
		points = seg.BackfillPoints
	}
	res, err := s.propose(ctx, catalog.RecordHeld{Edge: edge, Epoch: pl.Epoch, Ranges: []catalog.HeldRange{{
		FirstSeq: seg.PrevSeq + 1, LastSeq: seq, Points: uint64(points), MinTimeMs: seg.MinT, MaxTimeMs: seg.MaxT,
	}}})
	if err != nil {
		return refusal(s.proposalRefusal(seq, 0, fmt.Errorf("record segment %d of edge %q: %w", seq, edge, err)))
	}
	r, ok := res.(catalog.RecordHeldResult)
	if !ok {
		return refusal(unavailable(seq, 0, "record segment %d of edge %q: unexpected result %T", seq, edge, res))
	}
	if r.Added == 0 {
		s.duplicates.Add(1) // recorded meanwhile by another stream
	} else {
		s.segments.Add(1)
	}
	return ack(&pb.ShipAck{Seq: seq, AckedThrough: r.AckedThrough})
}

// duplicate answers a segment the catalog holds: the same CRC is a resend
// after a lost ack, another is a conflict.
func (s *Server) duplicate(ctx context.Context, edge string, seg *wire.Segment, p catalog.EdgeProgress) *pb.ShipResponse {
	seq := seg.Seq
	var replicas []string
	if pl, ok := s.o.Catalog.Placement(edge); ok {
		replicas = pl.Replicas
	}
	// Ask this coordinator first when it is a replica: no network.
	if i := slices.Index(replicas, s.o.CoordinatorID); i > 0 {
		replicas[0], replicas[i] = replicas[i], replicas[0]
	}
	for _, c := range replicas {
		cctx, cancel := context.WithTimeout(ctx, s.o.ProposalTimeout)
		crc, ok, err := s.o.Replicas.CRC(cctx, c, edge, seq)
		cancel()
		if err != nil {
			s.o.Logger.Debug("read a stored crc", "edge", edge, "seq", seq, "coordinator", c, "err", err)
			continue
		}
		if !ok {
			continue
		}
		if crc != seg.CRC {
			s.conflicts.Add(1)
			return refusal(&wire.Error{Seq: seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT,
				Msg: fmt.Sprintf("segment %d of edge %q is held with crc32c %08x on %s, sent with %08x", seq, edge, crc, c, seg.CRC)})
		}
		break
	}
	// Held and not contradicted (no replica could tell): acknowledge again.
	s.duplicates.Add(1)
	return ack(&pb.ShipAck{Seq: seq, AckedThrough: p.AckedThrough()})
}

// store writes the segment on every replica in parallel and returns the
// series the segment defines (as the first replica reported them).
func (s *Server) store(ctx context.Context, edge string, seg *wire.Segment, replicas []string) ([]labels.Labels, *wire.Error) {
	sctx, cancel := context.WithTimeout(ctx, s.o.ProposalTimeout)
	defer cancel()
	type result struct {
		series []labels.Labels
		err    error
	}
	results := make([]result, len(replicas))
	var wg sync.WaitGroup
	for i, c := range replicas {
		wg.Go(func() {
			rctx, span := s.startReplicate(sctx, c, seg.Seq)
			series, err := s.o.Replicas.Store(rctx, c, edge, seg.Seq, seg.CRC, seg.File)
			if err != nil {
				err = fmt.Errorf("store segment %d of edge %q on %s: %w", seg.Seq, edge, c, err)
			}
			endSpan(span, err)
			results[i] = result{series, err}
		})
	}
	wg.Wait()
	var errs []error
	conflict := false
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
			conflict = conflict || errors.Is(r.err, ErrConflict)
		}
	}
	if conflict {
		s.conflicts.Add(1)
		return nil, &wire.Error{Seq: seg.Seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT, Msg: errors.Join(errs...).Error()}
	}
	if len(errs) > 0 {
		return nil, unavailable(seg.Seq, 0, "%v", errors.Join(errs...))
	}
	return results[0].series, nil
}

// registerSeries registers, with one command, the series of a segment
// that the catalog does not list for the edge yet.
func (s *Server) registerSeries(ctx context.Context, edge string, seq uint64, series []labels.Labels) *wire.Error {
	if len(series) == 0 {
		return nil
	}
	have := s.o.Catalog.EdgeSeries(edge) // sorted
	seen := map[string]bool{}
	var missing []labels.Labels
	for _, ls := range series {
		key := string(ls.AppendKey(nil))
		if seen[key] {
			continue
		}
		seen[key] = true
		if id, ok := s.o.Catalog.Lookup(ls); ok {
			if _, found := slices.BinarySearch(have, id); found {
				continue
			}
		}
		missing = append(missing, ls)
	}
	if len(missing) == 0 {
		return nil
	}
	res, err := s.propose(ctx, catalog.RegisterSeries{Edge: edge, Series: missing})
	if err != nil {
		return s.proposalRefusal(seq, 0, fmt.Errorf("register %d series of segment %d of edge %q: %w", len(missing), seq, edge, err))
	}
	if r, ok := res.(catalog.RegisterSeriesResult); ok && len(r.Rejected) > 0 {
		s.o.Logger.Warn("catalog rejected series of a segment", "edge", edge, "seq", seq,
			"rejected", len(r.Rejected), "first", r.Rejected[0].Reason)
	}
	return nil
}

// gap records a checked gap declaration.
func (s *Server) gap(ctx context.Context, edge string, g *pb.ShipGap) *pb.ShipResponse {
	through := g.GetThroughSeq()
	res, err := s.propose(ctx, catalog.RecordGap{Edge: edge, Gaps: []catalog.GapRange{{
		AfterSeq: g.GetAfterSeq(), ThroughSeq: through, Reason: catalog.GapReason(g.GetReason()),
		Segments: g.GetSegments(), Points: g.GetPoints(), MinTimeMs: g.GetMinTimeMs(), MaxTimeMs: g.GetMaxTimeMs(),
	}}})
	if err != nil {
		return refusal(s.proposalRefusal(0, through, fmt.Errorf("record gap %d..%d of edge %q: %w", g.GetAfterSeq()+1, through, edge, err)))
	}
	r, ok := res.(catalog.RecordGapResult)
	if !ok {
		return refusal(unavailable(0, through, "record gap through %d of edge %q: unexpected result %T", through, edge, res))
	}
	s.gaps.Add(1)
	return ack(&pb.ShipAck{GapThrough: through, AckedThrough: r.AckedThrough})
}

// propose proposes c within ProposalTimeout.
func (s *Server) propose(ctx context.Context, c catalog.Command) (_ any, err error) {
	ctx, span := s.startPropose(ctx, c)
	defer func() { endSpan(span, err) }()
	pctx, cancel := context.WithTimeout(ctx, s.o.ProposalTimeout)
	defer cancel()
	return s.o.Raft.Propose(pctx, catalog.EncodeCommand(c))
}

// proposalRefusal classifies a failed proposal: a catalog rejection of a
// bad or conflicting command is final, anything else (no leader, a
// timeout, a stopped member, a limit) may pass.
func (s *Server) proposalRefusal(seq, gapThrough uint64, err error) *wire.Error {
	e := &wire.Error{Seq: seq, GapThrough: gapThrough, Msg: err.Error()}
	var ce *catalog.CommandError
	switch {
	case errors.As(err, &ce) && errors.Is(ce, catalog.ErrBadCommand):
		e.Code = pb.ShipErrorCode_SHIP_ERROR_CODE_MALFORMED
	case errors.As(err, &ce) && errors.Is(ce, catalog.ErrConflict):
		e.Code = pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT
		s.conflicts.Add(1)
	default:
		e.Code, e.Retryable = pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE, true
	}
	return e
}

func heldContains(held []catalog.HeldRange, seq uint64) bool {
	i, _ := slices.BinarySearchFunc(held, seq, func(h catalog.HeldRange, seq uint64) int { return cmp.Compare(h.LastSeq, seq) })
	return i < len(held) && held[i].FirstSeq <= seq
}
