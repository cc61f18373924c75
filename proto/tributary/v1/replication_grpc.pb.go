// Tributary replication API, version 1: how an edge node ships its sealed
// WAL segments to the cloud coordinators.
//
// The edge dials out (it is usually behind NAT) and keeps one long-lived
// bidirectional stream open on one coordinator at a time. docs/replication.md
// is the long-form specification; the comments here are normative.
//
// # Words
//
// A segment is one sealed WAL segment file of an edge node, byte for byte
// as node/wal wrote it (header, records, footer; see node/wal/doc.go). It is
// immutable and identified by (node id, seq, crc32c), where crc32c is the
// CRC32C its footer stores over every byte of the file before that field.
//
// Sequence numbers order segments; wall clocks never do. They start at 1,
// only grow, and may skip numbers (a WAL segment that never held a record
// is removed instead of sealed). A segment's header names prev_seq, the
// segment sealed just before it (0 for the first), so a segment COVERS the
// sequence numbers prev_seq+1 .. seq: the skipped numbers below it belong to
// it, and the covered intervals of one node's segments never overlap and
// leave no hole. A gap declaration (ShipGap) covers after_seq+1 ..
// through_seq the same way.
//
// acked_through is the highest S such that every number in 1..S is covered
// by a segment the cloud holds durably or by a gap the cloud has recorded.
// It never goes back.
//
// # The stream
//
//	edge                                   coordinator
//	 |-- ShipRequest{hello} ----------------->|  verify identity, load progress
//	 |<---------------- ShipResponse{welcome} -|  acked_through + held runs above it
//	 |-- ShipRequest{gap} (0..n) ------------->|  record, then ack (gap_through)
//	 |-- ShipRequest{segment} part 1..k ------>|  reassemble, verify, store
//	 |<---------------- ShipResponse{ack} -----|  when durable on the replicas
//	 |<---------------- ShipResponse{error} ---|  per segment, or per gap
//	 |   ... any number of segments and gaps, a window of them unacked ...
//
// 1. The first request is a hello; anything else first is a protocol error
//    (status FAILED_PRECONDITION). The coordinator checks that node_id is
//    the identity of the caller's certificate (PERMISSION_DENIED otherwise)
//    and that it speaks protocol_version (FAILED_PRECONDITION otherwise).
// 2. The coordinator answers with exactly one welcome before any ack or
//    error. Its held runs list what it already holds above acked_through,
//    so that an edge resuming on another coordinator skips them.
// 3. The edge then sends gap declarations and segments, each segment as one
//    or more consecutive parts (parts of different segments never
//    interleave). It keeps a window of segments sent but not acknowledged;
//    it may send segments in any sequence order (fresh data first after an
//    outage), but never a segment the welcome or an ack says is held.
// 4. The coordinator acknowledges each segment only once it is durable on
//    the edge's replica coordinators and recorded in the catalog, and each
//    gap once it is recorded. Every ack carries the current acked_through.
//    Acks may come in any order.
// 4a. The coordinator may send a config (the fleet configuration) at any
//    time after the welcome, when its version is higher than the one the
//    welcome or an earlier config carried. The edge applies a version
//    only once.
// 5. Either side may end the stream at any time. Nothing unacknowledged is
//    assumed durable: the edge keeps every segment until it is covered by
//    acked_through (or by a gap), and resends the rest on the next stream,
//    on any coordinator.
//
// # Idempotency: what the coordinator must do with a segment
//
//   - Reassemble its parts: every part repeats the same metadata; offsets
//     are contiguous from 0; the parts' data adds up to compressed_bytes.
//   - Bound memory before trusting anything: compressed_bytes and
//     uncompressed_bytes within its limits (it announces max_segment_bytes
//     in the welcome); decompress with an output limit of
//     uncompressed_bytes, and require exactly that many bytes.
//   - Verify the file by itself (node/wal format): header CRC, every record
//     CRC, footer counts and whole-file CRC; node id in the header equal to
//     the hello's node_id; seq and prev_seq equal to the message's; footer
//     CRC equal to crc32c; records, points, min_time_ms and max_time_ms
//     equal to the message's.
//   - (node_id, seq) already held with the same crc32c: a resend after a
//     lost ack. Store nothing, acknowledge again. Replaying the same
//     segment twice changes nothing.
//   - (node_id, seq) already held with a different crc32c: a conflict (the
//     edge's WAL was reset, or two nodes share an id). Keep what is held,
//     answer SHIP_ERROR_CODE_CONFLICT, not retryable.
//
// Keepalive: the edge sends gRPC keepalive pings (default every 30s, also
// without active calls); the coordinator's keepalive enforcement policy must
// allow them (MinTime at most the edge's interval, PermitWithoutStream), or
// it will close the connection with ENHANCE_YOUR_CALM.

// Code generated by protoc-gen-go-grpc. DO NOT EDIT.
// versions:
// - protoc-gen-go-grpc v1.5.1
// - protoc             v3.21.12
// source: tributary/v1/replication.proto

package tributaryv1

import (
	context "context"
	grpc "google.golang.org/grpc"
	codes "google.golang.org/grpc/codes"
	status "google.golang.org/grpc/status"
)

// This is a compile-time assertion to ensure that this generated file
// is compatible with the grpc package it is being compiled against.
// Requires gRPC-Go v1.64.0 or later.
const _ = grpc.SupportPackageIsVersion9

const (
	ReplicationService_Ship_FullMethodName    = "/tributary.v1.ReplicationService/Ship"
	ReplicationService_Tunnel_FullMethodName  = "/tributary.v1.ReplicationService/Tunnel"
	ReplicationService_Restore_FullMethodName = "/tributary.v1.ReplicationService/Restore"
)

// ReplicationServiceClient is the client API for ReplicationService service.
//
// For semantics around ctx use and closing/ending streaming RPCs, please refer to https://pkg.go.dev/google.golang.org/grpc/?tab=doc#ClientConn.NewStream.
//
// ReplicationService is served by the coordinators; edge nodes call it.
type ReplicationServiceClient interface {
	// Ship is the one long-lived stream an edge keeps open to ship its
	// sealed WAL segments. See the file comment for the protocol.
	Ship(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[ShipRequest, ShipResponse], error)
	// Tunnel lets the coordinators query an edge they cannot dial (it is
	// behind NAT). The edge opens it to every coordinator it replicates to
	// and sends a hello (its node_id must be the identity of its client
	// certificate, PERMISSION_DENIED otherwise). After the hello both
	// directions carry the bytes of one connection, in order, in messages of
	// at most 64 KiB: the coordinator is its gRPC client, the edge serves its
	// tributary.v1.QueryService on it. Either side may end the stream; the
	// edge opens a new one after a backoff. A newer tunnel of the same edge
	// replaces an older one on that coordinator.
	Tunnel(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[TunnelRequest, TunnelResponse], error)
	// Restore streams an edge's history back to it, for an edge whose disk
	// was replaced and that starts again empty under its known node id
	// (tributary node restore). node_id must be the identity of the caller's
	// client certificate (PERMISSION_DENIED otherwise, as for a ShipHello;
	// without TLS the request is trusted). A revoked edge, or a node that
	// is not an edge, is refused (PERMISSION_DENIED).
	//
	// The answer is one RestoreHeader (what the cloud knows of the edge and
	// what it will send), then the raw points of
	// [header.raw_start_ms, header.max_time_ms] as RestoreFile messages in
	// time order, then the rollups of the whole UTC days before
	// header.raw_start_ms (back to the day of header.min_time_ms) as
	// RestoreRollups messages, and last one RestoreDone with the counts. The
	// receiver verifies every file (the node/wal segment format) before it
	// uses it, and counts what arrived against RestoreDone.
	//
	// The coordinator reads each part of the span from a live replica of
	// the edge whose holding covers it (the catalog's per-replica lack
	// runs), possibly several replicas for different parts; when no live
	// replica holds some part, the call fails before the header with
	// FAILED_PRECONDITION naming the span, rather than sending less. A
	// replica failing while it sends is replaced by the next one that holds
	// the part, which sends the part again (receivers import idempotently);
	// when none is left the stream ends with UNAVAILABLE.
	//
	// What was never in the cloud is not restored and is said in the
	// header: segments the edge declared as gaps (gap_segments,
	// gap_points) and numbers below next_seq the cloud neither holds nor
	// recorded as a gap (missing: segments that had not reached the cloud
	// when the edge lost its disk).
	Restore(ctx context.Context, in *RestoreRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[RestoreResponse], error)
}

type replicationServiceClient struct {
	cc grpc.ClientConnInterface
}

func NewReplicationServiceClient(cc grpc.ClientConnInterface) ReplicationServiceClient {
	return &replicationServiceClient{cc}
}

func (c *replicationServiceClient) Ship(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[ShipRequest, ShipResponse], error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	stream, err := c.cc.NewStream(ctx, &ReplicationService_ServiceDesc.Streams[0], ReplicationService_Ship_FullMethodName, cOpts...)
	if err != nil {
		return nil, err
	}
	x := &grpc.GenericClientStream[ShipRequest, ShipResponse]{ClientStream: stream}
	return x, nil
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type ReplicationService_ShipClient = grpc.BidiStreamingClient[ShipRequest, ShipResponse]

func (c *replicationServiceClient) Tunnel(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[TunnelRequest, TunnelResponse], error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	stream, err := c.cc.NewStream(ctx, &ReplicationService_ServiceDesc.Streams[1], ReplicationService_Tunnel_FullMethodName, cOpts...)
	if err != nil {
		return nil, err
	}
	x := &grpc.GenericClientStream[TunnelRequest, TunnelResponse]{ClientStream: stream}
	return x, nil
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type ReplicationService_TunnelClient = grpc.BidiStreamingClient[TunnelRequest, TunnelResponse]

func (c *replicationServiceClient) Restore(ctx context.Context, in *RestoreRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[RestoreResponse], error) {
	cOpts := append([]grpc.CallOption{grpc.StaticMethod()}, opts...)
	stream, err := c.cc.NewStream(ctx, &ReplicationService_ServiceDesc.Streams[2], ReplicationService_Restore_FullMethodName, cOpts...)
	if err != nil {
		return nil, err
	}
	x := &grpc.GenericClientStream[RestoreRequest, RestoreResponse]{ClientStream: stream}
	if err := x.ClientStream.SendMsg(in); err != nil {
		return nil, err
	}
	if err := x.ClientStream.CloseSend(); err != nil {
		return nil, err
	}
	return x, nil
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type ReplicationService_RestoreClient = grpc.ServerStreamingClient[RestoreResponse]

// ReplicationServiceServer is the server API for ReplicationService service.
// All implementations must embed UnimplementedReplicationServiceServer
// for forward compatibility.
//
// ReplicationService is served by the coordinators; edge nodes call it.
type ReplicationServiceServer interface {
	// Ship is the one long-lived stream an edge keeps open to ship its
	// sealed WAL segments. See the file comment for the protocol.
	Ship(grpc.BidiStreamingServer[ShipRequest, ShipResponse]) error
	// Tunnel lets the coordinators query an edge they cannot dial (it is
	// behind NAT). The edge opens it to every coordinator it replicates to
	// and sends a hello (its node_id must be the identity of its client
	// certificate, PERMISSION_DENIED otherwise). After the hello both
	// directions carry the bytes of one connection, in order, in messages of
	// at most 64 KiB: the coordinator is its gRPC client, the edge serves its
	// tributary.v1.QueryService on it. Either side may end the stream; the
	// edge opens a new one after a backoff. A newer tunnel of the same edge
	// replaces an older one on that coordinator.
	Tunnel(grpc.BidiStreamingServer[TunnelRequest, TunnelResponse]) error
	// Restore streams an edge's history back to it, for an edge whose disk
	// was replaced and that starts again empty under its known node id
	// (tributary node restore). node_id must be the identity of the caller's
	// client certificate (PERMISSION_DENIED otherwise, as for a ShipHello;
	// without TLS the request is trusted). A revoked edge, or a node that
	// is not an edge, is refused (PERMISSION_DENIED).
	//
	// The answer is one RestoreHeader (what the cloud knows of the edge and
	// what it will send), then the raw points of
	// [header.raw_start_ms, header.max_time_ms] as RestoreFile messages in
	// time order, then the rollups of the whole UTC days before
	// header.raw_start_ms (back to the day of header.min_time_ms) as
	// RestoreRollups messages, and last one RestoreDone with the counts. The
	// receiver verifies every file (the node/wal segment format) before it
	// uses it, and counts what arrived against RestoreDone.
	//
	// The coordinator reads each part of the span from a live replica of
	// the edge whose holding covers it (the catalog's per-replica lack
	// runs), possibly several replicas for different parts; when no live
	// replica holds some part, the call fails before the header with
	// FAILED_PRECONDITION naming the span, rather than sending less. A
	// replica failing while it sends is replaced by the next one that holds
	// the part, which sends the part again (receivers import idempotently);
	// when none is left the stream ends with UNAVAILABLE.
	//
	// What was never in the cloud is not restored and is said in the
	// header: segments the edge declared as gaps (gap_segments,
	// gap_points) and numbers below next_seq the cloud neither holds nor
	// recorded as a gap (missing: segments that had not reached the cloud
	// when the edge lost its disk).
	Restore(*RestoreRequest, grpc.ServerStreamingServer[RestoreResponse]) error
	mustEmbedUnimplementedReplicationServiceServer()
}

// UnimplementedReplicationServiceServer must be embedded to have
// forward compatible implementations.
//
// NOTE: this should be embedded by value instead of pointer to avoid a nil
// pointer dereference when methods are called.
type UnimplementedReplicationServiceServer struct{}

func (UnimplementedReplicationServiceServer) Ship(grpc.BidiStreamingServer[ShipRequest, ShipResponse]) error {
	return status.Errorf(codes.Unimplemented, "method Ship not implemented")
}
func (UnimplementedReplicationServiceServer) Tunnel(grpc.BidiStreamingServer[TunnelRequest, TunnelResponse]) error {
	return status.Errorf(codes.Unimplemented, "method Tunnel not implemented")
}
func (UnimplementedReplicationServiceServer) Restore(*RestoreRequest, grpc.ServerStreamingServer[RestoreResponse]) error {
	return status.Errorf(codes.Unimplemented, "method Restore not implemented")
}
func (UnimplementedReplicationServiceServer) mustEmbedUnimplementedReplicationServiceServer() {}
func (UnimplementedReplicationServiceServer) testEmbeddedByValue()                            {}

// UnsafeReplicationServiceServer may be embedded to opt out of forward compatibility for this service.
// Use of this interface is not recommended, as added methods to ReplicationServiceServer will
// result in compilation errors.
type UnsafeReplicationServiceServer interface {
	mustEmbedUnimplementedReplicationServiceServer()
}

func RegisterReplicationServiceServer(s grpc.ServiceRegistrar, srv ReplicationServiceServer) {
	// If the following call pancis, it indicates UnimplementedReplicationServiceServer was
	// embedded by pointer and is nil.  This will cause panics if an
	// unimplemented method is ever invoked, so we test this at initialization
	// time to prevent it from happening at runtime later due to I/O.
	if t, ok := srv.(interface{ testEmbeddedByValue() }); ok {
		t.testEmbeddedByValue()
	}
	s.RegisterService(&ReplicationService_ServiceDesc, srv)
}

func _ReplicationService_Ship_Handler(srv interface{}, stream grpc.ServerStream) error {
	return srv.(ReplicationServiceServer).Ship(&grpc.GenericServerStream[ShipRequest, ShipResponse]{ServerStream: stream})
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type ReplicationService_ShipServer = grpc.BidiStreamingServer[ShipRequest, ShipResponse]

func _ReplicationService_Tunnel_Handler(srv interface{}, stream grpc.ServerStream) error {
	return srv.(ReplicationServiceServer).Tunnel(&grpc.GenericServerStream[TunnelRequest, TunnelResponse]{ServerStream: stream})
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type ReplicationService_TunnelServer = grpc.BidiStreamingServer[TunnelRequest, TunnelResponse]

func _ReplicationService_Restore_Handler(srv interface{}, stream grpc.ServerStream) error {
	m := new(RestoreRequest)
	if err := stream.RecvMsg(m); err != nil {
		return err
	}
	return srv.(ReplicationServiceServer).Restore(m, &grpc.GenericServerStream[RestoreRequest, RestoreResponse]{ServerStream: stream})
}

// This type alias is provided for backwards compatibility with existing code that references the prior non-generic stream type by name.
type ReplicationService_RestoreServer = grpc.ServerStreamingServer[RestoreResponse]

// ReplicationService_ServiceDesc is the grpc.ServiceDesc for ReplicationService service.
// It's only intended for direct use with grpc.RegisterService,
// and not to be introspected or modified (even as a copy)
var ReplicationService_ServiceDesc = grpc.ServiceDesc{
	ServiceName: "tributary.v1.ReplicationService",
	HandlerType: (*ReplicationServiceServer)(nil),
	Methods:     []grpc.MethodDesc{},
	Streams: []grpc.StreamDesc{
		{
			StreamName:    "Ship",
			Handler:       _ReplicationService_Ship_Handler,
			ServerStreams: true,
			ClientStreams: true,
		},
		{
			StreamName:    "Tunnel",
			Handler:       _ReplicationService_Tunnel_Handler,
			ServerStreams: true,
			ClientStreams: true,
		},
		{
			StreamName:    "Restore",
			Handler:       _ReplicationService_Restore_Handler,
			ServerStreams: true,
		},
	},
	Metadata: "tributary/v1/replication.proto",
}
