package replicator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/internal/cursor"
)

// Restore: a node whose disk died starts again with an empty data
// directory under its known node id, and takes its history back from the
// coordinators (ReplicationService.Restore; tributary node restore):
//
//  1. The data directory must be empty (or hold what an interrupted
//     restore left, see below). A marker file, RestoreMarker, is written
//     in it first and removed last.
//  2. The first coordinator of Targets that answers sends a header: one
//     past every sequence number the cloud recorded for the node
//     (next_seq), its acked_through, and the runs below next_seq it never
//     received. The node's WAL is initialised to start at next_seq
//     (wal.InitSequence), so new segments neither collide with the
//     cloud's numbers nor leave a hole below them.
//  3. Every raw file is verified and imported into the node's store
//     (node.Node.ImportSegment: the flush path, not the WAL, so nothing
//     is shipped again), then every series' rollups of older days
//     (node.Node.ImportRollups). The counts are checked against the
//     answer's last message, and the store is synced.
//  4. The cursor is written: acked_through as the cloud says,
//     released = next_seq-1 (the node holds no segment below next_seq),
//     and the runs the cloud never received as MISSING gaps (points
//     unknown, never backfilled), which the Shipper declares when it
//     connects so that the cloud's acked_through moves past them. When
//     the cloud's record has no hole, acked_through = next_seq-1 and there
//     are no gaps.
//  5. The marker is removed (and the directory synced): the node may start.
//
// Interrupted (killed, a coordinator lost, an error): the marker stays.
// tributary node refuses to start on a directory that holds it
// (CheckRestored), and Restore run again starts over: it removes what the
// interrupted run wrote (the WAL, the store, the cursor; it refuses if
// the directory holds anything else) and restores from the beginning.

// RestoreMarker names the file that marks a data directory whose restore
// has not finished.
const RestoreMarker = "RESTORE-INCOMPLETE"

// ErrNotEmpty: a restore into a data directory that holds data.
var ErrNotEmpty = errors.New("replicator: the data directory is not empty")

// ErrRestoreIncomplete: the data directory holds an unfinished restore.
var ErrRestoreIncomplete = errors.New("replicator: a restore into this data directory did not finish")

// Default and bounds of RestoreOptions.MaxFileBytes (those of the
// coordinator).
const (
	DefaultRestoreFileBytes = 4 << 20
	minRestoreFileBytes     = 64 << 10
	maxRestoreFileBytes     = 64 << 20
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// Targets, TLS, Insecure and DialOptions are those of Options: the
	// coordinators are asked in order until one answers. With TLS the
	// client certificate must name Node.NodeID.
	Targets     []string
	TLS         *tls.Config
	Insecure    bool
	DialOptions []grpc.DialOption
	// Node configures the node the history is restored into: DataDir and
	// NodeID are required (the node id the cloud knows); WALRetention and
	// WriteGate are not used.
	Node node.Options
	// CursorPath is the Shipper's cursor file; default
	// Node.DataDir/replication.cursor.
	CursorPath string
	// StartMs: restore only data at or after this time (0: everything the
	// cloud holds). RawStartMs: raw points from the UTC day of
	// max(RawStartMs, the cloud's raw retention start), rollups before (0:
	// raw as far back as the cloud keeps it).
	StartMs, RawStartMs int64
	// MaxFileBytes bounds each file received, uncompressed (default
	// DefaultRestoreFileBytes; 64 KiB to 64 MiB): the memory a restore
	// needs is about three times this.
	MaxFileBytes int64
	Logger       *slog.Logger
}

func (o *RestoreOptions) validate() error {
	bad := checkLink(o.Targets, o.TLS, o.Insecure)
	if o.Node.DataDir == "" {
		bad = append(bad, "Node.DataDir is required")
	}
	if o.Node.NodeID == "" || len(o.Node.NodeID) > 255 {
		bad = append(bad, "Node.NodeID is required (1 to 255 bytes): the node id the cloud knows")
	}
	if o.CursorPath == "" {
		o.CursorPath = filepath.Join(o.Node.DataDir, "replication.cursor")
	}
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = DefaultRestoreFileBytes
	}
	if o.MaxFileBytes < minRestoreFileBytes || o.MaxFileBytes > maxRestoreFileBytes {
		bad = append(bad, fmt.Sprintf("MaxFileBytes %d is outside [%d, %d]", o.MaxFileBytes, minRestoreFileBytes, maxRestoreFileBytes))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(bad) > 0 {
		return errors.New("restore options: " + strings.Join(bad, "; "))
	}
	return nil
}

// RestoreResult says what a restore did.
type RestoreResult struct {
	Coordinator string
	// StartedOver: the leftovers of an interrupted restore were removed
	// first.
	StartedOver bool
	// From the cloud's header (see pb.RestoreHeader).
	NextSeq, AckedThrough uint64
	// MissingSegments counts the sequence numbers below NextSeq the cloud
	// never received (declared as MISSING gaps), in MissingRuns runs.
	MissingSegments uint64
	MissingRuns     int
	HeldPoints      uint64
	GapSegments     uint64
	GapPoints       int64
	MinTimeMs       int64
	MaxTimeMs       int64
	RawStartMs      int64
	// What arrived and was imported.
	Files, RawPoints          int64
	RollupSeries, RollupPacks int64
	Bytes                     int64 // received, compressed
	Took                      time.Duration
}

// CheckRestored returns an error wrapping ErrRestoreIncomplete when a
// restore into dataDir was interrupted: the node must not start on it.
func CheckRestored(dataDir string) error {
	_, err := os.Stat(filepath.Join(dataDir, RestoreMarker))
	switch {
	case err == nil:
		return fmt.Errorf("%w (%s holds %s): run tributary node restore again", ErrRestoreIncomplete, dataDir, RestoreMarker)
	case errors.Is(err, os.ErrNotExist):
		return nil
	}
	return fmt.Errorf("check %s for an unfinished restore: %w", dataDir, err)
}

// Restore restores the history of node o.Node.NodeID from the cloud into
// the empty directory o.Node.DataDir (see the top of this file). It needs
// the node's process not to run. On error the directory keeps its marker:
// run Restore again.
func Restore(ctx context.Context, o RestoreOptions) (RestoreResult, error) {
	var res RestoreResult
	if err := o.validate(); err != nil {
		return res, err
	}
	begun := time.Now()
	log := o.Logger.With("component", "restore", "node", o.Node.NodeID)
	started, err := prepareRestoreDir(o.Node.DataDir, o.CursorPath)
	if err != nil {
		return res, err
	}
	res.StartedOver = started
	if started {
		log.Warn("an interrupted restore's leftovers were removed; starting over", "data_dir", o.Node.DataDir)
	}
	stream, conn, target, first, err := openRestore(ctx, &o, log)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	h, err := restoreHeader(first, &o)
	if err != nil {
		return res, fmt.Errorf("restore from %s: %w", target, err)
	}
	res.Coordinator, res.NextSeq, res.AckedThrough = h.GetCoordinatorId(), h.GetNextSeq(), h.GetAckedThrough()
	res.HeldPoints, res.GapSegments, res.GapPoints = h.GetHeldPoints(), h.GetGapSegments(), h.GetGapPoints()
	res.MinTimeMs, res.MaxTimeMs, res.RawStartMs = h.GetMinTimeMs(), h.GetMaxTimeMs(), h.GetRawStartMs()
	res.MissingRuns = len(h.GetMissing())
	for _, m := range h.GetMissing() {
		res.MissingSegments += m.GetLastSeq() - m.GetFirstSeq() + 1
	}
	log.Info("restoring", "coordinator", res.Coordinator, "target", target, "next_seq", res.NextSeq,
		"acked_through", res.AckedThrough, "held_points", res.HeldPoints, "from", fmtMs(res.MinTimeMs),
		"raw_from", fmtMs(res.RawStartMs), "to", fmtMs(res.MaxTimeMs), "missing_segments", res.MissingSegments)
	if err := wal.InitSequence(nil, node.WALDir(o.Node.DataDir), res.NextSeq); err != nil {
		return res, err
	}
	no := o.Node
	no.WALRetention, no.WriteGate = nil, nil
	n, err := node.Open(no)
	if err != nil {
		return res, fmt.Errorf("open the node: %w", err)
	}
	err = receiveRestore(stream, n, h.GetMaxFileBytes(), &res, log)
	if err == nil {
		err = n.SyncImports()
	}
	if cerr := n.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close the node: %w", cerr)
	}
	if err != nil {
		return res, fmt.Errorf("restore from %s (%s): %w", target, res.Coordinator, err)
	}
	cur := cursor.State{NodeID: o.Node.NodeID, AckedThrough: res.AckedThrough, Released: res.NextSeq - 1}
	for _, m := range h.GetMissing() {
		cur.AddGap(cursor.Gap{After: m.GetFirstSeq() - 1, Through: m.GetLastSeq(), Reason: cursor.ReasonMissing, Points: -1, Unrecoverable: true})
	}
	if err := cursor.Save(vfs.OS{}, o.CursorPath, &cur); err != nil {
		return res, err
	}
	if err := removeMarker(o.Node.DataDir); err != nil {
		return res, err
	}
	res.Took = time.Since(begun)
	log.Info("restore finished", "files", res.Files, "raw_points", res.RawPoints, "rollup_series", res.RollupSeries,
		"rollup_packs", res.RollupPacks, "bytes", res.Bytes, "took", res.Took.Round(time.Millisecond))
	return res, nil
}

// restoreEntries are what a restore writes in a data directory (besides
// the cursor, which may live elsewhere).
var restoreEntries = []string{"wal", "db", RestoreMarker}

// prepareRestoreDir makes dataDir an empty directory holding only the
// marker; started reports that an interrupted restore's leftovers were
// removed.
func prepareRestoreDir(dataDir, cursorPath string) (started bool, err error) {
	entries, err := os.ReadDir(dataDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("read data directory: %w", err)
	}
	cursorFiles := []string{cursorPath, cursorPath + vfs.TempSuffix, cursorPath + summariesSuffix}
	inDir := func(name string) bool {
		return slices.Contains(restoreEntries, name) || slices.ContainsFunc(cursorFiles, func(p string) bool {
			return filepath.Clean(p) == filepath.Join(dataDir, name)
		})
	}
	marked := slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.Name() == RestoreMarker })
	if !marked {
		if len(entries) > 0 {
			return false, fmt.Errorf("%w: %s holds %q: a restore writes only into an empty directory (move the old one aside)", ErrNotEmpty, dataDir, entries[0].Name())
		}
		for _, p := range cursorFiles {
			if _, err := os.Stat(p); err == nil {
				return false, fmt.Errorf("%w: the cursor %s exists: remove it, or restore into another place", ErrNotEmpty, p)
			}
		}
	} else {
		for _, e := range entries {
			if !inDir(e.Name()) {
				return false, fmt.Errorf("%w: %s holds an interrupted restore and also %q, which a restore does not write: move it aside", ErrNotEmpty, dataDir, e.Name())
			}
		}
		for _, p := range cursorFiles {
			if err := os.RemoveAll(p); err != nil {
				return false, fmt.Errorf("remove an interrupted restore: %w", err)
			}
		}
		for _, name := range restoreEntries {
			if name == RestoreMarker {
				continue
			}
			if err := os.RemoveAll(filepath.Join(dataDir, name)); err != nil {
				return false, fmt.Errorf("remove an interrupted restore: %w", err)
			}
		}
	}
	fsys := vfs.OS{}
	if err := vfs.MkdirAllDurable(fsys, dataDir, 0o755); err != nil {
		return false, fmt.Errorf("create data directory: %w", err)
	}
	if !marked {
		f, err := fsys.OpenFile(filepath.Join(dataDir, RestoreMarker), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
		if err != nil {
			return false, fmt.Errorf("write the restore marker: %w", err)
		}
		_, err = f.Write([]byte("a restore from the cloud into this directory has not finished: run tributary node restore again\n"))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return false, fmt.Errorf("write the restore marker: %w", err)
		}
	}
	// The marker must be durable before anything else is written, and the
	// removals above before the new WAL: a power cut must not leave a
	// half-restored directory without its marker.
	if err := syncDir(fsys, dataDir); err != nil {
		return false, err
	}
	return marked, syncDir(fsys, filepath.Dir(filepath.Clean(dataDir)))
}

func removeMarker(dataDir string) error {
	fsys := vfs.OS{}
	if err := fsys.Remove(filepath.Join(dataDir, RestoreMarker)); err != nil {
		return fmt.Errorf("remove the restore marker: %w", err)
	}
	return syncDir(fsys, dataDir)
}

func syncDir(fsys vfs.FS, dir string) error {
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// openRestore calls Restore on each target in turn until one answers with
// its first message; a refusal (identity, nothing known, a span no
// replica holds) ends the search, since every coordinator answers from
// the same catalog.
func openRestore(ctx context.Context, o *RestoreOptions, log *slog.Logger) (grpc.ServerStreamingClient[pb.RestoreResponse], *grpc.ClientConn, string, *pb.RestoreResponse, error) {
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	// A file (compressed, at worst a little larger), or a rollups message
	// of about 1 MiB plus one series' entry.
	recv := int(max(o.MaxFileBytes+o.MaxFileBytes/64+64<<10, 4<<20))
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(recv))}, o.DialOptions...)
	req := &pb.RestoreRequest{NodeId: o.Node.NodeID, StartMs: o.StartMs, RawStartMs: o.RawStartMs, MaxFileBytes: uint64(o.MaxFileBytes)}
	var errs []string
	for _, target := range o.Targets {
		conn, err := grpc.NewClient(target, dial...)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", target, err))
			continue
		}
		stream, err := pb.NewReplicationServiceClient(conn).Restore(ctx, req)
		if err == nil {
			// The header is the first message: wait for it here, so that a
			// coordinator that cannot answer is passed over.
			var first *pb.RestoreResponse
			if first, err = stream.Recv(); err == nil {
				return stream, conn, target, first, nil
			}
		}
		conn.Close()
		switch status.Code(err) {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Unimplemented, codes.Canceled, codes.Unknown, codes.ResourceExhausted:
			if ctx.Err() != nil {
				return nil, nil, "", nil, ctx.Err()
			}
			log.Warn("coordinator cannot restore; trying the next", "target", target, "err", err)
			errs = append(errs, fmt.Sprintf("%s: %v", target, err))
			continue
		}
		return nil, nil, "", nil, fmt.Errorf("restore refused by %s: %w", target, err)
	}
	return nil, nil, "", nil, fmt.Errorf("restore: no coordinator answered: %s", strings.Join(errs, "; "))
}

// restoreHeader checks the first message of an answer.
func restoreHeader(m *pb.RestoreResponse, o *RestoreOptions) (*pb.RestoreHeader, error) {
	h := m.GetHeader()
	switch {
	case h == nil:
		return nil, fmt.Errorf("protocol violation: the first message is not a header (%T)", m.GetBody())
	case h.GetNextSeq() == 0 || h.GetAckedThrough() >= h.GetNextSeq():
		return nil, fmt.Errorf("protocol violation: next_seq %d with acked_through %d", h.GetNextSeq(), h.GetAckedThrough())
	case h.GetMaxFileBytes() == 0 || h.GetMaxFileBytes() > uint64(o.MaxFileBytes):
		return nil, fmt.Errorf("protocol violation: files of up to %d bytes, %d asked for", h.GetMaxFileBytes(), o.MaxFileBytes)
	case h.GetMinTimeMs() > h.GetMaxTimeMs():
		return nil, fmt.Errorf("protocol violation: time span [%d, %d]", h.GetMinTimeMs(), h.GetMaxTimeMs())
	}
	prev := h.GetAckedThrough()
	for _, r := range h.GetMissing() {
		if r.GetFirstSeq() <= prev || r.GetLastSeq() < r.GetFirstSeq() || r.GetLastSeq() >= h.GetNextSeq() {
			return nil, fmt.Errorf("protocol violation: missing run %d..%d (acked through %d, next %d)", r.GetFirstSeq(), r.GetLastSeq(), h.GetAckedThrough(), h.GetNextSeq())
		}
		prev = r.GetLastSeq()
	}
	return h, nil
}

// receiveRestore imports every file and rollup of the answer into n, and
// checks the counts against its last message.
func receiveRestore(stream grpc.ServerStreamingClient[pb.RestoreResponse], n *node.Node, maxFile uint64, res *RestoreResult, log *slog.Logger) error {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxFile),
		zstd.WithDecoderMaxWindow(min(maxFile, 1<<30)), zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return fmt.Errorf("zstd decoder: %w", err)
	}
	defer dec.Close()
	lastLog := time.Now()
	rollups := false
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("the answer ended without its last message")
		}
		if err != nil {
			return err
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			log.Info("restore progress", "files", res.Files, "raw_points", res.RawPoints, "rollup_series", res.RollupSeries, "bytes", res.Bytes)
		}
		switch b := m.GetBody().(type) {
		case *pb.RestoreResponse_File:
			if rollups {
				return errors.New("protocol violation: a file after rollups")
			}
			if err := importFile(n, dec, b.File, maxFile); err != nil {
				return fmt.Errorf("file %d: %w", res.Files+1, err)
			}
			res.Files++
			res.RawPoints += b.File.GetPoints()
			res.Bytes += int64(len(b.File.GetData()))
		case *pb.RestoreResponse_Rollups:
			rollups = true
			for _, s := range b.Rollups.GetSeries() {
				packs, err := importRollups(n, s)
				if err != nil {
					return fmt.Errorf("rollups entry %d: %w", res.RollupSeries+1, err)
				}
				res.RollupSeries++
				res.RollupPacks += packs
			}
			res.Bytes += int64(proto.Size(b.Rollups))
		case *pb.RestoreResponse_Done:
			d := b.Done
			if d.GetFiles() != res.Files || d.GetRawPoints() != res.RawPoints || d.GetRollupSeries() != res.RollupSeries || d.GetRollupPacks() != res.RollupPacks {
				return fmt.Errorf("the coordinator says it sent %d files (%d points) and %d rollup entries (%d packs); %d (%d), %d (%d) arrived",
					d.GetFiles(), d.GetRawPoints(), d.GetRollupSeries(), d.GetRollupPacks(), res.Files, res.RawPoints, res.RollupSeries, res.RollupPacks)
			}
			return nil
		default:
			return fmt.Errorf("protocol violation: unexpected %T", b)
		}
	}
}

// importFile decompresses (never past maxFile bytes), verifies and
// imports one file.
func importFile(n *node.Node, dec *zstd.Decoder, f *pb.RestoreFile, maxFile uint64) error {
	size := f.GetUncompressedBytes()
	if size == 0 || size > maxFile {
		return fmt.Errorf("protocol violation: a file of %d bytes (limit %d)", size, maxFile)
	}
	var data []byte
	switch f.GetCompression() {
	case pb.SegmentCompression_SEGMENT_COMPRESSION_NONE:
		data = f.GetData()
	case pb.SegmentCompression_SEGMENT_COMPRESSION_ZSTD:
		// With the cap limit, DecodeAll never grows the buffer past size.
		var err error
		if data, err = dec.DecodeAll(f.GetData(), make([]byte, 0, size)); err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
	default:
		return fmt.Errorf("protocol violation: compression %v", f.GetCompression())
	}
	if uint64(len(data)) != size {
		return fmt.Errorf("the file is %d bytes, the coordinator said %d", len(data), size)
	}
	got, err := n.ImportSegment(data)
	if err != nil {
		return err
	}
	if s := got.Segment; s.CRC != f.GetCrc32C() || s.Points != f.GetPoints() {
		return fmt.Errorf("the file has crc32c %08x and %d points, the coordinator said %08x and %d (imported; the restore fails)",
			s.CRC, s.Points, f.GetCrc32C(), f.GetPoints())
	}
	return nil
}

// importRollups decodes and imports one entry of rollups; it returns its
// packs.
func importRollups(n *node.Node, s *pb.RestoreRollupSeries) (int64, error) {
	pairs := make([]labels.Label, len(s.GetLabels()))
	for i, l := range s.GetLabels() {
		pairs[i] = labels.Label{Name: l.GetName(), Value: l.GetValue()}
	}
	r := node.SeriesRollups{Labels: labels.Labels(pairs)}
	for _, p := range s.GetHourly() {
		h, err := rollup.DecodeHourly(p.GetData(), p.GetStartMs())
		if err != nil {
			return 0, fmt.Errorf("hourly rollups of %s at %d: %w", r.Labels, p.GetStartMs(), err)
		}
		r.Hourly = append(r.Hourly, node.HourlyRollups{Day: p.GetStartMs(), Hours: h})
	}
	for _, p := range s.GetDaily() {
		d, err := rollup.DecodeDaily(p.GetData(), p.GetStartMs())
		if err != nil {
			return 0, fmt.Errorf("daily rollups of %s at %d: %w", r.Labels, p.GetStartMs(), err)
		}
		r.Daily = append(r.Daily, node.DailyRollups{Pack: p.GetStartMs(), Days: d})
	}
	if err := n.ImportRollups(r); err != nil {
		return 0, err
	}
	return int64(len(r.Hourly) + len(r.Daily)), nil
}
