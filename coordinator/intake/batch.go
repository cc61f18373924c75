package intake

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
)

// The group commit of catalog records: the records the streams of a
// Server make concurrently (RegisterSeries, RecordHeld, RecordGap,
// RecordReplicated) go to raft together, as one catalog.RecordBatch, so
// that a coordinator taking segments from thousands of edges makes a few
// proposals a second instead of one per segment.
//
// A batch is proposed once its oldest record has waited Options.
// CatalogLinger and no batch is in flight; or, while batches are in
// flight, once it is full (CatalogBatchRecords records or
// CatalogBatchBytes bytes) or its oldest record has waited batchMaxWait
// (a batch whose proposal was lost must not hold up the others for a
// whole ProposalTimeout); at most maxBatchesInflight batches are in
// flight. Each record's caller gets its own result: what the catalog
// returned for its record, its record's rejection, or the failure of
// the proposal that carried it (which fails exactly the records it
// carried; a proposal raft dropped without applying it, for want of a
// leader, is proposed again until ProposalTimeout first). A record is
// answered only once the entry holding it has applied on this member, so
// nothing is acknowledged before it is recorded. A caller that gives up (its context ends) leaves its record
// in the batch if it was proposed already (the edge resends, and the
// segment is then held) and out of it if not; the other records are not
// affected.
//
// A batch is one catalog.RecordBatch only when every member applies that
// command (catalog.FSM.RecordBatchReady); otherwise its records are
// proposed one command each, concurrently, as before. A batch of one
// record is proposed as that record's command.

// maxBatchesInflight bounds the batches proposed and not answered yet.
const maxBatchesInflight = 4

// batchMaxWait: while a batch is in flight, how long the oldest waiting
// record waits before the next batch is proposed anyway.
const batchMaxWait = 100 * time.Millisecond

// batcherOptions configure a batcher.
type batcherOptions struct {
	// propose proposes an encoded command and returns the catalog's
	// result (a rejected command: a *catalog.CommandError).
	propose func(ctx context.Context, cmd []byte) (any, error)
	// ready reports whether a catalog.RecordBatch may be proposed.
	ready func() bool
	// dropped reports whether a proposal error says the command was not
	// applied and may be proposed again (raft had no leader); nil: none
	// does. Such a proposal is retried, after 10 ms and then up to
	// 200 ms apart, until timeout: a leader election then delays the
	// records instead of failing them.
	dropped    func(error) bool
	linger     time.Duration // <= 0: none
	maxRecords int           // >= 1
	maxBytes   int           // >= 1
	timeout    time.Duration // bounds each proposal
	now        func() time.Time
}

// batcher gathers records into batches; see above. Its loop goroutine
// runs until the context given to newBatcher ends; submit may be called
// from any goroutine.
type batcher struct {
	o    batcherOptions
	ctx  context.Context
	in   chan *record
	done chan struct{}

	records, proposals, batches, retries atomic.Int64
}

// record is one command waiting to be proposed.
type record struct {
	cmd    []byte // catalog.EncodeCommand
	ctx    context.Context
	queued time.Time
	answer chan recordAnswer // buffered: the loop never blocks on it
}

type recordAnswer struct {
	res any
	err error
}

// errBatcherClosed answers records still waiting when the Server closes.
var errBatcherClosed = errors.New("intake: closed")

func newBatcher(ctx context.Context, o batcherOptions) *batcher {
	if o.now == nil {
		o.now = time.Now
	}
	o.maxRecords = max(1, min(o.maxRecords, catalog.MaxBatchRecords))
	o.maxBytes = max(1, o.maxBytes)
	b := &batcher{o: o, ctx: ctx, in: make(chan *record), done: make(chan struct{})}
	go b.loop()
	return b
}

// submit proposes c with the records of other callers and returns the
// catalog's result for it, or why it was not recorded. It returns when
// ctx ends, whether or not c was proposed.
func (b *batcher) submit(ctx context.Context, c catalog.Command) (any, error) {
	if !catalog.Batchable(c.Kind()) {
		return nil, fmt.Errorf("BUG: intake: a %s is not a batch record", c.Kind())
	}
	r := &record{cmd: catalog.EncodeCommand(c), ctx: ctx, queued: b.o.now(), answer: make(chan recordAnswer, 1)}
	select {
	case b.in <- r:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-b.ctx.Done():
		return nil, errBatcherClosed
	}
	select {
	case a := <-r.answer:
		return a.res, a.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// wait returns once the batcher's loop has returned (after its context ended
// and every batch in flight was answered).
func (b *batcher) wait() { <-b.done }

// loop is the batcher's one owner of its queue.
func (b *batcher) loop() {
	defer close(b.done)
	var (
		pending      []*record
		pendingBytes int
		inflight     int
		finished     = make(chan struct{}, maxBatchesInflight)
		timer        = time.NewTimer(time.Hour)
		timerSet     bool
	)
	timer.Stop()
	defer timer.Stop()
	for {
		// Propose what may go now, then wait for something to change.
		for len(pending) > 0 && inflight < maxBatchesInflight {
			pending, pendingBytes = dropCanceled(pending)
			if len(pending) == 0 {
				break
			}
			waited := b.o.now().Sub(pending[0].queued)
			full := len(pending) >= b.o.maxRecords || pendingBytes >= b.o.maxBytes
			if !full && !(inflight == 0 && waited >= b.o.linger) && waited < batchMaxWait {
				wake := b.o.linger - waited
				if inflight > 0 {
					wake = batchMaxWait - waited
				}
				if timerSet {
					timer.Stop()
				}
				timer.Reset(wake)
				timerSet = true
				break
			}
			var batch []*record
			batch, pending = take(pending, b.o.maxRecords, b.o.maxBytes)
			pendingBytes = 0
			for _, r := range pending {
				pendingBytes += len(r.cmd)
			}
			inflight++
			go func() {
				b.propose(batch)
				finished <- struct{}{}
			}()
		}
		select {
		case r := <-b.in:
			pending = append(pending, r)
			pendingBytes += len(r.cmd)
		case <-finished:
			inflight--
		case <-timer.C:
			timerSet = false
		case <-b.ctx.Done():
			for _, r := range pending {
				r.answer <- recordAnswer{err: errBatcherClosed}
			}
			for ; inflight > 0; inflight-- {
				<-finished
			}
			return
		}
	}
}

// dropCanceled answers and removes the records whose callers gave up
// before they were proposed, and returns the rest with their bytes.
func dropCanceled(pending []*record) ([]*record, int) {
	kept, bytes := pending[:0], 0
	for _, r := range pending {
		if err := context.Cause(r.ctx); err != nil {
			r.answer <- recordAnswer{err: err}
			continue
		}
		kept = append(kept, r)
		bytes += len(r.cmd)
	}
	clear(pending[len(kept):])
	return kept, bytes
}

// take splits off the first batch of pending: at least one record, at
// most maxRecords records and, past the first, maxBytes bytes.
func take(pending []*record, maxRecords, maxBytes int) (batch, rest []*record) {
	n, bytes := 0, 0
	for n < len(pending) && n < maxRecords && (n == 0 || bytes+len(pending[n].cmd) <= maxBytes) {
		bytes += len(pending[n].cmd)
		n++
	}
	batch = pending[:n:n]
	rest = append([]*record(nil), pending[n:]...)
	return batch, rest
}

// propose proposes one batch and answers its records.
func (b *batcher) propose(batch []*record) {
	ctx, cancel := context.WithTimeout(b.ctx, b.o.timeout)
	defer cancel()
	b.batches.Add(1)
	b.records.Add(int64(len(batch)))
	if len(batch) == 1 || !b.o.ready() {
		// One command per record, as before batches: concurrently, so
		// that raft still packs them into few entries.
		var wg sync.WaitGroup
		for _, r := range batch {
			wg.Go(func() {
				res, err := b.proposeOne(ctx, r.cmd)
				r.answer <- recordAnswer{res, err}
			})
		}
		wg.Wait()
		return
	}
	cmds := make([][]byte, len(batch))
	for i, r := range batch {
		cmds[i] = r.cmd
	}
	enc, err := catalog.EncodeRecordBatch(cmds)
	var res any
	if err == nil {
		res, err = b.proposeOne(ctx, enc)
	}
	if err != nil {
		err = fmt.Errorf("record a batch of %d catalog records: %w", len(batch), err)
		for _, r := range batch {
			r.answer <- recordAnswer{err: err}
		}
		return
	}
	br, ok := res.(catalog.RecordBatchResult)
	if !ok || len(br.Records) != len(batch) {
		err := fmt.Errorf("record a batch of %d catalog records: unexpected result %T", len(batch), res)
		for _, r := range batch {
			r.answer <- recordAnswer{err: err}
		}
		return
	}
	for i, r := range batch {
		r.answer <- recordAnswer{br.Records[i].Result, br.Records[i].Err}
	}
}

// proposeOne proposes cmd, again while raft drops it (not applied: no
// leader) and ctx allows.
func (b *batcher) proposeOne(ctx context.Context, cmd []byte) (any, error) {
	wait := 10 * time.Millisecond
	for {
		b.proposals.Add(1)
		res, err := b.o.propose(ctx, cmd)
		if err == nil || b.o.dropped == nil || !b.o.dropped(err) {
			return res, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		b.retries.Add(1)
		wait = min(2*wait, 200*time.Millisecond)
	}
}
