package intake

import (
	"context"
	"fmt"
	"sync"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/internal/pace"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// An announcement is one ShipAnnounce waiting to be recorded; answer
// hands the ShipAnnounced to its stream and never blocks.
type announcement struct {
	edge      string
	id        uint64
	throughMs int64 // catalog.NoWatermark for a part with more to come
	all       []labels.Labels
	answer    func(*pb.ShipResponse)
}

// announcer batches the announcements of every stream of a Server: one
// catalog command per AnnounceInterval for all of them (catalog.
// AnnounceSeries when every member applies it, else one RegisterSeries
// per edge with series the catalog does not list).
type announcer struct {
	mu      sync.Mutex
	pending []*announcement // REQUIRES: mu held
}

func (a *announcer) add(x *announcement) {
	a.mu.Lock()
	a.pending = append(a.pending, x)
	a.mu.Unlock()
}

func (a *announcer) take() []*announcement {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.pending
	a.pending = nil
	return p
}

// announce queues a checked announcement of edge; answer is called once
// it is recorded or refused.
func (s *Server) announce(edge string, m *pb.ShipAnnounce, answer func(*pb.ShipResponse)) {
	x := &announcement{edge: edge, id: m.GetId(), throughMs: m.GetThroughMs(), answer: answer}
	if m.GetMore() {
		x.throughMs = catalog.NoWatermark
	}
	x.all = make([]labels.Labels, len(m.GetSeries()))
	for i, sr := range m.GetSeries() {
		ls := make(labels.Labels, len(sr.GetLabels()))
		for j, l := range sr.GetLabels() {
			ls[j] = labels.Label{Name: l.GetName(), Value: l.GetValue()}
		}
		x.all[i] = ls
	}
	s.announcements.Add(1)
	s.ann.add(x)
}

// announceLoop records the queued announcements every AnnounceInterval.
func (s *Server) announceLoop() {
	defer close(s.annDone)
	pace.Every(s.ctx.Done(), s.o.AnnounceInterval, nil, s.recordAnnouncements)
}

// recordAnnouncements records what is queued, with one command when every
// member applies AnnounceSeries, and answers every announcement; a turn
// of announceLoop.
func (s *Server) recordAnnouncements() {
	batch := s.ann.take()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.o.ProposalTimeout)
	defer cancel()
	if !s.o.Catalog.AnnounceReady() {
		s.registerAnnounced(ctx, batch)
		return
	}
	cmd := catalog.AnnounceSeries{Edges: make([]catalog.EdgeAnnouncement, len(batch))}
	for i, x := range batch {
		cmd.Edges[i] = catalog.EdgeAnnouncement{Edge: x.edge, ThroughMs: x.throughMs, Series: s.o.Catalog.Unlisted(x.edge, x.all)}
	}
	res, err := s.propose(ctx, cmd)
	r, ok := res.(catalog.AnnounceSeriesResult)
	if err == nil && (!ok || len(r.Edges) != len(batch)) {
		err = fmt.Errorf("unexpected result %T", res)
	}
	if err != nil {
		if s.ctx.Err() == nil {
			s.o.Logger.Warn("record series announcements", "announcements", len(batch), "err", err)
		}
		for _, x := range batch {
			x.answer(announced(x.id, 0, false, fmt.Sprintf("record the announcement: %v", err)))
		}
		return
	}
	s.annCommands.Add(1)
	for i, x := range batch {
		e := r.Edges[i]
		msg := e.Skipped
		if msg == "" && len(e.Rejected) > 0 {
			// An error makes the edge announce the same series again, so
			// that its watermark stays below them for as long as the
			// catalog cannot list them (the fleet's series limit).
			msg = fmt.Sprintf("the catalog rejected %d announced series (first: %s); the registration watermark stays", len(e.Rejected), e.Rejected[0].Reason)
			s.o.Logger.Warn("catalog rejected announced series; the edge's registration watermark stays", "edge", x.edge,
				"rejected", len(e.Rejected), "first", e.Rejected[0].Reason)
		}
		x.answer(announced(x.id, e.ThroughMs, e.Registered, msg))
	}
}

// registerAnnounced registers the announced series with RegisterSeries,
// one command per edge that has series the catalog does not list: some
// member cannot apply AnnounceSeries yet, so no watermark is recorded.
func (s *Server) registerAnnounced(ctx context.Context, batch []*announcement) {
	byEdge := map[string][]labels.Labels{}
	var order []string
	for _, x := range batch {
		if _, ok := byEdge[x.edge]; !ok {
			order = append(order, x.edge)
		}
		byEdge[x.edge] = append(byEdge[x.edge], x.all...)
	}
	failed := map[string]string{}
	for _, edge := range order {
		missing := s.o.Catalog.Unlisted(edge, byEdge[edge])
		if len(missing) == 0 {
			continue
		}
		if _, err := s.propose(ctx, catalog.RegisterSeries{Edge: edge, Series: missing}); err != nil {
			failed[edge] = fmt.Sprintf("register the announced series: %v", err)
		}
	}
	for _, x := range batch {
		x.answer(announced(x.id, 0, false, failed[x.edge]))
	}
}

func announced(id uint64, throughMs int64, registered bool, msg string) *pb.ShipResponse {
	return &pb.ShipResponse{Body: &pb.ShipResponse_Announced{Announced: &pb.ShipAnnounced{
		Id: id, ThroughMs: throughMs, Registered: registered, Error: msg,
	}}}
}
