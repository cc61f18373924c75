package replica

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// Client calls a peer coordinator's ReplicaService. Safe for concurrent use.
type Client struct {
	rpc  clusterv1.ReplicaServiceClient
	enc  *zstd.Encoder
	dec  *zstd.Decoder // of exported files
	opts ClientOptions
}

// ClientOptions configure a Client.
type ClientOptions struct {
	// Uncompressed sends stored segments and asks for exported files as
	// they are, for a peer on the same host (a loopback address): there
	// compressing costs CPU on both sides and saves no network.
	Uncompressed bool
}

// NewClient wraps a connection to a peer (the caller owns and closes cc),
// with the default options.
func NewClient(cc grpc.ClientConnInterface) *Client { return NewClientWith(cc, ClientOptions{}) }

// NewClientWith wraps a connection to a peer (the caller owns and closes
// cc).
func NewClientWith(cc grpc.ClientConnInterface, o ClientOptions) *Client {
	// The decoder's options are constants, so NewReader cannot fail.
	dec, err := newDecoder(DefaultMaxSegmentBytes)
	if err != nil {
		panic("BUG: replica client: zstd decoder: " + err.Error())
	}
	return &Client{rpc: clusterv1.NewReplicaServiceClient(cc), enc: newEncoder(), dec: dec, opts: o}
}

// Store stores one segment on the peer. ErrConflict, ErrInvalidSegment and
// model.ErrOverloaded survive the round trip (errors.Is), and the error
// keeps its gRPC status (status.Code): InvalidArgument (bad request, do
// not retry), AlreadyExists (conflict), ResourceExhausted (retry later),
// Unavailable and others (retryable).
func (c *Client) Store(ctx context.Context, edge string, seq uint64, crc uint32, file []byte) (Applied, error) {
	req := &clusterv1.StoreRequest{Edge: edge, Seq: seq, Crc32C: crc, UncompressedBytes: uint64(len(file)),
		Compression: clusterv1.Compression_COMPRESSION_NONE, Data: file}
	if !c.opts.Uncompressed {
		if z := zstdFrame(c.enc, file); len(z) < len(file) {
			req.Compression, req.Data = clusterv1.Compression_COMPRESSION_ZSTD, z
		}
	}
	limit := MaxStoreMessageBytes(max(int64(len(file)), DefaultMaxSegmentBytes))
	resp, err := c.rpc.Store(ctx, req, grpc.MaxCallSendMsgSize(limit))
	if err != nil {
		return Applied{}, fmt.Errorf("store segment %d of %q on peer: %w", seq, edge, fromStatus(err, ErrInvalidSegment))
	}
	return appliedFromProto(resp), nil
}

// Query has the contract of Store.Query; errors.Is(err, model.ErrBadQuery)
// survives the round trip.
func (c *Client) Query(ctx context.Context, edges []string, q model.Query, emit func(edge string, s model.Series) error) (model.QueryInfo, error) {
	var info model.QueryInfo
	req, err := queryToProto(edges, q)
	if err != nil {
		return info, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when emit fails
	stream, err := c.rpc.Query(ctx, req)
	if err != nil {
		return info, fmt.Errorf("query peer: %w", fromStatus(err, model.ErrBadQuery))
	}
	var cur *model.Series
	var curEdge string
	flush := func() error {
		if cur == nil {
			return nil
		}
		s := *cur
		cur = nil
		return emit(curEdge, s)
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return info, errors.New("query peer: the answer ended without its final message")
		}
		if err != nil {
			return info, fmt.Errorf("query peer: %w", fromStatus(err, model.ErrBadQuery))
		}
		for _, p := range msg.GetSeries() {
			if len(p.GetTimestampsMs()) != len(p.GetValues()) {
				return info, fmt.Errorf("query peer: series part with %d timestamps and %d values", len(p.GetTimestampsMs()), len(p.GetValues()))
			}
			if p.GetContinued() {
				if cur == nil || p.GetEdge() != curEdge {
					return info, errors.New("query peer: a series part continues nothing")
				}
				cur.Ts = append(cur.Ts, p.GetTimestampsMs()...)
				cur.Vs = append(cur.Vs, p.GetValues()...)
				continue
			}
			if err := flush(); err != nil {
				return info, err
			}
			cur = &model.Series{Labels: labels.Labels(labelsFromProto(p.GetLabels())), Ts: p.GetTimestampsMs(), Vs: p.GetValues()}
			curEdge = p.GetEdge()
		}
		if msg.GetDone() {
			if err := flush(); err != nil {
				return info, err
			}
			pi := msg.GetInfo()
			info = model.QueryInfo{Source: pi.GetSource(), Series: int(pi.GetSeries()), Points: pi.GetPoints(), Warnings: pi.GetWarnings()}
			return info, nil
		}
	}
}

// Export has the contract of Store.Export, over the peer's store: it calls
// fn with each file the peer sends, decompressed (never past
// maxFileBytes) but not verified (ApplyCopy verifies). It asks for S2
// compression (none with ClientOptions.Uncompressed): between
// coordinators, zstd's CPU cost would bound a copy's rate more than the
// third more bytes S2 sends. A response that
// breaks the protocol (a file over the limit, a bad frame, counts that do
// not add up, an answer without its final message) is an error wrapping
// ErrInvalidSegment; errors.Is(err, model.ErrBadQuery) survives the round
// trip for bad arguments.
func (c *Client) Export(ctx context.Context, edge string, minT, maxT int64, firstSeq, lastSeq uint64, maxFileBytes int64, fn func(ExportedFile) error) error {
	if err := checkExport(edge, minT, maxT, firstSeq, lastSeq, maxFileBytes); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when fn fails
	req := &clusterv1.ExportRequest{Edge: edge, FirstSeq: firstSeq, LastSeq: lastSeq, MinTimeMs: minT, MaxTimeMs: maxT,
		MaxFileBytes: uint64(maxFileBytes), Compression: clusterv1.Compression_COMPRESSION_S2}
	if c.opts.Uncompressed {
		req.Compression = clusterv1.Compression_COMPRESSION_NONE
	}
	stream, err := c.rpc.Export(ctx, req, grpc.MaxCallRecvMsgSize(MaxStoreMessageBytes(maxFileBytes)))
	if err != nil {
		return fmt.Errorf("export %d..%d of %q from peer: %w", firstSeq, lastSeq, edge, fromStatus(err, model.ErrBadQuery))
	}
	var files int64
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("export %d..%d of %q from peer: %w: the answer ended without its final message", firstSeq, lastSeq, edge, ErrInvalidSegment)
		}
		if err != nil {
			return fmt.Errorf("export %d..%d of %q from peer: %w", firstSeq, lastSeq, edge, fromStatus(err, model.ErrBadQuery))
		}
		if msg.GetDone() {
			if msg.GetFiles() != files {
				return fmt.Errorf("export %d..%d of %q from peer: %w: the peer says it sent %d files, %d arrived",
					firstSeq, lastSeq, edge, ErrInvalidSegment, msg.GetFiles(), files)
			}
			return nil
		}
		f, err := exportFileFromProto(c.dec, msg, edge, firstSeq, lastSeq, maxFileBytes)
		if err != nil {
			return fmt.Errorf("export %d..%d of %q from peer: file %d: %w", firstSeq, lastSeq, edge, files+1, err)
		}
		files++
		if err := fn(f); err != nil {
			return err
		}
	}
}

// Holdings returns the runs of edge's sequence numbers the peer holds
// (see Store.Holdings); truncated reports that the peer holds more runs
// than one answer carries (maxHoldingsRanges), the lowest of which are
// returned.
func (c *Client) Holdings(ctx context.Context, edge string) (runs []SeqRange, truncated bool, err error) {
	resp, err := c.rpc.Holdings(ctx, &clusterv1.HoldingsRequest{Edge: edge})
	if err != nil {
		return nil, false, fmt.Errorf("holdings of %q on peer: %w", edge, fromStatus(err, ErrInvalidSegment))
	}
	runs, err = holdingsFromProto(resp)
	if err != nil {
		return nil, false, fmt.Errorf("holdings of %q on peer: %w", edge, err)
	}
	return runs, resp.GetTruncated(), nil
}
