package replica

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/model"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// ServerOptions configure the ReplicaService server.
type ServerOptions struct {
	Store     *Store
	Authorize func(ctx context.Context) error // nil: allow (tests, local mode); production checks the caller is a coordinator member
	// Serving, when set, is asked before a Query, Export or Holdings call
	// is answered: an error refuses it as UNAVAILABLE (the caller asks
	// another replica). The coordinator refuses reads until the catalog
	// binds this store's identity, so that a replaced store never answers
	// for what its predecessor held.
	Serving func() error
	// MaxSegmentBytes bounds a stored segment, uncompressed (default 64 MiB).
	// The grpc.Server must accept messages of MaxStoreMessageBytes of it:
	// see GRPCServerOptions.
	MaxSegmentBytes int64
}

// Validate fills defaults and rejects impossible values.
func (o *ServerOptions) Validate() error {
	if o.Store == nil {
		return errors.New("replica server options: Store is required")
	}
	o.MaxSegmentBytes = cmp.Or(o.MaxSegmentBytes, DefaultMaxSegmentBytes)
	if o.MaxSegmentBytes < 4096 || o.MaxSegmentBytes > 1<<30 {
		return fmt.Errorf("replica server options: MaxSegmentBytes %d out of range [4 KiB, 1 GiB]", o.MaxSegmentBytes)
	}
	return nil
}

// GRPCServerOptions are the grpc.Server options a server of segments up to
// maxSegmentBytes needs (gRPC refuses messages over 4 MiB by default).
func GRPCServerOptions(maxSegmentBytes int64) []grpc.ServerOption {
	if maxSegmentBytes <= 0 {
		maxSegmentBytes = DefaultMaxSegmentBytes
	}
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxStoreMessageBytes(maxSegmentBytes))}
}

// Server serves tributary.cluster.v1.ReplicaService over a Store. Safe for
// concurrent use; every call runs on its gRPC goroutine.
type Server struct {
	clusterv1.UnimplementedReplicaServiceServer
	opts ServerOptions
	dec  *zstd.Decoder
	enc  *zstd.Encoder // of exported files
}

// NewServer checks the options and builds a server.
func NewServer(o ServerOptions) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	dec, err := newDecoder(o.MaxSegmentBytes)
	if err != nil {
		return nil, fmt.Errorf("replica server: zstd decoder: %w", err)
	}
	return &Server{opts: o, dec: dec, enc: newEncoder()}, nil
}

// Register registers the service on g. g must have been made with
// GRPCServerOptions (or larger limits).
func (s *Server) Register(g *grpc.Server) { clusterv1.RegisterReplicaServiceServer(g, s) }

func (s *Server) authorize(ctx context.Context) error {
	if s.opts.Authorize == nil {
		return nil
	}
	err := s.opts.Authorize(ctx)
	if err == nil {
		return nil
	}
	if !isPlain(err) {
		return err
	}
	return status.Error(codes.PermissionDenied, err.Error())
}

// Store applies one segment.
func (s *Server) Store(ctx context.Context, req *clusterv1.StoreRequest) (*clusterv1.StoreResponse, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	file, err := s.decompress(req)
	if err != nil {
		return nil, toStatus(fmt.Errorf("store segment %d of %q: %w", req.GetSeq(), req.GetEdge(), err))
	}
	a, err := s.opts.Store.Apply(ctx, req.GetEdge(), req.GetSeq(), req.GetCrc32C(), file)
	if err != nil {
		return nil, toStatus(err)
	}
	return appliedToProto(a), nil
}

// decompress returns the segment file of req, bounded by MaxSegmentBytes.
// Store requests come zstd-compressed or not at all.
func (s *Server) decompress(req *clusterv1.StoreRequest) ([]byte, error) {
	if req.GetCompression() == clusterv1.Compression_COMPRESSION_S2 {
		return nil, fmt.Errorf("%w: S2 compression in a store request", ErrInvalidSegment)
	}
	return decompressFile(s.dec, req.GetCompression(), req.GetData(), req.GetUncompressedBytes(), s.opts.MaxSegmentBytes)
}

// decompressFile returns the file that data holds (compressed as c),
// which the sender says is n bytes; n must be in [1, limit], and the
// output never grows past n. Errors wrap ErrInvalidSegment.
// REQUIRES: dec was made with WithDecodeAllCapLimit.
func decompressFile(dec *zstd.Decoder, c clusterv1.Compression, data []byte, n uint64, limit int64) ([]byte, error) {
	if n == 0 || n > uint64(limit) {
		return nil, fmt.Errorf("%w: uncompressed size %d out of range [1, %d]", ErrInvalidSegment, n, limit)
	}
	switch c {
	case clusterv1.Compression_COMPRESSION_NONE:
		if uint64(len(data)) != n {
			return nil, fmt.Errorf("%w: %d bytes of uncompressed data, the sender says %d", ErrInvalidSegment, len(data), n)
		}
		return data, nil
	case clusterv1.Compression_COMPRESSION_ZSTD:
		// With the cap limit, DecodeAll never grows dst past its capacity:
		// a frame that would make more than n bytes stops there.
		out, err := dec.DecodeAll(data, make([]byte, 0, n))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %w", ErrInvalidSegment, err)
		}
		if uint64(len(out)) != n {
			return nil, fmt.Errorf("%w: decompressed to %d bytes, the sender says %d", ErrInvalidSegment, len(out), n)
		}
		return out, nil
	case clusterv1.Compression_COMPRESSION_S2:
		// The block header states the length; check it before allocating,
		// and Decode writes into dst only (it is large enough).
		if m, err := s2.DecodedLen(data); err != nil || uint64(m) != n {
			return nil, fmt.Errorf("%w: S2 block of %d bytes (%v), the sender says %d", ErrInvalidSegment, m, err, n)
		}
		out, err := s2.Decode(make([]byte, n), data)
		if err != nil {
			return nil, fmt.Errorf("%w: s2: %w", ErrInvalidSegment, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown compression %d", ErrInvalidSegment, c)
}

// newDecoder returns a zstd decoder for files of up to limit bytes; its
// DecodeAll is safe for concurrent use, and the limits bound what one
// frame may make it allocate.
func newDecoder(limit int64) (*zstd.Decoder, error) {
	return zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(uint64(limit)),
		zstd.WithDecoderMaxWindow(uint64(min(limit, 1<<30))),
		zstd.WithDecodeAllCapLimit(true))
}

// newEncoder returns the zstd encoder of files sent to a peer: EncodeAll
// is safe for concurrent use. SpeedFastest: files between coordinators
// cross a data-centre network, where CPU costs more than bytes. The
// options are constants, so it cannot fail.
func newEncoder() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(8<<20))
	if err != nil {
		panic("BUG: replica: zstd encoder: " + err.Error())
	}
	return enc
}

// Export streams the files of an export, then the final message. One
// goroutine builds the files, another compresses and sends them, at most
// one file apart.
func (s *Server) Export(req *clusterv1.ExportRequest, stream clusterv1.ReplicaService_ExportServer) error {
	ctx := stream.Context()
	if err := s.authorize(ctx); err != nil {
		return err
	}
	if err := s.serving(); err != nil {
		return err
	}
	maxFile := min(int64(DefaultExportFileBytes), s.opts.MaxSegmentBytes)
	if m := req.GetMaxFileBytes(); m != 0 {
		if m > uint64(s.opts.MaxSegmentBytes) {
			return toStatus(fmt.Errorf("%w: export of %q: max_file_bytes %d is over this server's segment limit %d", model.ErrBadQuery, req.GetEdge(), m, s.opts.MaxSegmentBytes))
		}
		maxFile = int64(m)
	}
	comp := req.GetCompression()
	switch comp {
	case clusterv1.Compression_COMPRESSION_UNSPECIFIED:
		comp = clusterv1.Compression_COMPRESSION_ZSTD
	case clusterv1.Compression_COMPRESSION_NONE, clusterv1.Compression_COMPRESSION_ZSTD, clusterv1.Compression_COMPRESSION_S2:
	default:
		return toStatus(fmt.Errorf("%w: export of %q: unknown compression %d", model.ErrBadQuery, req.GetEdge(), comp))
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	files := make(chan ExportedFile, 1)
	sent := make(chan error, 1)
	go func() {
		var err error
		for f := range files {
			if err != nil {
				continue // draining: the export is being stopped
			}
			if err = stream.Send(exportFileToProto(s.enc, comp, f)); err != nil {
				cancel()
			}
		}
		sent <- err
	}()
	var n int64
	err := s.opts.Store.Export(ctx, req.GetEdge(), req.GetMinTimeMs(), req.GetMaxTimeMs(), req.GetFirstSeq(), req.GetLastSeq(), maxFile,
		func(f ExportedFile) error {
			select {
			case files <- f:
				n++
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	close(files)
	if serr := <-sent; serr != nil {
		return toStatus(serr)
	}
	if err != nil {
		return toStatus(err)
	}
	return stream.Send(&clusterv1.ExportResponse{Done: true, Files: n})
}

// Holdings answers the runs of an edge's sequence numbers held here.
func (s *Server) Holdings(ctx context.Context, req *clusterv1.HoldingsRequest) (*clusterv1.HoldingsResponse, error) {
	if err := s.authorize(ctx); err != nil {
		return nil, err
	}
	if err := s.serving(); err != nil {
		return nil, err
	}
	runs, err := s.opts.Store.Holdings(req.GetEdge())
	if err != nil {
		return nil, toStatus(err)
	}
	return holdingsToProto(runs), nil
}

// serving refuses reads while ServerOptions.Serving says so.
func (s *Server) serving() error {
	if s.opts.Serving == nil {
		return nil
	}
	if err := s.opts.Serving(); err != nil {
		return status.Errorf(codes.Unavailable, "replica store does not serve reads: %v", err)
	}
	return nil
}

// Query streams the answer to a query.
func (s *Server) Query(req *clusterv1.QueryRequest, stream clusterv1.ReplicaService_QueryServer) error {
	ctx := stream.Context()
	if err := s.authorize(ctx); err != nil {
		return err
	}
	if err := s.serving(); err != nil {
		return err
	}
	q, err := queryFromProto(req)
	if err != nil {
		return toStatus(err)
	}
	msg := &clusterv1.QueryResponse{}
	size := 0
	send := func() error {
		if err := stream.Send(msg); err != nil {
			return err
		}
		msg, size = &clusterv1.QueryResponse{}, 0
		return nil
	}
	info, err := s.opts.Store.Query(ctx, req.GetEdges(), q, func(edge string, x model.Series) error {
		for lo := 0; lo == 0 || lo < len(x.Ts); lo += maxQueryPartPoints {
			hi := min(lo+maxQueryPartPoints, len(x.Ts))
			part := &clusterv1.QuerySeries{Edge: edge, TimestampsMs: x.Ts[lo:hi]}
			part.Values = x.Vs[lo:hi]
			if lo == 0 {
				part.Labels = labelsToProto(x.Labels)
			} else {
				part.Continued = true
			}
			msg.Series = append(msg.Series, part)
			size += 18*(hi-lo) + 64*len(part.Labels) + len(edge)
			if size >= maxQueryMessageBytes {
				if err := send(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return toStatus(err)
	}
	msg.Done = true
	msg.Info = &clusterv1.QueryInfo{Source: info.Source, Series: int64(info.Series), Points: info.Points, Warnings: info.Warnings}
	return send()
}

// zstdFrame compresses file (the client's side).
func zstdFrame(enc *zstd.Encoder, file []byte) []byte {
	return enc.EncodeAll(file, make([]byte, 0, len(file)/2+64))
}
