package intake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

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
		return s.held(ctx, edge, seg, p)
	}
	pl, ok := s.o.Catalog.Placement(edge)
	if !ok || len(pl.Replicas) == 0 {
		return refusal(unavailable(seq, 0, "edge %q has no replica coordinators", edge))
	}
	q := s.o.Catalog.Config().Quorum(len(pl.Replicas))
	out, werr := s.storeQuorum(ctx, edge, seg, pl, q)
	if werr != nil {
		return refusal(werr)
	}
	// Whatever happens next, the replicas still storing report to the
	// catalog once the segment is recorded (or give up).
	recorded := make(chan bool, 1)
	defer close(recorded)
	if out.late != nil {
		go s.recordLate(edge, seg, pl, out.late, recorded)
	}
	if werr := s.registerSeries(ctx, edge, seq, out.series); werr != nil {
		return refusal(werr)
	}
	// Only points the replicas really stored count as held. A backfill
	// (built by the edge from its store for a gap) may hold points of
	// neighbouring segments too: the catalog counts what the gap declared
	// for these numbers.
	points := max(seg.Points-out.rejected, 0)
	if seg.Backfill {
		points = seg.BackfillPoints
	}
	if out.rejected > 0 {
		s.o.Logger.Warn("replicas refused points of a segment; the catalog counts only those stored", "edge", edge, "seq", seq,
			"points", seg.Points, "rejected", out.rejected)
	}
	res, err := s.record(ctx, catalog.RecordHeld{Edge: edge, Epoch: pl.Epoch, Holders: out.holders, Ranges: []catalog.HeldRange{{
		FirstSeq: seg.PrevSeq + 1, LastSeq: seq, Points: uint64(points), MinTimeMs: seg.MinT, MaxTimeMs: seg.MaxT,
	}}})
	if err != nil {
		return refusal(s.proposalRefusal(seq, 0, fmt.Errorf("record segment %d of edge %q: %w", seq, edge, err)))
	}
	r, ok := res.(catalog.RecordHeldResult)
	if !ok {
		return refusal(unavailable(seq, 0, "record segment %d of edge %q: unexpected result %T", seq, edge, res))
	}
	recorded <- true
	if r.Added == 0 {
		s.duplicates.Add(1) // recorded meanwhile by another stream
	} else {
		s.segments.Add(1)
		if len(out.holders) < len(pl.Replicas) {
			s.quorumAcks.Add(1)
		}
	}
	return ack(&pb.ShipAck{Seq: seq, AckedThrough: r.AckedThrough})
}

// held answers a segment whose numbers the catalog holds: the same CRC is
// a resend after a lost ack, another is a conflict (a backfill, rebuilt by
// the edge from its store, is not compared). Active replicas that lack it
// (missed by a write quorum, placed since, or asked to be given it again
// with a reship) are given it and recorded as holding it.
func (s *Server) held(ctx context.Context, edge string, seg *wire.Segment, p catalog.EdgeProgress) *pb.ShipResponse {
	seq, first := seg.Seq, seg.PrevSeq+1
	if !seg.Backfill {
		if e := s.checkCRC(ctx, edge, seg); e != nil {
			return refusal(e)
		}
	}
	pl, _ := s.o.Catalog.Placement(edge)
	var lacking []string
	for i, r := range pl.Replicas {
		if pl.Holdings[i].LacksAny(first, seq) {
			lacking = append(lacking, r)
		}
	}
	if len(lacking) == 0 || !heldContains(p.Held, first) {
		// Held everywhere (or only partly covered: a piece overlapping a
		// held run's edge is never shipped by a correct edge).
		s.duplicates.Add(1)
		return ack(&pb.ShipAck{Seq: seq, AckedThrough: p.AckedThrough()})
	}
	sub := pl
	sub.Replicas, sub.Holdings = nil, nil
	for i, r := range pl.Replicas {
		if slices.Contains(lacking, r) {
			sub.Replicas = append(sub.Replicas, r)
			sub.Holdings = append(sub.Holdings, pl.Holdings[i])
		}
	}
	out, werr := s.storeQuorum(ctx, edge, seg, sub, 1)
	if werr != nil {
		return refusal(werr)
	}
	recorded := make(chan bool, 1)
	recorded <- true
	close(recorded)
	if out.late != nil {
		go s.recordLate(edge, seg, sub, out.late, recorded)
	}
	// Concurrently, so that the records share one batch.
	errs := make([]error, len(out.holders))
	var wg sync.WaitGroup
	for i, r := range out.holders {
		wg.Go(func() { errs[i] = s.recordReplicated(ctx, edge, r, sub, first, seq) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return refusal(s.proposalRefusal(seq, 0, err))
		}
	}
	s.refilled.Add(1)
	return ack(&pb.ShipAck{Seq: seq, AckedThrough: p.AckedThrough()})
}

// checkCRC compares a resent segment with a stored CRC: another CRC is a
// conflict. No replica able to tell is no conflict.
func (s *Server) checkCRC(ctx context.Context, edge string, seg *wire.Segment) *wire.Error {
	seq := seg.Seq
	var replicas []string
	if pl, ok := s.o.Catalog.Placement(edge); ok {
		replicas = pl.All()
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
			return &wire.Error{Seq: seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT,
				Msg: fmt.Sprintf("segment %d of edge %q is held with crc32c %08x on %s, sent with %08x", seq, edge, crc, c, seg.CRC)}
		}
		return nil
	}
	return nil
}

// stored is the outcome of storeQuorum.
type stored struct {
	holders  []string        // replicas that hold the segment durably
	series   []labels.Labels // as the first holder reported them
	rejected int64           // the most points a holder refused
	// late receives the outcomes of the replicas still storing when the
	// quorum and its grace were reached (nil: none); closed after the last.
	late <-chan storeOutcome
}

type storeOutcome struct {
	replica string
	st      Stored
	err     error
}

// storeQuorum writes the segment on every active replica of pl in
// parallel and returns once q of them hold it and the others have
// answered or QuorumGrace has passed since the q-th. Fewer than q
// holders once every replica answered is a refusal: CONFLICT when a
// replica holds the segment with another CRC, else UNAVAILABLE
// (retryable). The stores run on their own deadline (ProposalTimeout),
// not the stream's, so a straggler can still complete.
func (s *Server) storeQuorum(ctx context.Context, edge string, seg *wire.Segment, pl catalog.Placement, q int) (stored, *wire.Error) {
	n := len(pl.Replicas)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.ProposalTimeout)
	stop := context.AfterFunc(s.ctx, cancel)
	results := make(chan storeOutcome, n)
	var wg sync.WaitGroup
	for _, c := range pl.Replicas {
		wg.Go(func() {
			rctx, span := s.startReplicate(sctx, c, seg.Seq)
			st, err := s.o.Replicas.Store(rctx, c, edge, seg.Seq, seg.CRC, seg.File)
			if err != nil {
				err = fmt.Errorf("store segment %d of edge %q on %s: %w", seg.Seq, edge, c, err)
			}
			endSpan(span, err)
			results <- storeOutcome{c, st, err}
		})
	}
	go func() {
		wg.Wait()
		stop()
		cancel()
		close(results)
	}()

	var out stored
	var errs []error
	conflict := false
	var grace <-chan time.Time
	received := 0
collect:
	for received < n {
		select {
		case r := <-results:
			received++
			if r.err != nil {
				errs = append(errs, r.err)
				conflict = conflict || errors.Is(r.err, ErrConflict)
				continue
			}
			out.holders = append(out.holders, r.replica)
			if out.series == nil {
				out.series = r.st.Series
			}
			out.rejected = max(out.rejected, r.st.Rejected)
			if len(out.holders) == q && received < n {
				t := time.NewTimer(s.o.QuorumGrace)
				defer t.Stop()
				grace = t.C
			}
		case <-grace:
			break collect
		case <-ctx.Done():
			// The stream ended: nothing can be acknowledged; the stores
			// finish or time out on their own, and the edge resends.
			return stored{}, unavailable(seg.Seq, 0, "stream ended while storing segment %d: %v", seg.Seq, context.Cause(ctx))
		}
	}
	if len(out.holders) < q {
		if received < n {
			// Cannot happen: a grace starts only once q hold it.
			return stored{}, unavailable(seg.Seq, 0, "segment %d of edge %q: %d of %d replicas hold it, quorum %d", seg.Seq, edge, len(out.holders), n, q)
		}
		if conflict && len(out.holders) == 0 {
			s.conflicts.Add(1)
			return stored{}, &wire.Error{Seq: seg.Seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_CONFLICT, Msg: errors.Join(errs...).Error()}
		}
		return stored{}, unavailable(seg.Seq, 0, "segment %d of edge %q: %d of %d replicas hold it, quorum %d: %v",
			seg.Seq, edge, len(out.holders), n, q, errors.Join(errs...))
	}
	if len(errs) > 0 {
		s.o.Logger.Warn("a replica did not store a segment; recorded as lacking it, to be repaired", "edge", edge, "seq", seg.Seq,
			"holders", out.holders, "err", errors.Join(errs...))
	}
	slices.Sort(out.holders)
	if received < n {
		s.stragglers.Add(int64(n - received))
		out.late = results
	}
	return out, nil
}

// recordLate waits for the replicas that were still storing the segment
// when it was acknowledged and, once the segment is recorded (recorded
// receives true), records each that stored it as holding it.
func (s *Server) recordLate(edge string, seg *wire.Segment, pl catalog.Placement, late <-chan storeOutcome, recorded <-chan bool) {
	var ok []string
	for r := range late {
		if r.err != nil {
			s.o.Logger.Warn("a replica did not store a segment after its quorum; recorded as lacking it, to be repaired",
				"edge", edge, "seq", seg.Seq, "coordinator", r.replica, "err", r.err)
			continue
		}
		ok = append(ok, r.replica)
	}
	if !<-recorded {
		return // not recorded: the edge resends, and the stores are duplicates then
	}
	for _, r := range ok {
		ctx, cancel := context.WithTimeout(s.ctx, s.o.ProposalTimeout)
		err := s.recordReplicated(ctx, edge, r, pl, seg.PrevSeq+1, seg.Seq)
		cancel()
		if err != nil && s.ctx.Err() == nil {
			s.o.Logger.Warn("record a late replica store", "edge", edge, "seq", seg.Seq, "coordinator", r, "err", err)
			continue
		}
		s.lateRecorded.Add(1)
	}
}

// recordReplicated records that replica, placed as in pl, holds
// first..last of edge.
func (s *Server) recordReplicated(ctx context.Context, edge, replica string, pl catalog.Placement, first, last uint64) error {
	h, _, ok := pl.HoldingOf(replica)
	if !ok {
		return nil
	}
	_, err := s.record(ctx, catalog.RecordReplicated{Edge: edge, Replica: replica, PlacedIndex: h.Index,
		Ranges: []catalog.SeqRange{{FirstSeq: first, LastSeq: last}}})
	if err != nil {
		return fmt.Errorf("record segments %d..%d of edge %q on %s: %w", first, last, edge, replica, err)
	}
	return nil
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
	res, err := s.record(ctx, catalog.RegisterSeries{Edge: edge, Series: missing})
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
	res, err := s.record(ctx, catalog.RecordGap{Edge: edge, Gaps: []catalog.GapRange{{
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

// record records c (a catalog.Batchable command) with the records of
// other segments (batch.go) within ProposalTimeout.
func (s *Server) record(ctx context.Context, c catalog.Command) (_ any, err error) {
	ctx, span := s.startPropose(ctx, c)
	defer func() { endSpan(span, err) }()
	rctx, cancel := context.WithTimeout(ctx, s.o.ProposalTimeout)
	defer cancel()
	return s.batch.submit(rctx, c)
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
