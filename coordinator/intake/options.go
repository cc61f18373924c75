package intake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

// Raft is what the intake needs of the raft member (*raftnode.Node
// satisfies it). Propose returns the catalog's result, or a
// *catalog.CommandError for a rejected command.
type Raft interface {
	Propose(ctx context.Context, cmd []byte) (any, error)
	LinearizableRead(ctx context.Context) error
}

// Replicas stores segments on coordinators (this one or peers) and reads
// back stored CRCs.
type Replicas interface {
	// Store makes the verified segment file durable on coordinator
	// coordID. A conflicting stored segment returns an error wrapping
	// ErrConflict.
	Store(ctx context.Context, coordID, edge string, seq uint64, crc uint32, file []byte) (Stored, error)
	// CRC reports the crc stored for (edge, seq) on coordinator coordID,
	// ok=false if unknown/not checkable.
	CRC(ctx context.Context, coordID, edge string, seq uint64) (crc uint32, ok bool, err error)
}

// Stored is what a replica did with a segment.
type Stored struct {
	// Series the segment defines, as the edge named them.
	Series []labels.Labels
	// Points written and points the replica refused (counted); both 0 for
	// a Duplicate.
	Points, Rejected int64
	// Duplicate: the replica held the segment with this CRC already.
	Duplicate bool
}

// ErrConflict is wrapped by a Replicas.Store error when the replica holds
// the segment with another CRC.
var ErrConflict = errors.New("intake: segment conflicts with a stored one")

// DefaultCatalogLinger is Options.CatalogLinger when not set. At 100 ms a
// coordinator makes at most about ten record batches a second whatever
// its edges send: with 6,000 edges sealing every 30 s (200 segments a
// second across three coordinators) the catalog took 0.11 raft
// proposals a segment, against 0.45 with a 5 ms linger, for the same
// seal-to-acknowledgement lag (p99 0.52 s against 0.57 s; docs/
// benchmarks.md, "Fleet"). An acknowledgement waits up to that much
// longer, against lag budgets of seconds.
const DefaultCatalogLinger = 100 * time.Millisecond

// maxInflight bounds the segments and gaps of one stream being made
// durable at the same time (the edge's default window): the next message
// is read only under it.
const maxInflight = 8

// Options configure a Server.
type Options struct {
	CoordinatorID string       // this coordinator's node id (required)
	Catalog       *catalog.FSM // read side (required)
	Raft          Raft         // required
	Replicas      Replicas     // required
	// Identity returns the verified identity of a stream's caller (the
	// node id its client certificate proves). Nil trusts the hello's
	// node_id: insecure or local mode only.
	Identity func(ctx context.Context) (string, error)
	// Tunnel serves the ReplicationService's Tunnel streams (the edges'
	// query tunnels, internal/tunnel.Registry.Serve). Nil answers
	// UNIMPLEMENTED.
	Tunnel func(grpc.BidiStreamingServer[pb.TunnelRequest, pb.TunnelResponse]) error
	// Restore serves the ReplicationService's Restore calls (an edge whose
	// disk was replaced pulls its history back; restore.go): where the
	// edge's data is read from. Nil answers UNIMPLEMENTED.
	Restore RestoreSource
	// Limits bound a segment and a part; zero fields take the wire
	// defaults, and the welcome announces the result.
	Limits wire.Limits
	// HeartbeatInterval (10s): how often the heartbeats of the edges with
	// an open stream are proposed, all in one command.
	HeartbeatInterval time.Duration
	// AnnounceInterval (250ms): how often the series announcements of
	// every open stream are recorded, all in one command.
	AnnounceInterval time.Duration
	// CatalogLinger (DefaultCatalogLinger): how long the catalog records
	// of segments and gaps (batch.go) wait for others to share a raft
	// proposal with when none is in flight; negative: not at all (while
	// one is in flight they wait for it anyway). It adds to every
	// acknowledgement's latency.
	CatalogLinger time.Duration
	// CatalogBatchRecords (1024, at most catalog.MaxBatchRecords) and
	// CatalogBatchBytes (256 KiB) bound one batch of catalog records.
	CatalogBatchRecords, CatalogBatchBytes int
	// ProposalTimeout (10s) bounds each step of making a segment or gap
	// durable: one proposal, a linearizable read, a store on the replicas.
	ProposalTimeout time.Duration
	// QuorumGrace (100ms): once a write quorum of replicas holds a
	// segment, how long the others may still take before the segment is
	// recorded and acknowledged without them (they are recorded as
	// lacking it, and as holding it once their store completes).
	QuorumGrace time.Duration
	// ReshipInterval (30s): how long an open stream waits before asking
	// its edge again for a run it asked to ship again (a run the edge
	// said it cannot give: ten times as long).
	ReshipInterval time.Duration
	// Revoked reports whether an edge is refused (its revocation is
	// checked at the hello and every ConfigPollInterval); nil: the
	// catalog's Node.Revoked.
	Revoked func(edge string) bool
	// ConfigPollInterval (2s): how often each open stream reads the
	// catalog's fleet configuration and sends it to the edge when its
	// version changed since the last one sent (the welcome carries the
	// first).
	ConfigPollInterval time.Duration
	Logger             *slog.Logger
	Now                func() time.Time // default time.Now; dates registrations and heartbeats
	// TracerProvider gives the spans of each segment (trace.go); nil: no-op.
	TracerProvider trace.TracerProvider
}

// Validate fills in defaults and rejects impossible values.
func (o *Options) Validate() error {
	var bad []string
	if o.CoordinatorID == "" {
		bad = append(bad, "CoordinatorID is required")
	}
	if o.Catalog == nil {
		bad = append(bad, "Catalog is required")
	}
	if o.Raft == nil {
		bad = append(bad, "Raft is required")
	}
	if o.Replicas == nil {
		bad = append(bad, "Replicas is required")
	}
	o.Limits.MaxSegmentBytes = cmp.Or(o.Limits.MaxSegmentBytes, wire.DefaultMaxSegmentBytes)
	o.Limits.MaxPartBytes = cmp.Or(o.Limits.MaxPartBytes, wire.DefaultMaxPartBytes)
	// NB: int64: on 32-bit ARM an int cannot hold math.MaxUint32.
	if o.Limits.MaxPartBytes < 1024 || int64(o.Limits.MaxPartBytes) > math.MaxUint32 {
		bad = append(bad, fmt.Sprintf("Limits.MaxPartBytes %d is outside 1 KiB..4 GiB", o.Limits.MaxPartBytes))
	}
	o.HeartbeatInterval = cmp.Or(o.HeartbeatInterval, 10*time.Second)
	o.AnnounceInterval = cmp.Or(o.AnnounceInterval, 250*time.Millisecond)
	o.ProposalTimeout = cmp.Or(o.ProposalTimeout, 10*time.Second)
	o.CatalogLinger = cmp.Or(o.CatalogLinger, DefaultCatalogLinger)
	o.CatalogBatchRecords = cmp.Or(o.CatalogBatchRecords, 1024)
	o.CatalogBatchBytes = cmp.Or(o.CatalogBatchBytes, 256<<10)
	if o.CatalogBatchRecords < 1 || o.CatalogBatchRecords > catalog.MaxBatchRecords || o.CatalogBatchBytes < 1 {
		bad = append(bad, fmt.Sprintf("CatalogBatchRecords %d is outside 1..%d, or CatalogBatchBytes %d below 1", o.CatalogBatchRecords, catalog.MaxBatchRecords, o.CatalogBatchBytes))
	}
	o.ConfigPollInterval = cmp.Or(o.ConfigPollInterval, 2*time.Second)
	o.QuorumGrace = cmp.Or(o.QuorumGrace, 100*time.Millisecond)
	o.ReshipInterval = cmp.Or(o.ReshipInterval, 30*time.Second)
	if o.QuorumGrace < 0 || o.ReshipInterval < 0 {
		bad = append(bad, fmt.Sprintf("negative QuorumGrace %s or ReshipInterval %s", o.QuorumGrace, o.ReshipInterval))
	}
	if o.Revoked == nil && o.Catalog != nil {
		cat := o.Catalog
		o.Revoked = func(edge string) bool {
			n, ok := cat.Node(edge)
			return ok && n.Revoked
		}
	}
	if o.AnnounceInterval < 0 {
		bad = append(bad, fmt.Sprintf("negative AnnounceInterval %s", o.AnnounceInterval))
	}
	if o.HeartbeatInterval < 0 || o.ProposalTimeout < 0 || o.ConfigPollInterval < 0 {
		bad = append(bad, fmt.Sprintf("negative HeartbeatInterval %s, ProposalTimeout %s or ConfigPollInterval %s", o.HeartbeatInterval, o.ProposalTimeout, o.ConfigPollInterval))
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TracerProvider == nil {
		o.TracerProvider = tracenoop.NewTracerProvider()
	}
	if len(bad) > 0 {
		return errors.New("intake options: " + strings.Join(bad, "; "))
	}
	return nil
}
