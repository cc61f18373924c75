package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	"github.com/tributarydb/tributary/replicator"
)

// pi is an edge that keeps its data and cursor in one directory, as
// tributary node does, so that the directory can be lost and restored.
type pi struct {
	id      string
	dir     string
	targets []string
	n       *node.Node
	s       *replicator.Shipper
	stop    func()
	// truth holds every point acknowledged to a writer: series → t → v.
	truth map[string]map[int64]float64
}

func (p *pi) options() node.Options {
	return node.Options{DataDir: p.dir, NodeID: p.id, WALSegmentBytes: 16 << 10, WALSegmentAge: 20 * time.Millisecond,
		FlushInterval: 10 * time.Millisecond, HeadChunkSamples: 64}
}

func (p *pi) start(t *testing.T) {
	t.Helper()
	if err := replicator.CheckRestored(p.dir); err != nil {
		t.Fatal(err)
	}
	s, err := replicator.New(replicator.Options{
		Targets: p.targets, Insecure: true, CursorPath: filepath.Join(p.dir, "replication.cursor"),
		SoftwareVersion: "test", BackoffInitial: 10 * time.Millisecond, BackoffMax: 200 * time.Millisecond,
		AckTimeout: 5 * time.Second, PollInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})).With("test_edge", p.id),
	})
	if err != nil {
		t.Fatal(err)
	}
	o := p.options()
	o.WALRetention, o.WriteGate = s.RetainFrom, s.WriteGate
	n, err := node.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Run(ctx, n); err != nil {
			t.Errorf("shipper of %s: %v", p.id, err)
		}
	})
	p.n, p.s = n, s
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			if err := n.Close(); err != nil {
				t.Errorf("close %s: %v", p.id, err)
			}
		})
	}
	t.Cleanup(p.stop)
}

// write writes, for each of three series, points every step from from
// to to (in time order, values halves so that sums are exact), then
// waits until the cloud acknowledged the segment holding the last one.
func (p *pi) write(t *testing.T, from, to, step int64) {
	t.Helper()
	for k := range 3 {
		ls := []labels.Label{{Name: "__name__", Value: "temp"}, {Name: "host", Value: p.id}, {Name: "sensor", Value: fmt.Sprint(k)}}
		key := labels.Labels(ls).String()
		if p.truth[key] == nil {
			p.truth[key] = map[int64]float64{}
		}
		b := model.Batch{Labels: ls}
		flush := func() {
			res, err := p.n.Write(context.Background(), []model.Batch{b})
			if err != nil || res.Accepted != int64(len(b.Ts)) {
				t.Fatalf("write: %+v, %v", res, err)
			}
			for i, ts := range b.Ts {
				p.truth[key][ts] = b.Vs[i]
			}
			b.Ts, b.Vs = b.Ts[:0], b.Vs[:0]
		}
		for ts := from + int64(k); ts <= to; ts += step {
			b.Ts, b.Vs = append(b.Ts, ts), append(b.Vs, float64((ts/1000+int64(k))%1999)*0.5)
			if len(b.Ts) == 500 {
				flush()
			}
		}
		if len(b.Ts) > 0 {
			flush()
		}
	}
	// The newest segment with points holds the last write; the flush loop
	// seals it once it ages, and the shipper ships it. It need not be the
	// last segment: if the flush loop sealed it between the write and this
	// look, the open segment after it is empty and is never sealed.
	segs := p.n.WALSegments()
	var last uint64
	for _, s := range slices.Backward(segs) {
		if s.Points > 0 {
			last = s.Seq
			break
		}
	}
	if last == 0 {
		t.Fatalf("%s: no WAL segment holds points after a write: %+v", p.id, segs)
	}
	eventually(t, fmt.Sprintf("%s: the cloud acknowledged segment %d", p.id, last), func() bool {
		return p.s.Stats().AckedThrough >= last
	})
}

func (p *pi) points() (n uint64) {
	for _, m := range p.truth {
		n += uint64(len(m))
	}
	return n
}

// oracle answers q over p.truth the naive way (0 step: raw).
func (p *pi) oracle(start, end, step int64, f rollup.Func) map[string][]float64 {
	out := map[string][]float64{}
	for key, m := range p.truth {
		var flat []float64
		if step == 0 {
			for _, ts := range slices.Sorted(mapKeys(m)) {
				if ts >= start && ts <= end {
					flat = append(flat, float64(ts), m[ts])
				}
			}
		} else {
			cells := map[int64]*rollup.Agg{}
			for ts, v := range m {
				if ts < start || ts > end {
					continue
				}
				b := rollup.BucketStart(ts, step)
				if cells[b] == nil {
					cells[b] = &rollup.Agg{}
				}
				cells[b].Add(ts, v)
			}
			for _, b := range slices.Sorted(mapKeys(cells)) {
				flat = append(flat, float64(b), cells[b].Value(f))
			}
		}
		if len(flat) > 0 {
			out[key] = flat
		}
	}
	return out
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// flatAnswer runs q over the series of host through query and returns
// series → t, v, t, v, ...
func flatAnswer(t *testing.T, host string, query func(context.Context, model.Query, func(model.Series) error) (model.QueryInfo, error), q model.Query) map[string][]float64 {
	t.Helper()
	eq, _ := labels.NewMatcher(labels.MatchEqual, "__name__", "temp")
	h, _ := labels.NewMatcher(labels.MatchEqual, "host", host)
	q.Matchers = []*labels.Matcher{eq, h}
	out := map[string][]float64{}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	info, err := query(ctx, q, func(s model.Series) error {
		var flat []float64
		for i, ts := range s.Ts {
			flat = append(flat, float64(ts), s.Vs[i])
		}
		out[s.Labels.String()] = flat
		return nil
	})
	if err != nil {
		t.Fatalf("query %+v: %v", q, err)
	}
	// NB: the in-process edges advertise no query address, so the cloud
	// warns that it cannot ask them for points after their watermark
	// (there are none: every segment is acknowledged before a query).
	for _, w := range info.Warnings {
		if !strings.Contains(w, "unreachable") {
			t.Errorf("query %+v: warning %q", q, w)
		}
	}
	return out
}

func sameFlat(t *testing.T, what string, got, want map[string][]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d series, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		g := got[k]
		if !slices.Equal(g, w) {
			i := 0
			for i < min(len(g), len(w)) && g[i] == w[i] {
				i++
			}
			t.Errorf("%s: %s: %d values, want %d; first difference at %d", what, k, len(g), len(w), i)
		}
	}
}

// TestRestore_PiComesBack: an edge writes three days of history and
// replicates it; its data directory is lost; `restore` brings the history
// back from the coordinators (raw, or rollups for the older days when
// asked), the edge ships again with fresh sequence numbers, writes more,
// and then the edge, the cloud and a naive oracle answer every raw and
// downsampled query alike, and the catalog holds every acknowledged point
// exactly once. Then the refusals: a restore into a directory with data,
// and a restore when no live replica holds the history.
func TestRestore_PiComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three coordinators and two edges")
	}
	addrs := freeAddrs(t, 3)
	ms := startBootstrapped(t, addrs[:3])
	leader(t, ms)
	for _, m := range ms {
		eventually(t, m.nodeID+" ready with all three coordinators registered", func() bool {
			return m.c.Ready() && len(registeredCoordinators(m.c)) == 3
		})
	}
	var targets []string
	for _, m := range ms {
		targets = append(targets, m.c.IntakeAddr())
	}
	now := time.Now().UnixMilli()
	day := int64(rollup.Day)
	from := rollup.BucketStart(now, day) - 3*day
	rawSince := from + 2*day // the second edge takes rollups before this

	for _, c := range []struct {
		name       string
		rawStartMs int64
	}{{"raw", 0}, {"rollups", rawSince}} {
		t.Run(c.name, func(t *testing.T) {
			p := &pi{id: "pi-" + c.name, dir: filepath.Join(t.TempDir(), "data"), targets: targets, truth: map[string]map[int64]float64{}}
			p.start(t)
			p.write(t, from+17, now-time.Minute.Milliseconds(), 97_000)
			firstLife := p.n.WALSegments()
			p.stop()

			// The SD card dies.
			if err := os.RemoveAll(p.dir); err != nil {
				t.Fatal(err)
			}
			lead := leader(t, ms)
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			if err := lead.c.Barrier(ctx); err != nil {
				t.Fatal(err)
			}
			prog, _ := lead.c.Catalog().Progress(p.id)
			res, err := replicator.Restore(ctx, replicator.RestoreOptions{
				Targets: targets, Insecure: true, Node: p.options(), RawStartMs: c.rawStartMs, MaxFileBytes: 64 << 10,
				Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			if err != nil {
				t.Fatalf("restore: %v", err)
			}
			t.Logf("restore: %+v", res)
			if res.NextSeq != prog.NextSeq() || res.NextSeq <= firstLife[len(firstLife)-1].Seq-1 || res.HeldPoints != p.points() || res.MissingSegments != 0 {
				t.Fatalf("restore result %+v; the catalog's next sequence is %d, the edge wrote %d points", res, prog.NextSeq(), p.points())
			}
			if c.rawStartMs == 0 && (res.RollupSeries != 0 || res.RawPoints < int64(p.points())) {
				t.Fatalf("restore of everything raw sent %d raw points and %d rollup entries; want at least %d raw, no rollups", res.RawPoints, res.RollupSeries, p.points())
			}
			if c.rawStartMs != 0 && (res.RollupSeries != 3 || res.RawStartMs != rawSince) {
				t.Fatalf("restore with rollups before %d: %+v", rawSince, res)
			}

			// Back in service: new segments follow the cloud's numbers, and
			// nothing old is shipped again.
			p.start(t)
			if segs := p.n.WALSegments(); segs[0].Seq <= res.NextSeq-1 || segs[0].PrevSeq != res.NextSeq-1 {
				t.Fatalf("restored WAL starts with segment %d after %d; the cloud's next is %d", segs[0].Seq, segs[0].PrevSeq, res.NextSeq)
			}
			p.write(t, now, now+30_000, 1000)

			start, end := from, rollup.BucketStart(now, day)+day-1
			rawFrom := start
			if c.rawStartMs != 0 {
				rawFrom = c.rawStartMs
			}
			eventually(t, "the catalog acknowledges every segment", func() bool {
				pr, _ := lead.c.Catalog().Progress(p.id)
				return pr.AckedThrough() >= p.s.Stats().NewestSealed && pr.AckedThrough() > res.NextSeq
			})
			for _, m := range ms {
				if err := m.c.Barrier(ctx); err != nil {
					t.Fatal(err)
				}
				pr, _ := m.c.Catalog().Progress(p.id)
				var held uint64
				for _, h := range pr.Held {
					held += h.Points
				}
				if held != p.points() {
					t.Errorf("%s: the catalog holds %d points of %s, %d were acknowledged to writers", m.nodeID, held, p.id, p.points())
				}
			}
			queries := []model.Query{{Start: rawFrom, End: end, Mode: model.ModeRaw}}
			for _, step := range []int64{rollup.Hour, day} {
				for _, f := range []rollup.Func{rollup.FuncSum, rollup.FuncCount, rollup.FuncMax, rollup.FuncFirst} {
					queries = append(queries, model.Query{Start: start, End: end, Mode: model.ModeDownsample, Step: step, Downsample: f})
				}
			}
			for _, q := range queries {
				what := fmt.Sprintf("%s mode %d step %d %s", p.id, q.Mode, q.Step, q.Downsample)
				want := p.oracle(q.Start, q.End, q.Step, q.Downsample)
				sameFlat(t, what+": the edge vs the oracle", flatAnswer(t, p.id, p.n.Query, q), want)
				for _, m := range ms {
					sameFlat(t, what+": the cloud through "+m.nodeID+" vs the oracle", flatAnswer(t, p.id, m.c.Backend().Query, q), want)
				}
			}
			if c.rawStartMs != 0 {
				if got := flatAnswer(t, p.id, p.n.Query, model.Query{Start: start, End: rawFrom - 1, Mode: model.ModeRaw}); len(got) != 0 {
					t.Errorf("raw points before --raw-since on the restored edge: %d series", len(got))
				}
			}
			for _, m := range ms {
				if st := m.c.intake.Stats(); st.Conflicts != 0 {
					t.Errorf("%s refused %d segments as conflicts", m.nodeID, st.Conflicts)
				}
			}

			// A restore into a directory that holds data is refused, and
			// touches nothing.
			p.stop()
			_, err = replicator.Restore(ctx, replicator.RestoreOptions{Targets: targets, Insecure: true, Node: p.options()})
			if !errors.Is(err, replicator.ErrNotEmpty) {
				t.Fatalf("restore into the live data directory: %v, want ErrNotEmpty", err)
			}
			if err := replicator.CheckRestored(p.dir); err != nil {
				t.Fatalf("a refused restore marked the directory: %v", err)
			}
		})
	}

	// Segments that never reached the cloud (a hole below its highest
	// number): the restored edge declares them as a MISSING gap, and the
	// cloud's acknowledgement moves past them.
	lead := leader(t, ms)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	hole := &pi{id: "pi-hole", dir: filepath.Join(t.TempDir(), "data"), targets: targets, truth: map[string]map[int64]float64{}}
	for _, cmd := range []catalog.Command{
		catalog.RegisterNode{ID: hole.id, Role: catalog.RoleEdge, TimeMs: now},
		catalog.RecordHeld{Edge: hole.id, Ranges: []catalog.HeldRange{{FirstSeq: 1, LastSeq: 3}, {FirstSeq: 6, LastSeq: 8}}},
	} {
		if _, err := lead.c.raft.Propose(ctx, catalog.EncodeCommand(cmd)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := replicator.Restore(ctx, replicator.RestoreOptions{Targets: targets, Insecure: true, Node: hole.options()})
	if err != nil {
		t.Fatal(err)
	}
	if res.NextSeq != 9 || res.AckedThrough != 3 || res.MissingSegments != 2 || res.MissingRuns != 1 {
		t.Fatalf("restore over a hole: %+v, want next 9, acked through 3, segments 4..5 missing", res)
	}
	hole.start(t)
	hole.write(t, now, now+1000, 100) // returns once the cloud acknowledged it: past the hole
	pr, _ := lead.c.Catalog().Progress(hole.id)
	if len(pr.Gaps) != 1 || pr.Gaps[0].AfterSeq != 3 || pr.Gaps[0].ThroughSeq != 5 || pr.Gaps[0].Reason != catalog.GapMissing {
		t.Fatalf("gaps of %s: %+v, want one MISSING gap over 4..5", hole.id, pr.Gaps)
	}
	hole.stop()

	// No live replica: every coordinator holding the edge is marked down.
	for _, m := range ms {
		if _, err := lead.c.raft.Propose(ctx, catalog.EncodeCommand(catalog.SetNodeState{ID: m.nodeID, State: catalog.NodeDown})); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "data")
	_, err = replicator.Restore(ctx, replicator.RestoreOptions{Targets: targets, Insecure: true,
		Node: node.Options{DataDir: dir, NodeID: "pi-raw"}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("restore with every replica down: %v, want FAILED_PRECONDITION", err)
	}
	for _, want := range []string{"no live replica holds its data in [", " is down"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("restore with every replica down: %v, want it to say %q", err, want)
		}
	}
	if err := replicator.CheckRestored(dir); !errors.Is(err, replicator.ErrRestoreIncomplete) {
		t.Errorf("a failed restore must leave its marker: %v", err)
	}
}
