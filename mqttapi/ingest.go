package mqttapi

import (
	"context"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
)

// pendingWrite is the messages at hand and the points they made, written
// to the backend in one call and then acknowledged.
type pendingWrite struct {
	msgs    []pendingMsg
	batches []model.Batch
	points  int
}

// pendingMsg is one message of a pendingWrite.
type pendingMsg struct {
	m          *message
	topic      string
	first, end int // its batches: batches[first:end]
	points     int // points decoded
	refused    int // points the decoder refused
	outcome    outcome
	decided    bool // outcome is known before the write (unmatched, ignored, too large)
}

func (p *pendingWrite) reset() {
	clear(p.batches) // let go of what the points referenced
	clear(p.msgs)
	p.msgs, p.batches, p.points = p.msgs[:0], p.batches[:0], 0
}

// ingest is the ingest goroutine: it takes the messages at hand (waiting
// for the first), decodes them, writes their points in one call, and
// acknowledges them once the write succeeded. It returns when work is
// done; what it holds then is not acknowledged.
func (a *Adapter) ingest(work context.Context) {
	var p pendingWrite
	for {
		select {
		case m := <-a.in:
			if !a.take(work, &p, m) {
				return
			}
		case <-work.Done():
			return
		}
		for more := true; more; {
			select {
			case m := <-a.in:
				if !a.take(work, &p, m) {
					return
				}
			default:
				more = false
			}
		}
		if !a.flush(work, &p) {
			return
		}
	}
}

// match returns the first subscription whose filter matches topic, and
// the levels it captured.
func (a *Adapter) match(topic string) (*subscription, []capture) {
	for _, s := range a.subs {
		if caps, ok := s.filter.match(topic, nil); ok {
			return s, caps
		}
	}
	return nil, nil
}

// take decodes m into p, writing p first when m's points would make it
// too large. It returns false when work is done before that write
// succeeded.
func (a *Adapter) take(work context.Context, p *pendingWrite, m *message) bool {
	pm := pendingMsg{m: m, topic: m.pub.Topic}
	sub, caps := a.match(pm.topic)
	switch {
	case sub == nil:
		pm.outcome, pm.decided = outcomeUnmatched, true
		a.rl.warn("unmatched", "mqtt: a message matches no subscription (a subscription the session kept from an earlier configuration?); acknowledged, not stored", "topic", pm.topic)
	case len(m.pub.Payload) > a.o.MaxPayloadBytes:
		pm.outcome, pm.decided = outcomeRefused, true
		a.m.decode.Add(context.Background(), 1, a.m.reasons[formatIndex(sub.Format)][reasonTooLarge])
		a.m.points.Add(context.Background(), 1, a.m.refused)
		a.rl.warn("too_large", "mqtt: message refused", "topic", pm.topic, "reason", reasonTooLarge.String(),
			"error", "payload larger than the limit", "bytes", len(m.pub.Payload), "limit", a.o.MaxPayloadBytes)
	default:
		r := &a.res
		skip := ""
		if sub.JSON != nil {
			skip = sub.JSON.MetricTopic
		}
		r.reset(a.o.Limits, a.o.MaxPointsPerMessage, sub.baseLabels(caps, skip))
		sub.dec.decode(&inbound{topic: pm.topic, payload: m.pub.Payload, caps: caps, receivedMs: m.received.UnixMilli()}, r)
		a.m.decoded(sub.Format, r)
		if r.first != "" && r.firstWhy != reasonUnsupportedType {
			a.rl.warn("decode/"+r.firstWhy.String(), "mqtt: message refused in part or whole", "topic", pm.topic,
				"format", string(sub.Format), "reason", r.firstWhy.String(), "error", r.first, "points_refused", r.refused)
		}
		if r.ignored {
			pm.outcome, pm.decided = outcomeIgnored, true
		}
		if len(p.msgs) > 0 && p.points+r.points > a.o.MaxBatchPoints {
			if !a.flush(work, p) {
				return false
			}
		}
		pm.first = len(p.batches)
		p.batches = append(p.batches, r.batches...)
		pm.end = len(p.batches)
		pm.points, pm.refused = r.points, r.refused
		p.points += r.points
	}
	p.msgs = append(p.msgs, pm)
	return true
}

// flush writes p's points and acknowledges its messages. It returns false
// when work is done before the write succeeded: nothing is acknowledged.
func (a *Adapter) flush(work context.Context, p *pendingWrite) bool {
	var wr model.WriteResult
	if len(p.batches) > 0 {
		var ok bool
		if wr, ok = a.write(work, p.batches, len(p.msgs) == 1, p); !ok {
			return false
		}
	}
	a.account(p, &wr)
	now := a.o.now()
	for _, pm := range p.msgs {
		if pm.m.pub.QoS > 0 {
			// An error means the connection this message came on is
			// gone: the broker sends it again on the next one.
			if err := pm.m.client.Ack(pm.m.pub); err != nil {
				a.o.Logger.Debug("mqtt: acknowledgement not sent; the broker will send the message again", "topic", pm.topic, "err", err)
			}
		}
		a.m.ack(pm.m.received, now)
		a.m.pending.Add(-1)
	}
	p.reset()
	return true
}

// write writes batches, retrying with backoff while the backend refuses
// for now (overloaded, unavailable, timeout): those messages are not
// acknowledged, and the broker's flow control holds the rest back. A
// write refused as a bad request is split per message (p's) so that one
// bad message does not refuse the others; a single message's bad request
// refuses its points. It returns false when work is done first.
func (a *Adapter) write(work context.Context, batches []model.Batch, single bool, p *pendingWrite) (model.WriteResult, bool) {
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(work, a.o.WriteTimeout)
		wr, err := a.b.Write(ctx, batches)
		cancel()
		if err == nil {
			return wr, true
		}
		if work.Err() != nil {
			return wr, false
		}
		kind := backend.Classify(err)
		if kind == backend.KindBadRequest {
			if !single && p != nil {
				return a.writeEach(work, p)
			}
			var rej model.WriteResult
			for _, b := range batches {
				rej.Rejected += int64(len(b.Ts))
			}
			a.rl.warn("write/bad_request", "mqtt: the node refused a message's points", "err", err)
			return rej, true
		}
		a.m.retry(kind)
		backoff := a.backoff(attempt)
		a.rl.warn("write/retry", "mqtt: the node cannot take writes now; holding the messages unacknowledged and retrying",
			"err", err, "batches", len(batches), "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-work.Done():
			t.Stop()
			return model.WriteResult{}, false
		}
	}
}

// writeEach writes the messages of p one by one and merges the results
// (rejection batch indexes are p's).
func (a *Adapter) writeEach(work context.Context, p *pendingWrite) (model.WriteResult, bool) {
	var all model.WriteResult
	for _, pm := range p.msgs {
		if pm.end == pm.first {
			continue
		}
		wr, ok := a.write(work, p.batches[pm.first:pm.end], true, nil)
		if !ok {
			return all, false
		}
		all.Accepted += wr.Accepted
		all.Rejected += wr.Rejected
		for i, n := range wr.RejectedBy {
			all.RejectedBy[i] += n
		}
		for _, rj := range wr.Rejections {
			rj.BatchIndex += pm.first
			if len(all.Rejections) < model.MaxRejectionDetails {
				all.Rejections = append(all.Rejections, rj)
			}
		}
	}
	return all, true
}

// account counts what became of p's messages and points, and logs what
// the backend refused.
func (a *Adapter) account(p *pendingWrite, wr *model.WriteResult) {
	ctx := context.Background()
	refused := wr.Rejected
	nodeRefused := make(map[int]int64) // message -> points the backend refused, from the details
	for _, rj := range wr.Rejections {
		i := msgOf(p, rj.BatchIndex)
		if i < 0 {
			continue
		}
		n := rj.Points
		if n <= 0 {
			n = 1
		}
		nodeRefused[i] += n
		a.rl.warn("rejected/"+rj.Reason.String(), "mqtt: the node refused points of a message", "topic", p.msgs[i].topic,
			"reason", rj.Reason.String(), "error", rj.Message)
	}
	for i, pm := range p.msgs {
		refused += int64(pm.refused)
		if !pm.decided {
			pm.outcome = decideOutcome(pm.points, pm.refused, nodeRefused[i])
		}
		a.m.message(pm.outcome)
	}
	if wr.Accepted > 0 {
		a.m.points.Add(ctx, wr.Accepted, a.m.stored)
	}
	if refused > 0 {
		a.m.points.Add(ctx, refused, a.m.refused)
	}
}

// decideOutcome is the outcome of a message that made points (decoded)
// and had some refused by the decoder and the backend.
func decideOutcome(decoded, decoderRefused int, backendRefused int64) outcome {
	stored := int64(decoded) - backendRefused
	switch {
	case decoded == 0 && decoderRefused == 0:
		return outcomeEmpty
	case stored <= 0:
		return outcomeRefused
	case decoderRefused > 0 || backendRefused > 0:
		return outcomePartial
	}
	return outcomeStored
}

// msgOf returns the index of the message of batch b, or -1.
func msgOf(p *pendingWrite, b int) int {
	for i, pm := range p.msgs {
		if b >= pm.first && b < pm.end {
			return i
		}
	}
	return -1
}
