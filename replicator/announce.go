package replicator

import (
	"fmt"
	"time"

	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator/wire"
)

// SeriesSource is a Source that lists the series it creates; *node.Node
// is one. With it, and a coordinator whose welcome lists the feature
// "announce", the Shipper announces new series on the stream as they are
// created (ShipAnnounce), not only when a segment holding them ships.
type SeriesSource interface {
	Source
	// CreatedSeries returns up to limit series from the node-local id
	// from on, in creation order, and the id to ask from next.
	CreatedSeries(from uint64, limit int) (series []labels.Labels, next uint64)
}

// announceState is a session's announcements (loop goroutine only). Each
// stream announces every series of the node once, from id 1 (so that a
// catalog that forgot the edge learns them again; the coordinator
// proposes only those it does not list), then, every AnnounceInterval,
// the series created since, with the time the list was taken: the
// registration watermark. One announcement is in flight at a time.
type announceState struct {
	on       bool      // the coordinator answers announcements
	from     uint64    // the next node-local id not yet acknowledged
	sentNext uint64    // from, once the announcement in flight is answered
	id       uint64    // of the last announcement sent
	inflight bool      // an announcement awaits its answer
	sentMore bool      // the one in flight was full: more follows at once
	due      time.Time // when the next one is sent
}

// pumpAnnounce sends the next announcement when one is due; it reports
// whether it sent one (the sender is then busy).
func (l *loop) pumpAnnounce(s *session, now time.Time) bool {
	a := &s.ann
	if !a.on || a.inflight || now.Before(a.due) {
		return false
	}
	src, ok := l.src.(SeriesSource)
	if !ok {
		return false
	}
	// The clock is read before the list is: every series created before
	// throughMs is in the list (or an earlier one), and one created while
	// listing may be in it too, which says more than needed.
	throughMs := l.o.Now().UnixMilli()
	// At most MaxAnnounceSeries series and about MaxAnnounceBytes of
	// labels per message (one series over it goes alone); more follow.
	var series []labels.Labels
	next, size, more := a.from, 0, false
	for {
		if len(series) == wire.MaxAnnounceSeries {
			more = true
			break
		}
		got, n := src.CreatedSeries(next, 1)
		if len(got) == 0 {
			next = n
			break
		}
		b := labelBytes(got[0])
		if len(series) > 0 && size+b > wire.MaxAnnounceBytes {
			more = true
			break
		}
		series, size, next = append(series, got[0]), size+b, n
	}
	a.id++
	m := &pb.ShipAnnounce{Id: a.id, ThroughMs: throughMs, More: more, Series: make([]*pb.AnnouncedSeries, len(series))}
	for i, ls := range series {
		ps := &pb.AnnouncedSeries{Labels: make([]*pb.Label, len(ls))}
		for j, lb := range ls {
			ps.Labels[j] = &pb.Label{Name: lb.Name, Value: lb.Value}
		}
		m.Series[i] = ps
	}
	a.inflight, a.sentNext, a.sentMore = true, next, more
	l.announced += int64(len(series))
	l.send(s, &outgoing{msgs: []*pb.ShipRequest{{Body: &pb.ShipRequest_Announce{Announce: m}}}})
	return true
}

// labelBytes is about the size of ls in a message.
func labelBytes(ls labels.Labels) int {
	n := 2
	for _, l := range ls {
		n += len(l.Name) + len(l.Value) + 4
	}
	return n
}

// onAnnounced takes the answer to the announcement in flight: on success
// the next one lists the series created since; on a refusal the same
// series are announced again after AnnounceInterval.
func (l *loop) onAnnounced(s *session, r *pb.ShipAnnounced) {
	a := &s.ann
	if !a.inflight || r.GetId() != a.id {
		s.cancel(fmt.Errorf("protocol violation: an answer to announcement %d, which is not in flight", r.GetId()))
		return
	}
	a.inflight = false
	now := time.Now()
	if msg := r.GetError(); msg != "" {
		l.lastErr = "announce series: " + msg
		l.log.Warn("series announcement not recorded; announcing again later", "err", msg)
		a.due = now.Add(l.o.AnnounceInterval)
		l.annTimer.Reset(l.o.AnnounceInterval)
		return
	}
	a.from = a.sentNext
	if r.GetRegistered() {
		l.registeredMs = r.GetThroughMs()
	}
	if a.sentMore {
		a.due = now // the rest of a long list, at once
		return
	}
	a.due = now.Add(l.o.AnnounceInterval)
	l.annTimer.Reset(l.o.AnnounceInterval)
}
