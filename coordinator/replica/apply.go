package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
)

// Applied describes what Apply did. For a Duplicate, Series and the time
// span describe the file and Points and Rejected are 0.
type Applied struct {
	Points               int64           // points written (= the segment footer's points when nothing was rejected)
	Rejected             int64           // points the engine refused (e.g. older than retention), counted
	Series               []labels.Labels // distinct series the segment defines, as the edge named them (no __edge__), sorted
	MinTimeMs, MaxTimeMs int64
	Duplicate            bool // the index already held (edge, seq) with this crc: nothing was written
}

// maxEdgeBytes bounds an edge id (it becomes a label value).
const maxEdgeBytes = 256

func validEdge(edge string) error {
	switch {
	case edge == "":
		return fmt.Errorf("%w: empty edge id", ErrInvalidSegment)
	case len(edge) > maxEdgeBytes:
		return fmt.Errorf("%w: edge id of %d bytes, limit is %d", ErrInvalidSegment, len(edge), maxEdgeBytes)
	case !utf8.ValidString(edge) || strings.IndexByte(edge, 0) >= 0:
		return fmt.Errorf("%w: edge id %q is not valid UTF-8 without NUL", ErrInvalidSegment, edge)
	}
	return nil
}

// Apply stores one sealed WAL segment file of edge (bytes as the edge's WAL
// wrote them). Durable when it returns nil.
//
// Errors: ErrInvalidSegment (wrapped) for a file that does not verify or
// decode or that contradicts edge, seq or crc; ErrConflict (wrapped) when
// (edge, seq) is held with another crc32c; model.ErrOverloaded (wrapped)
// when the engine cannot keep up (retry later); others (e.g. a disk
// error, or ctx ending) leave the segment not recorded, and applying it
// again is safe. Points the engine refuses are counted in Rejected.
func (s *Store) Apply(ctx context.Context, edge string, seq uint64, crc uint32, file []byte) (Applied, error) {
	a, err := s.apply(ctx, edge, seq, crc, file)
	switch {
	case errors.Is(err, ErrInvalidSegment):
		s.stats.invalid.Add(1)
	case errors.Is(err, ErrConflict):
		s.stats.conflicts.Add(1)
	case err == nil && a.Duplicate:
		s.stats.duplicates.Add(1)
	case err == nil:
		s.stats.applied.Add(1)
	default:
		s.stats.failed.Add(1)
	}
	if err != nil {
		return Applied{}, fmt.Errorf("store segment %d of %q: %w", seq, edge, err)
	}
	return a, nil
}

func (s *Store) apply(ctx context.Context, edge string, seq uint64, crc uint32, file []byte) (Applied, error) {
	if err := validEdge(edge); err != nil {
		return Applied{}, err
	}
	if seq == 0 {
		return Applied{}, fmt.Errorf("%w: sequence number 0", ErrInvalidSegment)
	}
	t := s.phases.start()
	d, err := decodeSegment(fmt.Sprintf("%d of %s", seq, edge), edge, file, applyKeepPoints)
	s.phases.end(phaseDecode, &t)
	if err != nil {
		return Applied{}, err
	}
	switch {
	case d.Info.Seq != seq:
		return Applied{}, fmt.Errorf("%w: the file is segment %d", ErrInvalidSegment, d.Info.Seq)
	case d.Info.CRC != crc:
		return Applied{}, fmt.Errorf("%w: the file's crc32c is %08x, the request says %08x", ErrInvalidSegment, d.Info.CRC, crc)
	}
	a := Applied{Series: sortedSeries(d.Series), MinTimeMs: d.Info.MinT, MaxTimeMs: d.Info.MaxT}

	defer s.lockSegment(edge, seq)()
	held, ok, err := s.SegmentCRC(edge, seq)
	s.phases.end(phaseLookup, &t)
	switch {
	case err != nil:
		return Applied{}, err
	case ok && held == crc:
		a.Duplicate = true
		return a, nil
	case ok:
		return Applied{}, fmt.Errorf("%w: held with crc32c %08x, this one has %08x", ErrConflict, held, crc)
	}
	err = s.write(ctx, edge, file, d, &a, applyBatchPoints)
	s.phases.end(phaseWrite, &t)
	if err != nil {
		return Applied{}, err
	}
	// Only now are the points durable; a crash before this line makes the
	// resend apply them again, which changes nothing.
	err = s.recordCRC(edge, seq, d.Info.PrevSeq, crc)
	s.phases.end(phaseIndex, &t)
	if err != nil {
		return Applied{}, err
	}
	if a.Rejected > 0 {
		s.log.Warn("replica engine refused points of a segment", "edge", edge, "seq", seq,
			"points", a.Points, "rejected", a.Rejected)
	}
	return a, nil
}

// decoded is a segment file verified and decoded: its contents and, when
// they fit in the bound decodeSegment was given, its points (else the
// file is decoded again as it is written).
type decoded struct {
	*segment.Contents
	// runs holds the points by series, each series' points in file order
	// (Labels: the series' with the edge label); nil when not kept.
	runs []model.Batch
}

// decodeSegment verifies the whole file (named name in errors), a segment
// of edge, and decodes every record without storing anything, so that a
// damaged segment stores nothing. It keeps the points it decodes when
// there are at most keep of them (16 bytes a point).
func decodeSegment(name, edge string, file []byte, keep int64) (*decoded, error) {
	d := &decoded{}
	slot := map[uint64]int{}
	var kept int64
	keepRun := func(id uint64, ts []int64, vs []float64) error {
		if kept += int64(len(ts)); kept > keep {
			d.runs, slot = nil, nil // too many: decoded again by write
			return nil
		}
		if slot == nil {
			return nil
		}
		i, ok := slot[id]
		if !ok {
			i = len(d.runs)
			slot[id] = i
			d.runs = append(d.runs, model.Batch{})
		}
		b := &d.runs[i]
		b.Ts = append(b.Ts, ts...)
		b.Vs = append(b.Vs, vs...)
		return nil
	}
	c, err := segment.ReadRuns(name, file, nil, keepRun)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrInvalidSegment, err)
	case c.Info.NodeID != edge:
		return nil, fmt.Errorf("%w: the file is of node %q", ErrInvalidSegment, c.Info.NodeID)
	case c.Points != c.Info.Points:
		return nil, fmt.Errorf("%w: records hold %d points, the footer says %d", ErrInvalidSegment, c.Points, c.Info.Points)
	}
	d.Contents = &c
	if d.runs != nil {
		ids := make([]uint64, len(slot))
		for id, i := range slot {
			ids[i] = id
		}
		for i, id := range ids {
			d.runs[i].Labels = withEdgeLabel(c.Series[id], edge)
		}
	}
	return d, nil
}

func withEdgeLabel(ls labels.Labels, edge string) []labels.Label {
	return append(slices.Clone([]labels.Label(ls)), labels.Label{Name: EdgeLabel, Value: edge})
}

// write stores the segment's points, with the edge label, in engine
// writes of about batchPoints points. Each series' points keep the file's
// order, so duplicate timestamps stay last-write-wins.
func (s *Store) write(ctx context.Context, edge string, file []byte, d *decoded, a *Applied, batchPoints int) error {
	var (
		batches []model.Batch
		pending int
	)
	flush := func() error {
		if pending == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		res, err := s.eng.Write(context.Background(), batches)
		if errors.Is(err, model.ErrOverloaded) {
			// The head is full; flushing it now is what the engine's flush
			// loop would do next. One retry, then the caller retries later.
			if ferr := s.eng.Flush(); ferr != nil {
				return fmt.Errorf("flush replica engine: %w", ferr)
			}
			res, err = s.eng.Write(context.Background(), batches)
		}
		if err != nil {
			return fmt.Errorf("write %d points: %w", pending, err)
		}
		a.Points += res.Accepted
		a.Rejected += res.Rejected
		s.stats.points.Add(res.Accepted)
		s.stats.rejected.Add(res.Rejected)
		batches, pending = batches[:0], 0
		return nil
	}
	if d.runs != nil {
		// Decoded once: cut the kept runs into writes.
		for _, r := range d.runs {
			for len(r.Ts) > 0 {
				n := min(len(r.Ts), batchPoints-pending)
				batches = append(batches, model.Batch{Labels: r.Labels, Ts: r.Ts[:n:n], Vs: r.Vs[:n:n]})
				r.Ts, r.Vs = r.Ts[n:], r.Vs[n:]
				if pending += n; pending >= batchPoints {
					if err := flush(); err != nil {
						return err
					}
				}
			}
		}
		return flush()
	}
	withEdge := make(map[uint64][]labels.Label, len(d.Series))
	for id, ls := range d.Series {
		withEdge[id] = withEdgeLabel(ls, edge)
	}
	slot := map[uint64]int{}
	var dec record.Decoder
	var werr error
	_, err := wal.VerifySegment("", file, func(r wal.Record) error {
		return dec.Decode(r.Data, func(uint64, []byte) error { return nil }, func(id uint64, ts []int64, vs []float64) error {
			i, ok := slot[id]
			if !ok {
				i = len(batches)
				slot[id] = i
				batches = append(batches, model.Batch{Labels: withEdge[id]})
			}
			b := &batches[i]
			b.Ts = append(b.Ts, ts...)
			b.Vs = append(b.Vs, vs...)
			pending += len(ts)
			if pending >= batchPoints {
				if werr = flush(); werr != nil {
					return werr
				}
				clear(slot)
			}
			return nil
		})
	})
	if werr != nil {
		return werr
	}
	if err != nil {
		// The first pass verified these bytes; the caller changed them.
		return fmt.Errorf("BUG: segment changed between verifying and writing it: %w", err)
	}
	return flush()
}

func sortedSeries(m map[uint64]labels.Labels) []labels.Labels {
	seen := make(map[string]bool, len(m))
	out := make([]labels.Labels, 0, len(m))
	var buf []byte
	for _, ls := range m {
		buf = ls.AppendKey(buf[:0])
		if seen[string(buf)] {
			continue
		}
		seen[string(buf)] = true
		out = append(out, ls)
	}
	slices.SortFunc(out, labels.Compare)
	return out
}
