// Package lowrate is the small-write benchmark (tribench lowrate): one edge
// node taking what a typical fleet device sends — Series series at one
// point per second each, in one line-protocol request per second — with
// the WAL fsynced before every acknowledgement. It measures what that costs
// the storage device: write_bytes of /proc/PID/io over the run (every fsync
// of a small append writes at least one 4 KiB page, plus whatever the file
// system journals), per hour, and its ratio to that floor of one page per
// durable acknowledgement; and the node's WAL fsyncs per write, read from
// its /metrics, which show any extra fsync (a segment seal, a directory
// sync, the store) beyond the one per write.
//
// The run prints a table for people and then one JSON line, the last line
// of its output. Missing the target never fails a run; a refused write does.
//
// Run is not safe to call concurrently with itself on the same Options.Out.
package lowrate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/diskio"
	"github.com/tributarydb/tributary/bench/internal/lpbench"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/workdir"
)

// PageBytes is the floor of one fsync of a small append: one page.
const PageBytes = 4096

// Target is the goal for storage writes against the floor.
var Target = report.Target{Value: 1.25, AtMost: true}

// Options configures one run.
type Options struct {
	// The node process (Binary, WorkDir, KeepDataDir, NodeArgs, Env,
	// ReadyTimeout, StopTimeout) and the report (Commit, Out, Logger).
	runopt.Procs
	runopt.Output
	// Series is the number of series, one point each per write.
	Series int
	// Interval is the time between two writes.
	Interval time.Duration
	// Duration is how long to write.
	Duration time.Duration
	// Warmup is written before the measured Duration (the node's start-up
	// writes are not counted).
	Warmup time.Duration
	// WALSync is the node's --wal-sync policy.
	WALSync string
	// CallTimeout bounds one request.
	CallTimeout time.Duration
}

// DefaultOptions: 8 series at 1 Hz, one write a second for 10 minutes,
// fsync before ack.
func DefaultOptions() Options {
	return Options{
		Procs:       runopt.Procs{ReadyTimeout: 60 * time.Second, StopTimeout: time.Minute},
		Output:      runopt.DefaultOutput(),
		Series:      8,
		Interval:    time.Second,
		Duration:    10 * time.Minute,
		Warmup:      10 * time.Second,
		WALSync:     "always",
		CallTimeout: 10 * time.Second,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	errs := append(o.Procs.Problems(), o.Output.Problems()...)
	if o.Series <= 0 || o.Series > 10_000 {
		errs = append(errs, fmt.Errorf("series must be in [1, 10000], got %d", o.Series))
	}
	if o.Interval < 10*time.Millisecond {
		errs = append(errs, fmt.Errorf("interval must be at least 10ms, got %v", o.Interval))
	}
	if o.Duration < o.Interval || o.Warmup < 0 {
		errs = append(errs, fmt.Errorf("duration must be at least one interval and warm-up not negative, got %v and %v", o.Duration, o.Warmup))
	}
	if o.WALSync == "" {
		errs = append(errs, errors.New("wal-sync is required"))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, errors.New("call timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Result is the outcome of one run; its JSON form is the last line printed.
type Result struct {
	StorageWriteBytesPerHour  report.Number `json:"storage_write_bytes_per_hour"`
	FloorBytesPerHour         report.Number `json:"floor_bytes_per_hour"` // one 4 KiB page per write
	RatioToFloor              report.Number `json:"ratio_to_page_floor"`
	StorageWriteBytesPerWrite report.Number `json:"storage_write_bytes_per_write"`
	StorageWriteBytesPerPoint report.Number `json:"storage_write_bytes_per_point"`
	WALFsyncsPerWrite         report.Number `json:"wal_fsyncs_per_write"`
	Series                    int           `json:"series"`
	IntervalS                 float64       `json:"interval_s"`
	DurationS                 report.Number `json:"duration_s"`
	Writes                    int64         `json:"writes"`
	Points                    int64         `json:"points"`
	StorageWriteBytes         int64         `json:"storage_write_bytes"`
	WALFsyncs                 int64         `json:"wal_fsyncs"`
	DataDirBytes              int64         `json:"data_dir_bytes"` // at the end, node running
	WALSync                   string        `json:"wal_sync"`
	report.Provenance
}

// Run runs the benchmark and writes its report to o.Out.
func Run(ctx context.Context, o Options) (_ Result, err error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("lowrate options: %w", err)
	}
	logger := o.Log()
	binary, err := nodeproc.FindBinary(o.Binary)
	if err != nil {
		return Result{}, err
	}
	wd, err := workdir.Make(o.WorkDir, "tribench-lowrate-", o.KeepDataDir, logger)
	if err != nil {
		return Result{}, err
	}
	defer func() { wd.Finish(err) }()
	grpcAddr, err := nodeproc.FreeLoopbackAddr()
	if err != nil {
		return Result{}, err
	}
	httpAddr, err := nodeproc.FreeLoopbackAddr()
	if err != nil {
		return Result{}, err
	}
	nodeLog := filepath.Join(wd.Path, "node.log")
	node, err := nodeproc.Start(ctx, nodeproc.Options{
		Binary: binary, DataDir: wd.DataDir, ListenAddr: grpcAddr, WALSync: o.WALSync, LogLevel: "info",
		ExtraArgs: append([]string{"--http-listen", httpAddr}, o.NodeArgs...),
		LogPath:   nodeLog, ReadyTimeout: o.ReadyTimeout, Logger: logger,
	})
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if _, serr := node.Stop(o.StopTimeout); serr != nil && err == nil {
			err = serr
		}
	}()
	w := &writer{o: o, client: &http.Client{Timeout: o.CallTimeout}, url: "http://" + httpAddr + "/write?db=lowrate&precision=ms", exited: node.Exited()}
	logger.Info("warming up", "for", o.Warmup)
	if err := w.run(ctx, o.Warmup); err != nil {
		return Result{}, fmt.Errorf("%w\nnode log %s ends with:\n%s", err, nodeLog, node.LogTail())
	}
	metricsURL := "http://" + httpAddr + "/metrics"
	fsyncs0, ferr := ScrapeCounter(ctx, w.client, metricsURL, "tributary_wal_fsyncs")
	probe, err := diskio.Begin(node.PID(), wd.DataDir)
	if err != nil {
		return Result{}, err
	}
	w.writes, w.points = 0, 0
	logger.Info("writing", "series", o.Series, "interval", o.Interval, "for", o.Duration)
	t0 := time.Now()
	if err := w.run(ctx, o.Duration); err != nil {
		return Result{}, fmt.Errorf("%w\nnode log %s ends with:\n%s", err, nodeLog, node.LogTail())
	}
	elapsed := time.Since(t0)
	if err := probe.Settle(ctx, 0, node.Exited()); err != nil {
		return Result{}, err
	}
	fsyncs1, ferr2 := ScrapeCounter(ctx, w.client, metricsURL, "tributary_wal_fsyncs")
	fig := probe.Figures()
	res := result(o, elapsed, w.writes, w.points, fig, fsyncs1-fsyncs0, errors.Join(ferr, ferr2))
	if err := WriteReport(o.Out, res); err != nil {
		return res, err
	}
	return res, nil
}

func result(o Options, elapsed time.Duration, writes, points int64, fig diskio.Figures, fsyncs int64, fsyncErr error) Result {
	nan := report.Number(math.NaN())
	ratio := func(a, b float64, d int) report.Number {
		if b == 0 || math.IsNaN(a) {
			return nan
		}
		return report.Number(report.Round(a/b, d))
	}
	hours := elapsed.Hours()
	perHour := float64(fig.StorageWrite) / hours
	floor := float64(writes) * PageBytes / hours
	r := Result{
		StorageWriteBytesPerHour:  report.Number(report.Round(perHour, 0)),
		FloorBytesPerHour:         report.Number(report.Round(floor, 0)),
		RatioToFloor:              ratio(perHour, floor, 3),
		StorageWriteBytesPerWrite: ratio(float64(fig.StorageWrite), float64(writes), 1),
		StorageWriteBytesPerPoint: ratio(float64(fig.StorageWrite), float64(points), 1),
		WALFsyncsPerWrite:         ratio(float64(fsyncs), float64(writes), 3),
		Series:                    o.Series,
		IntervalS:                 o.Interval.Seconds(),
		DurationS:                 report.Number(report.Round(elapsed.Seconds(), 1)),
		Writes:                    writes,
		Points:                    points,
		StorageWriteBytes:         fig.StorageWrite,
		WALFsyncs:                 fsyncs,
		DataDirBytes:              fig.AtRest,
		WALSync:                   o.WALSync,
		Provenance:                report.NewProvenance(map[string]float64{"ratio_to_page_floor": Target.Value}, o.Commit, report.DetectMachine()),
	}
	if fsyncErr != nil {
		r.WALFsyncsPerWrite = nan
		r.Notes = append(r.Notes, "WAL fsyncs not read from /metrics: "+fsyncErr.Error())
	}
	if o.WALSync != "always" {
		r.Notes = append(r.Notes, "the floor assumes one fsync per write (--wal-sync always); under "+o.WALSync+" fewer fsyncs make a ratio below 1 possible")
	}
	return r
}

// writer sends one request of o.Series lines every o.Interval.
type writer struct {
	o              Options
	client         *http.Client
	url            string
	exited         <-chan struct{}
	next           int64 // next timestamp, ms
	writes, points int64
}

func (w *writer) run(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	tick := time.NewTicker(w.o.Interval)
	defer tick.Stop()
	end := time.Now().Add(d)
	var body bytes.Buffer
	for time.Now().Before(end) {
		if w.next == 0 {
			w.next = time.Now().Add(-time.Minute).UnixMilli()
		}
		body.Reset()
		for s := range w.o.Series {
			fmt.Fprintf(&body, "sensor,device=edge-1,channel=c%d value=%g %d\n", s, float64(w.next%1000)/10+float64(s), w.next)
		}
		w.next += w.o.Interval.Milliseconds()
		if err := lpbench.Post(ctx, w.client, w.url, body.Bytes()); err != nil {
			return err
		}
		w.writes++
		w.points += int64(w.o.Series)
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-w.exited:
			return errors.New("the node exited during the run")
		}
	}
	return nil
}

// ScrapeCounter sums the samples of a Prometheus counter (name, with or
// without the _total suffix) on the node's /metrics.
func ScrapeCounter(ctx context.Context, c *http.Client, url, name string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	return parseCounter(io.LimitReader(resp.Body, 16<<20), name)
}

func parseCounter(r io.Reader, name string) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		metric, val, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		base, _, _ := strings.Cut(metric, "{")
		if base != name && base != name+"_total" {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %w", line, err)
		}
		sum += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no %s on /metrics", name)
	}
	return int64(sum), nil
}

// WriteReport prints the table for people and then, as the last line, the
// JSON form of r.
func WriteReport(w io.Writer, r Result) error {
	fmt.Fprintf(w, "tribench lowrate: %d series × 1 point every %gs, one request per interval, --wal-sync %s, %s s\n",
		r.Series, r.IntervalS, r.WALSync, r.DurationS.Text(0))
	fmt.Fprintf(w, "machine: %s; commit %s\n\n", r.Machine, r.Commit)
	tb := report.Table{Header: []string{"figure", "measured", "target", "met?"}, RightAlign: []bool{false, true, true, false}}
	tb.Add("storage writes (bytes/hour)", report.Whole(float64(r.StorageWriteBytesPerHour)), "", "")
	tb.Add("floor: one 4 KiB page per write (bytes/hour)", report.Whole(float64(r.FloorBytesPerHour)), "", "")
	tb.AddTarget("ratio to the floor", r.RatioToFloor.Text(2), Target, report.Decimals(2), r.RatioToFloor)
	tb.Add("storage writes per write (bytes)", r.StorageWriteBytesPerWrite.Text(0), "", "")
	tb.Add("storage writes per point (bytes)", r.StorageWriteBytesPerPoint.Text(0), "", "")
	tb.Add("WAL fsyncs per write", r.WALFsyncsPerWrite.Text(3), "", "")
	if err := tb.Write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return report.WriteNotesAndJSONLine(w, r.Notes, r)
}
