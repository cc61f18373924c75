package intake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
	"github.com/tributarydb/tributary/rules/selector"
)

// service adapts a Server to the generated interface, so that Ship is not
// part of Server's own API.
type service struct {
	pb.UnimplementedReplicationServiceServer
	s *Server
}

func (v service) Ship(stream grpc.BidiStreamingServer[pb.ShipRequest, pb.ShipResponse]) error {
	return v.s.ship(stream)
}

func (v service) Tunnel(stream grpc.BidiStreamingServer[pb.TunnelRequest, pb.TunnelResponse]) error {
	if v.s.o.Tunnel == nil {
		return status.Error(codes.Unimplemented, "this coordinator serves no query tunnels")
	}
	return v.s.o.Tunnel(stream)
}

type received struct {
	m   *pb.ShipRequest
	err error
}

// ship serves one stream (see the package documentation): the handshake,
// then the stream loop (shipStream.run).
func (s *Server) ship(stream grpc.BidiStreamingServer[pb.ShipRequest, pb.ShipResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	st := &shipStream{s: s, stream: stream, ctx: ctx, recv: receive(ctx, stream), recvOpen: true,
		done: make(chan *pb.ShipResponse, maxInflight)}

	first, err := st.next()
	if err != nil {
		return err
	}
	if st.edge, err = s.hello(ctx, first.GetHello()); err != nil {
		return err
	}
	welcome, rulesSeen, err := s.welcome(ctx, st.edge)
	if err != nil {
		return err
	}
	if err := stream.Send(&pb.ShipResponse{Body: &pb.ShipResponse_Welcome{Welcome: welcome}}); err != nil {
		return err
	}
	s.streamOpened(st.edge)
	defer s.streamClosed(st.edge)
	st.log = s.o.Logger.With("edge", st.edge)
	st.log.Info("replication stream open", "acked_through", welcome.AckedThrough, "held_runs", len(welcome.Held),
		"software_version", first.GetHello().GetSoftwareVersion())

	if st.asm, err = wire.NewAssembler(st.edge, s.o.Limits); err != nil {
		return status.Errorf(codes.Internal, "segment assembler: %v", err)
	}
	defer st.asm.Close()
	defer st.wg.Wait() // after cancel (deferred later, runs first)
	defer cancel()
	// The fleet configuration: the welcome carried the version in force
	// then; a newer one is sent when the catalog's changes.
	st.configSent = welcome.GetConfig().GetVersion()
	st.rulesSeen = rulesSeen
	st.reship = newReshipper(s, st.edge, slices.Contains(first.GetHello().GetFeatures(), wire.FeatureReship))
	return st.run()
}

// receive starts the stream's receiver, the only reader of the stream. It
// hands over one message at a time, so it never holds more than one part;
// it ends when ctx does (gRPC cancels it once ship returns).
func receive(ctx context.Context, stream grpc.BidiStreamingServer[pb.ShipRequest, pb.ShipResponse]) chan received {
	recv := make(chan received)
	go func() {
		for {
			m, err := stream.Recv()
			select {
			case recv <- received{m, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return recv
}

// shipStream is one open stream past its handshake. Only ship's goroutine
// uses it, and it is the stream's only sender; the workers that store
// segments and gaps answer on done.
type shipStream struct {
	s      *Server
	stream grpc.BidiStreamingServer[pb.ShipRequest, pb.ShipResponse]
	ctx    context.Context
	edge   string
	log    *slog.Logger
	asm    *wire.Assembler
	reship *reshipper

	recv     chan received
	recvOpen bool // the edge has not closed its side
	// done carries the workers' answers; never blocking: at most
	// maxInflight run.
	done       chan *pb.ShipResponse
	wg         sync.WaitGroup
	inflight   int
	configSent uint64 // version of the fleet configuration the edge has
	// rulesSeen is the catalog's rule groups version (FSM.RulesVersion)
	// of the last rule groups sent (in the welcome or later).
	rulesSeen uint64
}

// next waits for the stream's next message.
func (st *shipStream) next() (*pb.ShipRequest, error) {
	select {
	case r := <-st.recv:
		return r.m, r.err
	case <-st.ctx.Done():
		return nil, st.s.ended(st.ctx)
	}
}

// run is the stream loop: messages from the edge while fewer than
// maxInflight are being stored, the workers' answers, and the periodic
// checks, until the edge closes its side and nothing is in flight, or the
// stream fails.
func (st *shipStream) run() error {
	configTick := time.NewTicker(st.s.o.ConfigPollInterval)
	defer configTick.Stop()
	for {
		var in chan received
		if st.recvOpen && st.inflight < maxInflight {
			in = st.recv
		}
		if !st.recvOpen && st.inflight == 0 {
			st.log.Info("replication stream closed by the edge")
			return nil
		}
		var err error
		select {
		case <-st.ctx.Done():
			return st.s.ended(st.ctx)
		case <-configTick.C:
			err = st.tick()
		case r := <-st.done:
			st.inflight--
			err = st.send(r)
		case r := <-in:
			switch {
			case errors.Is(r.err, io.EOF):
				// The edge closed its side: finish what is in flight.
				st.recvOpen = false
			case r.err != nil:
				err = r.err
			default:
				err = st.handle(r.m)
			}
		}
		if err != nil {
			return err
		}
	}
}

// tick ends the stream of a revoked edge, asks the edge for the runs no
// live replica can give, and sends a newer fleet configuration.
func (st *shipStream) tick() error {
	if st.s.o.Revoked(st.edge) {
		st.s.revokedRefusals.Add(1)
		st.log.Warn("replication stream ended: the edge is revoked")
		return status.Errorf(codes.PermissionDenied, "edge %q is revoked", st.edge)
	}
	for _, r := range st.reship.due(st.s.o.Now()) {
		if err := st.send(&pb.ShipResponse{Body: &pb.ShipResponse_Reship{Reship: r}}); err != nil {
			return err
		}
		st.log.Info("asked the edge to ship segments again (no live replica can give them)",
			"first_seq", r.FirstSeq, "last_seq", r.LastSeq)
	}
	if cfg := st.s.o.Catalog.Config(); cfg.Version > st.configSent {
		if err := st.send(&pb.ShipResponse{Body: &pb.ShipResponse_Config{Config: edgeConfig(cfg)}}); err != nil {
			return err
		}
		st.configSent = cfg.Version
		st.log.Info("fleet config sent", "version", cfg.Version)
	}
	if st.s.o.Catalog.RulesVersion() > st.rulesSeen {
		rg, seen := st.s.edgeRuleGroups(st.edge)
		if rg != nil {
			if err := st.send(&pb.ShipResponse{Body: &pb.ShipResponse_RuleGroups{RuleGroups: rg}}); err != nil {
				return err
			}
			st.log.Info("fleet rule groups sent", "version", rg.Version, "groups", len(rg.Groups))
		}
		st.rulesSeen = seen
	}
	return nil
}

// handle takes one message from the edge: a segment part (a complete
// segment goes to a worker), a gap (to a worker), or a run the edge cannot
// ship again.
func (st *shipStream) handle(m *pb.ShipRequest) error {
	switch b := m.Body.(type) {
	case *pb.ShipRequest_Segment:
		st.s.bytes.Add(int64(len(b.Segment.GetData())))
		seg, werr := st.asm.Add(b.Segment)
		if werr != nil {
			return st.send(refusal(werr))
		}
		if seg != nil {
			st.inflight++
			st.wg.Go(func() { st.done <- st.s.segment(st.ctx, st.edge, seg) })
		}
	case *pb.ShipRequest_Gap:
		if werr := wire.CheckGap(st.edge, b.Gap); werr != nil {
			return st.send(refusal(werr))
		}
		st.inflight++
		g := b.Gap
		st.wg.Go(func() { st.done <- st.s.gap(st.ctx, st.edge, g) })
	case *pb.ShipRequest_ReshipUnavailable:
		u := b.ReshipUnavailable
		st.s.reshipsUnavailable.Add(1)
		st.reship.unavailable(u.GetFirstSeq(), u.GetLastSeq(), st.s.o.Now())
		st.log.Warn("the edge cannot ship segments again; they stay on no live replica until one returns",
			"first_seq", u.GetFirstSeq(), "last_seq", u.GetLastSeq(), "reason", u.GetReason())
	case *pb.ShipRequest_Announce:
		if err := wire.CheckAnnounce(b.Announce); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		// Counted in flight like a segment: the answer comes on done,
		// which then never blocks.
		st.inflight++
		done := st.done
		st.s.announce(st.edge, b.Announce, func(r *pb.ShipResponse) { done <- r })
	case *pb.ShipRequest_Hello:
		return status.Error(codes.FailedPrecondition, "second hello on the stream")
	default:
		return status.Error(codes.InvalidArgument, "empty request")
	}
	return nil
}

// send sends r to the edge, counting and logging a refusal: one the edge
// will not retry needs an operator.
func (st *shipStream) send(r *pb.ShipResponse) error {
	if e := r.GetError(); e != nil {
		st.s.countRefusal(e.Code)
		level := slog.LevelWarn
		if !e.Retryable {
			level = slog.LevelError
		}
		st.log.Log(st.ctx, level, "replication refusal", "seq", e.Seq, "gap_through", e.GapThrough, "code", e.Code,
			"retryable", e.Retryable, "msg", e.Message)
	}
	return st.stream.Send(r)
}

// ended is the status of a stream whose context is done.
func (s *Server) ended(ctx context.Context) error {
	if s.ctx.Err() != nil {
		return status.Error(codes.Unavailable, "coordinator intake is shutting down")
	}
	return status.FromContextError(context.Cause(ctx)).Err()
}

// hello checks the first message and registers the edge if needed. It
// returns the edge's node id.
func (s *Server) hello(ctx context.Context, h *pb.ShipHello) (string, error) {
	if h == nil {
		return "", status.Error(codes.FailedPrecondition, "the first message of a stream must be a hello")
	}
	identity, err := s.callerIdentity(ctx, h.GetNodeId(), "hello names node %q, the caller is %q")
	if err != nil {
		return "", err
	}
	if err := wire.CheckHello(h, identity); err != nil {
		return "", status.Error(codes.FailedPrecondition, err.Error())
	}
	edge := h.GetNodeId()
	hl := make(labels.Labels, 0, len(h.GetLabels()))
	for _, l := range h.GetLabels() {
		hl = append(hl, labels.Label{Name: l.GetName(), Value: l.GetValue()})
	}
	edgeLabels, err := catalog.NodeLabels(hl)
	if err != nil {
		return "", status.Errorf(codes.InvalidArgument, "hello of edge %q: labels: %v", edge, err)
	}
	n, known, err := s.admitEdge(edge, identity)
	if err != nil {
		return "", err
	}
	if known && n.Addr == h.GetQueryAddr() && (identity == "" || n.Identity == identity) && labels.Equal(n.Labels, edgeLabels) {
		return edge, nil
	}
	// The hello's labels replace the ones the catalog had.
	reg := catalog.RegisterNode{ID: edge, Role: catalog.RoleEdge, Addr: h.GetQueryAddr(), Identity: identity,
		Labels: edgeLabels, TimeMs: s.o.Now().UnixMilli()}
	if known {
		if identity == "" {
			reg.Identity = n.Identity // insecure mode keeps what a certificate proved before
		}
	}
	pctx, cancel := context.WithTimeout(ctx, s.o.ProposalTimeout)
	defer cancel()
	if _, err := s.o.Raft.Propose(pctx, catalog.EncodeCommand(reg)); err != nil {
		var ce *catalog.CommandError
		if errors.As(err, &ce) {
			return "", status.Errorf(codes.FailedPrecondition, "register edge %q: %v", edge, err)
		}
		return "", status.Errorf(codes.Unavailable, "register edge %q: %v", edge, err)
	}
	return edge, nil
}

// callerIdentity returns the identity of the caller's certificate, which
// must be edge (mismatchf formats the refusal from edge and the identity),
// or "" when the server checks no identities (insecure mode).
func (s *Server) callerIdentity(ctx context.Context, edge, mismatchf string) (string, error) {
	if s.o.Identity == nil {
		return "", nil
	}
	id, err := s.o.Identity(ctx)
	if err != nil {
		return "", status.Errorf(codes.Unauthenticated, "caller identity: %v", err)
	}
	if id == "" {
		return "", status.Error(codes.Unauthenticated, "caller has no identity")
	}
	if id != edge {
		return "", status.Errorf(codes.PermissionDenied, mismatchf, edge, id)
	}
	return id, nil
}

// admitEdge refuses a revoked edge, and a node the catalog has registered
// as a coordinator or with another identity than the caller's (identity;
// "" in insecure mode). It returns the catalog's node, if known.
func (s *Server) admitEdge(edge, identity string) (catalog.Node, bool, error) {
	if s.o.Revoked(edge) {
		s.revokedRefusals.Add(1)
		return catalog.Node{}, false, status.Errorf(codes.PermissionDenied, "edge %q is revoked", edge)
	}
	n, known := s.o.Catalog.Node(edge)
	if known && n.Role != catalog.RoleEdge {
		return n, known, status.Errorf(codes.PermissionDenied, "node %q is registered as a %s, not an edge", edge, n.Role)
	}
	if known && n.Identity != "" && identity != "" && n.Identity != identity {
		return n, known, status.Errorf(codes.PermissionDenied, "node %q is registered with identity %q, the caller is %q", edge, n.Identity, identity)
	}
	return n, known, nil
}

// welcome reads the edge's progress linearizably. It also returns the
// rule groups' version its rule groups were read at.
func (s *Server) welcome(ctx context.Context, edge string) (*pb.ShipWelcome, uint64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.o.ProposalTimeout)
	defer cancel()
	if err := s.o.Raft.LinearizableRead(rctx); err != nil {
		return nil, 0, status.Errorf(codes.Unavailable, "read the catalog for edge %q: %v", edge, err)
	}
	p, _ := s.o.Catalog.Progress(edge)
	through := p.AckedThrough()
	rg, rulesSeen := s.edgeRuleGroups(edge)
	return &pb.ShipWelcome{
		RuleGroups:      rg,
		CoordinatorId:   s.o.CoordinatorID,
		AckedThrough:    through,
		Held:            coveredAbove(p, through, wire.MaxHeldRuns),
		MaxSegmentBytes: s.o.Limits.MaxSegmentBytes,
		MaxPartBytes:    uint32(s.o.Limits.MaxPartBytes),
		Config:          edgeConfig(s.o.Catalog.Config()),
		Features:        []string{wire.FeatureAnnounce},
		SegmentFormats:  SegmentFormats,
	}, rulesSeen, nil
}

// edgeRuleGroups returns the fleet's rule groups whose selector matches
// the edge's labels, versioned by the catalog's applied index, and the
// rule groups' version it read them at; nil while no rule group was ever
// set (or the edge is unknown). A selector that does not parse (the
// catalog checks none; the proposer did, perhaps with another parser
// version) selects no edge and is logged.
func (s *Server) edgeRuleGroups(edge string) (*pb.EdgeRuleGroups, uint64) {
	er, ok := s.o.Catalog.EdgeRules(edge)
	if !ok || er.RulesVersion == 0 {
		return nil, er.RulesVersion
	}
	out := &pb.EdgeRuleGroups{Version: er.Applied}
	for _, g := range er.Groups {
		sel, err := selector.Parse(g.Selector)
		if err != nil {
			s.o.Logger.Warn("fleet rule group selects no edge: its selector does not parse", "group", g.Name, "err", err)
			continue
		}
		if sel.Matches(er.Labels) {
			out.Groups = append(out.Groups, &pb.EdgeRuleGroup{Name: g.Name, Yaml: g.YAML, Selector: g.Selector, Version: g.Version})
		}
	}
	return out, er.RulesVersion
}

// SegmentFormats are the WAL segment format versions a welcome says the
// cloud reads: the replica store decodes both record kinds (package
// node/record).
var SegmentFormats = []uint32{uint32(wal.FormatV1), uint32(wal.FormatV2)}

// edgeConfig is the part of the fleet configuration an edge applies. The
// lag budget goes as in force (the default when the catalog holds 0), so
// that an edge tells a default from a sender that predates the field.
func edgeConfig(c catalog.FleetConfig) *pb.EdgeConfig {
	return &pb.EdgeConfig{
		Version:        c.Version,
		RetentionRawMs: c.RetentionRawMs, Retention_1HMs: c.Retention1hMs, Retention_1DMs: c.Retention1dMs,
		RollupHourly: c.RollupHourly, RollupDaily: c.RollupDaily,
		RateLimitPointsPerSec: c.RateLimitPointsPerSec, RateLimitBurstPoints: c.RateLimitBurstPoints,
		LagBudgetMs: c.LagBudget(), MinSegmentPoints: c.MinSegmentPoints,
	}
}

// seqRun is an inclusive run of sequence numbers.
type seqRun struct{ first, last uint64 }

// coveredRuns returns the runs of sequence numbers that p holds or has
// recorded gaps for, sorted by their first number (not merged: a gap may
// touch a held run).
func coveredRuns(p catalog.EdgeProgress) []seqRun {
	runs := make([]seqRun, 0, len(p.Held)+len(p.Gaps))
	for _, h := range p.Held {
		runs = append(runs, seqRun{h.FirstSeq, h.LastSeq})
	}
	for _, g := range p.Gaps {
		runs = append(runs, seqRun{g.AfterSeq + 1, g.ThroughSeq})
	}
	slices.SortFunc(runs, func(a, b seqRun) int { return cmp.Compare(a.first, b.first) })
	return runs
}

// coveredAbove returns the runs of sequence numbers above through that are
// held or inside a recorded gap (the protocol's "covered"), merged,
// ascending, at most limit (the lowest).
func coveredAbove(p catalog.EdgeProgress, through uint64, limit int) []*pb.SeqRange {
	var out []*pb.SeqRange
	for _, r := range coveredRuns(p) {
		if r.last <= through {
			continue
		}
		r.first = max(r.first, through+1)
		if n := len(out); n > 0 && out[n-1].LastSeq+1 >= r.first {
			out[n-1].LastSeq = max(out[n-1].LastSeq, r.last)
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, &pb.SeqRange{FirstSeq: r.first, LastSeq: r.last})
	}
	return out
}

func refusal(e *wire.Error) *pb.ShipResponse {
	return &pb.ShipResponse{Body: &pb.ShipResponse_Error{Error: e.Proto()}}
}

func ack(a *pb.ShipAck) *pb.ShipResponse {
	return &pb.ShipResponse{Body: &pb.ShipResponse_Ack{Ack: a}}
}

func unavailable(seq, gapThrough uint64, format string, args ...any) *wire.Error {
	return &wire.Error{Seq: seq, GapThrough: gapThrough, Code: pb.ShipErrorCode_SHIP_ERROR_CODE_UNAVAILABLE, Retryable: true,
		Msg: fmt.Sprintf(format, args...)}
}

// reshipper decides when an open stream asks its edge to ship runs again:
// the runs some active replica lacks and no live replica can give
// (catalog.FSM.Unsourced), each at most every ReshipInterval (a run the
// edge said it cannot give: ten times as long). Only the stream's
// goroutine uses it.
type reshipper struct {
	s       *Server
	edge    string
	enabled bool
	asked   map[[2]uint64]time.Time // run → when it may be asked again
}

func newReshipper(s *Server, edge string, enabled bool) *reshipper {
	return &reshipper{s: s, edge: edge, enabled: enabled, asked: map[[2]uint64]time.Time{}}
}

// due returns the runs to ask for now.
func (r *reshipper) due(now time.Time) []*pb.ShipReship {
	if !r.enabled {
		return nil
	}
	var out []*pb.ShipReship
	runs := r.s.o.Catalog.Unsourced(r.edge)
	live := map[[2]uint64]bool{}
	for _, run := range runs {
		k := [2]uint64{run.FirstSeq, run.LastSeq}
		live[k] = true
		if next, ok := r.asked[k]; ok && now.Before(next) {
			continue
		}
		r.asked[k] = now.Add(r.s.o.ReshipInterval)
		out = append(out, &pb.ShipReship{FirstSeq: run.FirstSeq, LastSeq: run.LastSeq, MinTimeMs: run.MinTimeMs, MaxTimeMs: run.MaxTimeMs})
		r.s.reships.Add(1)
	}
	for k := range r.asked {
		if !live[k] {
			delete(r.asked, k)
		}
	}
	return out
}

// unavailable notes that the edge cannot give first..last.
func (r *reshipper) unavailable(first, last uint64, now time.Time) {
	for k := range r.asked {
		if k[0] <= last && k[1] >= first {
			r.asked[k] = now.Add(10 * r.s.o.ReshipInterval)
		}
	}
}
