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

// Code generated by protoc-gen-go. DO NOT EDIT.
// versions:
// 	protoc-gen-go v1.36.12
// 	protoc        v3.21.12
// source: tributary/v1/replication.proto

package tributaryv1

import (
	protoreflect "google.golang.org/protobuf/reflect/protoreflect"
	protoimpl "google.golang.org/protobuf/runtime/protoimpl"
	reflect "reflect"
	sync "sync"
	unsafe "unsafe"
)

const (
	// Verify that this generated code is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(20 - protoimpl.MinVersion)
	// Verify that runtime/protoimpl is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(protoimpl.MaxVersion - 20)
)

// SegmentCompression says how ShipSegment.data is encoded.
type SegmentCompression int32

const (
	SegmentCompression_SEGMENT_COMPRESSION_UNSPECIFIED SegmentCompression = 0
	// The segment file's bytes as they are.
	SegmentCompression_SEGMENT_COMPRESSION_NONE SegmentCompression = 1
	// One zstd frame (RFC 8878) holding the segment file, with its content
	// size in the frame header.
	SegmentCompression_SEGMENT_COMPRESSION_ZSTD SegmentCompression = 2
)

// Enum value maps for SegmentCompression.
var (
	SegmentCompression_name = map[int32]string{
		0: "SEGMENT_COMPRESSION_UNSPECIFIED",
		1: "SEGMENT_COMPRESSION_NONE",
		2: "SEGMENT_COMPRESSION_ZSTD",
	}
	SegmentCompression_value = map[string]int32{
		"SEGMENT_COMPRESSION_UNSPECIFIED": 0,
		"SEGMENT_COMPRESSION_NONE":        1,
		"SEGMENT_COMPRESSION_ZSTD":        2,
	}
)

func (x SegmentCompression) Enum() *SegmentCompression {
	p := new(SegmentCompression)
	*p = x
	return p
}

func (x SegmentCompression) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (SegmentCompression) Descriptor() protoreflect.EnumDescriptor {
	return file_tributary_v1_replication_proto_enumTypes[0].Descriptor()
}

func (SegmentCompression) Type() protoreflect.EnumType {
	return &file_tributary_v1_replication_proto_enumTypes[0]
}

func (x SegmentCompression) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use SegmentCompression.Descriptor instead.
func (SegmentCompression) EnumDescriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{0}
}

// GapReason says why an edge will not ship some segments. In every case the
// points of those segments were acknowledged to their writers and may still
// be in the edge's local store; a gap is a record of where, never a silent
// loss.
type GapReason int32

const (
	GapReason_GAP_REASON_UNSPECIFIED GapReason = 0
	// The edge's replication backlog outgrew its disk budget and the default
	// policy released the segments: the points stay in the edge's local store
	// and are to be backfilled from there when the link allows.
	GapReason_GAP_REASON_BACKLOG_OVERFLOW GapReason = 1
	// The backlog outgrew its budget under the drop-oldest policy: the points
	// will not be replicated (they may stay in the edge's local store until
	// its retention removes them); the edge counts them as dropped.
	GapReason_GAP_REASON_DROPPED GapReason = 2
	// The segments are no longer on the edge's disk, or cannot be read:
	// removed before replication was enabled, quarantined as corrupt when
	// the node started, damaged or deleted later. Their points are -1 when
	// the edge does not know how many they held. When the edge's store holds
	// every one of their points (and their count and time span are known),
	// the edge backfills the gap like a BACKLOG_OVERFLOW one; otherwise it
	// stays a gap.
	GapReason_GAP_REASON_MISSING GapReason = 3
)

// Enum value maps for GapReason.
var (
	GapReason_name = map[int32]string{
		0: "GAP_REASON_UNSPECIFIED",
		1: "GAP_REASON_BACKLOG_OVERFLOW",
		2: "GAP_REASON_DROPPED",
		3: "GAP_REASON_MISSING",
	}
	GapReason_value = map[string]int32{
		"GAP_REASON_UNSPECIFIED":      0,
		"GAP_REASON_BACKLOG_OVERFLOW": 1,
		"GAP_REASON_DROPPED":          2,
		"GAP_REASON_MISSING":          3,
	}
)

func (x GapReason) Enum() *GapReason {
	p := new(GapReason)
	*p = x
	return p
}

func (x GapReason) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (GapReason) Descriptor() protoreflect.EnumDescriptor {
	return file_tributary_v1_replication_proto_enumTypes[1].Descriptor()
}

func (GapReason) Type() protoreflect.EnumType {
	return &file_tributary_v1_replication_proto_enumTypes[1]
}

func (x GapReason) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use GapReason.Descriptor instead.
func (GapReason) EnumDescriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{1}
}

// ShipErrorCode classifies a refused segment or gap.
type ShipErrorCode int32

const (
	ShipErrorCode_SHIP_ERROR_CODE_UNSPECIFIED ShipErrorCode = 0
	// The reassembled segment does not decompress, or does not verify
	// (damaged in transit or on the edge's disk). Retryable.
	ShipErrorCode_SHIP_ERROR_CODE_CHECKSUM_MISMATCH ShipErrorCode = 1
	// The cloud holds this sequence with a different crc32c. Not retryable.
	ShipErrorCode_SHIP_ERROR_CODE_CONFLICT ShipErrorCode = 2
	// The message contradicts the protocol or itself (metadata differing
	// between parts or from the file, wrong node id, a bad range). Not
	// retryable.
	ShipErrorCode_SHIP_ERROR_CODE_MALFORMED ShipErrorCode = 3
	// Larger than the coordinator's limits. Not retryable.
	ShipErrorCode_SHIP_ERROR_CODE_TOO_LARGE ShipErrorCode = 4
	// The coordinator cannot make it durable now (replicas unavailable,
	// catalog not writable, disk full). Retryable.
	ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE ShipErrorCode = 5
)

// Enum value maps for ShipErrorCode.
var (
	ShipErrorCode_name = map[int32]string{
		0: "SHIP_ERROR_CODE_UNSPECIFIED",
		1: "SHIP_ERROR_CODE_CHECKSUM_MISMATCH",
		2: "SHIP_ERROR_CODE_CONFLICT",
		3: "SHIP_ERROR_CODE_MALFORMED",
		4: "SHIP_ERROR_CODE_TOO_LARGE",
		5: "SHIP_ERROR_CODE_UNAVAILABLE",
	}
	ShipErrorCode_value = map[string]int32{
		"SHIP_ERROR_CODE_UNSPECIFIED":       0,
		"SHIP_ERROR_CODE_CHECKSUM_MISMATCH": 1,
		"SHIP_ERROR_CODE_CONFLICT":          2,
		"SHIP_ERROR_CODE_MALFORMED":         3,
		"SHIP_ERROR_CODE_TOO_LARGE":         4,
		"SHIP_ERROR_CODE_UNAVAILABLE":       5,
	}
)

func (x ShipErrorCode) Enum() *ShipErrorCode {
	p := new(ShipErrorCode)
	*p = x
	return p
}

func (x ShipErrorCode) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (ShipErrorCode) Descriptor() protoreflect.EnumDescriptor {
	return file_tributary_v1_replication_proto_enumTypes[2].Descriptor()
}

func (ShipErrorCode) Type() protoreflect.EnumType {
	return &file_tributary_v1_replication_proto_enumTypes[2]
}

func (x ShipErrorCode) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use ShipErrorCode.Descriptor instead.
func (ShipErrorCode) EnumDescriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{2}
}

// RestoreRequest asks for what the cloud holds of an edge.
type RestoreRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The edge's node id (1 to 255 bytes).
	NodeId string `protobuf:"bytes,1,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	// Restore data with timestamps at or after start_ms (0: everything the
	// cloud holds). Rollups are restored in whole UTC days, from the day of
	// start_ms.
	StartMs int64 `protobuf:"varint,2,opt,name=start_ms,json=startMs,proto3" json:"start_ms,omitempty"`
	// Raw points from the UTC day of max(raw_start_ms, the cloud's raw
	// retention start) on; older periods as rollups. 0: raw points as far
	// back as the cloud keeps them.
	RawStartMs int64 `protobuf:"varint,3,opt,name=raw_start_ms,json=rawStartMs,proto3" json:"raw_start_ms,omitempty"`
	// Bound of each RestoreFile's file, uncompressed: 0 for the
	// coordinator's default (4 MiB); else 64 KiB to 64 MiB.
	MaxFileBytes  uint64 `protobuf:"varint,4,opt,name=max_file_bytes,json=maxFileBytes,proto3" json:"max_file_bytes,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RestoreRequest) Reset() {
	*x = RestoreRequest{}
	mi := &file_tributary_v1_replication_proto_msgTypes[0]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RestoreRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RestoreRequest) ProtoMessage() {}

func (x *RestoreRequest) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[0]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RestoreRequest.ProtoReflect.Descriptor instead.
func (*RestoreRequest) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{0}
}

func (x *RestoreRequest) GetNodeId() string {
	if x != nil {
		return x.NodeId
	}
	return ""
}

func (x *RestoreRequest) GetStartMs() int64 {
	if x != nil {
		return x.StartMs
	}
	return 0
}

func (x *RestoreRequest) GetRawStartMs() int64 {
	if x != nil {
		return x.RawStartMs
	}
	return 0
}

func (x *RestoreRequest) GetMaxFileBytes() uint64 {
	if x != nil {
		return x.MaxFileBytes
	}
	return 0
}

// RestoreResponse is one message of a Restore answer.
type RestoreResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Types that are valid to be assigned to Body:
	//
	//	*RestoreResponse_Header
	//	*RestoreResponse_File
	//	*RestoreResponse_Rollups
	//	*RestoreResponse_Done
	Body          isRestoreResponse_Body `protobuf_oneof:"body"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RestoreResponse) Reset() {
	*x = RestoreResponse{}
	mi := &file_tributary_v1_replication_proto_msgTypes[1]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RestoreResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RestoreResponse) ProtoMessage() {}

func (x *RestoreResponse) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[1]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RestoreResponse.ProtoReflect.Descriptor instead.
func (*RestoreResponse) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{1}
}

func (x *RestoreResponse) GetBody() isRestoreResponse_Body {
	if x != nil {
		return x.Body
	}
	return nil
}

func (x *RestoreResponse) GetHeader() *RestoreHeader {
	if x != nil {
		if x, ok := x.Body.(*RestoreResponse_Header); ok {
			return x.Header
		}
	}
	return nil
}

func (x *RestoreResponse) GetFile() *RestoreFile {
	if x != nil {
		if x, ok := x.Body.(*RestoreResponse_File); ok {
			return x.File
		}
	}
	return nil
}

func (x *RestoreResponse) GetRollups() *RestoreRollups {
	if x != nil {
		if x, ok := x.Body.(*RestoreResponse_Rollups); ok {
			return x.Rollups
		}
	}
	return nil
}

func (x *RestoreResponse) GetDone() *RestoreDone {
	if x != nil {
		if x, ok := x.Body.(*RestoreResponse_Done); ok {
			return x.Done
		}
	}
	return nil
}

type isRestoreResponse_Body interface {
	isRestoreResponse_Body()
}

type RestoreResponse_Header struct {
	// First message, and only the first.
	Header *RestoreHeader `protobuf:"bytes,1,opt,name=header,proto3,oneof"`
}

type RestoreResponse_File struct {
	// One file of raw points.
	File *RestoreFile `protobuf:"bytes,2,opt,name=file,proto3,oneof"`
}

type RestoreResponse_Rollups struct {
	// Rollups of series, after every file.
	Rollups *RestoreRollups `protobuf:"bytes,3,opt,name=rollups,proto3,oneof"`
}

type RestoreResponse_Done struct {
	// Last message.
	Done *RestoreDone `protobuf:"bytes,4,opt,name=done,proto3,oneof"`
}

func (*RestoreResponse_Header) isRestoreResponse_Body() {}

func (*RestoreResponse_File) isRestoreResponse_Body() {}

func (*RestoreResponse_Rollups) isRestoreResponse_Body() {}

func (*RestoreResponse_Done) isRestoreResponse_Body() {}

// RestoreHeader says what the cloud knows of the edge and what it sends.
type RestoreHeader struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Names the answering coordinator, for logs.
	CoordinatorId string `protobuf:"bytes,1,opt,name=coordinator_id,json=coordinatorId,proto3" json:"coordinator_id,omitempty"`
	// One past the highest sequence number the cloud has recorded for the
	// edge (held, in a recorded gap, or the watermark); 1 when nothing is.
	// The restored node's WAL starts here, so its new segments neither
	// collide with the cloud's numbers nor leave a hole below them.
	NextSeq uint64 `protobuf:"varint,2,opt,name=next_seq,json=nextSeq,proto3" json:"next_seq,omitempty"`
	// The cloud's acked_through for the edge (see the file comment).
	AckedThrough uint64 `protobuf:"varint,3,opt,name=acked_through,json=ackedThrough,proto3" json:"acked_through,omitempty"`
	// The edge's watermark.
	WatermarkSeq    uint64 `protobuf:"varint,4,opt,name=watermark_seq,json=watermarkSeq,proto3" json:"watermark_seq,omitempty"`
	WatermarkTimeMs int64  `protobuf:"varint,5,opt,name=watermark_time_ms,json=watermarkTimeMs,proto3" json:"watermark_time_ms,omitempty"`
	// Runs of sequence numbers below next_seq that the cloud neither holds
	// nor recorded as a gap: segments that never reached it. Ascending,
	// disjoint, at most 1024 (past that the last run is widened to cover the
	// rest, which may include held numbers). The restored edge declares them
	// as MISSING gaps.
	Missing []*SeqRange `protobuf:"bytes,6,rep,name=missing,proto3" json:"missing,omitempty"`
	// Points the catalog records as held for the edge.
	HeldPoints uint64 `protobuf:"varint,7,opt,name=held_points,json=heldPoints,proto3" json:"held_points,omitempty"`
	// Segments and known points in the gaps the edge declared (never in the
	// cloud, so not restored).
	GapSegments uint64 `protobuf:"varint,8,opt,name=gap_segments,json=gapSegments,proto3" json:"gap_segments,omitempty"`
	GapPoints   int64  `protobuf:"varint,9,opt,name=gap_points,json=gapPoints,proto3" json:"gap_points,omitempty"`
	// The time span of the edge's held data the answer covers (both 0 when
	// the cloud holds nothing): raw points from raw_start_ms to max_time_ms,
	// rollups of the UTC days from the day of min_time_ms up to
	// raw_start_ms (a day boundary).
	MinTimeMs  int64 `protobuf:"varint,10,opt,name=min_time_ms,json=minTimeMs,proto3" json:"min_time_ms,omitempty"`
	MaxTimeMs  int64 `protobuf:"varint,11,opt,name=max_time_ms,json=maxTimeMs,proto3" json:"max_time_ms,omitempty"`
	RawStartMs int64 `protobuf:"varint,12,opt,name=raw_start_ms,json=rawStartMs,proto3" json:"raw_start_ms,omitempty"`
	// Bound of every file's uncompressed size in this answer.
	MaxFileBytes  uint64 `protobuf:"varint,13,opt,name=max_file_bytes,json=maxFileBytes,proto3" json:"max_file_bytes,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RestoreHeader) Reset() {
	*x = RestoreHeader{}
	mi := &file_tributary_v1_replication_proto_msgTypes[2]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RestoreHeader) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RestoreHeader) ProtoMessage() {}

func (x *RestoreHeader) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[2]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RestoreHeader.ProtoReflect.Descriptor instead.
func (*RestoreHeader) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{2}
}

func (x *RestoreHeader) GetCoordinatorId() string {
	if x != nil {
		return x.CoordinatorId
	}
	return ""
}

func (x *RestoreHeader) GetNextSeq() uint64 {
	if x != nil {
		return x.NextSeq
	}
	return 0
}

func (x *RestoreHeader) GetAckedThrough() uint64 {
	if x != nil {
		return x.AckedThrough
	}
	return 0
}

func (x *RestoreHeader) GetWatermarkSeq() uint64 {
	if x != nil {
		return x.WatermarkSeq
	}
	return 0
}

func (x *RestoreHeader) GetWatermarkTimeMs() int64 {
	if x != nil {
		return x.WatermarkTimeMs
	}
	return 0
}

func (x *RestoreHeader) GetMissing() []*SeqRange {
	if x != nil {
		return x.Missing
	}
	return nil
}

func (x *RestoreHeader) GetHeldPoints() uint64 {
	if x != nil {
		return x.HeldPoints
	}
	return 0
}

func (x *RestoreHeader) GetGapSegments() uint64 {
	if x != nil {
		return x.GapSegments
	}
	return 0
}

func (x *RestoreHeader) GetGapPoints() int64 {
	if x != nil {
		return x.GapPoints
	}
	return 0
}

func (x *RestoreHeader) GetMinTimeMs() int64 {
	if x != nil {
		return x.MinTimeMs
	}
	return 0
}

func (x *RestoreHeader) GetMaxTimeMs() int64 {
	if x != nil {
		return x.MaxTimeMs
	}
	return 0
}

func (x *RestoreHeader) GetRawStartMs() int64 {
	if x != nil {
		return x.RawStartMs
	}
	return 0
}

func (x *RestoreHeader) GetMaxFileBytes() uint64 {
	if x != nil {
		return x.MaxFileBytes
	}
	return 0
}

// RestoreFile carries one sealed WAL segment file (the node/wal format, as
// node/segment builds it) of the edge's raw points: its header names the
// edge; its sequence numbers mean nothing to the receiver. Files of one
// answer may hold the same points twice (a part sent again from another
// replica); importing them again changes nothing.
type RestoreFile struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// NONE or ZSTD (one frame).
	Compression SegmentCompression `protobuf:"varint,1,opt,name=compression,proto3,enum=tributary.v1.SegmentCompression" json:"compression,omitempty"`
	// Size of the file, at most the header's max_file_bytes.
	UncompressedBytes uint64 `protobuf:"varint,2,opt,name=uncompressed_bytes,json=uncompressedBytes,proto3" json:"uncompressed_bytes,omitempty"`
	Data              []byte `protobuf:"bytes,3,opt,name=data,proto3" json:"data,omitempty"`
	// From the file's footer: its CRC32C, points and time span.
	Crc32C        uint32 `protobuf:"fixed32,4,opt,name=crc32c,proto3" json:"crc32c,omitempty"`
	Points        int64  `protobuf:"varint,5,opt,name=points,proto3" json:"points,omitempty"`
	MinTimeMs     int64  `protobuf:"varint,6,opt,name=min_time_ms,json=minTimeMs,proto3" json:"min_time_ms,omitempty"`
	MaxTimeMs     int64  `protobuf:"varint,7,opt,name=max_time_ms,json=maxTimeMs,proto3" json:"max_time_ms,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RestoreFile) Reset() {
	*x = RestoreFile{}
	mi := &file_tributary_v1_replication_proto_msgTypes[3]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RestoreFile) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RestoreFile) ProtoMessage() {}

func (x *RestoreFile) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[3]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RestoreFile.ProtoReflect.Descriptor instead.
func (*RestoreFile) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{3}
}

func (x *RestoreFile) GetCompression() SegmentCompression {
	if x != nil {
		return x.Compression
	}
	return SegmentCompression_SEGMENT_COMPRESSION_UNSPECIFIED
}

func (x *RestoreFile) GetUncompressedBytes() uint64 {
	if x != nil {
		return x.UncompressedBytes
	}
	return 0
}

func (x *RestoreFile) GetData() []byte {
	if x != nil {
		return x.Data
	}
	return nil
}

func (x *RestoreFile) GetCrc32C() uint32 {
	if x != nil {
		return x.Crc32C
	}
	return 0
}

func (x *RestoreFile) GetPoints() int64 {
	if x != nil {
		return x.Points
	}
	return 0
}

func (x *RestoreFile) GetMinTimeMs() int64 {
	if x != nil {
		return x.MinTimeMs
	}
	return 0
}

func (x *RestoreFile) GetMaxTimeMs() int64 {
	if x != nil {
		return x.MaxTimeMs
	}
	return 0
}

// RestoreRollups carries the rollups of some series. A series may come in
// several entries (each at most about 1 MiB); cells of one entry never
// repeat in another.
type RestoreRollups struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	Series        []*RestoreRollupSeries `protobuf:"bytes,1,rep,name=series,proto3" json:"series,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RestoreRollups) Reset() {
	*x = RestoreRollups{}
	mi := &file_tributary_v1_replication_proto_msgTypes[4]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RestoreRollups) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RestoreRollups) ProtoMessage() {}

func (x *RestoreRollups) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[4]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RestoreRollups.ProtoReflect.Descriptor instead.
func (*RestoreRollups) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{4}
}

func (x *RestoreRollups) GetSeries() []*RestoreRollupSeries {
	if x != nil {
		return x.Series
	}
	return nil
}

// RestoreRollupSeries holds packed rollups of one series, in node/rollup's
// pack format (its package doc): hourly packs hold the 24 hours of the
// UTC day starting at start_ms, daily packs the 32 days of the daily pack
// starting at start_ms (a multiple of 32 days since the epoch). A cell
// with count 0 is absent.
type RestoreRollupSeries struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The series' labels, sorted by name.
	Labels        []*Label             `protobuf:"bytes,1,rep,name=labels,proto3" json:"labels,omitempty"`
	Hourly        []*RestoreRollupPack `protobuf:"bytes,2,rep,name=hourly,proto3" json:"hourly,omitempty"`
	Daily         []*RestoreRollupPack `protobuf:"bytes,3,rep,name=daily,proto3" json:"daily,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RestoreRollupSeries) Reset() {
	*x = RestoreRollupSeries{}
	mi := &file_tributary_v1_replication_proto_msgTypes[5]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RestoreRollupSeries) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RestoreRollupSeries) ProtoMessage() {}

func (x *RestoreRollupSeries) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[5]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RestoreRollupSeries.ProtoReflect.Descriptor instead.
func (*RestoreRollupSeries) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{5}
}

func (x *RestoreRollupSeries) GetLabels() []*Label {
	if x != nil {
		return x.Labels
	}
	return nil
}

func (x *RestoreRollupSeries) GetHourly() []*RestoreRollupPack {
	if x != nil {
		return x.Hourly
	}
	return nil
}

func (x *RestoreRollupSeries) GetDaily() []*RestoreRollupPack {
	if x != nil {
		return x.Daily
	}
	return nil
}

// RestoreRollupPack is one packed rollup value.
type RestoreRollupPack struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	StartMs       int64                  `protobuf:"varint,1,opt,name=start_ms,json=startMs,proto3" json:"start_ms,omitempty"`
	Data          []byte                 `protobuf:"bytes,2,opt,name=data,proto3" json:"data,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RestoreRollupPack) Reset() {
	*x = RestoreRollupPack{}
	mi := &file_tributary_v1_replication_proto_msgTypes[6]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RestoreRollupPack) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RestoreRollupPack) ProtoMessage() {}

func (x *RestoreRollupPack) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[6]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RestoreRollupPack.ProtoReflect.Descriptor instead.
func (*RestoreRollupPack) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{6}
}

func (x *RestoreRollupPack) GetStartMs() int64 {
	if x != nil {
		return x.StartMs
	}
	return 0
}

func (x *RestoreRollupPack) GetData() []byte {
	if x != nil {
		return x.Data
	}
	return nil
}

// RestoreDone ends a Restore answer: what was sent.
type RestoreDone struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// RestoreFile messages, and the points they hold.
	Files     int64 `protobuf:"varint,1,opt,name=files,proto3" json:"files,omitempty"`
	RawPoints int64 `protobuf:"varint,2,opt,name=raw_points,json=rawPoints,proto3" json:"raw_points,omitempty"`
	// RestoreRollupSeries entries, and the packs they hold.
	RollupSeries  int64 `protobuf:"varint,3,opt,name=rollup_series,json=rollupSeries,proto3" json:"rollup_series,omitempty"`
	RollupPacks   int64 `protobuf:"varint,4,opt,name=rollup_packs,json=rollupPacks,proto3" json:"rollup_packs,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *RestoreDone) Reset() {
	*x = RestoreDone{}
	mi := &file_tributary_v1_replication_proto_msgTypes[7]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *RestoreDone) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RestoreDone) ProtoMessage() {}

func (x *RestoreDone) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[7]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RestoreDone.ProtoReflect.Descriptor instead.
func (*RestoreDone) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{7}
}

func (x *RestoreDone) GetFiles() int64 {
	if x != nil {
		return x.Files
	}
	return 0
}

func (x *RestoreDone) GetRawPoints() int64 {
	if x != nil {
		return x.RawPoints
	}
	return 0
}

func (x *RestoreDone) GetRollupSeries() int64 {
	if x != nil {
		return x.RollupSeries
	}
	return 0
}

func (x *RestoreDone) GetRollupPacks() int64 {
	if x != nil {
		return x.RollupPacks
	}
	return 0
}

// TunnelRequest is one message from the edge on a Tunnel stream.
type TunnelRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Types that are valid to be assigned to Body:
	//
	//	*TunnelRequest_Hello
	//	*TunnelRequest_Data
	Body          isTunnelRequest_Body `protobuf_oneof:"body"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *TunnelRequest) Reset() {
	*x = TunnelRequest{}
	mi := &file_tributary_v1_replication_proto_msgTypes[8]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *TunnelRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*TunnelRequest) ProtoMessage() {}

func (x *TunnelRequest) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[8]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use TunnelRequest.ProtoReflect.Descriptor instead.
func (*TunnelRequest) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{8}
}

func (x *TunnelRequest) GetBody() isTunnelRequest_Body {
	if x != nil {
		return x.Body
	}
	return nil
}

func (x *TunnelRequest) GetHello() *TunnelHello {
	if x != nil {
		if x, ok := x.Body.(*TunnelRequest_Hello); ok {
			return x.Hello
		}
	}
	return nil
}

func (x *TunnelRequest) GetData() []byte {
	if x != nil {
		if x, ok := x.Body.(*TunnelRequest_Data); ok {
			return x.Data
		}
	}
	return nil
}

type isTunnelRequest_Body interface {
	isTunnelRequest_Body()
}

type TunnelRequest_Hello struct {
	// First message of every stream, and only the first.
	Hello *TunnelHello `protobuf:"bytes,1,opt,name=hello,proto3,oneof"`
}

type TunnelRequest_Data struct {
	// The next bytes of the tunneled connection, edge to coordinator.
	Data []byte `protobuf:"bytes,2,opt,name=data,proto3,oneof"`
}

func (*TunnelRequest_Hello) isTunnelRequest_Body() {}

func (*TunnelRequest_Data) isTunnelRequest_Body() {}

// TunnelResponse is one message from the coordinator on a Tunnel stream.
type TunnelResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The next bytes of the tunneled connection, coordinator to edge.
	Data          []byte `protobuf:"bytes,1,opt,name=data,proto3" json:"data,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *TunnelResponse) Reset() {
	*x = TunnelResponse{}
	mi := &file_tributary_v1_replication_proto_msgTypes[9]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *TunnelResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*TunnelResponse) ProtoMessage() {}

func (x *TunnelResponse) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[9]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use TunnelResponse.ProtoReflect.Descriptor instead.
func (*TunnelResponse) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{9}
}

func (x *TunnelResponse) GetData() []byte {
	if x != nil {
		return x.Data
	}
	return nil
}

// TunnelHello opens a Tunnel stream.
type TunnelHello struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The edge node's id (1 to 255 bytes), as in its ShipHello.
	NodeId        string `protobuf:"bytes,1,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *TunnelHello) Reset() {
	*x = TunnelHello{}
	mi := &file_tributary_v1_replication_proto_msgTypes[10]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *TunnelHello) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*TunnelHello) ProtoMessage() {}

func (x *TunnelHello) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[10]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use TunnelHello.ProtoReflect.Descriptor instead.
func (*TunnelHello) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{10}
}

func (x *TunnelHello) GetNodeId() string {
	if x != nil {
		return x.NodeId
	}
	return ""
}

// ShipRequest is one message from the edge.
type ShipRequest struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Types that are valid to be assigned to Body:
	//
	//	*ShipRequest_Hello
	//	*ShipRequest_Segment
	//	*ShipRequest_Gap
	//	*ShipRequest_ReshipUnavailable
	//	*ShipRequest_Announce
	Body          isShipRequest_Body `protobuf_oneof:"body"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipRequest) Reset() {
	*x = ShipRequest{}
	mi := &file_tributary_v1_replication_proto_msgTypes[11]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipRequest) ProtoMessage() {}

func (x *ShipRequest) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[11]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipRequest.ProtoReflect.Descriptor instead.
func (*ShipRequest) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{11}
}

func (x *ShipRequest) GetBody() isShipRequest_Body {
	if x != nil {
		return x.Body
	}
	return nil
}

func (x *ShipRequest) GetHello() *ShipHello {
	if x != nil {
		if x, ok := x.Body.(*ShipRequest_Hello); ok {
			return x.Hello
		}
	}
	return nil
}

func (x *ShipRequest) GetSegment() *ShipSegment {
	if x != nil {
		if x, ok := x.Body.(*ShipRequest_Segment); ok {
			return x.Segment
		}
	}
	return nil
}

func (x *ShipRequest) GetGap() *ShipGap {
	if x != nil {
		if x, ok := x.Body.(*ShipRequest_Gap); ok {
			return x.Gap
		}
	}
	return nil
}

func (x *ShipRequest) GetReshipUnavailable() *ShipReshipUnavailable {
	if x != nil {
		if x, ok := x.Body.(*ShipRequest_ReshipUnavailable); ok {
			return x.ReshipUnavailable
		}
	}
	return nil
}

func (x *ShipRequest) GetAnnounce() *ShipAnnounce {
	if x != nil {
		if x, ok := x.Body.(*ShipRequest_Announce); ok {
			return x.Announce
		}
	}
	return nil
}

type isShipRequest_Body interface {
	isShipRequest_Body()
}

type ShipRequest_Hello struct {
	// First message of every stream, and only the first.
	Hello *ShipHello `protobuf:"bytes,1,opt,name=hello,proto3,oneof"`
}

type ShipRequest_Segment struct {
	// One part of one segment.
	Segment *ShipSegment `protobuf:"bytes,2,opt,name=segment,proto3,oneof"`
}

type ShipRequest_Gap struct {
	// Segments the edge will not ship.
	Gap *ShipGap `protobuf:"bytes,3,opt,name=gap,proto3,oneof"`
}

type ShipRequest_ReshipUnavailable struct {
	// The edge cannot ship again (some of) a run a ShipReship asked for:
	// its local store no longer holds the data.
	ReshipUnavailable *ShipReshipUnavailable `protobuf:"bytes,4,opt,name=reship_unavailable,json=reshipUnavailable,proto3,oneof"`
}

type ShipRequest_Announce struct {
	// Series the edge created, announced before any segment holding them
	// ships. Sent only to a coordinator whose welcome lists the feature
	// "announce".
	Announce *ShipAnnounce `protobuf:"bytes,5,opt,name=announce,proto3,oneof"`
}

func (*ShipRequest_Hello) isShipRequest_Body() {}

func (*ShipRequest_Segment) isShipRequest_Body() {}

func (*ShipRequest_Gap) isShipRequest_Body() {}

func (*ShipRequest_ReshipUnavailable) isShipRequest_Body() {}

func (*ShipRequest_Announce) isShipRequest_Body() {}

// ShipResponse is one message from the coordinator.
type ShipResponse struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Types that are valid to be assigned to Body:
	//
	//	*ShipResponse_Welcome
	//	*ShipResponse_Ack
	//	*ShipResponse_Error
	//	*ShipResponse_Config
	//	*ShipResponse_Reship
	//	*ShipResponse_Announced
	//	*ShipResponse_RuleGroups
	Body          isShipResponse_Body `protobuf_oneof:"body"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipResponse) Reset() {
	*x = ShipResponse{}
	mi := &file_tributary_v1_replication_proto_msgTypes[12]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipResponse) ProtoMessage() {}

func (x *ShipResponse) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[12]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipResponse.ProtoReflect.Descriptor instead.
func (*ShipResponse) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{12}
}

func (x *ShipResponse) GetBody() isShipResponse_Body {
	if x != nil {
		return x.Body
	}
	return nil
}

func (x *ShipResponse) GetWelcome() *ShipWelcome {
	if x != nil {
		if x, ok := x.Body.(*ShipResponse_Welcome); ok {
			return x.Welcome
		}
	}
	return nil
}

func (x *ShipResponse) GetAck() *ShipAck {
	if x != nil {
		if x, ok := x.Body.(*ShipResponse_Ack); ok {
			return x.Ack
		}
	}
	return nil
}

func (x *ShipResponse) GetError() *ShipError {
	if x != nil {
		if x, ok := x.Body.(*ShipResponse_Error); ok {
			return x.Error
		}
	}
	return nil
}

func (x *ShipResponse) GetConfig() *EdgeConfig {
	if x != nil {
		if x, ok := x.Body.(*ShipResponse_Config); ok {
			return x.Config
		}
	}
	return nil
}

func (x *ShipResponse) GetReship() *ShipReship {
	if x != nil {
		if x, ok := x.Body.(*ShipResponse_Reship); ok {
			return x.Reship
		}
	}
	return nil
}

func (x *ShipResponse) GetAnnounced() *ShipAnnounced {
	if x != nil {
		if x, ok := x.Body.(*ShipResponse_Announced); ok {
			return x.Announced
		}
	}
	return nil
}

func (x *ShipResponse) GetRuleGroups() *EdgeRuleGroups {
	if x != nil {
		if x, ok := x.Body.(*ShipResponse_RuleGroups); ok {
			return x.RuleGroups
		}
	}
	return nil
}

type isShipResponse_Body interface {
	isShipResponse_Body()
}

type ShipResponse_Welcome struct {
	// First message of every stream, and only the first.
	Welcome *ShipWelcome `protobuf:"bytes,1,opt,name=welcome,proto3,oneof"`
}

type ShipResponse_Ack struct {
	// A segment or gap is durable; acked_through may have moved.
	Ack *ShipAck `protobuf:"bytes,2,opt,name=ack,proto3,oneof"`
}

type ShipResponse_Error struct {
	// A segment or gap was refused.
	Error *ShipError `protobuf:"bytes,3,opt,name=error,proto3,oneof"`
}

type ShipResponse_Config struct {
	// The fleet configuration changed after the welcome (or after the
	// last config on this stream); version is higher than any sent
	// before on the stream.
	Config *EdgeConfig `protobuf:"bytes,4,opt,name=config,proto3,oneof"`
}

type ShipResponse_Reship struct {
	// Asks the edge to ship a run of segments again: the cloud recorded
	// them as held, but no live replica can give them to a replica that
	// lacks them (the only replica that held them is down or gone). Sent
	// only to edges whose hello lists the feature "reship".
	Reship *ShipReship `protobuf:"bytes,5,opt,name=reship,proto3,oneof"`
}

type ShipResponse_Announced struct {
	// Answers a ShipAnnounce, once the catalog recorded it (or could
	// not).
	Announced *ShipAnnounced `protobuf:"bytes,6,opt,name=announced,proto3,oneof"`
}

type ShipResponse_RuleGroups struct {
	// The fleet's rule groups that select this edge changed after the
	// welcome (or the last rule_groups on this stream); version is
	// higher than any sent before on the stream.
	RuleGroups *EdgeRuleGroups `protobuf:"bytes,20,opt,name=rule_groups,json=ruleGroups,proto3,oneof"`
}

func (*ShipResponse_Welcome) isShipResponse_Body() {}

func (*ShipResponse_Ack) isShipResponse_Body() {}

func (*ShipResponse_Error) isShipResponse_Body() {}

func (*ShipResponse_Config) isShipResponse_Body() {}

func (*ShipResponse_Reship) isShipResponse_Body() {}

func (*ShipResponse_Announced) isShipResponse_Body() {}

func (*ShipResponse_RuleGroups) isShipResponse_Body() {}

// ShipAnnounce announces series the edge created: every series it created
// before its clock read through_ms is in this message or an earlier one
// on the stream, except when more follows (more = true: the series of one
// announcement did not fit one message; only the last carries the
// watermark). Announcements are idempotent: a series the catalog lists
// for the edge already changes nothing, and the watermark never goes
// back. An edge announces every series it holds once per stream (so that
// a catalog that forgot the edge learns them again), then, every
// announce interval, the series it created since (possibly none, to move
// the watermark). At most one announcement is unanswered at a time.
type ShipAnnounce struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Numbers the announcement on the stream (from 1, increasing); its
	// ShipAnnounced carries it.
	Id uint64 `protobuf:"varint,1,opt,name=id,proto3" json:"id,omitempty"`
	// The series: at most 1,000 per message and about 1 MiB of labels (a
	// single longer series goes alone).
	Series []*AnnouncedSeries `protobuf:"bytes,2,rep,name=series,proto3" json:"series,omitempty"`
	// The edge's clock (Unix ms) when it took the list.
	ThroughMs int64 `protobuf:"varint,3,opt,name=through_ms,json=throughMs,proto3" json:"through_ms,omitempty"`
	// The announcement continues in the next message (which has the next
	// id); through_ms is then not a watermark and is ignored.
	More          bool `protobuf:"varint,4,opt,name=more,proto3" json:"more,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipAnnounce) Reset() {
	*x = ShipAnnounce{}
	mi := &file_tributary_v1_replication_proto_msgTypes[13]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipAnnounce) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipAnnounce) ProtoMessage() {}

func (x *ShipAnnounce) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[13]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipAnnounce.ProtoReflect.Descriptor instead.
func (*ShipAnnounce) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{13}
}

func (x *ShipAnnounce) GetId() uint64 {
	if x != nil {
		return x.Id
	}
	return 0
}

func (x *ShipAnnounce) GetSeries() []*AnnouncedSeries {
	if x != nil {
		return x.Series
	}
	return nil
}

func (x *ShipAnnounce) GetThroughMs() int64 {
	if x != nil {
		return x.ThroughMs
	}
	return 0
}

func (x *ShipAnnounce) GetMore() bool {
	if x != nil {
		return x.More
	}
	return false
}

// AnnouncedSeries is one series of a ShipAnnounce.
type AnnouncedSeries struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	Labels        []*Label               `protobuf:"bytes,1,rep,name=labels,proto3" json:"labels,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *AnnouncedSeries) Reset() {
	*x = AnnouncedSeries{}
	mi := &file_tributary_v1_replication_proto_msgTypes[14]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *AnnouncedSeries) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*AnnouncedSeries) ProtoMessage() {}

func (x *AnnouncedSeries) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[14]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use AnnouncedSeries.ProtoReflect.Descriptor instead.
func (*AnnouncedSeries) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{14}
}

func (x *AnnouncedSeries) GetLabels() []*Label {
	if x != nil {
		return x.Labels
	}
	return nil
}

// ShipAnnounced answers ShipAnnounce id.
type ShipAnnounced struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	Id    uint64                 `protobuf:"varint,1,opt,name=id,proto3" json:"id,omitempty"`
	// The edge's registration watermark in the catalog after the
	// announcement; registered false: the catalog keeps none for the edge
	// (its coordinators cannot all record one yet, or a series was
	// rejected), the series were registered all the same unless error says
	// otherwise.
	ThroughMs  int64 `protobuf:"varint,2,opt,name=through_ms,json=throughMs,proto3" json:"through_ms,omitempty"`
	Registered bool  `protobuf:"varint,3,opt,name=registered,proto3" json:"registered,omitempty"`
	// Why the announcement was not recorded ("" when it was); the edge
	// announces the same series again later.
	Error         string `protobuf:"bytes,4,opt,name=error,proto3" json:"error,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipAnnounced) Reset() {
	*x = ShipAnnounced{}
	mi := &file_tributary_v1_replication_proto_msgTypes[15]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipAnnounced) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipAnnounced) ProtoMessage() {}

func (x *ShipAnnounced) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[15]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipAnnounced.ProtoReflect.Descriptor instead.
func (*ShipAnnounced) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{15}
}

func (x *ShipAnnounced) GetId() uint64 {
	if x != nil {
		return x.Id
	}
	return 0
}

func (x *ShipAnnounced) GetThroughMs() int64 {
	if x != nil {
		return x.ThroughMs
	}
	return 0
}

func (x *ShipAnnounced) GetRegistered() bool {
	if x != nil {
		return x.Registered
	}
	return false
}

func (x *ShipAnnounced) GetError() string {
	if x != nil {
		return x.Error
	}
	return ""
}

// ShipReship asks the edge to ship again the segments first_seq..last_seq,
// whose data has times in [min_time_ms, max_time_ms] (both inclusive; the
// span may be wider than the data). The edge sends them as backfill
// segments (backfill_points 0: the cloud counted their points when it
// first acknowledged them) covering exactly these numbers, from its WAL
// when the original files are still there (the same bytes and CRC), else
// rebuilt from its local store for the time span; or answers
// ShipReshipUnavailable for what it cannot give. A second request for a
// run already being shipped changes nothing.
type ShipReship struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	FirstSeq      uint64                 `protobuf:"varint,1,opt,name=first_seq,json=firstSeq,proto3" json:"first_seq,omitempty"`
	LastSeq       uint64                 `protobuf:"varint,2,opt,name=last_seq,json=lastSeq,proto3" json:"last_seq,omitempty"`
	MinTimeMs     int64                  `protobuf:"varint,3,opt,name=min_time_ms,json=minTimeMs,proto3" json:"min_time_ms,omitempty"`
	MaxTimeMs     int64                  `protobuf:"varint,4,opt,name=max_time_ms,json=maxTimeMs,proto3" json:"max_time_ms,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipReship) Reset() {
	*x = ShipReship{}
	mi := &file_tributary_v1_replication_proto_msgTypes[16]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipReship) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipReship) ProtoMessage() {}

func (x *ShipReship) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[16]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipReship.ProtoReflect.Descriptor instead.
func (*ShipReship) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{16}
}

func (x *ShipReship) GetFirstSeq() uint64 {
	if x != nil {
		return x.FirstSeq
	}
	return 0
}

func (x *ShipReship) GetLastSeq() uint64 {
	if x != nil {
		return x.LastSeq
	}
	return 0
}

func (x *ShipReship) GetMinTimeMs() int64 {
	if x != nil {
		return x.MinTimeMs
	}
	return 0
}

func (x *ShipReship) GetMaxTimeMs() int64 {
	if x != nil {
		return x.MaxTimeMs
	}
	return 0
}

// ShipReshipUnavailable says the edge cannot ship first_seq..last_seq of
// a ShipReship again; reason says why (for logs and metrics).
type ShipReshipUnavailable struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	FirstSeq      uint64                 `protobuf:"varint,1,opt,name=first_seq,json=firstSeq,proto3" json:"first_seq,omitempty"`
	LastSeq       uint64                 `protobuf:"varint,2,opt,name=last_seq,json=lastSeq,proto3" json:"last_seq,omitempty"`
	Reason        string                 `protobuf:"bytes,3,opt,name=reason,proto3" json:"reason,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipReshipUnavailable) Reset() {
	*x = ShipReshipUnavailable{}
	mi := &file_tributary_v1_replication_proto_msgTypes[17]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipReshipUnavailable) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipReshipUnavailable) ProtoMessage() {}

func (x *ShipReshipUnavailable) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[17]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipReshipUnavailable.ProtoReflect.Descriptor instead.
func (*ShipReshipUnavailable) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{17}
}

func (x *ShipReshipUnavailable) GetFirstSeq() uint64 {
	if x != nil {
		return x.FirstSeq
	}
	return 0
}

func (x *ShipReshipUnavailable) GetLastSeq() uint64 {
	if x != nil {
		return x.LastSeq
	}
	return 0
}

func (x *ShipReshipUnavailable) GetReason() string {
	if x != nil {
		return x.Reason
	}
	return ""
}

// ShipHello opens a stream.
type ShipHello struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The edge node's id, as in its WAL segment headers (1 to 255 bytes). It
	// must be the identity of the client certificate.
	NodeId string `protobuf:"bytes,1,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	// The edge's software version, for logs and fleet status.
	SoftwareVersion string `protobuf:"bytes,2,opt,name=software_version,json=softwareVersion,proto3" json:"software_version,omitempty"`
	// Protocol version the edge speaks; this file describes version 1.
	ProtocolVersion uint32 `protobuf:"varint,3,opt,name=protocol_version,json=protocolVersion,proto3" json:"protocol_version,omitempty"`
	// The highest acked_through the edge has been told (its durable cursor;
	// 0 if none). The coordinator's own value wins; a coordinator that knows
	// less than the edge has lost data and should say so in its logs.
	AckedThrough uint64 `protobuf:"varint,4,opt,name=acked_through,json=ackedThrough,proto3" json:"acked_through,omitempty"`
	// The lowest sequence the edge still holds on disk to ship (0: none).
	OldestRetainedSeq uint64 `protobuf:"varint,5,opt,name=oldest_retained_seq,json=oldestRetainedSeq,proto3" json:"oldest_retained_seq,omitempty"`
	// The highest sequence the edge has sealed (0: none), for lag reporting.
	NewestSealedSeq uint64 `protobuf:"varint,6,opt,name=newest_sealed_seq,json=newestSealedSeq,proto3" json:"newest_sealed_seq,omitempty"`
	// Where coordinators can reach the edge's QueryService (host:port), to
	// read what the cloud does not hold; empty when the edge is not
	// reachable. The coordinator records it as the node's address.
	QueryAddr string `protobuf:"bytes,7,opt,name=query_addr,json=queryAddr,proto3" json:"query_addr,omitempty"`
	// Optional protocol features the edge understands: "reship" (it answers
	// ShipResponse.reship).
	Features []string `protobuf:"bytes,8,rep,name=features,proto3" json:"features,omitempty"`
	// The edge's labels (--edge-label), at most 32, names as for series
	// labels, empty values dropped. The catalog records them for the edge
	// (replacing the ones it had) and selects the fleet's rule groups by
	// them (ClusterService.SetRuleGroup).
	Labels        []*Label `protobuf:"bytes,20,rep,name=labels,proto3" json:"labels,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipHello) Reset() {
	*x = ShipHello{}
	mi := &file_tributary_v1_replication_proto_msgTypes[18]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipHello) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipHello) ProtoMessage() {}

func (x *ShipHello) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[18]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipHello.ProtoReflect.Descriptor instead.
func (*ShipHello) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{18}
}

func (x *ShipHello) GetNodeId() string {
	if x != nil {
		return x.NodeId
	}
	return ""
}

func (x *ShipHello) GetSoftwareVersion() string {
	if x != nil {
		return x.SoftwareVersion
	}
	return ""
}

func (x *ShipHello) GetProtocolVersion() uint32 {
	if x != nil {
		return x.ProtocolVersion
	}
	return 0
}

func (x *ShipHello) GetAckedThrough() uint64 {
	if x != nil {
		return x.AckedThrough
	}
	return 0
}

func (x *ShipHello) GetOldestRetainedSeq() uint64 {
	if x != nil {
		return x.OldestRetainedSeq
	}
	return 0
}

func (x *ShipHello) GetNewestSealedSeq() uint64 {
	if x != nil {
		return x.NewestSealedSeq
	}
	return 0
}

func (x *ShipHello) GetQueryAddr() string {
	if x != nil {
		return x.QueryAddr
	}
	return ""
}

func (x *ShipHello) GetFeatures() []string {
	if x != nil {
		return x.Features
	}
	return nil
}

func (x *ShipHello) GetLabels() []*Label {
	if x != nil {
		return x.Labels
	}
	return nil
}

// SeqRange is an inclusive run of sequence numbers.
type SeqRange struct {
	state         protoimpl.MessageState `protogen:"open.v1"`
	FirstSeq      uint64                 `protobuf:"varint,1,opt,name=first_seq,json=firstSeq,proto3" json:"first_seq,omitempty"`
	LastSeq       uint64                 `protobuf:"varint,2,opt,name=last_seq,json=lastSeq,proto3" json:"last_seq,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *SeqRange) Reset() {
	*x = SeqRange{}
	mi := &file_tributary_v1_replication_proto_msgTypes[19]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *SeqRange) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*SeqRange) ProtoMessage() {}

func (x *SeqRange) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[19]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use SeqRange.ProtoReflect.Descriptor instead.
func (*SeqRange) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{19}
}

func (x *SeqRange) GetFirstSeq() uint64 {
	if x != nil {
		return x.FirstSeq
	}
	return 0
}

func (x *SeqRange) GetLastSeq() uint64 {
	if x != nil {
		return x.LastSeq
	}
	return 0
}

// ShipWelcome answers a hello.
type ShipWelcome struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Names the coordinator, for logs.
	CoordinatorId string `protobuf:"bytes,1,opt,name=coordinator_id,json=coordinatorId,proto3" json:"coordinator_id,omitempty"`
	// What the cloud holds for this node: every number in 1..acked_through
	// is covered (see the file comment).
	AckedThrough uint64 `protobuf:"varint,2,opt,name=acked_through,json=ackedThrough,proto3" json:"acked_through,omitempty"`
	// Runs of covered sequence numbers above acked_through, ascending and
	// disjoint, at most 1024 (the lowest ones when there are more). A segment
	// whose seq lies in a run is held and must not be sent again.
	Held []*SeqRange `protobuf:"bytes,3,rep,name=held,proto3" json:"held,omitempty"`
	// Largest uncompressed segment the coordinator accepts (0: 256 MiB).
	MaxSegmentBytes uint64 `protobuf:"varint,4,opt,name=max_segment_bytes,json=maxSegmentBytes,proto3" json:"max_segment_bytes,omitempty"`
	// Largest data field of one ShipSegment it accepts (0: 1 MiB; at least
	// 1024 otherwise).
	MaxPartBytes uint32 `protobuf:"varint,5,opt,name=max_part_bytes,json=maxPartBytes,proto3" json:"max_part_bytes,omitempty"`
	// The fleet configuration at welcome time (absent from older
	// coordinators). Later changes arrive as ShipResponse.config.
	Config *EdgeConfig `protobuf:"bytes,6,opt,name=config,proto3" json:"config,omitempty"`
	// Optional protocol features the coordinator understands: "announce"
	// (it answers ShipRequest.announce). Absent from older coordinators: an
	// edge sends them no announcement.
	Features []string `protobuf:"bytes,7,rep,name=features,proto3" json:"features,omitempty"`
	// The segment format versions (the version byte of the node/wal
	// segment header) the coordinator, and so the cloud, reads. Empty: 1
	// only, as from coordinators older than this field. An edge never
	// sends a segment of a version the welcome does not list; it keeps it
	// and ships it on a later stream to a coordinator that lists it.
	SegmentFormats []uint32 `protobuf:"varint,8,rep,packed,name=segment_formats,json=segmentFormats,proto3" json:"segment_formats,omitempty"`
	// The fleet's rule groups that select this edge, at welcome time
	// (absent from coordinators older than this field). Later changes
	// arrive as ShipResponse.rule_groups.
	RuleGroups    *EdgeRuleGroups `protobuf:"bytes,20,opt,name=rule_groups,json=ruleGroups,proto3" json:"rule_groups,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipWelcome) Reset() {
	*x = ShipWelcome{}
	mi := &file_tributary_v1_replication_proto_msgTypes[20]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipWelcome) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipWelcome) ProtoMessage() {}

func (x *ShipWelcome) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[20]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipWelcome.ProtoReflect.Descriptor instead.
func (*ShipWelcome) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{20}
}

func (x *ShipWelcome) GetCoordinatorId() string {
	if x != nil {
		return x.CoordinatorId
	}
	return ""
}

func (x *ShipWelcome) GetAckedThrough() uint64 {
	if x != nil {
		return x.AckedThrough
	}
	return 0
}

func (x *ShipWelcome) GetHeld() []*SeqRange {
	if x != nil {
		return x.Held
	}
	return nil
}

func (x *ShipWelcome) GetMaxSegmentBytes() uint64 {
	if x != nil {
		return x.MaxSegmentBytes
	}
	return 0
}

func (x *ShipWelcome) GetMaxPartBytes() uint32 {
	if x != nil {
		return x.MaxPartBytes
	}
	return 0
}

func (x *ShipWelcome) GetConfig() *EdgeConfig {
	if x != nil {
		return x.Config
	}
	return nil
}

func (x *ShipWelcome) GetFeatures() []string {
	if x != nil {
		return x.Features
	}
	return nil
}

func (x *ShipWelcome) GetSegmentFormats() []uint32 {
	if x != nil {
		return x.SegmentFormats
	}
	return nil
}

func (x *ShipWelcome) GetRuleGroups() *EdgeRuleGroups {
	if x != nil {
		return x.RuleGroups
	}
	return nil
}

// ShipSegment is one part of one sealed segment. A segment is sent as one or
// more parts in a row; every part repeats the metadata fields (1 to 12)
// unchanged, and offset says where its data starts in the compressed stream.
type ShipSegment struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Must equal the hello's node_id.
	NodeId string `protobuf:"bytes,1,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	// The segment's sequence number (>= 1) and that of the segment sealed
	// before it (0 for the first).
	Seq     uint64 `protobuf:"varint,2,opt,name=seq,proto3" json:"seq,omitempty"`
	PrevSeq uint64 `protobuf:"varint,3,opt,name=prev_seq,json=prevSeq,proto3" json:"prev_seq,omitempty"`
	// The CRC32C (Castagnoli) stored in the segment's footer, over every byte
	// of the uncompressed file before that field.
	Crc32C      uint32             `protobuf:"fixed32,4,opt,name=crc32c,proto3" json:"crc32c,omitempty"`
	Compression SegmentCompression `protobuf:"varint,5,opt,name=compression,proto3,enum=tributary.v1.SegmentCompression" json:"compression,omitempty"`
	// Size of the segment file.
	UncompressedBytes uint64 `protobuf:"varint,6,opt,name=uncompressed_bytes,json=uncompressedBytes,proto3" json:"uncompressed_bytes,omitempty"`
	// Size of the compressed stream (the sum of every part's data).
	CompressedBytes uint64 `protobuf:"varint,7,opt,name=compressed_bytes,json=compressedBytes,proto3" json:"compressed_bytes,omitempty"`
	// From the segment's footer: records and points it holds, and the time
	// span (ms since the epoch) of the records that carry points (both 0 when
	// none do).
	Records   int64 `protobuf:"varint,8,opt,name=records,proto3" json:"records,omitempty"`
	Points    int64 `protobuf:"varint,9,opt,name=points,proto3" json:"points,omitempty"`
	MinTimeMs int64 `protobuf:"varint,10,opt,name=min_time_ms,json=minTimeMs,proto3" json:"min_time_ms,omitempty"`
	MaxTimeMs int64 `protobuf:"varint,11,opt,name=max_time_ms,json=maxTimeMs,proto3" json:"max_time_ms,omitempty"`
	// This part's position in the compressed stream and its bytes (never
	// empty, at most the welcome's max_part_bytes).
	Offset uint64 `protobuf:"varint,12,opt,name=offset,proto3" json:"offset,omitempty"`
	Data   []byte `protobuf:"bytes,13,opt,name=data,proto3" json:"data,omitempty"`
	// Set only on a backfill: a segment the edge built from its local store
	// to fill a gap it declared before (BACKLOG_OVERFLOW, or MISSING when the
	// store holds the lost segments' points; same file format, covering
	// sequence numbers of the gap). Its file may hold more points
	// than the gap did (neighbouring segments' points in the same time
	// span; replaying them changes nothing), so this carries the points the
	// gap declared for the sequence numbers the segment covers, and the
	// coordinator records that count instead of the footer's. A gap
	// backfilled in several segments puts its points on the last one and 0
	// on the others. Must be >= 0 and the same on every part.
	BackfillPoints *int64 `protobuf:"varint,14,opt,name=backfill_points,json=backfillPoints,proto3,oneof" json:"backfill_points,omitempty"`
	// W3C trace context (a `traceparent` header value,
	// "00-<32 hex trace id>-<16 hex span id>-<2 hex flags>") of the edge's
	// span for shipping this segment, so the coordinator's intake, replica
	// and catalog spans join the trace that began when the edge sealed the
	// segment. Empty when the edge does not trace. Set on the first part
	// only (offset 0); the coordinator ignores it on later parts and
	// ignores a value it cannot parse (tracing never fails a shipment).
	Traceparent   string `protobuf:"bytes,15,opt,name=traceparent,proto3" json:"traceparent,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipSegment) Reset() {
	*x = ShipSegment{}
	mi := &file_tributary_v1_replication_proto_msgTypes[21]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipSegment) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipSegment) ProtoMessage() {}

func (x *ShipSegment) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[21]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipSegment.ProtoReflect.Descriptor instead.
func (*ShipSegment) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{21}
}

func (x *ShipSegment) GetNodeId() string {
	if x != nil {
		return x.NodeId
	}
	return ""
}

func (x *ShipSegment) GetSeq() uint64 {
	if x != nil {
		return x.Seq
	}
	return 0
}

func (x *ShipSegment) GetPrevSeq() uint64 {
	if x != nil {
		return x.PrevSeq
	}
	return 0
}

func (x *ShipSegment) GetCrc32C() uint32 {
	if x != nil {
		return x.Crc32C
	}
	return 0
}

func (x *ShipSegment) GetCompression() SegmentCompression {
	if x != nil {
		return x.Compression
	}
	return SegmentCompression_SEGMENT_COMPRESSION_UNSPECIFIED
}

func (x *ShipSegment) GetUncompressedBytes() uint64 {
	if x != nil {
		return x.UncompressedBytes
	}
	return 0
}

func (x *ShipSegment) GetCompressedBytes() uint64 {
	if x != nil {
		return x.CompressedBytes
	}
	return 0
}

func (x *ShipSegment) GetRecords() int64 {
	if x != nil {
		return x.Records
	}
	return 0
}

func (x *ShipSegment) GetPoints() int64 {
	if x != nil {
		return x.Points
	}
	return 0
}

func (x *ShipSegment) GetMinTimeMs() int64 {
	if x != nil {
		return x.MinTimeMs
	}
	return 0
}

func (x *ShipSegment) GetMaxTimeMs() int64 {
	if x != nil {
		return x.MaxTimeMs
	}
	return 0
}

func (x *ShipSegment) GetOffset() uint64 {
	if x != nil {
		return x.Offset
	}
	return 0
}

func (x *ShipSegment) GetData() []byte {
	if x != nil {
		return x.Data
	}
	return nil
}

func (x *ShipSegment) GetBackfillPoints() int64 {
	if x != nil && x.BackfillPoints != nil {
		return *x.BackfillPoints
	}
	return 0
}

func (x *ShipSegment) GetTraceparent() string {
	if x != nil {
		return x.Traceparent
	}
	return ""
}

// ShipGap declares that the edge will not ship the segments covering
// after_seq+1 .. through_seq. The coordinator records it durably in the
// catalog (so acked_through can move past it and the gap stays visible),
// then acknowledges with ShipAck.gap_through = through_seq. Declaring the
// same gap twice records it once. A gap may cover segments the cloud holds:
// the held segments win.
type ShipGap struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// Must equal the hello's node_id.
	NodeId     string    `protobuf:"bytes,1,opt,name=node_id,json=nodeId,proto3" json:"node_id,omitempty"`
	AfterSeq   uint64    `protobuf:"varint,2,opt,name=after_seq,json=afterSeq,proto3" json:"after_seq,omitempty"`
	ThroughSeq uint64    `protobuf:"varint,3,opt,name=through_seq,json=throughSeq,proto3" json:"through_seq,omitempty"`
	Reason     GapReason `protobuf:"varint,4,opt,name=reason,proto3,enum=tributary.v1.GapReason" json:"reason,omitempty"`
	// Segments and points in the gap; segments is 0 and points -1 when
	// unknown.
	Segments uint64 `protobuf:"varint,5,opt,name=segments,proto3" json:"segments,omitempty"`
	Points   int64  `protobuf:"varint,6,opt,name=points,proto3" json:"points,omitempty"`
	// Time span (ms since the epoch) of those points; both 0 when unknown.
	MinTimeMs     int64 `protobuf:"varint,7,opt,name=min_time_ms,json=minTimeMs,proto3" json:"min_time_ms,omitempty"`
	MaxTimeMs     int64 `protobuf:"varint,8,opt,name=max_time_ms,json=maxTimeMs,proto3" json:"max_time_ms,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipGap) Reset() {
	*x = ShipGap{}
	mi := &file_tributary_v1_replication_proto_msgTypes[22]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipGap) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipGap) ProtoMessage() {}

func (x *ShipGap) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[22]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipGap.ProtoReflect.Descriptor instead.
func (*ShipGap) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{22}
}

func (x *ShipGap) GetNodeId() string {
	if x != nil {
		return x.NodeId
	}
	return ""
}

func (x *ShipGap) GetAfterSeq() uint64 {
	if x != nil {
		return x.AfterSeq
	}
	return 0
}

func (x *ShipGap) GetThroughSeq() uint64 {
	if x != nil {
		return x.ThroughSeq
	}
	return 0
}

func (x *ShipGap) GetReason() GapReason {
	if x != nil {
		return x.Reason
	}
	return GapReason_GAP_REASON_UNSPECIFIED
}

func (x *ShipGap) GetSegments() uint64 {
	if x != nil {
		return x.Segments
	}
	return 0
}

func (x *ShipGap) GetPoints() int64 {
	if x != nil {
		return x.Points
	}
	return 0
}

func (x *ShipGap) GetMinTimeMs() int64 {
	if x != nil {
		return x.MinTimeMs
	}
	return 0
}

func (x *ShipGap) GetMaxTimeMs() int64 {
	if x != nil {
		return x.MaxTimeMs
	}
	return 0
}

// ShipAck says a segment or a gap is durable in the cloud.
type ShipAck struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The acknowledged segment, or 0.
	Seq uint64 `protobuf:"varint,1,opt,name=seq,proto3" json:"seq,omitempty"`
	// The acknowledged gap's through_seq, or 0.
	GapThrough uint64 `protobuf:"varint,2,opt,name=gap_through,json=gapThrough,proto3" json:"gap_through,omitempty"`
	// The node's acked_through after this ack (see the file comment).
	AckedThrough  uint64 `protobuf:"varint,3,opt,name=acked_through,json=ackedThrough,proto3" json:"acked_through,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipAck) Reset() {
	*x = ShipAck{}
	mi := &file_tributary_v1_replication_proto_msgTypes[23]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipAck) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipAck) ProtoMessage() {}

func (x *ShipAck) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[23]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipAck.ProtoReflect.Descriptor instead.
func (*ShipAck) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{23}
}

func (x *ShipAck) GetSeq() uint64 {
	if x != nil {
		return x.Seq
	}
	return 0
}

func (x *ShipAck) GetGapThrough() uint64 {
	if x != nil {
		return x.GapThrough
	}
	return 0
}

func (x *ShipAck) GetAckedThrough() uint64 {
	if x != nil {
		return x.AckedThrough
	}
	return 0
}

// ShipError refuses one segment or one gap. The stream stays open. The
// edge resends a retryable refusal (after a delay, possibly on another
// stream) and reports a non-retryable one to its operator; it keeps the
// segment either way.
type ShipError struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// The refused segment, or 0.
	Seq uint64 `protobuf:"varint,1,opt,name=seq,proto3" json:"seq,omitempty"`
	// The refused gap's through_seq, or 0.
	GapThrough uint64        `protobuf:"varint,2,opt,name=gap_through,json=gapThrough,proto3" json:"gap_through,omitempty"`
	Code       ShipErrorCode `protobuf:"varint,3,opt,name=code,proto3,enum=tributary.v1.ShipErrorCode" json:"code,omitempty"`
	Retryable  bool          `protobuf:"varint,4,opt,name=retryable,proto3" json:"retryable,omitempty"`
	// Human-readable: what was wrong, naming the field and values.
	Message       string `protobuf:"bytes,5,opt,name=message,proto3" json:"message,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *ShipError) Reset() {
	*x = ShipError{}
	mi := &file_tributary_v1_replication_proto_msgTypes[24]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *ShipError) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ShipError) ProtoMessage() {}

func (x *ShipError) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[24]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ShipError.ProtoReflect.Descriptor instead.
func (*ShipError) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{24}
}

func (x *ShipError) GetSeq() uint64 {
	if x != nil {
		return x.Seq
	}
	return 0
}

func (x *ShipError) GetGapThrough() uint64 {
	if x != nil {
		return x.GapThrough
	}
	return 0
}

func (x *ShipError) GetCode() ShipErrorCode {
	if x != nil {
		return x.Code
	}
	return ShipErrorCode_SHIP_ERROR_CODE_UNSPECIFIED
}

func (x *ShipError) GetRetryable() bool {
	if x != nil {
		return x.Retryable
	}
	return false
}

func (x *ShipError) GetMessage() string {
	if x != nil {
		return x.Message
	}
	return ""
}

// EdgeConfig is the part of the fleet configuration that an edge applies
// (tributary.v1.FleetConfig, set with ClusterService.SetFleetConfig). An
// edge applies a config only when its version is higher than the last one
// it applied.
type EdgeConfig struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// version is the raft index of the change that set the configuration
	// (0: the catalog's defaults).
	Version uint64 `protobuf:"varint,1,opt,name=version,proto3" json:"version,omitempty"`
	// Retention per tier, milliseconds (all positive).
	RetentionRawMs int64 `protobuf:"varint,2,opt,name=retention_raw_ms,json=retentionRawMs,proto3" json:"retention_raw_ms,omitempty"`
	Retention_1HMs int64 `protobuf:"varint,3,opt,name=retention_1h_ms,json=retention1hMs,proto3" json:"retention_1h_ms,omitempty"`
	Retention_1DMs int64 `protobuf:"varint,4,opt,name=retention_1d_ms,json=retention1dMs,proto3" json:"retention_1d_ms,omitempty"`
	// Which rollup tiers to compute. Informational: edges compute both.
	RollupHourly bool `protobuf:"varint,5,opt,name=rollup_hourly,json=rollupHourly,proto3" json:"rollup_hourly,omitempty"`
	RollupDaily  bool `protobuf:"varint,6,opt,name=rollup_daily,json=rollupDaily,proto3" json:"rollup_daily,omitempty"`
	// Ingest rate limit, points per second (0: unlimited), and its
	// token-bucket burst (0: one second of the rate).
	RateLimitPointsPerSec uint64 `protobuf:"varint,7,opt,name=rate_limit_points_per_sec,json=rateLimitPointsPerSec,proto3" json:"rate_limit_points_per_sec,omitempty"`
	RateLimitBurstPoints  uint64 `protobuf:"varint,8,opt,name=rate_limit_burst_points,json=rateLimitBurstPoints,proto3" json:"rate_limit_burst_points,omitempty"`
	// The seal policy: the lag budget (the WAL segment age, milliseconds,
	// always set by coordinators that send it) and the minimum points per
	// segment (0: none). 0 lag budget: the sender predates it; the edge
	// keeps its own.
	LagBudgetMs      int64  `protobuf:"varint,9,opt,name=lag_budget_ms,json=lagBudgetMs,proto3" json:"lag_budget_ms,omitempty"`
	MinSegmentPoints uint64 `protobuf:"varint,10,opt,name=min_segment_points,json=minSegmentPoints,proto3" json:"min_segment_points,omitempty"`
	unknownFields    protoimpl.UnknownFields
	sizeCache        protoimpl.SizeCache
}

func (x *EdgeConfig) Reset() {
	*x = EdgeConfig{}
	mi := &file_tributary_v1_replication_proto_msgTypes[25]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *EdgeConfig) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*EdgeConfig) ProtoMessage() {}

func (x *EdgeConfig) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[25]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use EdgeConfig.ProtoReflect.Descriptor instead.
func (*EdgeConfig) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{25}
}

func (x *EdgeConfig) GetVersion() uint64 {
	if x != nil {
		return x.Version
	}
	return 0
}

func (x *EdgeConfig) GetRetentionRawMs() int64 {
	if x != nil {
		return x.RetentionRawMs
	}
	return 0
}

func (x *EdgeConfig) GetRetention_1HMs() int64 {
	if x != nil {
		return x.Retention_1HMs
	}
	return 0
}

func (x *EdgeConfig) GetRetention_1DMs() int64 {
	if x != nil {
		return x.Retention_1DMs
	}
	return 0
}

func (x *EdgeConfig) GetRollupHourly() bool {
	if x != nil {
		return x.RollupHourly
	}
	return false
}

func (x *EdgeConfig) GetRollupDaily() bool {
	if x != nil {
		return x.RollupDaily
	}
	return false
}

func (x *EdgeConfig) GetRateLimitPointsPerSec() uint64 {
	if x != nil {
		return x.RateLimitPointsPerSec
	}
	return 0
}

func (x *EdgeConfig) GetRateLimitBurstPoints() uint64 {
	if x != nil {
		return x.RateLimitBurstPoints
	}
	return 0
}

func (x *EdgeConfig) GetLagBudgetMs() int64 {
	if x != nil {
		return x.LagBudgetMs
	}
	return 0
}

func (x *EdgeConfig) GetMinSegmentPoints() uint64 {
	if x != nil {
		return x.MinSegmentPoints
	}
	return 0
}

// EdgeRuleGroups is the whole set of the fleet's rule groups whose
// selector matches the edge's labels (ClusterService.SetRuleGroup). It
// replaces the set the edge had: a group absent from it is no longer
// evaluated. An edge applies a set only when its version is higher than
// the last one it applied, and keeps the set it applied (in its data
// directory) across restarts.
type EdgeRuleGroups struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// version is the catalog's applied raft index when the set was taken:
	// every change to the rule groups or to the edge's labels up to that
	// index is in it (0: no rule group was ever set).
	Version uint64 `protobuf:"varint,1,opt,name=version,proto3" json:"version,omitempty"`
	// The groups, sorted by name.
	Groups        []*EdgeRuleGroup `protobuf:"bytes,2,rep,name=groups,proto3" json:"groups,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *EdgeRuleGroups) Reset() {
	*x = EdgeRuleGroups{}
	mi := &file_tributary_v1_replication_proto_msgTypes[26]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *EdgeRuleGroups) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*EdgeRuleGroups) ProtoMessage() {}

func (x *EdgeRuleGroups) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[26]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use EdgeRuleGroups.ProtoReflect.Descriptor instead.
func (*EdgeRuleGroups) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{26}
}

func (x *EdgeRuleGroups) GetVersion() uint64 {
	if x != nil {
		return x.Version
	}
	return 0
}

func (x *EdgeRuleGroups) GetGroups() []*EdgeRuleGroup {
	if x != nil {
		return x.Groups
	}
	return nil
}

// EdgeRuleGroup is one rule group of the fleet.
type EdgeRuleGroup struct {
	state protoimpl.MessageState `protogen:"open.v1"`
	// name is the group's name (unique in the fleet).
	Name string `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	// yaml is a Prometheus rule file holding exactly this group.
	Yaml string `protobuf:"bytes,2,opt,name=yaml,proto3" json:"yaml,omitempty"`
	// selector is the edge selector that chose the edge, for logs.
	Selector string `protobuf:"bytes,3,opt,name=selector,proto3" json:"selector,omitempty"`
	// version is the raft index of the change that set the group.
	Version       uint64 `protobuf:"varint,4,opt,name=version,proto3" json:"version,omitempty"`
	unknownFields protoimpl.UnknownFields
	sizeCache     protoimpl.SizeCache
}

func (x *EdgeRuleGroup) Reset() {
	*x = EdgeRuleGroup{}
	mi := &file_tributary_v1_replication_proto_msgTypes[27]
	ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
	ms.StoreMessageInfo(mi)
}

func (x *EdgeRuleGroup) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*EdgeRuleGroup) ProtoMessage() {}

func (x *EdgeRuleGroup) ProtoReflect() protoreflect.Message {
	mi := &file_tributary_v1_replication_proto_msgTypes[27]
	if x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use EdgeRuleGroup.ProtoReflect.Descriptor instead.
func (*EdgeRuleGroup) Descriptor() ([]byte, []int) {
	return file_tributary_v1_replication_proto_rawDescGZIP(), []int{27}
}

func (x *EdgeRuleGroup) GetName() string {
	if x != nil {
		return x.Name
	}
	return ""
}

func (x *EdgeRuleGroup) GetYaml() string {
	if x != nil {
		return x.Yaml
	}
	return ""
}

func (x *EdgeRuleGroup) GetSelector() string {
	if x != nil {
		return x.Selector
	}
	return ""
}

func (x *EdgeRuleGroup) GetVersion() uint64 {
	if x != nil {
		return x.Version
	}
	return 0
}

var File_tributary_v1_replication_proto protoreflect.FileDescriptor

const file_tributary_v1_replication_proto_rawDesc = "" +
	"\n" +
	"\x1etributary/v1/replication.proto\x12\ftributary.v1\x1a\x1ctributary/v1/tributary.proto\"\x8c\x01\n" +
	"\x0eRestoreRequest\x12\x17\n" +
	"\anode_id\x18\x01 \x01(\tR\x06nodeId\x12\x19\n" +
	"\bstart_ms\x18\x02 \x01(\x03R\astartMs\x12 \n" +
	"\fraw_start_ms\x18\x03 \x01(\x03R\n" +
	"rawStartMs\x12$\n" +
	"\x0emax_file_bytes\x18\x04 \x01(\x04R\fmaxFileBytes\"\xec\x01\n" +
	"\x0fRestoreResponse\x125\n" +
	"\x06header\x18\x01 \x01(\v2\x1b.tributary.v1.RestoreHeaderH\x00R\x06header\x12/\n" +
	"\x04file\x18\x02 \x01(\v2\x19.tributary.v1.RestoreFileH\x00R\x04file\x128\n" +
	"\arollups\x18\x03 \x01(\v2\x1c.tributary.v1.RestoreRollupsH\x00R\arollups\x12/\n" +
	"\x04done\x18\x04 \x01(\v2\x19.tributary.v1.RestoreDoneH\x00R\x04doneB\x06\n" +
	"\x04body\"\xe4\x03\n" +
	"\rRestoreHeader\x12%\n" +
	"\x0ecoordinator_id\x18\x01 \x01(\tR\rcoordinatorId\x12\x19\n" +
	"\bnext_seq\x18\x02 \x01(\x04R\anextSeq\x12#\n" +
	"\racked_through\x18\x03 \x01(\x04R\fackedThrough\x12#\n" +
	"\rwatermark_seq\x18\x04 \x01(\x04R\fwatermarkSeq\x12*\n" +
	"\x11watermark_time_ms\x18\x05 \x01(\x03R\x0fwatermarkTimeMs\x120\n" +
	"\amissing\x18\x06 \x03(\v2\x16.tributary.v1.SeqRangeR\amissing\x12\x1f\n" +
	"\vheld_points\x18\a \x01(\x04R\n" +
	"heldPoints\x12!\n" +
	"\fgap_segments\x18\b \x01(\x04R\vgapSegments\x12\x1d\n" +
	"\n" +
	"gap_points\x18\t \x01(\x03R\tgapPoints\x12\x1e\n" +
	"\vmin_time_ms\x18\n" +
	" \x01(\x03R\tminTimeMs\x12\x1e\n" +
	"\vmax_time_ms\x18\v \x01(\x03R\tmaxTimeMs\x12 \n" +
	"\fraw_start_ms\x18\f \x01(\x03R\n" +
	"rawStartMs\x12$\n" +
	"\x0emax_file_bytes\x18\r \x01(\x04R\fmaxFileBytes\"\x84\x02\n" +
	"\vRestoreFile\x12B\n" +
	"\vcompression\x18\x01 \x01(\x0e2 .tributary.v1.SegmentCompressionR\vcompression\x12-\n" +
	"\x12uncompressed_bytes\x18\x02 \x01(\x04R\x11uncompressedBytes\x12\x12\n" +
	"\x04data\x18\x03 \x01(\fR\x04data\x12\x16\n" +
	"\x06crc32c\x18\x04 \x01(\aR\x06crc32c\x12\x16\n" +
	"\x06points\x18\x05 \x01(\x03R\x06points\x12\x1e\n" +
	"\vmin_time_ms\x18\x06 \x01(\x03R\tminTimeMs\x12\x1e\n" +
	"\vmax_time_ms\x18\a \x01(\x03R\tmaxTimeMs\"K\n" +
	"\x0eRestoreRollups\x129\n" +
	"\x06series\x18\x01 \x03(\v2!.tributary.v1.RestoreRollupSeriesR\x06series\"\xb2\x01\n" +
	"\x13RestoreRollupSeries\x12+\n" +
	"\x06labels\x18\x01 \x03(\v2\x13.tributary.v1.LabelR\x06labels\x127\n" +
	"\x06hourly\x18\x02 \x03(\v2\x1f.tributary.v1.RestoreRollupPackR\x06hourly\x125\n" +
	"\x05daily\x18\x03 \x03(\v2\x1f.tributary.v1.RestoreRollupPackR\x05daily\"B\n" +
	"\x11RestoreRollupPack\x12\x19\n" +
	"\bstart_ms\x18\x01 \x01(\x03R\astartMs\x12\x12\n" +
	"\x04data\x18\x02 \x01(\fR\x04data\"\x8a\x01\n" +
	"\vRestoreDone\x12\x14\n" +
	"\x05files\x18\x01 \x01(\x03R\x05files\x12\x1d\n" +
	"\n" +
	"raw_points\x18\x02 \x01(\x03R\trawPoints\x12#\n" +
	"\rrollup_series\x18\x03 \x01(\x03R\frollupSeries\x12!\n" +
	"\frollup_packs\x18\x04 \x01(\x03R\vrollupPacks\"`\n" +
	"\rTunnelRequest\x121\n" +
	"\x05hello\x18\x01 \x01(\v2\x19.tributary.v1.TunnelHelloH\x00R\x05hello\x12\x14\n" +
	"\x04data\x18\x02 \x01(\fH\x00R\x04dataB\x06\n" +
	"\x04body\"$\n" +
	"\x0eTunnelResponse\x12\x12\n" +
	"\x04data\x18\x01 \x01(\fR\x04data\"&\n" +
	"\vTunnelHello\x12\x17\n" +
	"\anode_id\x18\x01 \x01(\tR\x06nodeId\"\xb8\x02\n" +
	"\vShipRequest\x12/\n" +
	"\x05hello\x18\x01 \x01(\v2\x17.tributary.v1.ShipHelloH\x00R\x05hello\x125\n" +
	"\asegment\x18\x02 \x01(\v2\x19.tributary.v1.ShipSegmentH\x00R\asegment\x12)\n" +
	"\x03gap\x18\x03 \x01(\v2\x15.tributary.v1.ShipGapH\x00R\x03gap\x12T\n" +
	"\x12reship_unavailable\x18\x04 \x01(\v2#.tributary.v1.ShipReshipUnavailableH\x00R\x11reshipUnavailable\x128\n" +
	"\bannounce\x18\x05 \x01(\v2\x1a.tributary.v1.ShipAnnounceH\x00R\bannounceB\x06\n" +
	"\x04body\"\x8f\x03\n" +
	"\fShipResponse\x125\n" +
	"\awelcome\x18\x01 \x01(\v2\x19.tributary.v1.ShipWelcomeH\x00R\awelcome\x12)\n" +
	"\x03ack\x18\x02 \x01(\v2\x15.tributary.v1.ShipAckH\x00R\x03ack\x12/\n" +
	"\x05error\x18\x03 \x01(\v2\x17.tributary.v1.ShipErrorH\x00R\x05error\x122\n" +
	"\x06config\x18\x04 \x01(\v2\x18.tributary.v1.EdgeConfigH\x00R\x06config\x122\n" +
	"\x06reship\x18\x05 \x01(\v2\x18.tributary.v1.ShipReshipH\x00R\x06reship\x12;\n" +
	"\tannounced\x18\x06 \x01(\v2\x1b.tributary.v1.ShipAnnouncedH\x00R\tannounced\x12?\n" +
	"\vrule_groups\x18\x14 \x01(\v2\x1c.tributary.v1.EdgeRuleGroupsH\x00R\n" +
	"ruleGroupsB\x06\n" +
	"\x04body\"\x88\x01\n" +
	"\fShipAnnounce\x12\x0e\n" +
	"\x02id\x18\x01 \x01(\x04R\x02id\x125\n" +
	"\x06series\x18\x02 \x03(\v2\x1d.tributary.v1.AnnouncedSeriesR\x06series\x12\x1d\n" +
	"\n" +
	"through_ms\x18\x03 \x01(\x03R\tthroughMs\x12\x12\n" +
	"\x04more\x18\x04 \x01(\bR\x04more\">\n" +
	"\x0fAnnouncedSeries\x12+\n" +
	"\x06labels\x18\x01 \x03(\v2\x13.tributary.v1.LabelR\x06labels\"t\n" +
	"\rShipAnnounced\x12\x0e\n" +
	"\x02id\x18\x01 \x01(\x04R\x02id\x12\x1d\n" +
	"\n" +
	"through_ms\x18\x02 \x01(\x03R\tthroughMs\x12\x1e\n" +
	"\n" +
	"registered\x18\x03 \x01(\bR\n" +
	"registered\x12\x14\n" +
	"\x05error\x18\x04 \x01(\tR\x05error\"\x84\x01\n" +
	"\n" +
	"ShipReship\x12\x1b\n" +
	"\tfirst_seq\x18\x01 \x01(\x04R\bfirstSeq\x12\x19\n" +
	"\blast_seq\x18\x02 \x01(\x04R\alastSeq\x12\x1e\n" +
	"\vmin_time_ms\x18\x03 \x01(\x03R\tminTimeMs\x12\x1e\n" +
	"\vmax_time_ms\x18\x04 \x01(\x03R\tmaxTimeMs\"g\n" +
	"\x15ShipReshipUnavailable\x12\x1b\n" +
	"\tfirst_seq\x18\x01 \x01(\x04R\bfirstSeq\x12\x19\n" +
	"\blast_seq\x18\x02 \x01(\x04R\alastSeq\x12\x16\n" +
	"\x06reason\x18\x03 \x01(\tR\x06reason\"\xe3\x02\n" +
	"\tShipHello\x12\x17\n" +
	"\anode_id\x18\x01 \x01(\tR\x06nodeId\x12)\n" +
	"\x10software_version\x18\x02 \x01(\tR\x0fsoftwareVersion\x12)\n" +
	"\x10protocol_version\x18\x03 \x01(\rR\x0fprotocolVersion\x12#\n" +
	"\racked_through\x18\x04 \x01(\x04R\fackedThrough\x12.\n" +
	"\x13oldest_retained_seq\x18\x05 \x01(\x04R\x11oldestRetainedSeq\x12*\n" +
	"\x11newest_sealed_seq\x18\x06 \x01(\x04R\x0fnewestSealedSeq\x12\x1d\n" +
	"\n" +
	"query_addr\x18\a \x01(\tR\tqueryAddr\x12\x1a\n" +
	"\bfeatures\x18\b \x03(\tR\bfeatures\x12+\n" +
	"\x06labels\x18\x14 \x03(\v2\x13.tributary.v1.LabelR\x06labels\"B\n" +
	"\bSeqRange\x12\x1b\n" +
	"\tfirst_seq\x18\x01 \x01(\x04R\bfirstSeq\x12\x19\n" +
	"\blast_seq\x18\x02 \x01(\x04R\alastSeq\"\x8d\x03\n" +
	"\vShipWelcome\x12%\n" +
	"\x0ecoordinator_id\x18\x01 \x01(\tR\rcoordinatorId\x12#\n" +
	"\racked_through\x18\x02 \x01(\x04R\fackedThrough\x12*\n" +
	"\x04held\x18\x03 \x03(\v2\x16.tributary.v1.SeqRangeR\x04held\x12*\n" +
	"\x11max_segment_bytes\x18\x04 \x01(\x04R\x0fmaxSegmentBytes\x12$\n" +
	"\x0emax_part_bytes\x18\x05 \x01(\rR\fmaxPartBytes\x120\n" +
	"\x06config\x18\x06 \x01(\v2\x18.tributary.v1.EdgeConfigR\x06config\x12\x1a\n" +
	"\bfeatures\x18\a \x03(\tR\bfeatures\x12'\n" +
	"\x0fsegment_formats\x18\b \x03(\rR\x0esegmentFormats\x12=\n" +
	"\vrule_groups\x18\x14 \x01(\v2\x1c.tributary.v1.EdgeRuleGroupsR\n" +
	"ruleGroups\"\x8b\x04\n" +
	"\vShipSegment\x12\x17\n" +
	"\anode_id\x18\x01 \x01(\tR\x06nodeId\x12\x10\n" +
	"\x03seq\x18\x02 \x01(\x04R\x03seq\x12\x19\n" +
	"\bprev_seq\x18\x03 \x01(\x04R\aprevSeq\x12\x16\n" +
	"\x06crc32c\x18\x04 \x01(\aR\x06crc32c\x12B\n" +
	"\vcompression\x18\x05 \x01(\x0e2 .tributary.v1.SegmentCompressionR\vcompression\x12-\n" +
	"\x12uncompressed_bytes\x18\x06 \x01(\x04R\x11uncompressedBytes\x12)\n" +
	"\x10compressed_bytes\x18\a \x01(\x04R\x0fcompressedBytes\x12\x18\n" +
	"\arecords\x18\b \x01(\x03R\arecords\x12\x16\n" +
	"\x06points\x18\t \x01(\x03R\x06points\x12\x1e\n" +
	"\vmin_time_ms\x18\n" +
	" \x01(\x03R\tminTimeMs\x12\x1e\n" +
	"\vmax_time_ms\x18\v \x01(\x03R\tmaxTimeMs\x12\x16\n" +
	"\x06offset\x18\f \x01(\x04R\x06offset\x12\x12\n" +
	"\x04data\x18\r \x01(\fR\x04data\x12,\n" +
	"\x0fbackfill_points\x18\x0e \x01(\x03H\x00R\x0ebackfillPoints\x88\x01\x01\x12 \n" +
	"\vtraceparent\x18\x0f \x01(\tR\vtraceparentB\x12\n" +
	"\x10_backfill_points\"\x85\x02\n" +
	"\aShipGap\x12\x17\n" +
	"\anode_id\x18\x01 \x01(\tR\x06nodeId\x12\x1b\n" +
	"\tafter_seq\x18\x02 \x01(\x04R\bafterSeq\x12\x1f\n" +
	"\vthrough_seq\x18\x03 \x01(\x04R\n" +
	"throughSeq\x12/\n" +
	"\x06reason\x18\x04 \x01(\x0e2\x17.tributary.v1.GapReasonR\x06reason\x12\x1a\n" +
	"\bsegments\x18\x05 \x01(\x04R\bsegments\x12\x16\n" +
	"\x06points\x18\x06 \x01(\x03R\x06points\x12\x1e\n" +
	"\vmin_time_ms\x18\a \x01(\x03R\tminTimeMs\x12\x1e\n" +
	"\vmax_time_ms\x18\b \x01(\x03R\tmaxTimeMs\"a\n" +
	"\aShipAck\x12\x10\n" +
	"\x03seq\x18\x01 \x01(\x04R\x03seq\x12\x1f\n" +
	"\vgap_through\x18\x02 \x01(\x04R\n" +
	"gapThrough\x12#\n" +
	"\racked_through\x18\x03 \x01(\x04R\fackedThrough\"\xa7\x01\n" +
	"\tShipError\x12\x10\n" +
	"\x03seq\x18\x01 \x01(\x04R\x03seq\x12\x1f\n" +
	"\vgap_through\x18\x02 \x01(\x04R\n" +
	"gapThrough\x12/\n" +
	"\x04code\x18\x03 \x01(\x0e2\x1b.tributary.v1.ShipErrorCodeR\x04code\x12\x1c\n" +
	"\tretryable\x18\x04 \x01(\bR\tretryable\x12\x18\n" +
	"\amessage\x18\x05 \x01(\tR\amessage\"\xab\x03\n" +
	"\n" +
	"EdgeConfig\x12\x18\n" +
	"\aversion\x18\x01 \x01(\x04R\aversion\x12(\n" +
	"\x10retention_raw_ms\x18\x02 \x01(\x03R\x0eretentionRawMs\x12&\n" +
	"\x0fretention_1h_ms\x18\x03 \x01(\x03R\rretention1hMs\x12&\n" +
	"\x0fretention_1d_ms\x18\x04 \x01(\x03R\rretention1dMs\x12#\n" +
	"\rrollup_hourly\x18\x05 \x01(\bR\frollupHourly\x12!\n" +
	"\frollup_daily\x18\x06 \x01(\bR\vrollupDaily\x128\n" +
	"\x19rate_limit_points_per_sec\x18\a \x01(\x04R\x15rateLimitPointsPerSec\x125\n" +
	"\x17rate_limit_burst_points\x18\b \x01(\x04R\x14rateLimitBurstPoints\x12\"\n" +
	"\rlag_budget_ms\x18\t \x01(\x03R\vlagBudgetMs\x12,\n" +
	"\x12min_segment_points\x18\n" +
	" \x01(\x04R\x10minSegmentPoints\"_\n" +
	"\x0eEdgeRuleGroups\x12\x18\n" +
	"\aversion\x18\x01 \x01(\x04R\aversion\x123\n" +
	"\x06groups\x18\x02 \x03(\v2\x1b.tributary.v1.EdgeRuleGroupR\x06groups\"m\n" +
	"\rEdgeRuleGroup\x12\x12\n" +
	"\x04name\x18\x01 \x01(\tR\x04name\x12\x12\n" +
	"\x04yaml\x18\x02 \x01(\tR\x04yaml\x12\x1a\n" +
	"\bselector\x18\x03 \x01(\tR\bselector\x12\x18\n" +
	"\aversion\x18\x04 \x01(\x04R\aversion*u\n" +
	"\x12SegmentCompression\x12#\n" +
	"\x1fSEGMENT_COMPRESSION_UNSPECIFIED\x10\x00\x12\x1c\n" +
	"\x18SEGMENT_COMPRESSION_NONE\x10\x01\x12\x1c\n" +
	"\x18SEGMENT_COMPRESSION_ZSTD\x10\x02*x\n" +
	"\tGapReason\x12\x1a\n" +
	"\x16GAP_REASON_UNSPECIFIED\x10\x00\x12\x1f\n" +
	"\x1bGAP_REASON_BACKLOG_OVERFLOW\x10\x01\x12\x16\n" +
	"\x12GAP_REASON_DROPPED\x10\x02\x12\x16\n" +
	"\x12GAP_REASON_MISSING\x10\x03*\xd4\x01\n" +
	"\rShipErrorCode\x12\x1f\n" +
	"\x1bSHIP_ERROR_CODE_UNSPECIFIED\x10\x00\x12%\n" +
	"!SHIP_ERROR_CODE_CHECKSUM_MISMATCH\x10\x01\x12\x1c\n" +
	"\x18SHIP_ERROR_CODE_CONFLICT\x10\x02\x12\x1d\n" +
	"\x19SHIP_ERROR_CODE_MALFORMED\x10\x03\x12\x1d\n" +
	"\x19SHIP_ERROR_CODE_TOO_LARGE\x10\x04\x12\x1f\n" +
	"\x1bSHIP_ERROR_CODE_UNAVAILABLE\x10\x052\xea\x01\n" +
	"\x12ReplicationService\x12A\n" +
	"\x04Ship\x12\x19.tributary.v1.ShipRequest\x1a\x1a.tributary.v1.ShipResponse(\x010\x01\x12G\n" +
	"\x06Tunnel\x12\x1b.tributary.v1.TunnelRequest\x1a\x1c.tributary.v1.TunnelResponse(\x010\x01\x12H\n" +
	"\aRestore\x12\x1c.tributary.v1.RestoreRequest\x1a\x1d.tributary.v1.RestoreResponse0\x01BAZ?github.com/tributarydb/tributary/proto/tributary/v1;tributaryv1b\x06proto3"

var (
	file_tributary_v1_replication_proto_rawDescOnce sync.Once
	file_tributary_v1_replication_proto_rawDescData []byte
)

func file_tributary_v1_replication_proto_rawDescGZIP() []byte {
	file_tributary_v1_replication_proto_rawDescOnce.Do(func() {
		file_tributary_v1_replication_proto_rawDescData = protoimpl.X.CompressGZIP(unsafe.Slice(unsafe.StringData(file_tributary_v1_replication_proto_rawDesc), len(file_tributary_v1_replication_proto_rawDesc)))
	})
	return file_tributary_v1_replication_proto_rawDescData
}

var file_tributary_v1_replication_proto_enumTypes = make([]protoimpl.EnumInfo, 3)
var file_tributary_v1_replication_proto_msgTypes = make([]protoimpl.MessageInfo, 28)
var file_tributary_v1_replication_proto_goTypes = []any{
	(SegmentCompression)(0),       // 0: tributary.v1.SegmentCompression
	(GapReason)(0),                // 1: tributary.v1.GapReason
	(ShipErrorCode)(0),            // 2: tributary.v1.ShipErrorCode
	(*RestoreRequest)(nil),        // 3: tributary.v1.RestoreRequest
	(*RestoreResponse)(nil),       // 4: tributary.v1.RestoreResponse
	(*RestoreHeader)(nil),         // 5: tributary.v1.RestoreHeader
	(*RestoreFile)(nil),           // 6: tributary.v1.RestoreFile
	(*RestoreRollups)(nil),        // 7: tributary.v1.RestoreRollups
	(*RestoreRollupSeries)(nil),   // 8: tributary.v1.RestoreRollupSeries
	(*RestoreRollupPack)(nil),     // 9: tributary.v1.RestoreRollupPack
	(*RestoreDone)(nil),           // 10: tributary.v1.RestoreDone
	(*TunnelRequest)(nil),         // 11: tributary.v1.TunnelRequest
	(*TunnelResponse)(nil),        // 12: tributary.v1.TunnelResponse
	(*TunnelHello)(nil),           // 13: tributary.v1.TunnelHello
	(*ShipRequest)(nil),           // 14: tributary.v1.ShipRequest
	(*ShipResponse)(nil),          // 15: tributary.v1.ShipResponse
	(*ShipAnnounce)(nil),          // 16: tributary.v1.ShipAnnounce
	(*AnnouncedSeries)(nil),       // 17: tributary.v1.AnnouncedSeries
	(*ShipAnnounced)(nil),         // 18: tributary.v1.ShipAnnounced
	(*ShipReship)(nil),            // 19: tributary.v1.ShipReship
	(*ShipReshipUnavailable)(nil), // 20: tributary.v1.ShipReshipUnavailable
	(*ShipHello)(nil),             // 21: tributary.v1.ShipHello
	(*SeqRange)(nil),              // 22: tributary.v1.SeqRange
	(*ShipWelcome)(nil),           // 23: tributary.v1.ShipWelcome
	(*ShipSegment)(nil),           // 24: tributary.v1.ShipSegment
	(*ShipGap)(nil),               // 25: tributary.v1.ShipGap
	(*ShipAck)(nil),               // 26: tributary.v1.ShipAck
	(*ShipError)(nil),             // 27: tributary.v1.ShipError
	(*EdgeConfig)(nil),            // 28: tributary.v1.EdgeConfig
	(*EdgeRuleGroups)(nil),        // 29: tributary.v1.EdgeRuleGroups
	(*EdgeRuleGroup)(nil),         // 30: tributary.v1.EdgeRuleGroup
	(*Label)(nil),                 // 31: tributary.v1.Label
}
var file_tributary_v1_replication_proto_depIdxs = []int32{
	5,  // 0: tributary.v1.RestoreResponse.header:type_name -> tributary.v1.RestoreHeader
	6,  // 1: tributary.v1.RestoreResponse.file:type_name -> tributary.v1.RestoreFile
	7,  // 2: tributary.v1.RestoreResponse.rollups:type_name -> tributary.v1.RestoreRollups
	10, // 3: tributary.v1.RestoreResponse.done:type_name -> tributary.v1.RestoreDone
	22, // 4: tributary.v1.RestoreHeader.missing:type_name -> tributary.v1.SeqRange
	0,  // 5: tributary.v1.RestoreFile.compression:type_name -> tributary.v1.SegmentCompression
	8,  // 6: tributary.v1.RestoreRollups.series:type_name -> tributary.v1.RestoreRollupSeries
	31, // 7: tributary.v1.RestoreRollupSeries.labels:type_name -> tributary.v1.Label
	9,  // 8: tributary.v1.RestoreRollupSeries.hourly:type_name -> tributary.v1.RestoreRollupPack
	9,  // 9: tributary.v1.RestoreRollupSeries.daily:type_name -> tributary.v1.RestoreRollupPack
	13, // 10: tributary.v1.TunnelRequest.hello:type_name -> tributary.v1.TunnelHello
	21, // 11: tributary.v1.ShipRequest.hello:type_name -> tributary.v1.ShipHello
	24, // 12: tributary.v1.ShipRequest.segment:type_name -> tributary.v1.ShipSegment
	25, // 13: tributary.v1.ShipRequest.gap:type_name -> tributary.v1.ShipGap
	20, // 14: tributary.v1.ShipRequest.reship_unavailable:type_name -> tributary.v1.ShipReshipUnavailable
	16, // 15: tributary.v1.ShipRequest.announce:type_name -> tributary.v1.ShipAnnounce
	23, // 16: tributary.v1.ShipResponse.welcome:type_name -> tributary.v1.ShipWelcome
	26, // 17: tributary.v1.ShipResponse.ack:type_name -> tributary.v1.ShipAck
	27, // 18: tributary.v1.ShipResponse.error:type_name -> tributary.v1.ShipError
	28, // 19: tributary.v1.ShipResponse.config:type_name -> tributary.v1.EdgeConfig
	19, // 20: tributary.v1.ShipResponse.reship:type_name -> tributary.v1.ShipReship
	18, // 21: tributary.v1.ShipResponse.announced:type_name -> tributary.v1.ShipAnnounced
	29, // 22: tributary.v1.ShipResponse.rule_groups:type_name -> tributary.v1.EdgeRuleGroups
	17, // 23: tributary.v1.ShipAnnounce.series:type_name -> tributary.v1.AnnouncedSeries
	31, // 24: tributary.v1.AnnouncedSeries.labels:type_name -> tributary.v1.Label
	31, // 25: tributary.v1.ShipHello.labels:type_name -> tributary.v1.Label
	22, // 26: tributary.v1.ShipWelcome.held:type_name -> tributary.v1.SeqRange
	28, // 27: tributary.v1.ShipWelcome.config:type_name -> tributary.v1.EdgeConfig
	29, // 28: tributary.v1.ShipWelcome.rule_groups:type_name -> tributary.v1.EdgeRuleGroups
	0,  // 29: tributary.v1.ShipSegment.compression:type_name -> tributary.v1.SegmentCompression
	1,  // 30: tributary.v1.ShipGap.reason:type_name -> tributary.v1.GapReason
	2,  // 31: tributary.v1.ShipError.code:type_name -> tributary.v1.ShipErrorCode
	30, // 32: tributary.v1.EdgeRuleGroups.groups:type_name -> tributary.v1.EdgeRuleGroup
	14, // 33: tributary.v1.ReplicationService.Ship:input_type -> tributary.v1.ShipRequest
	11, // 34: tributary.v1.ReplicationService.Tunnel:input_type -> tributary.v1.TunnelRequest
	3,  // 35: tributary.v1.ReplicationService.Restore:input_type -> tributary.v1.RestoreRequest
	15, // 36: tributary.v1.ReplicationService.Ship:output_type -> tributary.v1.ShipResponse
	12, // 37: tributary.v1.ReplicationService.Tunnel:output_type -> tributary.v1.TunnelResponse
	4,  // 38: tributary.v1.ReplicationService.Restore:output_type -> tributary.v1.RestoreResponse
	36, // [36:39] is the sub-list for method output_type
	33, // [33:36] is the sub-list for method input_type
	33, // [33:33] is the sub-list for extension type_name
	33, // [33:33] is the sub-list for extension extendee
	0,  // [0:33] is the sub-list for field type_name
}

func init() { file_tributary_v1_replication_proto_init() }
func file_tributary_v1_replication_proto_init() {
	if File_tributary_v1_replication_proto != nil {
		return
	}
	file_tributary_v1_tributary_proto_init()
	file_tributary_v1_replication_proto_msgTypes[1].OneofWrappers = []any{
		(*RestoreResponse_Header)(nil),
		(*RestoreResponse_File)(nil),
		(*RestoreResponse_Rollups)(nil),
		(*RestoreResponse_Done)(nil),
	}
	file_tributary_v1_replication_proto_msgTypes[8].OneofWrappers = []any{
		(*TunnelRequest_Hello)(nil),
		(*TunnelRequest_Data)(nil),
	}
	file_tributary_v1_replication_proto_msgTypes[11].OneofWrappers = []any{
		(*ShipRequest_Hello)(nil),
		(*ShipRequest_Segment)(nil),
		(*ShipRequest_Gap)(nil),
		(*ShipRequest_ReshipUnavailable)(nil),
		(*ShipRequest_Announce)(nil),
	}
	file_tributary_v1_replication_proto_msgTypes[12].OneofWrappers = []any{
		(*ShipResponse_Welcome)(nil),
		(*ShipResponse_Ack)(nil),
		(*ShipResponse_Error)(nil),
		(*ShipResponse_Config)(nil),
		(*ShipResponse_Reship)(nil),
		(*ShipResponse_Announced)(nil),
		(*ShipResponse_RuleGroups)(nil),
	}
	file_tributary_v1_replication_proto_msgTypes[21].OneofWrappers = []any{}
	type x struct{}
	out := protoimpl.TypeBuilder{
		File: protoimpl.DescBuilder{
			GoPackagePath: reflect.TypeOf(x{}).PkgPath(),
			RawDescriptor: unsafe.Slice(unsafe.StringData(file_tributary_v1_replication_proto_rawDesc), len(file_tributary_v1_replication_proto_rawDesc)),
			NumEnums:      3,
			NumMessages:   28,
			NumExtensions: 0,
			NumServices:   1,
		},
		GoTypes:           file_tributary_v1_replication_proto_goTypes,
		DependencyIndexes: file_tributary_v1_replication_proto_depIdxs,
		EnumInfos:         file_tributary_v1_replication_proto_enumTypes,
		MessageInfos:      file_tributary_v1_replication_proto_msgTypes,
	}.Build()
	File_tributary_v1_replication_proto = out.File
	file_tributary_v1_replication_proto_goTypes = nil
	file_tributary_v1_replication_proto_depIdxs = nil
}
