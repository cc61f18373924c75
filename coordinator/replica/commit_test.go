package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node"
)

// TestApply_ConcurrentEdgesAllRecorded applies the segments of many
// edges from many goroutines at once, each segment twice (once as a
// resend racing the first): every segment is recorded once and held,
// every point stored. Run with -race.
func TestApply_ConcurrentEdgesAllRecorded(t *testing.T) {
	const edges, perEdge = 40, 5
	segs := fleetSegments(t, edges, perEdge)
	s := openStore(t, t.TempDir())
	defer s.Close()
	var all []fleetSegment
	for _, l := range segs {
		all = append(all, l...)
		all = append(all, l...)
	}
	next := make(chan fleetSegment)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for seg := range next {
				if _, err := s.Apply(context.Background(), seg.edge, seg.seq, seg.crc, seg.file); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, seg := range all {
		next <- seg
	}
	close(next)
	wg.Wait()
	st := s.Stats()
	if st.SegmentsApplied != edges*perEdge || st.Duplicates != edges*perEdge || st.Points != edges*perEdge*8*5 {
		t.Fatalf("stats %+v; want %d segments applied once and once as duplicates, %d points", st, edges*perEdge, edges*perEdge*40)
	}
	if st.IndexSyncs > st.SegmentsApplied {
		t.Fatalf("%d index syncs for %d segments", st.IndexSyncs, st.SegmentsApplied)
	}
	for e := range edges {
		edge := fmt.Sprintf("edge-%05d", e)
		h, err := s.Holdings(edge)
		if err != nil || len(h) != 1 || h[0] != (SeqRange{First: 1, Last: perEdge}) {
			t.Fatalf("holdings of %s: %v, %v; want 1..%d", edge, h, err, perEdge)
		}
	}
	t.Logf("%d index syncs for %d segments", st.IndexSyncs, st.SegmentsApplied)
}

// TestApply_ReturnsOnlyOnceItsRecordIsDurable: the index's writes are
// watched; an Apply that returns nil must find its record in a write
// that returned (was synced) before, and an Apply whose record's write
// failed must fail. The first write is held until every other Apply has
// queued its record, so that the second write carries all of them
// (concurrent records share one sync).
func TestApply_ReturnsOnlyOnceItsRecordIsDurable(t *testing.T) {
	const edges = 24
	segs := fleetSegments(t, edges, 1)[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	var (
		mu      sync.Mutex
		durable = map[string]bool{}
		writes  [][]string
	)
	release := make(chan struct{})
	const failWrite = 2 // the third write fails
	write := s.index.write
	s.index.write = func(recs []node.ReplicaMetaRecord) error {
		mu.Lock()
		i := len(writes)
		keys := make([]string, len(recs))
		for k, r := range recs {
			keys[k] = r.Key
		}
		writes = append(writes, keys)
		mu.Unlock()
		if i == 0 {
			<-release
		}
		if i == failWrite {
			return errors.New("injected: sync failed")
		}
		if err := write(recs); err != nil {
			return err
		}
		mu.Lock()
		for _, k := range keys {
			durable[k] = true
		}
		mu.Unlock()
		return nil
	}
	applyAll := func(list []fleetSegment) []error {
		errs := make([]error, len(list))
		var wg sync.WaitGroup
		for i, seg := range list {
			wg.Go(func() {
				_, errs[i] = s.Apply(context.Background(), seg.edge, seg.seq, seg.crc, seg.file)
				if errs[i] == nil {
					mu.Lock()
					ok := durable[indexKey(seg.edge, seg.seq)]
					mu.Unlock()
					if !ok {
						t.Errorf("Apply of %s returned before its index record was durable", seg.edge)
					}
				}
			})
		}
		// The first write is held; release it once the others queued.
		waitFor(t, func() bool {
			s.index.mu.Lock()
			defer s.index.mu.Unlock()
			return len(s.index.queue) == len(list)-1
		})
		close(release)
		wg.Wait()
		return errs
	}
	for i, err := range applyAll(segs) {
		if err != nil {
			t.Fatalf("apply of %s: %v", segs[i].edge, err)
		}
	}
	if len(writes) != 2 || len(writes[0]) != 1 || len(writes[1]) != edges-1 {
		t.Fatalf("index writes of %v records; want 2 writes, of 1 and %d records", writeSizes(writes), edges-1)
	}
	// The third write fails: its Apply fails, records nothing, and
	// applies on a resend.
	seg := fleetSegments(t, 1, 2)[1][0]
	if _, err := s.Apply(context.Background(), seg.edge, seg.seq, seg.crc, seg.file); err == nil {
		t.Fatalf("apply of %s seq %d: nil error, its record's write failed", seg.edge, seg.seq)
	}
	if _, ok, _ := s.SegmentCRC(seg.edge, seg.seq); ok {
		t.Fatal("a segment whose record's write failed is recorded")
	}
	if _, err := s.Apply(context.Background(), seg.edge, seg.seq, seg.crc, seg.file); err != nil {
		t.Fatalf("resend: %v", err)
	}
	if len(writes) != 4 {
		t.Fatalf("index writes of %v records; want 4 writes", writeSizes(writes))
	}
}

func writeSizes(writes [][]string) []int {
	n := make([]int, len(writes))
	for i, w := range writes {
		n[i] = len(w)
	}
	return n
}

// waitFor polls cond until it holds (failing the test after 10 s).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
