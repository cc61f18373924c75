package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/wal"
)

// prepared is a validated batch waiting for the write lock.
type prepared struct {
	idx  int
	lset labels.Labels
	ts   []int64
	vs   []float64
	// orig maps a point of ts/vs back to its index in the client's batch
	// when some points were already rejected (nil: the identity).
	orig []int
}

// pointIndex is the client's index of point k of p.
func (p *prepared) pointIndex(k int) int {
	if p.orig != nil {
		return p.orig[k]
	}
	return k
}

// Write validates every point on its own, stores the valid ones and returns
// once they are durable. An error means nothing of this write is
// acknowledged (it may still be visible to queries and be kept):
// model.ErrClosed after Close; model.ErrOverloaded (nothing stored) when
// unflushed data has reached twice HeadMaxBytes or the ingest rate limit
// is reached (ErrRateLimited); a *StoreError while the store is unhealthy;
// ctx's error when ctx is done before the write begins (a write that has
// begun is not interrupted). When ctx holds a recording span (a traced
// gRPC or HTTP request), the write gets a node.write span with children
// for the WAL append, the head append and the wait for the WAL fsync.
func (n *Node) Write(ctx context.Context, batches []model.Batch) (model.WriteResult, error) {
	if err := ctx.Err(); err != nil {
		return model.WriteResult{}, err
	}
	if !trace.SpanFromContext(ctx).IsRecording() {
		return n.write(ctx, batches)
	}
	return n.writeTraced(ctx, batches)
}

// write is Write; with a recording span in ctx (writeTraced) its phases
// get child spans.
func (n *Node) write(ctx context.Context, batches []model.Batch) (res model.WriteResult, err error) {
	if n.closed.Load() {
		return res, model.ErrClosed
	}
	defer func() {
		n.stats.rejected.Add(res.Rejected)
		for r, c := range res.RejectedBy {
			if c != 0 {
				n.stats.rejectedBy[r].Add(c)
			}
		}
	}()
	// While the store cannot flush, writes are taken only while what they
	// add stays within the bounds of unflushed data (health.go).
	if n.health.unhealthy.Load() {
		if why := n.writeBound(); why != "" {
			if e := n.health.storeError(why); e != nil {
				n.health.refusing.Store(true)
				return res, e
			}
		}
	}
	// Backpressure: when flushing cannot keep up (or fails, e.g. a full
	// disk), the head stops growing and writers get a retryable error.
	if n.headBytes.Load() > 2*n.opts.HeadMaxBytes {
		return res, model.ErrOverloaded
	}
	if n.opts.WriteGate != nil {
		if err := n.opts.WriteGate(); err != nil {
			return res, err
		}
	}
	var points int64
	for _, b := range batches {
		points += int64(max(len(b.Ts), len(b.Vs)))
	}
	if err := n.admit(points); err != nil {
		return res, err
	}
	now := n.opts.Now()
	maxFuture := now.Add(n.opts.FutureWindow).UnixMilli()
	retentionRaw, _, _ := n.Retention()
	oldest := now.Add(-retentionRaw).UnixMilli()
	preps := make([]prepared, 0, len(batches))
	for i, b := range batches {
		if len(b.Ts) != len(b.Vs) {
			res.Reject(model.Rejection{BatchIndex: i, PointIndex: -1, Reason: model.RejectLengthMismatch, Message: fmt.Sprintf("batch %d: %d timestamps but %d values", i, len(b.Ts), len(b.Vs)), Points: int64(max(len(b.Ts), len(b.Vs)))})
			continue
		}
		if len(b.Ts) == 0 {
			continue
		}
		ls, err := labels.New(b.Labels, n.opts.Limits)
		if err != nil {
			res.Reject(model.Rejection{BatchIndex: i, PointIndex: -1, Reason: model.RejectInvalidSeries, Message: fmt.Sprintf("batch %d: %v", i, err), Points: int64(len(b.Ts))})
			continue
		}
		ts, vs := b.Ts, b.Vs
		var orig []int
		for j, t := range b.Ts {
			if t <= maxFuture && t >= oldest {
				continue
			}
			// Slow path: copy out the valid points.
			ts, vs = append([]int64(nil), b.Ts[:j]...), append([]float64(nil), b.Vs[:j]...)
			orig = make([]int, j, len(b.Ts))
			for k := range orig {
				orig[k] = k
			}
			for k := j; k < len(b.Ts); k++ {
				t := b.Ts[k]
				switch {
				case t > maxFuture:
					res.Reject(model.Rejection{BatchIndex: i, PointIndex: k, Reason: model.RejectTooFarInFuture, Message: fmt.Sprintf("batch %d point %d: timestamp %s is more than %s ahead of the node clock",
						i, k, fmtMs(t), n.opts.FutureWindow), Points: 1})
				case t < oldest:
					res.Reject(model.Rejection{BatchIndex: i, PointIndex: k, Reason: model.RejectTooOld, Message: fmt.Sprintf("batch %d point %d: timestamp %s is older than the raw retention (%s)",
						i, k, fmtMs(t), retentionRaw), Points: 1})
				default:
					ts, vs = append(ts, t), append(vs, b.Vs[k])
					orig = append(orig, k)
				}
			}
			break
		}
		if len(ts) > 0 {
			preps = append(preps, prepared{i, ls, ts, vs, orig})
		}
	}
	if len(preps) == 0 {
		return res, nil
	}
	pos, accepted, err := n.appendLocked(ctx, preps, &res)
	if err != nil {
		return res, err
	}
	if accepted == 0 {
		return res, nil
	}
	span := n.childSpan(ctx, "wal.sync")
	err = n.wal.SyncContext(ctx, pos)
	endSpan(span, err)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// The record is appended and will be made durable with the
			// others; the caller stops waiting for it.
			return res, fmt.Errorf("wait for the wal to sync the write (it may be stored): %w", err)
		}
		return res, fmt.Errorf("sync wal: %w", err)
	}
	res.Accepted = accepted
	n.stats.accepted.Add(accepted)
	return res, nil
}

func fmtMs(t int64) string { return time.UnixMilli(t).UTC().Format(time.RFC3339Nano) }

// appendLocked takes the write lock, writes one WAL record for all prepared
// batches and applies it to the head.
func (n *Node) appendLocked(ctx context.Context, preps []prepared, res *model.WriteResult) (wal.Position, int64, error) {
	if err := n.mu.LockContext(ctx); err != nil {
		// Nothing of the write was stored.
		return wal.Position{}, 0, fmt.Errorf("wait for the write lock: %w", err)
	}
	defer n.mu.Unlock()
	if n.closed.Load() {
		return wal.Position{}, 0, model.ErrClosed
	}
	seq, _, err := n.wal.MaybeCut()
	if err != nil {
		return wal.Position{}, 0, fmt.Errorf("cut wal segment: %w", err)
	}
	n.enc.Reset()
	type run struct {
		s  *memSeries
		ts []int64
		vs []float64
	}
	runs := make([]run, 0, len(preps))
	window := n.opts.OutOfOrderWindow.Milliseconds()
	for _, p := range preps {
		n.keyBuf = p.lset.AppendKey(n.keyBuf[:0])
		s := n.lookupLocked(n.keyBuf, p.lset)
		if s == nil {
			if len(n.byID) >= n.opts.MaxSeries {
				res.Reject(model.Rejection{BatchIndex: p.idx, PointIndex: -1, Reason: model.RejectLimitExceeded, Message: fmt.Sprintf("batch %d: series %s would exceed the node's limit of %d series", p.idx, p.lset, n.opts.MaxSeries), Points: int64(len(p.ts))})
				continue
			}
			// The series dictionary is in the store: while the store
			// refuses writes, a write with a new series is refused
			// (retryably, a *StoreError once the store is unhealthy). The
			// series is persisted before it is indexed: one the store
			// refused must not be found by the next write as recorded.
			s = &memSeries{id: n.nextID, lset: p.lset}
			if err := n.persistSeries(s); err != nil {
				return wal.Position{}, 0, err
			}
			s = n.addSeriesLocked(s.id, p.lset, n.keyBuf)
		}
		// Out-of-order window, against the series' newest sample as it
		// evolves through this batch.
		ts, vs := p.ts, p.vs
		s.mu.Lock()
		maxT, has := s.maxT, s.hasMaxT
		s.mu.Unlock()
		for j, t := range p.ts {
			if has && t < maxT-window {
				ts, vs = filterWindow(&p, j, maxT, window, res)
				break
			}
			if !has || t > maxT {
				maxT, has = t, true
			}
		}
		if len(ts) == 0 {
			continue
		}
		if s.definedSeq != seq {
			n.enc.DefineSeries(s.id, n.keyBuf)
			s.definedSeq = seq
		}
		n.enc.AddRun(s.id, ts, vs)
		runs = append(runs, run{s, ts, vs})
	}
	if len(runs) == 0 {
		return wal.Position{}, 0, nil
	}
	n.recBuf = n.enc.AppendTo(n.recBuf[:0])
	span := n.childSpan(ctx, "wal.append")
	// AppendIn: should the WAL have recovered from a failure since MaybeCut,
	// the record would land in a fresh segment that lacks the series
	// declarations this record relies on; it is refused instead.
	// A compressed record keeps one sample of a duplicated timestamp (the
	// last): its Points counts those it holds; the write accepted them all.
	pos, err := n.wal.AppendIn(seq, wal.Record{Data: n.recBuf, MinT: n.enc.MinT(), MaxT: n.enc.MaxT(), Points: n.enc.EncodedPoints()})
	endSpan(span, err)
	if err != nil {
		return wal.Position{}, 0, fmt.Errorf("append wal: %w", err)
	}
	span = n.childSpan(ctx, "head.append")
	n.stats.walRecordBytes.Add(int64(len(n.recBuf)))
	nowNs := n.opts.Now().UnixNano()
	var grown int64
	wake := false
	for _, r := range runs {
		r.s.mu.Lock()
		for i := range r.ts {
			d, c := r.s.append(r.ts[i], r.vs[i], seq, nowNs, n.opts.HeadChunkSamples)
			grown += d
			wake = wake || c
		}
		r.s.mu.Unlock()
	}
	span.End()
	n.lastAppendNs.Store(nowNs)
	n.headSamples.Add(n.enc.Points())
	if n.headBytes.Add(grown) > n.opts.HeadMaxBytes {
		wake = true
	}
	if wake {
		select {
		case n.flushWake <- struct{}{}:
		default:
		}
	}
	return pos, n.enc.Points(), nil
}

// filterWindow copies the points of p from index j on that fall inside the
// out-of-order window, rejecting the others.
func filterWindow(p *prepared, j int, maxT, window int64, res *model.WriteResult) ([]int64, []float64) {
	ts := append([]int64(nil), p.ts[:j]...)
	vs := append([]float64(nil), p.vs[:j]...)
	for k := j; k < len(p.ts); k++ {
		t := p.ts[k]
		if t < maxT-window {
			pi := p.pointIndex(k)
			res.Reject(model.Rejection{BatchIndex: p.idx, PointIndex: pi, Reason: model.RejectTooOld, Message: fmt.Sprintf("batch %d point %d: timestamp %s is more than the out-of-order window (%s) older than the series' newest sample %s",
				p.idx, pi, fmtMs(t), time.Duration(window)*time.Millisecond, fmtMs(maxT)), Points: 1})
			continue
		}
		maxT = max(maxT, t)
		ts, vs = append(ts, t), append(vs, p.vs[k])
	}
	return ts, vs
}
