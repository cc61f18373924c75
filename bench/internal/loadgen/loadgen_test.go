package loadgen

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/bench/internal/fakenode"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// recorder is a WriteService that accepts everything and remembers, per
// series, the edge label and the newest timestamp, and fails if a series
// goes back in time.
type recorder struct {
	tributaryv1.UnimplementedWriteServiceServer
	mu       sync.Mutex
	points   int64
	edges    map[string]bool
	newest   map[string]int64
	disorder int
	maxTs    int64
}

func newRecorder() *recorder {
	return &recorder{edges: map[string]bool{}, newest: map[string]int64{}}
}

func (r *recorder) Write(_ context.Context, req *tributaryv1.WriteRequest) (*tributaryv1.WriteResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, b := range req.GetBatches() {
		key := fakenode.LabelKey(b.GetSeries())
		r.edges[workload.Label(b.GetSeries(), EdgeLabel)] = true
		for _, ts := range b.GetTimestampsMs() {
			if ts <= r.newest[key] {
				r.disorder++
			}
			r.newest[key] = ts
			r.maxTs = max(r.maxTs, ts)
		}
		n += int64(len(b.GetValues()))
	}
	r.points += n
	return &tributaryv1.WriteResponse{Accepted: n}, nil
}

func (r *recorder) snapshot() (points int64, series int, edges []string, disorder int, maxTs int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for e := range r.edges {
		edges = append(edges, e)
	}
	return r.points, len(r.newest), edges, r.disorder, r.maxTs
}

// waitFor polls cond until it holds; the generous deadline only bounds a
// broken run.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRunWritesEveryTargetItsOwnSeries(t *testing.T) {
	a, b := newRecorder(), newRecorder()
	addrA, addrB := fakenode.Serve(t, a), fakenode.Serve(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Stats, 1)
	go func() {
		st, err := Run(ctx, Options{Targets: []string{addrA, addrB}, Names: []string{"ea", "eb"},
			Series: 20, SeriesPerRequest: 8, Interval: 5 * time.Millisecond, Flush: 5 * time.Millisecond,
			Report: time.Millisecond, Logger: discard()})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- st
	}()
	// Several windows per series, so ordering across writes is exercised.
	waitFor(t, "points at both targets", func() bool {
		pa, _, _, _, _ := a.snapshot()
		pb, _, _, _, _ := b.snapshot()
		return pa >= 200 && pb >= 200
	})
	cancel()
	st := <-done
	var sum int64
	for name, r := range map[string]*recorder{"ea": a, "eb": b} {
		points, series, edges, disorder, maxTs := r.snapshot()
		sum += points
		if series != 20 {
			t.Errorf("%s got %d series, want 20", name, series)
		}
		if len(edges) != 1 || edges[0] != name {
			t.Errorf("%s got edge labels %q, want only %q", name, edges, name)
		}
		if disorder != 0 {
			t.Errorf("%s: %d samples not newer than their series' previous one", name, disorder)
		}
		if now := time.Now().UnixMilli(); maxTs > now {
			t.Errorf("%s: sample at %d ms is in the future (now %d)", name, maxTs, now)
		}
	}
	if st.AckedPoints != sum || st.FailedPoints != 0 || st.Writes == 0 {
		t.Errorf("stats %+v, want %d acked points and no failures", st, sum)
	}
}

func TestRunCountsFailuresAndGoesOn(t *testing.T) {
	good := newRecorder()
	addr := fakenode.Serve(t, good)
	// A port nobody listens on: every write to it fails.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Stats, 1)
	go func() {
		st, err := Run(ctx, Options{Targets: []string{addr, dead}, Names: []string{"up", "down"}, Series: 4,
			Interval: 5 * time.Millisecond, Flush: 5 * time.Millisecond, CallTimeout: time.Second,
			Report: -1, Logger: discard(),
			Dial: func(a string) (*grpc.ClientConn, error) { return dialNoRetry(a) }})
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		done <- st
	}()
	waitFor(t, "writes to the live target after failures", func() bool {
		p, _, _, _, _ := good.snapshot()
		return p >= 100
	})
	cancel()
	st := <-done
	if st.FailedWrites == 0 || st.FailedPoints == 0 {
		t.Errorf("stats %+v: no failures counted for the dead target", st)
	}
	if p, _, _, _, _ := good.snapshot(); st.AckedPoints != p {
		t.Errorf("stats %+v, want %d acked points (what the live target got)", st, p)
	}
}

func TestValidate(t *testing.T) {
	base := func() Options { return Options{Targets: []string{"e1:7070"}, Logger: discard()} }
	ok := base()
	if err := ok.Validate(); err != nil || ok.Series != 64 || len(ok.Names) != 1 || ok.Names[0] != "e1" {
		t.Fatalf("defaults: %+v, %v", ok, err)
	}
	cases := []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.Targets = nil }, "no targets"},
		{func(o *Options) { o.Targets = []string{"e1"} }, `target "e1"`},
		{func(o *Options) { o.Targets = []string{"e1:7070", "e1:7071"} }, `"e1": empty or repeated`},
		{func(o *Options) { o.Names = []string{"a", "b"} }, "2 names for 1 targets"},
		{func(o *Options) { o.Interval = time.Microsecond }, "interval"},
		{func(o *Options) { o.Interval, o.Flush = time.Millisecond, time.Minute }, "flush"},
		{func(o *Options) { o.Series = -1 }, "series must be positive"},
		{func(o *Options) { o.Logger = nil }, "no logger"},
	}
	for i, c := range cases {
		o := base()
		c.mod(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: error %v, want one mentioning %q", i, err, c.want)
		}
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("case %d: Run accepted options Validate refuses", i)
		}
	}
}

// dialNoRetry dials plaintext gRPC; failures surface as write errors.
func dialNoRetry(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	options := Flags(fs)
	if err := fs.Parse([]string{"--targets", "e1:7070, e2:7070", "--names", "a,b", "--series", "8", "--interval", "100ms"}); err != nil {
		t.Fatal(err)
	}
	o, err := options()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.Targets, []string{"e1:7070", "e2:7070"}) || !slices.Equal(o.Names, []string{"a", "b"}) ||
		o.Series != 8 || o.Interval != 100*time.Millisecond || o.Flush != time.Second {
		t.Errorf("options %+v", o)
	}
	fs = flag.NewFlagSet("load", flag.ContinueOnError)
	options = Flags(fs)
	if err := fs.Parse([]string{"--series", "8"}); err != nil {
		t.Fatal(err)
	}
	if _, err := options(); err == nil || !strings.Contains(err.Error(), "--targets") {
		t.Errorf("no --targets: error %v", err)
	}
}
