package intake_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/replicator"
)

func shipperOptions(t *testing.T, cursor, target string) replicator.Options {
	return replicator.Options{
		Targets: []string{target}, Insecure: true, CursorPath: cursor, SoftwareVersion: "test",
		QueryAddr:      "pi-7.local:7001",
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		AckTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError})),
	}
}

// runShipper runs a Shipper for n until the returned stop is called.
func runShipper(t *testing.T, o replicator.Options, n *node.Node) (*replicator.Shipper, func()) {
	t.Helper()
	s, err := replicator.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, n) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("shipper run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

func writePoints(t *testing.T, n *node.Node, batches int, next *int64) int64 {
	t.Helper()
	var total int64
	for i := range batches {
		ts := make([]int64, 100)
		vs := make([]float64, 100)
		for k := range ts {
			ts[k] = *next
			vs[k] = float64(*next%1000) * 0.37
			*next++
		}
		res, err := n.Write(context.Background(), []model.Batch{{
			Labels: []labels.Label{{Name: "__name__", Value: "vibration"}, {Name: "axis", Value: fmt.Sprint("xyz"[i%3 : i%3+1])}},
			Ts:     ts, Vs: vs,
		}})
		if err != nil || res.Accepted != int64(len(ts)) {
			t.Fatalf("write: %+v, %v", res, err)
		}
		total += res.Accepted
	}
	return total
}

// shipAll writes, lets the open segment age and be cut, and waits until
// the Shipper has every sealed segment acknowledged. It returns the
// points written and those left in the open segment.
func shipAll(t *testing.T, n *node.Node, s *replicator.Shipper, batches int, next *int64) (written, open int64) {
	t.Helper()
	written = writePoints(t, n, batches, next)
	time.Sleep(30 * time.Millisecond) // let the open segment age, then cut it with one more write
	written += writePoints(t, n, 1, next)
	eventually(t, "every sealed segment acknowledged", func() bool {
		segs := n.WALSegments()
		last := segs[len(segs)-1]
		if last.Sealed || segs[len(segs)-2].Seq != last.PrevSeq || !segs[len(segs)-2].Sealed {
			return false
		}
		open = last.Points
		return s.Stats().AckedThrough == last.PrevSeq
	})
	return written, open
}

// checkCloud requires that the replica holds every segment 1..through
// exactly once, points summing to want, and that the catalog records the
// same.
func checkCloud(t *testing.T, e *env, through uint64, want int64) {
	t.Helper()
	p, _ := e.fsm.Progress("pi-7")
	if p.AckedThrough() != through || len(p.Held) != 1 || p.Held[0].FirstSeq != 1 {
		t.Fatalf("catalog progress %+v, want one run 1..%d", p, through)
	}
	if int64(p.Held[0].Points) != want {
		t.Errorf("catalog holds %d points, %d were written outside the open segment", p.Held[0].Points, want)
	}
	var points int64
	e.reps.mu.Lock()
	for key, s := range e.reps.segs[coordID] {
		if s.times != 1 {
			t.Errorf("segment %s stored %d times", key, s.times)
		}
		points += s.points
	}
	e.reps.mu.Unlock()
	if points != want {
		t.Errorf("replica holds %d points, want %d", points, want)
	}
}

// TestIntake_RealShipper ships a real node's segments through the real
// Shipper: every sealed segment is stored once and recorded; a restarted
// Shipper (new stream) sends nothing twice; a stream killed after the
// store and before the ack costs a resend that stores nothing new.
func TestIntake_RealShipper(t *testing.T) {
	e := startEnv(t, nil)
	dir := t.TempDir()
	cursor := filepath.Join(t.TempDir(), "replication.cursor")
	var cur atomic.Pointer[replicator.Shipper] // the node asks whichever Shipper runs
	n, err := node.Open(node.Options{
		DataDir: dir, NodeID: "pi-7",
		WALSegmentBytes: 4096, WALSegmentAge: 20 * time.Millisecond, FlushInterval: 10 * time.Millisecond, HeadChunkSamples: 32,
		WALRetention: func() uint64 { return cur.Load().RetainFrom() },
		WriteGate:    func() error { return cur.Load().WriteGate() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s, err := replicator.New(shipperOptions(t, cursor, e.addr))
	if err != nil {
		t.Fatal(err)
	}
	cur.Store(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, n) }()
	stopFirst := func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shipper run: %v", err)
		}
	}

	next := time.Now().Add(-10 * time.Minute).UnixMilli()
	written, open := shipAll(t, n, s, 40, &next)
	through := s.Stats().AckedThrough
	if through < 5 {
		t.Fatalf("only %d segments shipped", through)
	}
	checkCloud(t, e, through, written-open)
	if node, _ := e.fsm.Node("pi-7"); node.Addr != "pi-7.local:7001" {
		t.Errorf("edge registered with address %q", node.Addr)
	}
	if ids := e.fsm.EdgeSeries("pi-7"); len(ids) != 3 {
		t.Errorf("edge series %v, want the 3 written", ids)
	}

	// A new Shipper on the same cursor: a new stream, nothing sent twice.
	stopFirst()
	s2, stop2 := runShipper(t, shipperOptions(t, cursor, e.addr), n)
	cur.Store(s2)
	w2, open2 := shipAll(t, n, s2, 20, &next)
	written += w2
	checkCloud(t, e, s2.Stats().AckedThrough, written-open2)
	if st := e.in.Stats(); st.Duplicates != 0 || e.reps.restores != 0 {
		t.Errorf("after a restart: %d duplicates, %d stores again", st.Duplicates, e.reps.restores)
	}

	// The stream dies after a store and before its ack.
	var killOnce sync.Once
	e.reps.mu.Lock()
	e.reps.afterStore = func(string, uint64) { killOnce.Do(e.killStreams) }
	e.reps.mu.Unlock()
	sessions := s2.Stats().Sessions
	w3, open3 := shipAll(t, n, s2, 20, &next)
	written += w3
	if s2.Stats().Sessions == sessions {
		t.Fatal("the stream was not killed")
	}
	checkCloud(t, e, s2.Stats().AckedThrough, written-open3)
	// Either the resend was stored again idempotently on the replica, or
	// the record landed before the stream ended and the welcome said held.
	t.Logf("after the killed stream: %d stores again, %d duplicates", e.reps.restores, e.in.Stats().Duplicates)

	// A replica failure is refused as retryable; the Shipper resends and
	// the segment lands.
	e.reps.mu.Lock()
	e.reps.afterStore = nil
	e.reps.failNext = 2
	e.reps.mu.Unlock()
	// The killed stream above may itself have been refused (a store cut
	// short by the stream's end), so count the refusals from here on.
	refusals := s2.Stats().Refusals
	unavailable := e.in.Stats().Refusals["SHIP_ERROR_CODE_UNAVAILABLE"]
	w4, open4 := shipAll(t, n, s2, 20, &next)
	written += w4
	if s2.Stats().Refusals < refusals+2 || e.in.Stats().Refusals["SHIP_ERROR_CODE_UNAVAILABLE"] != unavailable+2 {
		t.Errorf("refusals: shipper %d (was %d), intake %v (UNAVAILABLE was %d)", s2.Stats().Refusals, refusals, e.in.Stats().Refusals, unavailable)
	}
	checkCloud(t, e, s2.Stats().AckedThrough, written-open4)
	stop2()
}
