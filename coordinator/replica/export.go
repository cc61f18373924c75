package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/segment"
	"github.com/tributarydb/tributary/node/wal"
)

// Limits of an export's files.
const (
	// DefaultExportFileBytes is the file size Copy asks for by default.
	DefaultExportFileBytes = 8 << 20
	// MinExportFileBytes is the smallest file size an export accepts: room
	// for a series of the largest label set the engine accepts and a point.
	MinExportFileBytes = 64 << 10
)

// ExportedFile is one file of an export: a sealed WAL segment file of the
// edge (its header names the edge, Seq the range's last sequence number,
// PrevSeq the one before its first), built as package segment does.
type ExportedFile struct {
	// Data is the file; it belongs to the callee (it is not reused).
	Data []byte
	// Info describes it as the exporter built it: Seq, PrevSeq, NodeID,
	// CRC, Points, MinT, MaxT, Bytes. A receiver checks Data against it.
	Info wal.SegmentInfo
}

// ExportSource is where Copy reads a range from: a peer's replica store
// through a Client, or a local Store.
type ExportSource interface {
	Export(ctx context.Context, edge string, minT, maxT int64, firstSeq, lastSeq uint64, maxFileBytes int64, fn func(ExportedFile) error) error
}

var (
	_ ExportSource = (*Store)(nil)
	_ ExportSource = (*Client)(nil)
)

// Export calls fn with the points of every series of edge that has points
// with timestamps in [minT, maxT] (inclusive, ms) — what a raw query of the
// edge answers: the engine's head and its stored chunks merged, last write
// wins — encoded as WAL segment files of at most maxFileBytes bytes
// (MinExportFileBytes to DefaultMaxSegmentBytes). Every file's header
// carries the edge as node id, seq lastSeq and prev seq firstSeq-1: the
// files of one export are told apart only by their order, and a receiver
// applies them all (ApplyCopy) before it records the range (RecordCopy).
// No points in the range: no file.
//
// Series come in label order (without EdgeLabel, which is stripped); a
// series whose points do not fit in the rest of a file continues in the
// next one (defined again there). Exporting the same unchanged data with
// the same arguments gives the same bytes. Memory: one file being built,
// plus one series' points in the range.
//
// Errors: arguments wrap model.ErrBadQuery; an error of fn is returned as
// is and stops the export. Safe for concurrent use, also with Apply:
// points written meanwhile may or may not be included.
func (s *Store) Export(ctx context.Context, edge string, minT, maxT int64, firstSeq, lastSeq uint64, maxFileBytes int64, fn func(ExportedFile) error) error {
	if err := checkExport(edge, minT, maxT, firstSeq, lastSeq, maxFileBytes); err != nil {
		return err
	}
	m, err := labels.NewMatcher(labels.MatchEqual, EdgeLabel, edge)
	if err != nil {
		return fmt.Errorf("export %q: %w", edge, err)
	}
	b, err := segment.NewBuilder(edge, maxFileBytes)
	if err != nil {
		return fmt.Errorf("%w: export %q: %w", model.ErrBadQuery, edge, err)
	}
	var fnErr error
	emit := func() error {
		data, info, err := b.Finish(lastSeq, firstSeq-1)
		if err != nil {
			return err
		}
		fnErr = fn(ExportedFile{Data: data, Info: info})
		return fnErr
	}
	err = s.eng.ExportRangeMatching(ctx, []*labels.Matcher{m}, minT, maxT, func(ls labels.Labels, ts []int64, vs []float64) error {
		ls, _ = stripEdge(ls)
		for len(ts) > 0 {
			n, err := b.Add(ls, ts, vs)
			if err != nil {
				return err
			}
			ts, vs = ts[n:], vs[n:]
			if len(ts) > 0 {
				if err := emit(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil && b.Points() > 0 {
		err = emit()
	}
	switch {
	case err == nil:
		return nil
	case fnErr != nil && errors.Is(err, fnErr):
		return fnErr
	}
	return fmt.Errorf("export %d..%d of %q: %w", firstSeq, lastSeq, edge, err)
}

// checkExport checks Export's arguments.
func checkExport(edge string, minT, maxT int64, firstSeq, lastSeq uint64, maxFileBytes int64) error {
	if err := checkRange(edge, firstSeq, lastSeq); err != nil {
		return fmt.Errorf("%w: %w", model.ErrBadQuery, err)
	}
	switch {
	case maxT < minT:
		return fmt.Errorf("%w: export of %q: time range [%d, %d] ends before it starts", model.ErrBadQuery, edge, minT, maxT)
	case maxFileBytes < MinExportFileBytes || maxFileBytes > DefaultMaxSegmentBytes:
		return fmt.Errorf("%w: export of %q: file size %d out of range [%d, %d]", model.ErrBadQuery, edge, maxFileBytes, MinExportFileBytes, DefaultMaxSegmentBytes)
	}
	return nil
}

// ApplyCopy stores the points of one file of an export of edge's segments
// firstSeq..lastSeq (as Export built it: the header names edge, seq
// lastSeq, prev seq firstSeq-1). Like Apply, it verifies the whole file
// and decodes every record before it writes anything (a damaged file
// stores nothing, ErrInvalidSegment), then writes the points with the
// edge label in the same bounded batches; durable when it returns nil.
//
// It does not record the range: RecordCopy does, once every file of the
// export is applied (Copy does both). Applying a file again changes
// nothing (the same points, last write wins); a file of a range already
// recorded as copied writes nothing (Duplicate).
func (s *Store) ApplyCopy(ctx context.Context, edge string, firstSeq, lastSeq uint64, file []byte) (Applied, error) {
	return s.applyCopy(ctx, edge, firstSeq, lastSeq, file, nil)
}

// applyCopy is ApplyCopy; want, if set, is what the exporter said the
// file is (CRC and Points must match).
func (s *Store) applyCopy(ctx context.Context, edge string, firstSeq, lastSeq uint64, file []byte, want *wal.SegmentInfo) (Applied, error) {
	a, err := s.applyCopyFile(ctx, edge, firstSeq, lastSeq, file, want)
	switch {
	case errors.Is(err, ErrInvalidSegment):
		s.stats.invalid.Add(1)
	case err == nil && a.Duplicate:
		s.stats.duplicates.Add(1)
	case err == nil:
		s.stats.copied.Add(1)
	default:
		s.stats.failed.Add(1)
	}
	if err != nil {
		return Applied{}, fmt.Errorf("store copy of %d..%d of %q: %w", firstSeq, lastSeq, edge, err)
	}
	return a, nil
}

func (s *Store) applyCopyFile(ctx context.Context, edge string, firstSeq, lastSeq uint64, file []byte, want *wal.SegmentInfo) (Applied, error) {
	if err := checkRange(edge, firstSeq, lastSeq); err != nil {
		return Applied{}, err
	}
	d, err := decodeSegment(fmt.Sprintf("copy %d..%d of %s", firstSeq, lastSeq, edge), edge, file, copyKeepPoints)
	if err != nil {
		return Applied{}, err
	}
	switch {
	case d.Info.Seq != lastSeq || d.Info.PrevSeq != firstSeq-1:
		return Applied{}, fmt.Errorf("%w: the file covers %d..%d, not %d..%d", ErrInvalidSegment, d.Info.PrevSeq+1, d.Info.Seq, firstSeq, lastSeq)
	case want != nil && (want.CRC != d.Info.CRC || want.Points != d.Info.Points):
		return Applied{}, fmt.Errorf("%w: the file has crc32c %08x and %d points, its sender said %08x and %d",
			ErrInvalidSegment, d.Info.CRC, d.Info.Points, want.CRC, want.Points)
	}
	a := Applied{Series: sortedSeries(d.Series), MinTimeMs: d.Info.MinT, MaxTimeMs: d.Info.MaxT}
	held, ok, err := s.copiedThrough(edge, firstSeq)
	switch {
	case err != nil:
		return Applied{}, err
	case ok && held >= lastSeq:
		a.Duplicate = true
		return a, nil
	}
	if err := s.write(ctx, edge, file, d, &a, copyBatchPoints); err != nil {
		return Applied{}, err
	}
	if a.Rejected > 0 {
		s.log.Warn("replica engine refused points of a copied file", "edge", edge, "first_seq", firstSeq, "last_seq", lastSeq,
			"points", a.Points, "rejected", a.Rejected)
	}
	return a, nil
}
