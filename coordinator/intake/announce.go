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
	// Each announcement's part of the command: the series the catalog
	// does not list for the edge, in pieces that fit maxAnnounceBytes
	// (the last carries the watermark), so that no command is too large
	// for a raft entry however long the series' labels.
	type piece struct {
		x    int // index in batch
		last bool
		ea   catalog.EdgeAnnouncement
	}
	var cmds [][]piece
	var cur []piece
	curBytes := 0
	add := func(p piece, size int) {
		if len(cur) > 0 && curBytes+size > maxAnnounceBytes {
			cmds = append(cmds, cur)
			cur, curBytes = nil, 0
		}
		cur = append(cur, p)
		curBytes += size
	}
	for i, x := range batch {
		missing := s.o.Catalog.Unlisted(x.edge, x.all)
		base := len(x.edge) + 16
		size := base
		var part []labels.Labels
		for _, ls := range missing {
			n := seriesBytes(ls)
			if len(part) > 0 && size+n > maxAnnounceBytes/2 {
				add(piece{x: i, ea: catalog.EdgeAnnouncement{Edge: x.edge, ThroughMs: catalog.NoWatermark, Series: part}}, size)
				part, size = nil, base
			}
			part = append(part, ls)
			size += n
		}
		add(piece{x: i, last: true, ea: catalog.EdgeAnnouncement{Edge: x.edge, ThroughMs: x.throughMs, Series: part}}, size)
	}
	cmds = append(cmds, cur)
	results := make([]catalog.EdgeAnnounced, len(batch))
	failed := make([]string, len(batch))
	for _, c := range cmds {
		cmd := catalog.AnnounceSeries{Edges: make([]catalog.EdgeAnnouncement, len(c))}
		for i, p := range c {
			cmd.Edges[i] = p.ea
			if p.last && failed[p.x] != "" {
				// An earlier piece was not recorded: its series may be
				// missing, so the watermark must not move.
				cmd.Edges[i].ThroughMs = catalog.NoWatermark
			}
		}
		res, err := s.propose(ctx, cmd)
		r, ok := res.(catalog.AnnounceSeriesResult)
		if err == nil && (!ok || len(r.Edges) != len(c)) {
			err = fmt.Errorf("unexpected result %T", res)
		}
		if err != nil {
			if s.ctx.Err() == nil {
				s.o.Logger.Warn("record series announcements", "announcements", len(c), "err", err)
			}
			for _, p := range c {
				failed[p.x] = fmt.Sprintf("record the announcement: %v", err)
			}
			continue
		}
		s.annCommands.Add(1)
		for i, p := range c {
			e := r.Edges[i]
			switch {
			case e.Skipped != "":
				failed[p.x] = e.Skipped
			case len(e.Rejected) > 0:
				// An error makes the edge announce the same series again,
				// so that its watermark stays below them for as long as
				// the catalog cannot list them (the fleet's series limit).
				failed[p.x] = fmt.Sprintf("the catalog rejected %d announced series (first: %s); the registration watermark stays", len(e.Rejected), e.Rejected[0].Reason)
				s.o.Logger.Warn("catalog rejected announced series; the edge's registration watermark stays", "edge", p.ea.Edge,
					"rejected", len(e.Rejected), "first", e.Rejected[0].Reason)
			}
			if p.last {
				results[p.x] = e
			}
		}
	}
	for i, x := range batch {
		if failed[i] != "" {
			x.answer(announced(x.id, results[i].ThroughMs, false, failed[i]))
			continue
		}
		x.answer(announced(x.id, results[i].ThroughMs, results[i].Registered, ""))
	}
}

// maxAnnounceBytes bounds the encoded series of one AnnounceSeries
// command, well under a raft entry (1 MiB by default).
const maxAnnounceBytes = 256 << 10

// seriesBytes is about the encoded size of a series in a command.
func seriesBytes(ls labels.Labels) int {
	n := 2
	for _, l := range ls {
		n += len(l.Name) + len(l.Value) + 4
	}
	return n
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
