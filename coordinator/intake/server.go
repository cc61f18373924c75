package intake

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/internal/pace"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Server is a coordinator's ReplicationService.
type Server struct {
	o Options

	ctx    context.Context // canceled by Close: open streams end
	cancel context.CancelFunc
	hbDone chan struct{}
	close  sync.Once

	mu   sync.Mutex
	open map[string]int // edge → open streams; REQUIRES: mu held

	streams, streamsOpen, segments, duplicates, conflicts atomic.Int64
	gaps, bytes, heartbeats                               atomic.Int64
	quorumAcks, stragglers, lateRecorded, refilled        atomic.Int64
	reships, reshipsUnavailable, revokedRefusals          atomic.Int64
	restores                                              atomic.Int64
	announcements, annCommands                            atomic.Int64

	ann      announcer
	annDone  chan struct{}
	batch    *batcher
	refusals sync.Map // pb.ShipErrorCode → *atomic.Int64
}

// Stats counts what a Server did since New.
type Stats struct {
	StreamsOpen int64 // streams past their hello, now
	Streams     int64 // streams that got a welcome, in total
	// SegmentsStored counts segments stored on their replicas and recorded;
	// Duplicates segments already held and acknowledged again; Conflicts
	// segments held with another CRC (refused).
	SegmentsStored, Duplicates, Conflicts int64
	// Refusals counts ShipErrors sent, by code name
	// (SHIP_ERROR_CODE_UNAVAILABLE, ...), conflicts included.
	Refusals map[string]int64
	// GapsRecorded counts gap declarations acknowledged (replays included).
	GapsRecorded int64
	// BytesReceived counts the data bytes of segment parts received
	// (compressed, as on the wire).
	BytesReceived int64
	// Heartbeats counts Heartbeat commands proposed.
	Heartbeats int64
	// QuorumAcks counts segments acknowledged before every active replica
	// held them (a write quorum did); Stragglers the replica stores still
	// running then; LateRecorded those that completed and were recorded.
	QuorumAcks, Stragglers, LateRecorded int64
	// Refilled counts held segments given to active replicas that lacked
	// them (resends and segments shipped again on request).
	Refilled int64
	// Reships counts runs the edges were asked to ship again;
	// ReshipsUnavailable the answers that they cannot.
	Reships, ReshipsUnavailable int64
	// RevokedRefusals counts streams refused or ended because their edge
	// is revoked.
	RevokedRefusals int64
	// Restores counts Restore calls answered to the end.
	Restores int64
	// Announcements counts ShipAnnounce messages received;
	// AnnounceCommands the AnnounceSeries commands that recorded them.
	Announcements, AnnounceCommands int64
	// CatalogRecords counts the catalog records of segments and gaps
	// (RegisterSeries, RecordHeld, RecordGap, RecordReplicated) proposed;
	// CatalogProposals the raft proposals that carried them (one per
	// RecordBatch, one per record proposed alone); CatalogBatches the
	// batches they were gathered in (batch.go).
	CatalogRecords, CatalogProposals, CatalogBatches int64
	// CatalogRetries counts proposals of records made again because raft
	// dropped them (no leader; included in CatalogProposals).
	CatalogRetries int64
}

// New returns a Server and starts its heartbeat, announcement and
// catalog record batchers; Close stops them.
func New(o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{o: o, ctx: ctx, cancel: cancel, hbDone: make(chan struct{}), annDone: make(chan struct{}), open: map[string]int{}}
	s.batch = newBatcher(ctx, batcherOptions{
		propose: o.Raft.Propose, ready: o.Catalog.RecordBatchReady,
		dropped: func(err error) bool { return errors.Is(err, raftnode.ErrProposalDropped) },
		linger:  o.CatalogLinger, maxRecords: o.CatalogBatchRecords, maxBytes: o.CatalogBatchBytes,
		timeout: o.ProposalTimeout,
	})
	go s.heartbeatLoop()
	go s.announceLoop()
	return s, nil
}

// Register registers the ReplicationService on g.
func (s *Server) Register(g *grpc.Server) {
	pb.RegisterReplicationServiceServer(g, service{s: s})
}

// Close stops the batchers and ends the open streams (their
// unfinished segments are not acknowledged; the edges resend them). It
// waits for the batchers, not for the streams.
func (s *Server) Close() {
	s.close.Do(func() {
		s.cancel()
		<-s.hbDone
		<-s.annDone
		s.batch.wait()
	})
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	st := Stats{
		StreamsOpen:        s.streamsOpen.Load(),
		Streams:            s.streams.Load(),
		SegmentsStored:     s.segments.Load(),
		Duplicates:         s.duplicates.Load(),
		Conflicts:          s.conflicts.Load(),
		GapsRecorded:       s.gaps.Load(),
		BytesReceived:      s.bytes.Load(),
		Heartbeats:         s.heartbeats.Load(),
		QuorumAcks:         s.quorumAcks.Load(),
		Stragglers:         s.stragglers.Load(),
		LateRecorded:       s.lateRecorded.Load(),
		Refilled:           s.refilled.Load(),
		Reships:            s.reships.Load(),
		ReshipsUnavailable: s.reshipsUnavailable.Load(),
		RevokedRefusals:    s.revokedRefusals.Load(),
		Restores:           s.restores.Load(),
		Announcements:      s.announcements.Load(),
		AnnounceCommands:   s.annCommands.Load(),
		CatalogRecords:     s.batch.records.Load(),
		CatalogProposals:   s.batch.proposals.Load(),
		CatalogBatches:     s.batch.batches.Load(),
		CatalogRetries:     s.batch.retries.Load(),
		Refusals:           map[string]int64{},
	}
	s.refusals.Range(func(k, v any) bool {
		st.Refusals[k.(pb.ShipErrorCode).String()] = v.(*atomic.Int64).Load()
		return true
	})
	return st
}

func (s *Server) countRefusal(code pb.ShipErrorCode) {
	v, _ := s.refusals.LoadOrStore(code, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// streamOpened and streamClosed keep the set of edges to heartbeat.
func (s *Server) streamOpened(edge string) {
	s.mu.Lock()
	s.open[edge]++
	s.mu.Unlock()
	s.streams.Add(1)
	s.streamsOpen.Add(1)
}

func (s *Server) streamClosed(edge string) {
	s.mu.Lock()
	if s.open[edge]--; s.open[edge] <= 0 {
		delete(s.open, edge)
	}
	s.mu.Unlock()
	s.streamsOpen.Add(-1)
}

// heartbeatLoop proposes, every HeartbeatInterval, one Heartbeat command
// for every edge with an open stream.
func (s *Server) heartbeatLoop() {
	defer close(s.hbDone)
	pace.Every(s.ctx.Done(), s.o.HeartbeatInterval, nil, s.heartbeat)
}

// heartbeat proposes one Heartbeat command for the edges with an open
// stream, if any; a turn of heartbeatLoop.
func (s *Server) heartbeat() {
	s.mu.Lock()
	edges := slices.Sorted(maps.Keys(s.open))
	s.mu.Unlock()
	if len(edges) == 0 {
		return
	}
	now := s.o.Now().UnixMilli()
	beats := make([]catalog.Beat, len(edges))
	for i, e := range edges {
		beats[i] = catalog.Beat{ID: e, TimeMs: now}
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.o.ProposalTimeout)
	_, err := s.o.Raft.Propose(ctx, catalog.EncodeCommand(catalog.Heartbeat{Beats: beats}))
	cancel()
	if err != nil {
		if s.ctx.Err() == nil {
			s.o.Logger.Warn("record edge heartbeats", "edges", len(edges), "err", err)
		}
		return
	}
	s.heartbeats.Add(1)
}
