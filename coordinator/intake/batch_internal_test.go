package intake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
)

// fakeCatalog stands in for raft and the catalog behind a batcher: it
// decodes every proposal, answers each RecordHeld with its LastSeq as
// AckedThrough (so that every caller can tell its own answer), rejects
// the edges in reject, and fails proposals while fail says so.
type fakeCatalog struct {
	mu        sync.Mutex
	proposals [][]catalog.Command // the records of each proposal
	sizes     []int               // the encoded size of each proposal
	reject    map[string]bool
	fail      func(records []catalog.Command) error
	gate      chan struct{} // if set, each proposal waits for a value
}

func (f *fakeCatalog) propose(ctx context.Context, cmd []byte) (any, error) {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c, err := catalog.DecodeCommand(cmd)
	if err != nil {
		return nil, err
	}
	records := []catalog.Command{c}
	if b, ok := c.(catalog.RecordBatch); ok {
		records = b.Records
	}
	f.mu.Lock()
	f.proposals = append(f.proposals, records)
	f.sizes = append(f.sizes, len(cmd))
	fail := f.fail
	f.mu.Unlock()
	if fail != nil {
		if err := fail(records); err != nil {
			return nil, err
		}
	}
	answer := func(r catalog.Command) (any, error) {
		h := r.(catalog.RecordHeld)
		if f.reject[h.Edge] {
			return nil, &catalog.CommandError{Kind: h.Kind(), Err: catalog.ErrNotFound, Msg: h.Edge + " is not registered"}
		}
		return catalog.RecordHeldResult{Added: 1, AckedThrough: h.Ranges[0].LastSeq}, nil
	}
	if _, ok := c.(catalog.RecordBatch); !ok {
		return answer(c)
	}
	var res catalog.RecordBatchResult
	for _, r := range records {
		x, err := answer(r)
		res.Records = append(res.Records, catalog.RecordResult{Result: x, Err: err})
	}
	return res, nil
}

func (f *fakeCatalog) recorded() [][]catalog.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.proposals)
}

func heldRecord(edge string, seq uint64) catalog.RecordHeld {
	return catalog.RecordHeld{Edge: edge, Ranges: []catalog.HeldRange{{FirstSeq: seq, LastSeq: seq, Points: 1}}}
}

func startBatcher(t *testing.T, f *fakeCatalog, edit func(*batcherOptions)) (*batcher, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	o := batcherOptions{propose: f.propose, ready: func() bool { return true }, linger: 5 * time.Millisecond,
		maxRecords: 1024, maxBytes: 256 << 10, timeout: 10 * time.Second}
	if edit != nil {
		edit(&o)
	}
	b := newBatcher(ctx, o)
	t.Cleanup(func() { cancel(); b.wait() })
	return b, cancel
}

// submitAll submits one RecordHeld per seq of edge, concurrently, and
// returns the answers by seq.
func submitAll(b *batcher, edge string, seqs []uint64) map[uint64]recordAnswer {
	var mu sync.Mutex
	out := map[uint64]recordAnswer{}
	var wg sync.WaitGroup
	for _, s := range seqs {
		wg.Go(func() {
			res, err := b.submit(context.Background(), heldRecord(edge, s))
			mu.Lock()
			out[s] = recordAnswer{res, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// Many concurrent callers share few proposals, and each gets the answer
// to its own record.
func TestBatcher_ConcurrentRecordsShareProposals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCatalog{}
		b, _ := startBatcher(t, f, nil)
		const n = 300
		answers := submitAll(b, "pi-1", seqRange(1, n))
		for s, a := range answers {
			if r, ok := a.res.(catalog.RecordHeldResult); a.err != nil || !ok || r.AckedThrough != s {
				t.Fatalf("record %d: answer %+v, %v", s, a.res, a.err)
			}
		}
		props := f.recorded()
		var seen []uint64
		for _, p := range props {
			for _, r := range p {
				seen = append(seen, r.(catalog.RecordHeld).Ranges[0].LastSeq)
			}
		}
		slices.Sort(seen)
		if !slices.Equal(seen, seqRange(1, n)) {
			t.Fatalf("records proposed: %v", seen)
		}
		// All were queued within one linger: one batch.
		if len(props) != 1 || b.proposals.Load() != 1 || b.records.Load() != n {
			t.Fatalf("%d proposals (counted %d) for %d records (counted %d)", len(props), b.proposals.Load(), n, b.records.Load())
		}
	})
}

// The batcher waits for the linger only when nothing is in flight; while
// a proposal is in flight, what arrives waits for it and then goes
// together.
func TestBatcher_GathersWhileAProposalIsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCatalog{gate: make(chan struct{})}
		b, _ := startBatcher(t, f, func(o *batcherOptions) { o.linger = -1 })
		first := make(chan recordAnswer, 1)
		go func() {
			res, err := b.submit(context.Background(), heldRecord("pi-1", 1))
			first <- recordAnswer{res, err}
		}()
		synctest.Wait() // proposed at once (no linger), waiting at the gate
		rest := make(chan map[uint64]recordAnswer, 1)
		go func() { rest <- submitAll(b, "pi-1", seqRange(2, 21)) }()
		synctest.Wait()
		time.Sleep(batchMaxWait / 2)
		f.gate <- struct{}{} // the first proposal completes
		if a := <-first; a.err != nil {
			t.Fatal(a.err)
		}
		f.gate <- struct{}{}
		for s, a := range <-rest {
			if a.err != nil {
				t.Fatalf("record %d: %v", s, a.err)
			}
		}
		if props := f.recorded(); len(props) != 2 || len(props[0]) != 1 || len(props[1]) != 20 {
			t.Fatalf("proposals of %v records, want 1 then 20", lens(props))
		}
	})
}

func lens(props [][]catalog.Command) []int {
	var out []int
	for _, p := range props {
		out = append(out, len(p))
	}
	return out
}

// A rejected record fails alone; the others of its batch are recorded.
func TestBatcher_ARejectedRecordFailsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCatalog{reject: map[string]bool{"pi-bad": true}}
		b, _ := startBatcher(t, f, nil)
		var wg sync.WaitGroup
		var badErr error
		wg.Go(func() { _, badErr = b.submit(context.Background(), heldRecord("pi-bad", 7)) })
		answers := submitAll(b, "pi-1", seqRange(1, 10))
		wg.Wait()
		var ce *catalog.CommandError
		if !errors.As(badErr, &ce) || !errors.Is(badErr, catalog.ErrNotFound) {
			t.Fatalf("rejected record: %v, want its own *catalog.CommandError", badErr)
		}
		for s, a := range answers {
			if a.err != nil || a.res.(catalog.RecordHeldResult).AckedThrough != s {
				t.Fatalf("record %d: %+v, %v", s, a.res, a.err)
			}
		}
		if props := f.recorded(); len(props) != 1 || len(props[0]) != 11 {
			t.Fatalf("proposals of %v records, want one of 11", lens(props))
		}
	})
}

// A failed proposal fails exactly the records it carried.
func TestBatcher_AFailedProposalFailsOnlyItsRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errLost := errors.New("proposal dropped (injected)")
		f := &fakeCatalog{}
		f.fail = func(records []catalog.Command) error {
			if records[0].(catalog.RecordHeld).Edge == "pi-lost" {
				return errLost
			}
			return nil
		}
		b, _ := startBatcher(t, f, func(o *batcherOptions) { o.maxRecords = 5 })
		lost := submitAll(b, "pi-lost", seqRange(1, 5)) // one full batch, failed
		ok := submitAll(b, "pi-1", seqRange(1, 12))
		for s, a := range lost {
			if !errors.Is(a.err, errLost) {
				t.Fatalf("record %d of the failed proposal: %v", s, a.err)
			}
		}
		for s, a := range ok {
			if a.err != nil {
				t.Fatalf("record %d: %v", s, a.err)
			}
		}
		for _, p := range f.recorded() {
			edges := map[string]bool{}
			for _, r := range p {
				edges[r.(catalog.RecordHeld).Edge] = true
			}
			if len(edges) != 1 {
				t.Fatalf("a proposal mixes the failed batch with others: %v", edges)
			}
		}
	})
}

// A caller that gives up before its record is proposed takes it out;
// the records queued with it are proposed and answered.
func TestBatcher_ACanceledWaiterLosesNoOtherRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCatalog{gate: make(chan struct{})}
		b, _ := startBatcher(t, f, func(o *batcherOptions) { o.linger = -1 })
		go func() { _, _ = b.submit(context.Background(), heldRecord("pi-1", 1)) }()
		synctest.Wait() // in flight, at the gate
		ctx, cancel := context.WithCancel(context.Background())
		canceled := make(chan error, 1)
		go func() {
			_, err := b.submit(ctx, heldRecord("pi-gone", 1))
			canceled <- err
		}()
		rest := make(chan map[uint64]recordAnswer, 1)
		go func() { rest <- submitAll(b, "pi-1", seqRange(2, 6)) }()
		synctest.Wait()
		cancel()
		if err := <-canceled; !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled caller: %v", err)
		}
		close(f.gate)
		for s, a := range <-rest {
			if a.err != nil || a.res.(catalog.RecordHeldResult).AckedThrough != s {
				t.Fatalf("record %d: %+v, %v", s, a.res, a.err)
			}
		}
		for _, p := range f.recorded() {
			for _, r := range p {
				if r.(catalog.RecordHeld).Edge == "pi-gone" {
					t.Fatal("the canceled record was proposed")
				}
			}
		}
	})
}

// No batch holds more records or (past its first record) more bytes than
// the limits.
func TestBatcher_BatchesAreBounded(t *testing.T) {
	for _, tc := range []struct{ records, bytes int }{{3, 1 << 20}, {1024, 100}, {1, 1 << 20}} {
		t.Run(fmt.Sprintf("records=%d,bytes=%d", tc.records, tc.bytes), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeCatalog{}
				b, _ := startBatcher(t, f, func(o *batcherOptions) { o.maxRecords, o.maxBytes = tc.records, tc.bytes })
				for s, a := range submitAll(b, "pi-1", seqRange(1, 40)) {
					if a.err != nil {
						t.Fatalf("record %d: %v", s, a.err)
					}
				}
				one := len(catalog.EncodeCommand(heldRecord("pi-1", 10)))
				total := 0
				for _, p := range f.recorded() {
					total += len(p)
					if len(p) > tc.records || (len(p) > 1 && len(p)*one > tc.bytes+one) {
						t.Fatalf("a batch of %d records (%d bytes each) over the limits %+v", len(p), one, tc)
					}
				}
				if total != 40 {
					t.Fatalf("%d records proposed, want 40", total)
				}
			})
		})
	}
}

// Until every member applies RecordBatch, each record is a proposal of
// its own.
func TestBatcher_OneCommandPerRecordUntilEveryMemberAppliesBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCatalog{}
		b, _ := startBatcher(t, f, func(o *batcherOptions) { o.ready = func() bool { return false } })
		for s, a := range submitAll(b, "pi-1", seqRange(1, 20)) {
			if a.err != nil || a.res.(catalog.RecordHeldResult).AckedThrough != s {
				t.Fatalf("record %d: %+v, %v", s, a.res, a.err)
			}
		}
		props := f.recorded()
		if len(props) != 20 || b.proposals.Load() != 20 {
			t.Fatalf("%d proposals (counted %d) for 20 records, want one each", len(props), b.proposals.Load())
		}
	})
}

// Closing answers what waits and ends the loop.
func TestBatcher_CloseAnswersWaitingRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeCatalog{gate: make(chan struct{})}
		b, cancel := startBatcher(t, f, func(o *batcherOptions) { o.linger = -1 })
		errs := make(chan error, 3)
		for s := range uint64(3) {
			go func() {
				_, err := b.submit(context.Background(), heldRecord("pi-1", s+1))
				errs <- err
			}()
			synctest.Wait()
		}
		cancel()
		for range 3 {
			if err := <-errs; err == nil {
				t.Fatal("a record answered as recorded after close")
			}
		}
		b.wait()
		if _, err := b.submit(context.Background(), heldRecord("pi-1", 9)); !errors.Is(err, errBatcherClosed) {
			t.Fatalf("submit after close: %v", err)
		}
	})
}

// A proposal raft dropped without applying it (no leader) is proposed
// again until it is applied, or until the proposal timeout, when its
// records fail with the drop.
func TestBatcher_RetriesDroppedProposals(t *testing.T) {
	errDropped := errors.New("dropped (injected)")
	for _, tc := range []struct {
		name  string
		drops int
	}{{"election", 3}, {"no leader", 1 << 30}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeCatalog{}
				var calls int
				f.fail = func([]catalog.Command) error {
					calls++ // one batch: one proposal at a time
					if calls <= tc.drops {
						return errDropped
					}
					return nil
				}
				b, _ := startBatcher(t, f, func(o *batcherOptions) {
					o.dropped = func(err error) bool { return errors.Is(err, errDropped) }
					o.timeout = 2 * time.Second
				})
				start := time.Now()
				answers := submitAll(b, "pi-1", seqRange(1, 10))
				for s, a := range answers {
					if tc.drops < 10 && (a.err != nil || a.res.(catalog.RecordHeldResult).AckedThrough != s) {
						t.Fatalf("record %d: %+v, %v", s, a.res, a.err)
					}
					if tc.drops > 10 && !errors.Is(a.err, errDropped) {
						t.Fatalf("record %d: %v, want the drop once the timeout passed", s, a.err)
					}
				}
				if tc.drops < 10 && b.retries.Load() != int64(tc.drops) {
					t.Fatalf("%d retries, want %d", b.retries.Load(), tc.drops)
				}
				if tc.drops > 10 && time.Since(start) < 2*time.Second {
					t.Fatalf("gave up after %s, before the proposal timeout", time.Since(start))
				}
				if got := b.proposals.Load(); got != b.retries.Load()+1 {
					t.Fatalf("%d proposals counted for %d retries of one batch", got, b.retries.Load())
				}
			})
		})
	}
}
