// Package catalogbench is the catalog size benchmark (`tribench
// catalog`): it fills an in-process catalog (catalog.FSM, the state
// machine every coordinator replicates) with a fleet's series the way the
// intake does (encoded RegisterSeries and RecordHeld commands through
// FSM.Apply), then snapshots it and restores the snapshot into a fresh
// catalog, and reports for each size:
//
//   - catalog_bytes_per_series: the Go heap the filled catalog holds
//     (after a GC, over an empty catalog), divided by its series; it
//     includes the edges' nodes, placements and progress, which a fleet
//     has along with its series;
//   - snapshot_mib and snapshot_s: FSM.Snapshot's size and time;
//   - snapshot_restore_s: FSM.Restore's time (checksum, decoding, every
//     invariant, postings rebuilt), and restored_bytes_per_series, the
//     heap the restored catalog holds.
//
// No process, disk or raft is involved: these are the catalog's own
// costs, which bound what a coordinator holds in memory and sends to a
// member that catches up from a snapshot.
//
// Concurrency: Run is not safe to call concurrently with itself (it
// reads the process's heap statistics).
package catalogbench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/node/labels"
)

// Targets of issue 19 (at 10 M series: ≤ 300 bytes a series, restore
// ≤ 30 s).
var (
	BytesPerSeriesTarget = report.Target{Value: 300, AtMost: true}
	RestoreTarget        = report.Target{Value: 30, AtMost: true}
)

// Options configures a run.
type Options struct {
	runopt.Output
	// Series are the catalog sizes to measure, one run each.
	Series []int
	// SeriesPerEdge: the fleet has Series/SeriesPerEdge edges, each with
	// one held run.
	SeriesPerEdge int
	// Metrics is the number of metric names the series are spread over
	// (each edge's series: metric × sensor index).
	Metrics int
	// Coordinators registered (and raft members) in the catalog.
	Coordinators int
}

// DefaultOptions: 1 M series, 100 a series per edge (10,000 edges), 10
// metric names, 3 coordinators.
func DefaultOptions() Options {
	return Options{Output: runopt.DefaultOutput(), Series: []int{1_000_000}, SeriesPerEdge: 100, Metrics: 10, Coordinators: 3}
}

// Result is what a run measured; its JSON form is the last line.
type Result struct {
	Runs          []RunResult `json:"runs"`
	SeriesPerEdge int         `json:"series_per_edge"`
	Commit        string      `json:"commit"`
	Machine       string      `json:"machine"`
}

// RunResult is one catalog size's figures.
type RunResult struct {
	Series                  int     `json:"series"`
	Edges                   int     `json:"edges"`
	FillS                   float64 `json:"fill_s"`
	CatalogBytesPerSeries   float64 `json:"catalog_bytes_per_series"`
	SnapshotMiB             float64 `json:"snapshot_mib"`
	SnapshotBytesPerSeries  float64 `json:"snapshot_bytes_per_series"`
	SnapshotS               float64 `json:"snapshot_s"`
	SnapshotRestoreS        float64 `json:"snapshot_restore_s"`
	RestoredBytesPerSeries  float64 `json:"restored_bytes_per_series"`
	HeapAfterFillMiB        float64 `json:"heap_after_fill_mib"`
	CommandsApplied         int     `json:"commands_applied"`
	SeriesRegisteredInCheck int     `json:"series_in_catalog"`
}

// Run measures every size in o.Series, prints a table and the JSON line.
func Run(ctx context.Context, o Options) (Result, error) {
	res := Result{SeriesPerEdge: o.SeriesPerEdge, Commit: o.Commit, Machine: report.DetectMachine().String()}
	if o.SeriesPerEdge < 1 || o.Metrics < 1 || o.Coordinators < 1 {
		return res, fmt.Errorf("catalogbench: series per edge %d, metrics %d and coordinators %d must be at least 1", o.SeriesPerEdge, o.Metrics, o.Coordinators)
	}
	for _, n := range o.Series {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		o.Log().Info("catalog: filling", "series", n)
		r, err := runOne(ctx, o, n)
		if err != nil {
			return res, err
		}
		res.Runs = append(res.Runs, r)
	}
	if err := writeTable(o.Out, res); err != nil {
		return res, err
	}
	return res, report.WriteJSONLine(o.Out, res)
}

func heapBytes() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func apply(f *catalog.FSM, index uint64, c catalog.Command) error {
	if _, err := f.Apply(index, catalog.EncodeCommand(c)); err != nil {
		return fmt.Errorf("apply %s at %d: %w", c.Kind(), index, err)
	}
	return nil
}

func runOne(ctx context.Context, o Options, n int) (RunResult, error) {
	edges := (n + o.SeriesPerEdge - 1) / o.SeriesPerEdge
	r := RunResult{Series: n, Edges: edges}
	base := heapBytes()
	f := catalog.New()
	index := uint64(0)
	next := func() uint64 { index++; return index }
	var voters []uint64
	for i := range o.Coordinators {
		id := uint64(i + 1)
		if err := apply(f, next(), catalog.RegisterNode{ID: fmt.Sprintf("coord-%d", id), Role: catalog.RoleCoordinator, RaftID: id,
			Addr: fmt.Sprintf("10.0.0.%d:7444", id)}); err != nil {
			return r, err
		}
		voters = append(voters, id)
	}
	if err := f.ApplyMembership(next(), catalog.Membership{Voters: voters}); err != nil {
		return r, err
	}
	// Series limit: the default may be below the sizes measured.
	cfg := f.Config()
	cfg.MaxSeries = uint64(n) + 1
	if err := apply(f, next(), catalog.SetConfig{Config: cfg}); err != nil {
		return r, err
	}
	start := time.Now()
	left := n
	names := make([]string, o.Metrics)
	for i := range names {
		names[i] = "sensor_metric_" + strconv.Itoa(i)
	}
	const perCommand = 1000
	for e := range edges {
		if e%1000 == 0 {
			if err := ctx.Err(); err != nil {
				return r, err
			}
		}
		edge := fmt.Sprintf("edge-%06d", e)
		if err := apply(f, next(), catalog.RegisterNode{ID: edge, Role: catalog.RoleEdge, Addr: edge + ":7070", TimeMs: 1}); err != nil {
			return r, err
		}
		k := min(o.SeriesPerEdge, left)
		left -= k
		for from := 0; from < k; from += perCommand {
			var ss []labels.Labels
			for i := from; i < min(k, from+perCommand); i++ {
				ss = append(ss, labels.FromStrings("__name__", names[i%o.Metrics], "host", edge, "sensor", strconv.Itoa(i/o.Metrics)))
			}
			if err := apply(f, next(), catalog.RegisterSeries{Edge: edge, Series: ss}); err != nil {
				return r, err
			}
			r.CommandsApplied++
		}
		if err := apply(f, next(), catalog.RecordHeld{Edge: edge, Ranges: []catalog.HeldRange{{FirstSeq: 1, LastSeq: 720, Points: 720 * 40, MinTimeMs: 0, MaxTimeMs: 3_600_000}}}); err != nil {
			return r, err
		}
		r.CommandsApplied += 2
	}
	r.FillS = report.Round(time.Since(start).Seconds(), 2)
	if got := f.SeriesCount(); got != n {
		return r, fmt.Errorf("catalogbench: the catalog holds %d series, want %d", got, n)
	}
	r.SeriesRegisteredInCheck = f.SeriesCount()
	filled := heapBytes()
	r.HeapAfterFillMiB = report.Round(float64(filled)/(1<<20), 1)
	r.CatalogBytesPerSeries = report.Round(float64(filled-min(base, filled))/float64(n), 1)

	start = time.Now()
	snap := f.Snapshot()
	r.SnapshotS = report.Round(time.Since(start).Seconds(), 3)
	r.SnapshotMiB = report.Round(float64(len(snap))/(1<<20), 2)
	r.SnapshotBytesPerSeries = report.Round(float64(len(snap))/float64(n), 1)
	f = nil

	beforeRestore := heapBytes()
	g := catalog.New()
	start = time.Now()
	if err := g.Restore(snap); err != nil {
		return r, fmt.Errorf("catalogbench: restore: %w", err)
	}
	r.SnapshotRestoreS = report.Round(time.Since(start).Seconds(), 3)
	if g.SeriesCount() != n {
		return r, fmt.Errorf("catalogbench: the restored catalog holds %d series, want %d", g.SeriesCount(), n)
	}
	// NB: the snapshot is still held, as it was when beforeRestore was
	// read: dropping it first would take its size off the catalog's.
	restored := heapBytes()
	r.RestoredBytesPerSeries = report.Round(float64(restored-min(beforeRestore, restored))/float64(n), 1)
	runtime.KeepAlive(snap)
	runtime.KeepAlive(g)
	return r, nil
}

func writeTable(w io.Writer, res Result) error {
	fmt.Fprintf(w, "catalog: %d series per edge, in process; %s, commit %s\n\n", res.SeriesPerEdge, res.Machine, res.Commit)
	t := report.Table{Header: []string{"series", "edges", "fill", "bytes/series", "restored bytes/series", "snapshot", "snapshot time", "restore", "target bytes/series", "target restore"}}
	for _, x := range res.Runs {
		t.Add(report.Int(int64(x.Series)), report.Int(int64(x.Edges)), report.Float(x.FillS, 1)+" s",
			report.Whole(x.CatalogBytesPerSeries), report.Whole(x.RestoredBytesPerSeries),
			report.Float(x.SnapshotMiB, 1)+" MiB", report.Float(x.SnapshotS, 2)+" s", report.Float(x.SnapshotRestoreS, 2)+" s",
			BytesPerSeriesTarget.Format(report.Whole)+" "+BytesPerSeriesTarget.Verdict(x.CatalogBytesPerSeries),
			RestoreTarget.Format(func(v float64) string { return report.Float(v, 0) + " s" })+" "+RestoreTarget.Verdict(x.SnapshotRestoreS))
	}
	if err := t.Write(w); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w)
	return err
}
