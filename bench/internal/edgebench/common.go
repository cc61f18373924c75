// Package edgebench holds the published edge-TSDB workloads that tribench
// runs against a `tributary node` process: the IoTDB-benchmark style
// write-only and read-write mix over a sweep of client counts (iotdb), the
// TSBS cpu-only ingest and the kdb+ blog's queries (tsbs-cpu), and the
// Warp 10 CAN-bus ingest as one series per line and as multi-field rows
// (canbus).
//
// Every run prints a table for people, writes a JSON record (machine,
// commit, configuration, figures) and PNG plots under a results directory,
// and ends its output with one JSON line. Missing a published figure never
// fails a run; a rejected write, a failed request or a wrong answer does.
package edgebench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/internal/loopback"
)

// Common holds the settings every workload shares.
type Common struct {
	// Procs says which binary is started as the node and how; Output
	// where the figures go.
	runopt.Procs
	runopt.Output
	// Profile names the run's size ("short" or "full"); it is part of the
	// result file names.
	Profile string
	// ResultsDir receives the JSON record and the PNG plots; "" writes
	// neither.
	ResultsDir string
	// WALSync is the node's --wal-sync policy; "" keeps the node's default.
	WALSync string
	// Seed selects the generated data and queries.
	Seed uint64
}

// defaultCommon is the short profile, seed 1, a minute for a node to
// start and two to stop.
func defaultCommon() Common {
	return Common{Procs: runopt.Procs{ReadyTimeout: time.Minute, StopTimeout: 2 * time.Minute},
		Output: runopt.DefaultOutput(), Profile: "short", Seed: 1}
}

func (c Common) validate() error {
	errs := append(c.Procs.Problems(), c.Output.Problems()...)
	if c.Profile != "short" && c.Profile != "full" {
		errs = append(errs, fmt.Errorf("profile must be short or full, got %q", c.Profile))
	}
	if c.Binary != "" {
		if _, err := nodeproc.FindBinary(c.Binary); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// longRetention keeps every generated sample in the raw tier, whatever its
// age: the workloads place their data in the past.
var longRetention = []string{"--retention-raw", "87600h", "--retention-1h", "87600h", "--retention-1d", "87600h"}

// node is a started node and its temporary directory.
type node struct {
	proc     *nodeproc.Node
	stopWait time.Duration // how long stop waits for it to exit
	dir      string
	grpcAddr string
	httpAddr string
}

// startNode starts a node on a fresh data directory with its gRPC and HTTP
// listeners on free loopback ports.
func startNode(ctx context.Context, c Common, name string) (*node, error) {
	dir, err := os.MkdirTemp(c.WorkDir, "tribench-"+name+"-")
	if err != nil {
		return nil, err
	}
	addrs, err := loopback.FreePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	grpcAddr, httpAddr := addrs[0], addrs[1]
	args := append([]string{"--http-listen", httpAddr}, longRetention...)
	p, err := nodeproc.Start(ctx, nodeproc.Options{
		Binary:       c.Binary,
		DataDir:      filepath.Join(dir, "data"),
		ListenAddr:   grpcAddr,
		WALSync:      c.WALSync,
		LogLevel:     "info",
		ExtraArgs:    append(args, c.NodeArgs...),
		Env:          c.Env,
		LogPath:      filepath.Join(dir, "node.log"),
		ReadyTimeout: c.ReadyTimeout,
		Logger:       c.Log(),
	})
	if err != nil {
		return nil, fmt.Errorf("start node (work directory %s kept): %w", dir, err)
	}
	return &node{proc: p, stopWait: c.StopTimeout, dir: dir, grpcAddr: grpcAddr, httpAddr: httpAddr}, nil
}

// stop stops the node and removes its directory unless the run failed.
func (n *node) stop(failed bool) error {
	_, err := n.proc.Stop(n.stopWait)
	if failed || err != nil {
		return err
	}
	return os.RemoveAll(n.dir)
}

// Latency summarises the client-side latencies of one operation, as the
// IoTDB benchmark reports them.
type Latency struct {
	Ops     int     `json:"ops"`
	OpsPerS float64 `json:"ops_per_s"`
	AvgMs   float64 `json:"avg_ms"`
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
	P95Ms   float64 `json:"p95_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// PercentileNames are the columns of a latency row, in order.
var PercentileNames = []string{"avg", "p50", "p90", "p95", "p99", "p999", "max"}

// Values returns the figures in PercentileNames order, in ms.
func (l Latency) Values() []float64 {
	return []float64{l.AvgMs, l.P50Ms, l.P90Ms, l.P95Ms, l.P99Ms, l.P999Ms, l.MaxMs}
}

// summarize computes the latency figures of ds measured over elapsed. ds
// is sorted in place.
func summarize(ds []time.Duration, elapsed time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	ms := func(d time.Duration) float64 { return report.Round(float64(d)/1e6, 3) }
	q := func(p float64) float64 {
		d, _ := report.NearestRank(ds, p)
		return ms(d)
	}
	l := Latency{
		Ops:    len(ds),
		AvgMs:  ms(sum / time.Duration(len(ds))),
		P50Ms:  q(0.50),
		P90Ms:  q(0.90),
		P95Ms:  q(0.95),
		P99Ms:  q(0.99),
		P999Ms: q(0.999),
		MaxMs:  ms(ds[len(ds)-1]),
	}
	if elapsed > 0 {
		l.OpsPerS = report.Round(float64(len(ds))/elapsed.Seconds(), 1)
	}
	return l
}

// fileName is the base name of a result file of workload w.
func fileName(c Common, w, suffix string) string {
	return fmt.Sprintf("%s-%s%s", w, cmp.Or(c.Profile, "run"), suffix)
}

// atomicInt is a counter safe for concurrent use.
type atomicInt struct{ v atomic.Int64 }

func (a *atomicInt) add(n int64) { a.v.Add(n) }
func (a *atomicInt) Load() int64 { return a.v.Load() }
