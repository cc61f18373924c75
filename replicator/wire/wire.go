// Package wire turns sealed WAL segments into the messages of the
// replication protocol and back (proto/tributary/v1/replication.proto,
// which is the specification, and docs/replication.md).
//
// The edge uses an Encoder: it compresses a segment file with zstd (or
// sends it as it is when that is not smaller) and cuts it into ShipSegment
// parts. The receiving side uses an Assembler: it checks each part against
// the protocol and its limits before buffering anything, reassembles the
// segment, decompresses it with a hard output limit and verifies the file
// by itself (node/wal format: header, every record, footer, whole-file
// CRC) and against the message's metadata. A receiver built on it still
// decides idempotency: a (node, seq) it holds with the same CRC is a
// duplicate to acknowledge again, with another CRC a conflict.
//
// Encoders and Assemblers are not safe for concurrent use; use one per
// stream.
package wire

import (
	"fmt"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// ProtocolVersion is the version of the replication protocol this package
// speaks (ShipHello.protocol_version).
const ProtocolVersion = 1

// Defaults a receiver announces when its welcome leaves the limit at 0.
const (
	DefaultMaxSegmentBytes = 256 << 20
	DefaultMaxPartBytes    = 1 << 20
)

// MaxHeldRuns bounds ShipWelcome.held.
const MaxHeldRuns = 1024

// maxWindowBytes is the largest zstd window the Encoder uses and the
// Assembler accepts.
const maxWindowBytes = 8 << 20

// Error is a refusal of one segment or gap, as carried by ShipError.
type Error struct {
	Seq        uint64 // the refused segment, or 0
	GapThrough uint64 // the refused gap's through_seq, or 0
	Code       pb.ShipErrorCode
	Retryable  bool
	Msg        string
}

func (e *Error) Error() string {
	what := fmt.Sprintf("segment %d", e.Seq)
	if e.Seq == 0 {
		what = fmt.Sprintf("gap through %d", e.GapThrough)
	}
	retry := "not retryable"
	if e.Retryable {
		retry = "retryable"
	}
	return fmt.Sprintf("replication: %s refused (%s, %s): %s", what, e.Code, retry, e.Msg)
}

// Proto returns e as a wire message.
func (e *Error) Proto() *pb.ShipError {
	return &pb.ShipError{Seq: e.Seq, GapThrough: e.GapThrough, Code: e.Code, Retryable: e.Retryable, Message: e.Msg}
}

// FromProto returns the Error a ShipError carries.
func FromProto(m *pb.ShipError) *Error {
	return &Error{Seq: m.GetSeq(), GapThrough: m.GetGapThrough(), Code: m.GetCode(), Retryable: m.GetRetryable(), Msg: m.GetMessage()}
}

func malformed(seq uint64, format string, args ...any) *Error {
	return &Error{Seq: seq, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_MALFORMED, Msg: fmt.Sprintf(format, args...)}
}

// FeatureReship is the ShipHello feature of an edge that answers
// ShipResponse.reship: it ships runs of held segments again when asked,
// or says it cannot (ShipReshipUnavailable).
const FeatureReship = "reship"

// FeatureAnnounce is the ShipWelcome feature of a coordinator that
// answers ShipRequest.announce: the edge announces the series it creates
// (ShipAnnounce) and the coordinator records them in the catalog with the
// edge's registration watermark.
const FeatureAnnounce = "announce"

// MaxAnnounceSeries bounds the series of one ShipAnnounce, and
// MaxAnnounceBytes about the bytes of their labels (a longer list goes in
// several messages; a single series longer than that goes alone).
const (
	MaxAnnounceSeries = 1000
	MaxAnnounceBytes  = 1 << 20
)

// CheckAnnounce checks an announcement against the protocol: at most
// MaxAnnounceSeries series, each with at least one label. The labels
// themselves are checked by the catalog, which rejects an invalid series
// on its own.
func CheckAnnounce(a *pb.ShipAnnounce) error {
	if n := len(a.GetSeries()); n > MaxAnnounceSeries {
		return fmt.Errorf("announcement %d: %d series, limit is %d", a.GetId(), n, MaxAnnounceSeries)
	}
	for i, s := range a.GetSeries() {
		if len(s.GetLabels()) == 0 {
			return fmt.Errorf("announcement %d: series %d has no labels", a.GetId(), i)
		}
	}
	return nil
}

// CheckHello checks a hello against the protocol. identity, when not
// empty, is the node id the caller's certificate proves; the hello must
// name it.
func CheckHello(h *pb.ShipHello, identity string) error {
	switch {
	case h == nil:
		return fmt.Errorf("first message is not a hello")
	case h.GetProtocolVersion() != ProtocolVersion:
		return fmt.Errorf("protocol version %d not supported (want %d)", h.GetProtocolVersion(), ProtocolVersion)
	case h.GetNodeId() == "" || len(h.GetNodeId()) > 255:
		return fmt.Errorf("node id of %d bytes (want 1 to 255)", len(h.GetNodeId()))
	case identity != "" && h.GetNodeId() != identity:
		return fmt.Errorf("node id %q is not the certificate's identity %q", h.GetNodeId(), identity)
	}
	return nil
}

// CheckGap checks a gap declaration of node nodeID.
func CheckGap(nodeID string, g *pb.ShipGap) *Error {
	bad := func(format string, args ...any) *Error {
		e := malformed(0, format, args...)
		e.GapThrough = g.GetThroughSeq()
		return e
	}
	switch {
	case g.GetNodeId() != nodeID:
		return bad("gap of node %q on the stream of node %q", g.GetNodeId(), nodeID)
	case g.GetThroughSeq() <= g.GetAfterSeq():
		return bad("gap after %d through %d covers nothing", g.GetAfterSeq(), g.GetThroughSeq())
	case g.GetReason() == pb.GapReason_GAP_REASON_UNSPECIFIED:
		return bad("gap through %d has no reason", g.GetThroughSeq())
	case g.GetPoints() < -1:
		return bad("gap through %d holds %d points", g.GetThroughSeq(), g.GetPoints())
	case g.GetMinTimeMs() > g.GetMaxTimeMs():
		return bad("gap through %d: min time %d after max time %d", g.GetThroughSeq(), g.GetMinTimeMs(), g.GetMaxTimeMs())
	}
	return nil
}
