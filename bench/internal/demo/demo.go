// Package demo is the guided tour behind `make demo`: it writes a few
// minutes of CAN-bus data from a small fleet of vehicles to a running node
// over gRPC, then runs the queries a user would try first — raw samples, a
// downsampled average per vehicle, a fleet-wide maximum, the last value of
// every channel, the series count — and prints each answer as a table.
//
// Every answer is also checked against the same aggregate computed naively
// from the samples the demo wrote, so the demo doubles as a smoke test of
// the write and query paths.
//
// Run is not safe to call concurrently with itself on the same Options.Out.
package demo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Options configures a demo run.
type Options struct {
	// Addr is the node's gRPC address (host:port).
	Addr string
	// Vehicles is the number of vehicles, 22 series each.
	Vehicles int
	// Minutes of data to write, ending now.
	Minutes int
	// PointsPerSeriesPerRequest is how many consecutive samples of each
	// channel go in one Write (300 = 30 s at 10 Hz).
	PointsPerSeriesPerRequest int
	// Seed selects the generated driving.
	Seed uint64
	// CallTimeout bounds each RPC.
	CallTimeout time.Duration
	// Now is the wall clock; the data ends at Now.
	Now func() time.Time
	// Location is the time zone times are printed in.
	Location *time.Location
	// Out receives the tables.
	Out io.Writer
	// Logger reports progress; nil discards.
	Logger *slog.Logger
	// SkipWrite runs only the queries, checking them against the data an
	// earlier run with the same Now, Seed, Vehicles and Minutes wrote
	// (the demo's second act: the cloud answers alone).
	SkipWrite bool
}

// DefaultOptions are the demo's defaults: 3 vehicles, 10 minutes.
func DefaultOptions() Options {
	return Options{
		Addr:                      "127.0.0.1:7070",
		Vehicles:                  3,
		Minutes:                   10,
		PointsPerSeriesPerRequest: 300,
		Seed:                      1,
		CallTimeout:               30 * time.Second,
		Now:                       time.Now,
		Location:                  time.Local,
		Out:                       os.Stdout,
	}
}

// Validate reports every problem with the options.
func (o Options) Validate() error {
	var errs []error
	if o.Addr == "" {
		errs = append(errs, errors.New("--addr is required"))
	}
	if o.Vehicles <= 0 {
		errs = append(errs, fmt.Errorf("vehicles must be positive, got %d", o.Vehicles))
	}
	if o.Minutes <= 0 {
		errs = append(errs, fmt.Errorf("minutes must be positive, got %d", o.Minutes))
	}
	if o.PointsPerSeriesPerRequest <= 0 {
		errs = append(errs, fmt.Errorf("points per series per request must be positive, got %d", o.PointsPerSeriesPerRequest))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, errors.New("call timeout must be positive"))
	}
	if o.Now == nil || o.Location == nil || o.Out == nil {
		errs = append(errs, errors.New("now, location and out are required"))
	}
	return errors.Join(errs...)
}

// Summary is what a demo run did.
type Summary struct {
	Points       int64
	WriteElapsed time.Duration
	Queries      []QueryOutcome
}

// QueryOutcome is one query's latency and verdict.
type QueryOutcome struct {
	Title   string
	Latency time.Duration
	Series  int
	Points  int
	// Err is set when the query failed or its answer differs from the data
	// written.
	Err error
}

// Run writes the data, runs the queries and prints everything to o.Out. It
// returns an error if a write was not fully accepted or a query failed or
// answered differently from the data written.
func Run(ctx context.Context, o Options) (Summary, error) {
	if err := o.Validate(); err != nil {
		return Summary{}, fmt.Errorf("demo options: %w", err)
	}
	logger := cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	conn, err := nodeclient.Dial(o.Addr)
	if err != nil {
		return Summary{}, err
	}
	defer conn.Close()
	wc := tributaryv1.NewWriteServiceClient(conn)
	qc := tributaryv1.NewQueryServiceClient(conn)

	samplesPerSeries := o.Minutes * 60 * 1000 / workload.CANIntervalMs
	endMs := o.Now().UnixMilli()
	endMs -= endMs % workload.CANIntervalMs
	startMs := endMs - int64(samplesPerSeries-1)*workload.CANIntervalMs
	gen, err := workload.NewCANBus(workload.CANBusOptions{Vehicles: o.Vehicles, StartMs: startMs, Seed: o.Seed})
	if err != nil {
		return Summary{}, err
	}
	w := o.Out
	fmt.Fprintf(w, "Tributary demo: %s × %d CAN-bus channels at 10 Hz, %s of driving from %s to %s\n",
		plural(o.Vehicles, "vehicle"), len(workload.CANChannels()), plural(o.Minutes, "minute"), fmtTime(startMs, o.Location, "15:04:05"), fmtTime(endMs, o.Location, "15:04:05 MST"))
	printStatus(ctx, w, qc, o)

	data := newDataset(gen, startMs, samplesPerSeries)
	sum := Summary{}
	if o.SkipWrite {
		data.fill(gen, o.PointsPerSeriesPerRequest)
		fmt.Fprintf(w, "\nNot writing: checking the answers against the %s points written before\n", report.Int(int64(gen.NumSeries()*samplesPerSeries)))
	} else {
		fmt.Fprintf(w, "\nWriting %s points to %s ... ", report.Int(int64(gen.NumSeries()*samplesPerSeries)), o.Addr)
		t0 := time.Now()
		sum.Points, err = write(ctx, wc, gen, data, o)
		sum.WriteElapsed = time.Since(t0)
		logger.Debug("write done", "points", sum.Points, "elapsed", sum.WriteElapsed, "err", err)
		if err != nil {
			fmt.Fprintln(w, "failed")
			return sum, err
		}
		fmt.Fprintf(w, "done in %.2f s (%s points/s)\n", sum.WriteElapsed.Seconds(), report.Int(int64(float64(sum.Points)/sum.WriteElapsed.Seconds())))
		waitVisible(ctx, w, qc, gen.NumSeries(), o)
	}

	for i, q := range queries(data, o) {
		fmt.Fprintf(w, "\n%d. %s\n   %s\n", i+1, q.title, q.describe())
		out := q.run(ctx, qc, o.CallTimeout)
		logger.Debug("query done", "query", q.title, "latency", out.Latency, "err", out.Err)
		if out.Err != nil {
			fmt.Fprintf(w, "   ✗ %v\n", out.Err)
		}
		sum.Queries = append(sum.Queries, out)
	}
	printSummary(w, sum)
	var failed []error
	for _, q := range sum.Queries {
		if q.Err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", q.Title, q.Err))
		}
	}
	if len(failed) > 0 {
		return sum, fmt.Errorf("%d of %d queries failed or answered wrongly: %w", len(failed), len(sum.Queries), errors.Join(failed...))
	}
	return sum, nil
}

// waitVisible waits until a listing through o.Addr shows the n series
// just written, and says how long that took. A node lists a series as
// soon as it is written; a coordinator learns new series from the edge's
// announcements (about a second, docs/coordinator.md), and a query
// through it does not ask an edge for series the catalog does not list
// yet.
func waitVisible(ctx context.Context, w io.Writer, qc tributaryv1.QueryServiceClient, n int, o Options) {
	req := &tributaryv1.SeriesRequest{Matchers: []*tributaryv1.Matcher{{Type: tributaryv1.Matcher_REGEX, Name: "vehicle", Value: ".+"}}}
	t0 := time.Now()
	deadline := t0.Add(10 * time.Second)
	got := 0
	for {
		cctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
		resp, err := qc.Series(cctx, req)
		cancel()
		if got = len(resp.GetSeries()); err == nil && got >= n {
			fmt.Fprintf(w, "%d series listed through %s %.2f s after the write\n", got, o.Addr, time.Since(t0).Seconds())
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			fmt.Fprintf(w, "only %d of %d series listed through %s %.0f s after the write (last error: %v)\n", got, n, o.Addr, time.Since(t0).Seconds(), err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// printStatus shows who answers, when the node implements Status.
func printStatus(ctx context.Context, w io.Writer, qc tributaryv1.QueryServiceClient, o Options) {
	ctx, cancel := context.WithTimeout(ctx, o.CallTimeout)
	defer cancel()
	st, err := qc.Status(ctx, &tributaryv1.StatusRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return
	case err != nil:
		fmt.Fprintf(w, "node %s: status unavailable: %v\n", o.Addr, err)
	default:
		fmt.Fprintf(w, "node %s: id %q, version %s, %s series stored before this run\n", o.Addr, st.GetNodeId(), st.GetVersion(), report.Int(st.GetSeries()))
	}
}

// write sends every vehicle's data, one concurrent writer per vehicle, and
// records what was written in data.
func write(ctx context.Context, wc tributaryv1.WriteServiceClient, gen *workload.Generator, data *dataset, o Options) (int64, error) {
	reqs := gen.Requests(gen.SeriesPerUnit(), o.PointsPerSeriesPerRequest)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		points   int64
		firstErr error
		wg       sync.WaitGroup
	)
	for v, req := range reqs {
		wg.Go(func() {
			for done := 0; done < data.samples; {
				n := min(o.PointsPerSeriesPerRequest, data.samples-done)
				req.Next(n)
				data.record(v*gen.SeriesPerUnit(), done, req.Msg)
				callCtx, callCancel := context.WithTimeout(ctx, o.CallTimeout)
				resp, err := wc.Write(callCtx, req.Msg)
				callCancel()
				if err == nil {
					err = nodeclient.CheckWrite(resp, req.Points())
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("write %s: %w", workload.VehicleID(v), err)
						cancel()
					}
					mu.Unlock()
					return
				}
				points += resp.GetAccepted()
				mu.Unlock()
				done += n
			}
		})
	}
	wg.Wait()
	return points, firstErr
}

func printSummary(w io.Writer, sum Summary) {
	fmt.Fprintf(w, "\nSummary\n")
	if sum.Points > 0 {
		fmt.Fprintf(w, "   wrote %s points in %.2f s (%s points/s)\n", report.Int(sum.Points), sum.WriteElapsed.Seconds(),
			report.Int(int64(float64(sum.Points)/sum.WriteElapsed.Seconds())))
	}
	fmt.Fprintln(w)
	tb := report.Table{Header: []string{"query", "latency (ms)", "series", "points", "answer"}, RightAlign: []bool{false, true, true, true, false}}
	for _, q := range sum.Queries {
		verdict := "matches the data written"
		if q.Err != nil {
			verdict = "WRONG or failed (see above)"
		}
		tb.Add(q.Title, report.Float(float64(q.Latency)/float64(time.Millisecond), 1), report.Int(int64(q.Series)), report.Int(int64(q.Points)), verdict)
	}
	writeIndented(w, tb)
}

func fmtTime(ms int64, loc *time.Location, layout string) string {
	return time.UnixMilli(ms).In(loc).Format(layout)
}

// plural renders "1 vehicle", "3 vehicles".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
