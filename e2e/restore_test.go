package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// restoreLoad is the writer of the SD card scenario: 10 series × 10
// points every 50 ms (2,000 points/s).
var restoreLoad = cluster.WriterOptions{Metric: metric, Series: 10, PointsPerSeries: 10, Interval: 50 * time.Millisecond}

// TestRestore_PiSDCardReplaced: edge-1 writes and ships to three
// coordinators; the writer pauses until the cloud holds every
// acknowledged point (an SD card that dies takes with it what the edge had
// not shipped yet: its replication lag, which this scenario makes zero);
// edge-1 is killed with SIGKILL and its data directory deleted;
// `tributary node restore` with the edge's own command line brings its
// history back; the edge starts again on the restored directory and the
// writer goes on. At the end every acknowledged point is on the edge and
// in the cloud exactly once (lost = duplicated = phantom = 0, the catalog
// holds exactly the acknowledged points: nothing was shipped twice), and
// the edge and every coordinator give the same downsampled answers.
func TestRestore_PiSDCardReplaced(t *testing.T) {
	phase := envDuration(t, "TRIBUTARY_E2E_RESTORE_LOAD", 3*time.Second)
	c := startCluster(t)
	ctx := context.Background()
	o := restoreLoad
	o.Addr = c.Edge.GRPC
	w, err := cluster.NewWriter(o)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	startMs := time.Now().UnixMilli() - 1000
	w.Start()
	time.Sleep(phase)
	before := w.Stop()
	if before.Failed > 0 || before.Acked == 0 {
		t.Fatalf("before the card dies: %d points acknowledged, %d writes failed: %v", before.Acked, before.Failed, before.FirstErr)
	}
	held := waitHeld(t, c, w.Ledger, before.Acked, 60*time.Second)
	requireEdgeCaughtUp(t, c, held.AckedThrough)

	// The card dies: kill -9, and the data directory is gone.
	c.Edge.Kill()
	dir := filepath.Join(c.Opts.Dir, c.Edge.ID)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	// The edge's own command line, with `restore` after `node`.
	args := append([]string{"node", "restore"}, c.Edge.Args[1:]...)
	began := time.Now()
	cmd := exec.Command(bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("tributary %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	took := time.Since(began)
	var sum struct {
		NextSeq         uint64 `json:"next_seq"`
		AckedThrough    uint64 `json:"acked_through"`
		MissingSegments uint64 `json:"missing_segments"`
		HeldPoints      uint64 `json:"held_points"`
		RawPoints       int64  `json:"raw_points"`
		Files           int64  `json:"files"`
		Bytes           int64  `json:"bytes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
		t.Fatalf("restore summary %q: %v", stdout.String(), err)
	}
	t.Logf("restore: %s (%v)", strings.TrimSpace(stdout.String()), took.Round(time.Millisecond))
	// A write cut short by the writer's stop is in doubt: the cloud may
	// hold it too.
	if sum.HeldPoints < uint64(before.Acked) || sum.HeldPoints > uint64(before.Acked+before.InDoubt) ||
		sum.RawPoints < int64(before.Acked) || sum.MissingSegments != 0 || sum.NextSeq != held.AckedThrough+1 {
		t.Fatalf("restore summary %+v: want every one of the %d acknowledged points (and at most the %d in doubt), next sequence %d",
			sum, before.Acked, before.InDoubt, held.AckedThrough+1)
	}

	// Back in service, writing on.
	if err := c.Edge.Start(c.Opts.ReadyTimeout); err != nil {
		t.Fatal(err)
	}
	w.Start()
	time.Sleep(phase)
	after := w.Stop()
	if after.Failed > 0 {
		t.Errorf("%d writes to the restored edge failed: %v", after.Failed, after.FirstErr)
	}
	// The catalog's count may include points of a write in doubt that the
	// edge stored, so reaching the acknowledged count does not prove the
	// newest segment shipped: wait for every point the edge holds.
	held = waitHeld(t, c, nil, edgeHolds(ctx, t, c, w.Ledger, startMs), 60*time.Second)
	// A write in doubt (no answer within the writer's timeout) may have
	// been stored: the catalog holds every acknowledged point and at most
	// those in doubt besides.
	if held.HeldPoints < uint64(after.Acked) || held.HeldPoints > uint64(after.Acked+after.InDoubt) {
		t.Errorf("the catalog holds %d points of %s, %d were acknowledged and %d in doubt (a segment shipped twice, or lost)", held.HeldPoints, c.Edge.ID, after.Acked, after.InDoubt)
	}
	if len(held.Gaps) > 0 {
		t.Errorf("%s declared gaps: %+v", c.Edge.ID, held.Gaps)
	}
	requireFleetsAgree(t, c)
	requireEdgeCaughtUp(t, c, held.AckedThrough)

	// Every acknowledged point on the edge, and through every coordinator
	// with the edge up; downsampled answers agree.
	endMs := time.Now().Add(time.Hour).UnixMilli()
	var lost, dup, phantom int
	for _, addr := range append([]string{c.Edge.GRPC}, coordinatorAddrs(c)...) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := cluster.Check(cctx, addr, metric, w.Ledger, startMs, endMs)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		t.Logf("%s: %v", addr, r)
		if !r.OK() {
			t.Errorf("%s answers wrong: %v", addr, r)
		}
		lost, dup, phantom = lost+r.Lost, dup+r.Duplicated, phantom+r.Phantom+r.WrongValue
	}
	for _, step := range []int64{60_000, 3_600_000} {
		want, err := downsampled(ctx, c.Edge.GRPC, startMs, endMs, step)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != restoreLoad.Series {
			t.Fatalf("the edge's downsampled answer has %d series, want %d", len(want), restoreLoad.Series)
		}
		for _, addr := range coordinatorAddrs(c) {
			got, err := downsampled(ctx, addr, startMs, endMs, step)
			if err != nil {
				t.Fatal(err)
			}
			if err := sameCells(got, want); err != nil {
				t.Errorf("step %dms: %s and the edge disagree: %v", step, addr, err)
			}
		}
	}
	// And from the replicas alone.
	c.Edge.Kill()
	for _, r := range checkEveryCoordinator(t, c, w.Ledger, startMs) {
		lost, dup, phantom = lost+r.Lost, dup+r.Duplicated, phantom+r.Phantom+r.WrongValue
	}
	t.Logf("summary: %d points acknowledged before the card died, %d after; restore of %d points in %d files (%d bytes) took %v; the catalog holds %d; lost %d, duplicated %d, phantom %d",
		before.Acked, after.Acked-before.Acked, sum.RawPoints, sum.Files, sum.Bytes, took.Round(time.Millisecond), held.HeldPoints, lost, dup, phantom)
}

func coordinatorAddrs(c *cluster.Cluster) []string {
	var out []string
	for _, co := range c.Coordinators {
		out = append(out, co.GRPC)
	}
	return out
}

// cell is one downsampled bucket: count, sum, min, max.
type cell struct{ count, sum, min, max float64 }

// downsampled asks the QueryService at addr for the count, sum, min and
// max of every load series per step: series → bucket → cell.
func downsampled(ctx context.Context, addr string, startMs, endMs, step int64) (map[string]map[int64]cell, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	out := map[string]map[int64]cell{}
	for _, f := range []pb.Aggregate{pb.Aggregate_AGGREGATE_COUNT, pb.Aggregate_AGGREGATE_SUM, pb.Aggregate_AGGREGATE_MIN, pb.Aggregate_AGGREGATE_MAX} {
		qctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		stream, err := pb.NewQueryServiceClient(conn).Query(qctx, &pb.QueryRequest{
			Matchers: []*pb.Matcher{{Type: pb.Matcher_EQUAL, Name: "__name__", Value: metric}},
			StartMs:  startMs, EndMs: endMs, Mode: pb.QueryMode_QUERY_MODE_DOWNSAMPLE, StepMs: step, Downsample: f,
		})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("query %s: %w", addr, err)
		}
		names := map[int64]string{}
		for {
			msg, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				cancel()
				return nil, fmt.Errorf("query %s: %w", addr, err)
			}
			if msg.Series != nil {
				for _, l := range msg.Series.Labels {
					if l.Name == cluster.SeriesLabel {
						names[msg.SeriesIndex] = l.Value
					}
				}
			}
			name := names[msg.SeriesIndex]
			if out[name] == nil {
				out[name] = map[int64]cell{}
			}
			for i, ts := range msg.TimestampsMs {
				c := out[name][ts]
				switch f {
				case pb.Aggregate_AGGREGATE_COUNT:
					c.count = msg.Values[i]
				case pb.Aggregate_AGGREGATE_SUM:
					c.sum = msg.Values[i]
				case pb.Aggregate_AGGREGATE_MIN:
					c.min = msg.Values[i]
				case pb.Aggregate_AGGREGATE_MAX:
					c.max = msg.Values[i]
				}
				out[name][ts] = c
			}
		}
		cancel()
	}
	return out, nil
}

// sameCells compares two downsampled answers: counts, minima and maxima
// exactly, sums to a relative 1e-9 (float sums depend on the order of
// additions).
func sameCells(got, want map[string]map[int64]cell) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d series, want %d", len(got), len(want))
	}
	for s, w := range want {
		g := got[s]
		if len(g) != len(w) {
			return fmt.Errorf("series %s: %d buckets, want %d", s, len(g), len(w))
		}
		for _, ts := range slices.Sorted(func(yield func(int64) bool) {
			for k := range w {
				if !yield(k) {
					return
				}
			}
		}) {
			a, b := g[ts], w[ts]
			if a.count != b.count || a.min != b.min || a.max != b.max || math.Abs(a.sum-b.sum) > 1e-9*math.Max(1, math.Abs(b.sum)) {
				return fmt.Errorf("series %s bucket %d: %+v, want %+v", s, ts, a, b)
			}
		}
	}
	return nil
}

// edgeHolds returns how many points of the ledger's metric the edge
// answers: every acknowledged point and those of writes in doubt it stored.
func edgeHolds(ctx context.Context, t *testing.T, c *cluster.Cluster, l *cluster.Ledger, startMs int64) int {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := cluster.Check(cctx, c.Edge.GRPC, metric, l, startMs, time.Now().Add(time.Hour).UnixMilli())
	if err != nil {
		t.Fatalf("%s: %v", c.Edge.GRPC, err)
	}
	return r.Returned - r.Duplicated
}
