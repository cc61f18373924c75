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
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/internal/loopback"
)

// Common holds the settings every workload shares.
type Common struct {
	// Binary is the tributary executable to start as the node.
	Binary string
	// Profile names the run's size ("short" or "full"); it is part of the
	// result file names.
	Profile string
	// ResultsDir receives the JSON record and the PNG plots; "" writes
	// neither.
	ResultsDir string
	// WorkDir is where temporary data directories are made; "" means the
	// system temp directory.
	WorkDir string
	// WALSync is the node's --wal-sync policy; "" keeps the node's default.
	WALSync string
	// NodeArgs are extra arguments for every node start.
	NodeArgs []string
	// Seed selects the generated data and queries.
	Seed uint64
	// Commit names the code measured.
	Commit string
	// Out receives the table and, last, the JSON line.
	Out io.Writer
	// Logger reports progress; nil discards.
	Logger *slog.Logger
}

func (c Common) validate() error {
	var errs []error
	if c.Binary == "" {
		errs = append(errs, errors.New("--binary is required (build it with make build)"))
	}
	if c.Profile != "short" && c.Profile != "full" {
		errs = append(errs, fmt.Errorf("profile must be short or full, got %q", c.Profile))
	}
	if c.Out == nil {
		errs = append(errs, errors.New("no output writer"))
	}
	if c.Binary != "" {
		if _, err := nodeproc.FindBinary(c.Binary); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c Common) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Logger
}

// longRetention keeps every generated sample in the raw tier, whatever its
// age: the workloads place their data in the past.
var longRetention = []string{"--retention-raw", "87600h", "--retention-1h", "87600h", "--retention-1d", "87600h"}

// node is a started node and its temporary directory.
type node struct {
	proc     *nodeproc.Node
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
		Binary:     c.Binary,
		DataDir:    filepath.Join(dir, "data"),
		ListenAddr: grpcAddr,
		WALSync:    c.WALSync,
		LogLevel:   "info",
		ExtraArgs:  append(args, c.NodeArgs...),
		LogPath:    filepath.Join(dir, "node.log"),
		Logger:     c.logger(),
	})
	if err != nil {
		return nil, fmt.Errorf("start node (work directory %s kept): %w", dir, err)
	}
	return &node{proc: p, dir: dir, grpcAddr: grpcAddr, httpAddr: httpAddr}, nil
}

// stop stops the node and removes its directory unless the run failed.
func (n *node) stop(failed bool) error {
	_, err := n.proc.Stop(2 * time.Minute)
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
	ms := func(d time.Duration) float64 { return round(float64(d)/1e6, 3) }
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(ds)))) - 1
		return ms(ds[max(0, min(i, len(ds)-1))])
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
		l.OpsPerS = round(float64(len(ds))/elapsed.Seconds(), 1)
	}
	return l
}

func round(x float64, decimals int) float64 {
	p := math.Pow10(decimals)
	return math.Round(x*p) / p
}

// fileName is the base name of a result file of workload w.
func fileName(c Common, w, suffix string) string {
	return fmt.Sprintf("%s-%s%s", w, cmp.Or(c.Profile, "run"), suffix)
}

// atomicInt is a counter safe for concurrent use.
type atomicInt struct{ v atomic.Int64 }

func (a *atomicInt) add(n int64) { a.v.Add(n) }
func (a *atomicInt) Load() int64 { return a.v.Load() }
