package intake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Restore: an edge whose disk was replaced pulls its history back
// (ReplicationService.Restore; proto/tributary/v1/replication.proto is the
// specification). The coordinator answering reads the catalog
// linearizably, plans which live replica gives each part of the edge's
// time span (planRestore, a pure function), and streams the parts from
// those replicas' stores (RestoreSource: its own, or a peer's over the
// cluster link), one file or one message of rollups at a time: memory is
// one file (and the file being built by the store), or about
// maxRestoreRollupBytes of rollups, whatever the history's size.

// RestoreSource reads an edge's data from a coordinator's replica store
// (this one's or a peer's).
type RestoreSource interface {
	// ExportRaw calls fn with the edge's raw points with timestamps in
	// [minT, maxT] held on coordinator coordID, as sealed WAL segment
	// files (node/wal's format, naming the edge, seq lastSeq) of at most
	// maxFileBytes bytes. An error of fn is returned as is.
	ExportRaw(ctx context.Context, coordID, edge string, minT, maxT int64, lastSeq uint64, maxFileBytes int64, fn func(RestoreFile) error) error
	// ExportRollups calls fn with the edge's rollups held on coordinator
	// coordID for the cells starting in [minT, maxT].
	ExportRollups(ctx context.Context, coordID, edge string, minT, maxT int64, fn func(RollupSeries) error) error
	// RetentionStart returns the oldest times (ms) the cloud keeps raw
	// points of (raw), and any data of (oldest: the longest retention).
	RetentionStart() (raw, oldest int64)
}

// RestoreFile is one exported file and what its footer says.
type RestoreFile struct {
	Data       []byte
	CRC        uint32
	Points     int64
	MinT, MaxT int64
}

// RollupSeries is packed rollups of one series (node/rollup's pack
// format): hourly packs at day starts, daily packs at pack starts.
type RollupSeries struct {
	Labels        labels.Labels
	Hourly, Daily []RollupPack
}

// RollupPack is one packed rollup value starting at StartMs.
type RollupPack struct {
	StartMs int64
	Data    []byte
}

// Limits of a restore.
const (
	// DefaultRestoreFileBytes is the file size when the request asks for
	// none; MinRestoreFileBytes and MaxRestoreFileBytes bound what it may
	// ask for.
	DefaultRestoreFileBytes = 4 << 20
	MinRestoreFileBytes     = 64 << 10
	MaxRestoreFileBytes     = 64 << 20
	// maxRestoreRollupBytes bounds (about) one RestoreRollups message.
	maxRestoreRollupBytes = 1 << 20
	// maxMissingRuns bounds RestoreHeader.missing.
	maxMissingRuns = 1024
	// Raw parts are exported in windows: the first restoreFirstWindow
	// long; one whose files held less than half of restoreWindowFiles
	// files' worth doubles the next (up to restoreMaxWindow), one with more
	// than twice halves it (down to restoreMinWindow).
	restoreFirstWindow = time.Hour
	restoreMaxWindow   = 32 * 24 * time.Hour
	restoreMinWindow   = time.Minute
	restoreWindowFiles = 4
	// restoreFutureLimit: the span sent ends at most this far ahead of
	// the coordinator's clock. Replicas refuse points further ahead (a
	// year, replica.DefaultFutureWindow), and a segment footer naming a
	// time far in the future must not make a restore walk windows up to it.
	restoreFutureLimit = 366 * 24 * time.Hour
)

// restorePart is a time span and the replicas that hold all of it, in the
// order they are asked.
type restorePart struct {
	lo, hi  int64
	sources []string
}

// restorePlan is what a Restore sends.
type restorePlan struct {
	header  *pb.RestoreHeader
	lastSeq uint64 // the sequence number the exported files carry
	raw     []restorePart
	rollups []restorePart
}

// restoreRequest is a Restore's request, after its defaults: startMs and
// rawStartMs 0 mean no bound.
type restoreRequest struct {
	edge, self           string
	startMs, rawStartMs  int64
	rawRetention, oldest int64 // RestoreSource.RetentionStart
	nowMs                int64
	maxFileBytes         int64
	progress             catalog.EdgeProgress
	placement            catalog.Placement
	down                 func(coord string) bool
}

// planRestore decides what a Restore sends and from which replicas. It
// fails, naming the span, when no live replica holds some part of it.
func planRestore(r restoreRequest) (restorePlan, error) {
	p := r.progress
	h := &pb.RestoreHeader{
		CoordinatorId: r.self, NextSeq: p.NextSeq(), AckedThrough: p.AckedThrough(),
		WatermarkSeq: p.WatermarkSeq, WatermarkTimeMs: p.WatermarkTimeMs,
		Missing: missingRuns(p, maxMissingRuns), MaxFileBytes: uint64(r.maxFileBytes),
	}
	plan := restorePlan{header: h, lastSeq: max(1, h.NextSeq-1)}
	minT, maxT, any := int64(math.MaxInt64), int64(math.MinInt64), false
	for _, x := range p.Held {
		h.HeldPoints += x.Points
		if x.Points > 0 {
			minT, maxT, any = min(minT, x.MinTimeMs), max(maxT, x.MaxTimeMs), true
		}
	}
	for _, g := range p.Gaps {
		h.GapSegments += g.Segments
		if g.Points > 0 {
			h.GapPoints += g.Points
		}
	}
	if !any {
		return plan, nil
	}
	start := max(minT, r.oldest)
	if r.startMs != 0 {
		start = max(start, r.startMs)
	}
	maxT = min(maxT, r.nowMs+restoreFutureLimit.Milliseconds())
	if start > maxT {
		return plan, nil
	}
	h.MinTimeMs, h.MaxTimeMs = start, maxT
	split := r.rawRetention
	if r.rawStartMs != 0 {
		split = max(split, r.rawStartMs)
	}
	split = rollup.BucketStart(split, rollup.Day)
	rawLo := max(split, start)
	h.RawStartMs = rawLo
	var uncovered []span
	if rawLo <= maxT {
		parts, un := sourcesFor(rawLo, maxT, r.placement, r.down, r.self)
		plan.raw, uncovered = parts, append(uncovered, un...)
	}
	if rollLo := rollup.BucketStart(start, rollup.Day); rollLo < split {
		rollHi := min(split-1, rollup.BucketStart(maxT, rollup.Day)+rollup.Day-1)
		parts, un := sourcesFor(rollLo, rollHi, r.placement, r.down, r.self)
		plan.rollups, uncovered = parts, append(uncovered, un...)
	}
	if len(uncovered) > 0 {
		return plan, uncoveredError(r.edge, uncovered, r.placement, r.down)
	}
	return plan, nil
}

// span is an inclusive time span, ms.
type span struct{ lo, hi int64 }

// sourcesFor splits [lo, hi] where the replicas' holdings change and
// returns, for each piece, the live replicas that hold all of it: this
// coordinator first, then active replicas, then leaving ones. Adjacent
// pieces with the same replicas are merged; pieces no live replica holds
// are returned apart.
func sourcesFor(lo, hi int64, pl catalog.Placement, down func(string) bool, self string) (parts []restorePart, uncovered []span) {
	type rep struct {
		id string
		h  catalog.Holding
	}
	var reps []rep
	for i, id := range pl.Replicas {
		if down(id) || i >= len(pl.Holdings) {
			continue
		}
		reps = append(reps, rep{id, pl.Holdings[i]})
	}
	for _, l := range pl.Leaving {
		if !down(l.ID) {
			reps = append(reps, rep{l.ID, l.Holding})
		}
	}
	if i := slices.IndexFunc(reps, func(r rep) bool { return r.id == self }); i > 0 {
		r := reps[i]
		reps = slices.Insert(slices.Delete(reps, i, i+1), 0, r)
	}
	// Holdings change only where a lack run's time span starts or ends.
	cuts := []int64{lo}
	for _, r := range reps {
		for _, l := range r.h.Lacks {
			if l.MinTimeMs > lo && l.MinTimeMs <= hi {
				cuts = append(cuts, l.MinTimeMs)
			}
			if l.MaxTimeMs >= lo && l.MaxTimeMs < hi {
				cuts = append(cuts, l.MaxTimeMs+1)
			}
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	for i, a := range cuts {
		b := hi
		if i+1 < len(cuts) {
			b = cuts[i+1] - 1
		}
		var ids []string
		for _, r := range reps {
			if r.h.Covers(a, b) {
				ids = append(ids, r.id)
			}
		}
		if len(ids) == 0 {
			if n := len(uncovered); n > 0 && uncovered[n-1].hi+1 == a {
				uncovered[n-1].hi = b
			} else {
				uncovered = append(uncovered, span{a, b})
			}
			continue
		}
		if n := len(parts); n > 0 && parts[n-1].hi+1 == a && slices.Equal(parts[n-1].sources, ids) {
			parts[n-1].hi = b
			continue
		}
		parts = append(parts, restorePart{lo: a, hi: b, sources: ids})
	}
	return parts, uncovered
}

// uncoveredError says which spans no live replica holds, and why.
func uncoveredError(edge string, spans []span, pl catalog.Placement, down func(string) bool) error {
	var where []string
	for _, s := range spans {
		where = append(where, fmt.Sprintf("[%s, %s]", fmtMs(s.lo), fmtMs(s.hi)))
	}
	var why []string
	all := pl.All()
	if len(all) == 0 {
		why = append(why, "the edge has no replicas")
	}
	for _, id := range all {
		h, _, _ := pl.HoldingOf(id)
		switch {
		case down(id):
			why = append(why, id+" is down")
		default:
			var lacks []string
			for _, l := range h.Lacks {
				for _, s := range spans {
					if l.MinTimeMs <= s.hi && l.MaxTimeMs >= s.lo {
						lacks = append(lacks, fmt.Sprintf("%d..%d", l.FirstSeq, l.LastSeq))
						break
					}
				}
			}
			if len(lacks) > 0 {
				why = append(why, fmt.Sprintf("%s lacks segments %s", id, strings.Join(lacks, ", ")))
			}
		}
	}
	return status.Errorf(codes.FailedPrecondition,
		"restore of edge %q refused: no live replica holds its data in %s (%s); restoring less would lose it silently: retry once a replica that holds it is back",
		edge, strings.Join(where, ", "), strings.Join(why, "; "))
}

func fmtMs(t int64) string { return time.UnixMilli(t).UTC().Format(time.RFC3339Nano) }

// missingRuns returns the runs of 1..NextSeq()-1 that are neither held
// nor in a recorded gap, at most limit (the last widened to cover the
// rest).
func missingRuns(p catalog.EdgeProgress, limit int) []*pb.SeqRange {
	covered := coveredRuns(p)
	var out []*pb.SeqRange
	next := uint64(1) // the lowest number not known covered
	add := func(first, last uint64) {
		if n := len(out); n == limit {
			out[n-1].LastSeq = last
			return
		}
		out = append(out, &pb.SeqRange{FirstSeq: first, LastSeq: last})
	}
	for _, c := range covered {
		if c.first > next {
			add(next, c.first-1)
		}
		if c.last >= next {
			if c.last == math.MaxUint64 {
				return out
			}
			next = c.last + 1
		}
	}
	if end := p.NextSeq(); next < end {
		add(next, end-1)
	}
	return out
}

// restoreCounts is what a Restore sent.
type restoreCounts struct {
	files, rawPoints, rollupSeries, rollupPacks, bytes int64
}

// restoreEncoder compresses restore files: edges are on slow links, so
// bytes cost more than the coordinator's CPU. EncodeAll is safe for
// concurrent use.
var restoreEncoder = sync.OnceValue(func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic("BUG: intake: zstd encoder: " + err.Error())
	}
	return enc
})

func (v service) Restore(req *pb.RestoreRequest, stream grpc.ServerStreamingServer[pb.RestoreResponse]) error {
	return v.s.restore(req, stream)
}

// restore serves one Restore call.
func (s *Server) restore(req *pb.RestoreRequest, stream grpc.ServerStreamingServer[pb.RestoreResponse]) error {
	if s.o.Restore == nil {
		return status.Error(codes.Unimplemented, "this coordinator serves no restores")
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	begun := time.Now()
	edge, err := s.restoreIdentity(ctx, req)
	if err != nil {
		return err
	}
	maxFile := int64(DefaultRestoreFileBytes)
	if m := req.GetMaxFileBytes(); m != 0 {
		if m < MinRestoreFileBytes || m > MaxRestoreFileBytes {
			return status.Errorf(codes.InvalidArgument, "restore of edge %q: max_file_bytes %d is outside [%d, %d]", edge, m, MinRestoreFileBytes, MaxRestoreFileBytes)
		}
		maxFile = int64(m)
	}
	rctx, rcancel := context.WithTimeout(ctx, s.o.ProposalTimeout)
	err = s.o.Raft.LinearizableRead(rctx)
	rcancel()
	if err != nil {
		return status.Errorf(codes.Unavailable, "restore of edge %q: read the catalog: %v", edge, err)
	}
	prog, hasProg := s.o.Catalog.Progress(edge)
	if _, known := s.o.Catalog.Node(edge); !known && !hasProg {
		return status.Errorf(codes.NotFound, "restore of edge %q: the cloud knows no such edge (it never shipped)", edge)
	}
	pl, _ := s.o.Catalog.Placement(edge)
	rawRet, oldest := s.o.Restore.RetentionStart()
	plan, err := planRestore(restoreRequest{
		edge: edge, self: s.o.CoordinatorID, startMs: req.GetStartMs(), rawStartMs: req.GetRawStartMs(),
		rawRetention: rawRet, oldest: oldest, nowMs: s.o.Now().UnixMilli(), maxFileBytes: maxFile, progress: prog, placement: pl,
		down: func(id string) bool {
			n, ok := s.o.Catalog.Node(id)
			return !ok || n.State == catalog.NodeDown
		},
	})
	log := s.o.Logger.With("edge", edge)
	if err != nil {
		log.Warn("restore refused", "err", err)
		return err
	}
	h := plan.header
	if err := stream.Send(&pb.RestoreResponse{Body: &pb.RestoreResponse_Header{Header: h}}); err != nil {
		return err
	}
	log.Info("restore started", "next_seq", h.NextSeq, "acked_through", h.AckedThrough, "held_points", h.HeldPoints,
		"from", fmtMs(h.MinTimeMs), "raw_from", fmtMs(h.RawStartMs), "to", fmtMs(h.MaxTimeMs), "raw_parts", len(plan.raw), "rollup_parts", len(plan.rollups))
	var n restoreCounts
	for _, part := range plan.raw {
		if err := s.restoreRaw(ctx, edge, part, plan.lastSeq, maxFile, stream, &n); err != nil {
			return s.restoreFailed(ctx, log, err)
		}
	}
	for _, part := range plan.rollups {
		if err := s.restoreRollups(ctx, edge, part, stream, &n); err != nil {
			return s.restoreFailed(ctx, log, err)
		}
	}
	done := &pb.RestoreDone{Files: n.files, RawPoints: n.rawPoints, RollupSeries: n.rollupSeries, RollupPacks: n.rollupPacks}
	if err := stream.Send(&pb.RestoreResponse{Body: &pb.RestoreResponse_Done{Done: done}}); err != nil {
		return err
	}
	s.restores.Add(1)
	log.Info("restore sent", "files", n.files, "raw_points", n.rawPoints, "rollup_series", n.rollupSeries,
		"rollup_packs", n.rollupPacks, "bytes", n.bytes, "took", time.Since(begun).Round(time.Millisecond))
	return nil
}

// restoreFailed is the status of a restore that stopped while sending.
func (s *Server) restoreFailed(ctx context.Context, log interface{ Warn(string, ...any) }, err error) error {
	if ctx.Err() != nil {
		return s.ended(ctx)
	}
	log.Warn("restore stopped", "err", err)
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unavailable, err.Error())
}

// restoreIdentity checks the caller as a hello is checked and returns the
// edge.
func (s *Server) restoreIdentity(ctx context.Context, req *pb.RestoreRequest) (string, error) {
	edge := req.GetNodeId()
	if edge == "" || len(edge) > 255 {
		return "", status.Errorf(codes.InvalidArgument, "restore: node id of %d bytes (want 1 to 255)", len(edge))
	}
	identity, err := s.callerIdentity(ctx, edge, "restore of node %q asked by %q: an edge restores only itself")
	if err != nil {
		return "", err
	}
	if _, _, err := s.admitEdge(edge, identity); err != nil {
		return "", err
	}
	return edge, nil
}

// restoreRaw sends the raw points of part in windows, each from the
// first of part's replicas that gives it whole.
func (s *Server) restoreRaw(ctx context.Context, edge string, part restorePart, lastSeq uint64, maxFile int64,
	stream grpc.ServerStreamingServer[pb.RestoreResponse], n *restoreCounts) error {
	enc := restoreEncoder()
	window := restoreFirstWindow.Milliseconds()
	target := restoreWindowFiles * maxFile
	for lo := part.lo; ; {
		hi := part.hi
		if part.hi-lo >= window { // no overflow: both sides are in range
			hi = lo + window - 1
		}
		var bytes int64
		send := func(f RestoreFile) error {
			m := &pb.RestoreFile{Compression: pb.SegmentCompression_SEGMENT_COMPRESSION_ZSTD, UncompressedBytes: uint64(len(f.Data)),
				Crc32C: f.CRC, Points: f.Points, MinTimeMs: f.MinT, MaxTimeMs: f.MaxT}
			m.Data = enc.EncodeAll(f.Data, make([]byte, 0, len(f.Data)/3+64))
			if len(m.Data) >= len(f.Data) {
				m.Compression, m.Data = pb.SegmentCompression_SEGMENT_COMPRESSION_NONE, f.Data
			}
			if err := stream.Send(&pb.RestoreResponse{Body: &pb.RestoreResponse_File{File: m}}); err != nil {
				return fmt.Errorf("%w: %w", errSend, err)
			}
			bytes += int64(len(f.Data))
			n.files++
			n.rawPoints += f.Points
			n.bytes += int64(len(m.Data))
			return nil
		}
		err := s.fromReplicas(ctx, part.sources, fmt.Sprintf("raw points of [%s, %s]", fmtMs(lo), fmtMs(hi)), func(coord string) error {
			return s.o.Restore.ExportRaw(ctx, coord, edge, lo, hi, lastSeq, maxFile, send)
		})
		if err != nil {
			return err
		}
		if hi == part.hi {
			return nil
		}
		lo = hi + 1
		switch {
		case bytes < target/2:
			window = min(2*window, restoreMaxWindow.Milliseconds())
		case bytes > 2*target:
			window = max(window/2, restoreMinWindow.Milliseconds())
		}
	}
}

// restoreRollups sends the rollups of part, several series to a message.
func (s *Server) restoreRollups(ctx context.Context, edge string, part restorePart,
	stream grpc.ServerStreamingServer[pb.RestoreResponse], n *restoreCounts) error {
	msg := &pb.RestoreRollups{}
	size := 0
	flush := func() error {
		if len(msg.Series) == 0 {
			return nil
		}
		if err := stream.Send(&pb.RestoreResponse{Body: &pb.RestoreResponse_Rollups{Rollups: msg}}); err != nil {
			return fmt.Errorf("%w: %w", errSend, err)
		}
		n.bytes += int64(size)
		msg, size = &pb.RestoreRollups{}, 0
		return nil
	}
	err := s.fromReplicas(ctx, part.sources, fmt.Sprintf("rollups of [%s, %s]", fmtMs(part.lo), fmtMs(part.hi)), func(coord string) error {
		return s.o.Restore.ExportRollups(ctx, coord, edge, part.lo, part.hi, func(e RollupSeries) error {
			p := &pb.RestoreRollupSeries{Labels: make([]*pb.Label, len(e.Labels))}
			for i, l := range e.Labels {
				p.Labels[i] = &pb.Label{Name: l.Name, Value: l.Value}
			}
			for _, x := range e.Hourly {
				p.Hourly = append(p.Hourly, &pb.RestoreRollupPack{StartMs: x.StartMs, Data: x.Data})
			}
			for _, x := range e.Daily {
				p.Daily = append(p.Daily, &pb.RestoreRollupPack{StartMs: x.StartMs, Data: x.Data})
			}
			sz := proto.Size(p)
			if size > 0 && size+sz > maxRestoreRollupBytes {
				if err := flush(); err != nil {
					return err
				}
			}
			msg.Series = append(msg.Series, p)
			size += sz
			n.rollupSeries++
			n.rollupPacks += int64(len(p.Hourly) + len(p.Daily))
			return nil
		})
	})
	if err != nil {
		return err
	}
	return flush()
}

// fromReplicas runs export against each of sources in turn until one
// succeeds. What a failed one sent stays sent: the next sends it again,
// which the receiver's import makes harmless.
func (s *Server) fromReplicas(ctx context.Context, sources []string, what string, export func(coord string) error) error {
	var errs []string
	for _, coord := range sources {
		err := export(coord)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errSend) {
			return err
		}
		s.o.Logger.Warn("restore: a replica failed; trying the next one", "coordinator", coord, "what", what, "err", err)
		errs = append(errs, fmt.Sprintf("%s: %v", coord, err))
	}
	return status.Errorf(codes.Unavailable, "restore: no replica could give the %s: %s", what, strings.Join(errs, "; "))
}

// errSend marks a failure to send to the edge (not the replica's fault).
var errSend = errors.New("send to the edge")
