package edgebench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"

	"github.com/tributarydb/tributary/bench/internal/benchplot"
	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/report"
)

// IoTDBOptions configure the iotdb workload, after IoTDB-benchmark: Groups
// storage groups holding Devices devices of Sensors sensors each; each
// client is bound to one device and writes batches of BatchRows rows (one
// sample of every sensor a row), a fraction OutOfOrderRatio of them behind
// the device's newest row; in the read-write mix half the operations are
// reads, split evenly over the five read types.
type IoTDBOptions struct {
	Common
	Groups, Devices, Sensors int
	// Clients are the client counts of the sweep; each must be at most
	// Devices.
	Clients []int
	// BatchRows is the rows per write.
	BatchRows int
	// Interval is the time between two rows of a device.
	Interval time.Duration
	// OutOfOrderRatio is the fraction of writes placed behind the
	// device's newest row (inside the node's out-of-order window).
	OutOfOrderRatio float64
	// Duration is how long each run (mode × client count) lasts.
	Duration time.Duration
	// ReadRatio is the fraction of reads in the mixed mode.
	ReadRatio float64
	// QueryRows is the rows a time-range read covers; GroupByRows the
	// rows of a group-by bucket.
	QueryRows, GroupByRows int
}

// DefaultIoTDBOptions is the short profile: 3 groups × 9 devices × 10
// sensors, clients 1, 3, 5, 9 for 5 s each.
func DefaultIoTDBOptions() IoTDBOptions {
	return IoTDBOptions{
		Common:          defaultCommon(),
		Groups:          3,
		Devices:         9,
		Sensors:         10,
		Clients:         []int{1, 3, 5, 9},
		BatchRows:       100,
		Interval:        time.Second,
		OutOfOrderRatio: 0.5,
		Duration:        5 * time.Second,
		ReadRatio:       0.5,
		QueryRows:       100,
		GroupByRows:     10,
	}
}

func (o IoTDBOptions) validate() error {
	errs := []error{o.Common.validate()}
	if o.Groups <= 0 || o.Devices <= 0 || o.Sensors <= 0 {
		errs = append(errs, fmt.Errorf("groups, devices and sensors must be positive, got %d, %d, %d", o.Groups, o.Devices, o.Sensors))
	}
	if len(o.Clients) == 0 {
		errs = append(errs, errors.New("no client counts"))
	}
	for _, c := range o.Clients {
		if c <= 0 || c > o.Devices {
			errs = append(errs, fmt.Errorf("client count %d: must be between 1 and the devices (%d), each client is bound to a device", c, o.Devices))
		}
	}
	if o.BatchRows <= 0 || o.QueryRows <= 0 || o.GroupByRows <= 0 {
		errs = append(errs, errors.New("batch rows, query rows and group-by rows must be positive"))
	}
	if o.Interval < time.Millisecond {
		errs = append(errs, fmt.Errorf("interval must be at least 1ms, got %s", o.Interval))
	}
	if o.OutOfOrderRatio < 0 || o.OutOfOrderRatio > 1 || o.ReadRatio < 0 || o.ReadRatio >= 1 {
		errs = append(errs, errors.New("out-of-order ratio must be in [0, 1] and read ratio in [0, 1)"))
	}
	if o.Duration <= 0 {
		errs = append(errs, errors.New("duration must be positive"))
	}
	return errors.Join(errs...)
}

// The operations of the IoTDB benchmark, in report order.
const (
	opWrite      = "write"
	opPrecise    = "precise_point"
	opTimeRange  = "time_range"
	opAggRange   = "aggregate_range"
	opGroupBy    = "group_by_time"
	opLatest     = "latest_point"
	iotdbMetric  = "iotdb"
	iotdbOutOfOr = 10 // batches an out-of-order write may lag behind
)

var iotdbReads = []string{opPrecise, opTimeRange, opAggRange, opGroupBy, opLatest}

// IoTDBRun is one mode at one client count.
type IoTDBRun struct {
	Mode             string             `json:"mode"` // write_only or read_write
	Clients          int                `json:"clients"`
	Seconds          float64            `json:"seconds"`
	Points           int64              `json:"points"`
	PointsPerS       float64            `json:"points_per_s"`
	OutOfOrderWrites int64              `json:"out_of_order_writes"`
	Ops              map[string]Latency `json:"ops"`
}

// IoTDBResult is the whole sweep.
type IoTDBResult struct {
	Runs []IoTDBRun `json:"runs"`
}

// RunIoTDB runs the sweep: for each client count, write-only and then the
// read-write mix, each on a fresh node.
func RunIoTDB(ctx context.Context, o IoTDBOptions) (IoTDBResult, error) {
	var res IoTDBResult
	if err := o.validate(); err != nil {
		return res, fmt.Errorf("iotdb: %w", err)
	}
	host := detectHost()
	for _, mode := range []string{"write_only", "read_write"} {
		for _, clients := range o.Clients {
			o.Log().Info("iotdb run", "mode", mode, "clients", clients, "duration", o.Duration)
			r, err := runIoTDBOnce(ctx, o, mode, clients)
			if err != nil {
				return res, fmt.Errorf("iotdb %s with %d clients: %w", mode, clients, err)
			}
			res.Runs = append(res.Runs, r)
		}
	}
	host.finish()
	printIoTDB(o, host, res)
	plots, err := plotIoTDB(o, res)
	if err != nil {
		return res, err
	}
	return res, finishRecord(o.Common, Record{
		Workload: "iotdb", Profile: o.Profile, Time: time.Now().UTC(), Commit: o.Commit, Machine: host,
		Config: iotdbConfig(o), Figures: res, Plots: plots,
		Published: map[string]string{
			"ticktockdb_pi_zero_w_write_only_points_per_s": "58000 (IoTDB-benchmark, Raspberry Pi Zero W; other hardware)",
		},
	})
}

func iotdbConfig(o IoTDBOptions) map[string]any {
	return map[string]any{
		"groups": o.Groups, "devices": o.Devices, "sensors": o.Sensors, "clients": o.Clients,
		"batch_rows": o.BatchRows, "interval_ms": o.Interval.Milliseconds(), "out_of_order_ratio": o.OutOfOrderRatio,
		"duration_s": o.Duration.Seconds(), "read_ratio": o.ReadRatio, "query_rows": o.QueryRows,
		"group_by_rows": o.GroupByRows, "wal_sync": o.WALSync, "seed": o.Seed,
	}
}

// device is the state of one client's device: the rows written so far.
type device struct {
	group, name string
	series      []*tributaryv1.Series
	startMs     int64
	next        int64 // next in-order row
	oooNext     int64 // next out-of-order row (placed half an interval off, behind next)
	newestRow   int64 // newest in-order row acknowledged, -1 when none
}

func newDevice(o IoTDBOptions, d int, startMs int64) *device {
	dv := &device{group: "g" + strconv.Itoa(d%o.Groups), name: "d" + strconv.Itoa(d), startMs: startMs, newestRow: -1}
	for s := range o.Sensors {
		dv.series = append(dv.series, &tributaryv1.Series{Labels: []*tributaryv1.Label{
			{Name: "__name__", Value: iotdbMetric},
			{Name: "device", Value: dv.name},
			{Name: "group", Value: dv.group},
			{Name: "sensor", Value: "s" + strconv.Itoa(s)},
		}})
	}
	return dv
}

func runIoTDBOnce(ctx context.Context, o IoTDBOptions, mode string, clients int) (IoTDBRun, error) {
	run := IoTDBRun{Mode: mode, Clients: clients, Ops: map[string]Latency{}}
	n, err := startNode(ctx, o.Common, "iotdb")
	if err != nil {
		return run, err
	}
	failed := true
	defer func() {
		if err := n.stop(failed); err != nil {
			o.Log().Warn("stop node", "err", err)
		}
	}()
	conn, err := nodeclient.Dial(n.grpcAddr)
	if err != nil {
		return run, err
	}
	defer conn.Close()
	wc := tributaryv1.NewWriteServiceClient(conn)
	qc := tributaryv1.NewQueryServiceClient(conn)

	// Rows go back far enough that no run reaches the wall clock.
	intervalMs := o.Interval.Milliseconds()
	startMs := time.Now().Add(-200*24*time.Hour).UnixMilli() / intervalMs * intervalMs
	type clientOut struct {
		lat    map[string][]time.Duration
		points int64
		ooo    int64
		err    error
	}
	outs := make([]clientOut, clients)
	var wg sync.WaitGroup
	deadline := time.Now().Add(o.Duration)
	runCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	t0 := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := &outs[c]
			out.lat = map[string][]time.Duration{}
			dv := newDevice(o, c, startMs)
			rng := rand.New(rand.NewPCG(o.Seed, uint64(c)))
			req := &tributaryv1.WriteRequest{}
			vals := make([][]float64, o.Sensors)
			ts := make([]int64, o.BatchRows)
			for runCtx.Err() == nil {
				op := opWrite
				if mode == "read_write" && dv.newestRow >= 0 && rng.Float64() < o.ReadRatio {
					op = iotdbReads[rng.IntN(len(iotdbReads))]
				}
				t := time.Now()
				var err error
				if op == opWrite {
					var ooo bool
					ooo, err = iotdbWrite(runCtx, wc, o, dv, rng, req, ts, vals)
					if err == nil {
						out.points += int64(o.BatchRows * o.Sensors)
						if ooo {
							out.ooo++
						}
					}
				} else {
					err = iotdbRead(runCtx, qc, o, dv, rng, op)
				}
				if err != nil {
					// gRPC may see the deadline pass before the context does.
					if runCtx.Err() != nil || !time.Now().Before(deadline) {
						break
					}
					out.err = fmt.Errorf("%s: %w", op, err)
					cancel()
					return
				}
				out.lat[op] = append(out.lat[op], time.Since(t))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	lat := map[string][]time.Duration{}
	var errs []error
	for _, out := range outs {
		errs = append(errs, out.err)
		run.Points += out.points
		run.OutOfOrderWrites += out.ooo
		for op, ds := range out.lat {
			lat[op] = append(lat[op], ds...)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return run, err
	}
	if err := ctx.Err(); err != nil {
		return run, err
	}
	run.Seconds = report.Round(elapsed.Seconds(), 2)
	run.PointsPerS = report.Round(float64(run.Points)/elapsed.Seconds(), 0)
	for op, ds := range lat {
		run.Ops[op] = summarize(ds, elapsed)
	}
	failed = false
	return run, nil
}

// iotdbWrite writes the device's next batch: in order, or with probability
// OutOfOrderRatio, rows half an interval off the in-order grid behind the
// newest row. It reports whether the batch was out of order.
func iotdbWrite(ctx context.Context, wc tributaryv1.WriteServiceClient, o IoTDBOptions, dv *device, rng *rand.Rand,
	req *tributaryv1.WriteRequest, ts []int64, vals [][]float64) (bool, error) {
	intervalMs := o.Interval.Milliseconds()
	rows := int64(o.BatchRows)
	ooo := rng.Float64() < o.OutOfOrderRatio && dv.oooNext+rows <= dv.next-rows
	var first, offset int64
	if ooo {
		first, offset = dv.oooNext, intervalMs/2
		// Stay inside the node's out-of-order window (an hour by default).
		if limit := dv.next - iotdbOutOfOr*rows; first < limit {
			first = limit
		}
		dv.oooNext = first + rows
	} else {
		first = dv.next
		dv.next += rows
	}
	for i := range ts {
		ts[i] = dv.startMs + (first+int64(i))*intervalMs + offset
	}
	req.Batches = req.Batches[:0]
	for s, se := range dv.series {
		if cap(vals[s]) < len(ts) {
			vals[s] = make([]float64, len(ts))
		}
		v := vals[s][:len(ts)]
		for i := range v {
			v[i] = float64(int(rng.Float64()*10000)) / 100
		}
		req.Batches = append(req.Batches, &tributaryv1.SeriesBatch{Series: se, TimestampsMs: ts, Values: v})
	}
	resp, err := wc.Write(ctx, req)
	if err != nil {
		return ooo, err
	}
	if err := nodeclient.CheckWrite(resp, len(ts)*len(dv.series)); err != nil {
		return ooo, err
	}
	if !ooo {
		dv.newestRow = first + rows - 1
	}
	return ooo, nil
}

// iotdbRead runs one read of type op on one sensor of the client's device
// over rows it has written, and checks the shape of the answer.
func iotdbRead(ctx context.Context, qc tributaryv1.QueryServiceClient, o IoTDBOptions, dv *device, rng *rand.Rand, op string) error {
	intervalMs := o.Interval.Milliseconds()
	sensor := "s" + strconv.Itoa(rng.IntN(o.Sensors))
	m := []*tributaryv1.Matcher{
		{Name: "__name__", Value: iotdbMetric},
		{Name: "device", Value: dv.name},
		{Name: "sensor", Value: sensor},
	}
	qrows := int64(o.QueryRows)
	// A range start among the rows written, so that the range is full.
	newest := dv.newestRow
	startRow := int64(0)
	if newest+1 > qrows {
		startRow = rng.Int64N(newest + 1 - qrows + 1)
	}
	startMs := dv.startMs + startRow*intervalMs
	endMs := startMs + qrows*intervalMs - 1
	req := &tributaryv1.QueryRequest{Matchers: m, StartMs: startMs, EndMs: endMs}
	wantMin := 1
	switch op {
	case opPrecise:
		row := rng.Int64N(newest + 1)
		req.StartMs = dv.startMs + row*intervalMs
		req.EndMs = req.StartMs
		req.Mode = tributaryv1.QueryMode_QUERY_MODE_RAW
	case opTimeRange:
		req.Mode = tributaryv1.QueryMode_QUERY_MODE_RAW
		wantMin = int(min(qrows, newest+1))
	case opAggRange:
		// One bucket over the whole range: the step is the range, aligned.
		step := qrows * intervalMs
		req.StartMs = dv.startMs + startRow*intervalMs/step*step
		req.EndMs = req.StartMs + step - 1
		req.Mode, req.StepMs, req.Downsample = tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE, step, tributaryv1.Aggregate_AGGREGATE_AVG
	case opGroupBy:
		req.Mode, req.StepMs, req.Downsample = tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE, int64(o.GroupByRows)*intervalMs, tributaryv1.Aggregate_AGGREGATE_AVG
		wantMin = int(min(qrows, newest+1)) / o.GroupByRows
	case opLatest:
		req.Mode = tributaryv1.QueryMode_QUERY_MODE_LAST_POINT
		req.StartMs, req.EndMs = 0, dv.startMs+(newest+1)*intervalMs
	}
	ans, err := nodeclient.Query(ctx, qc, req)
	if err != nil {
		return err
	}
	if len(ans.Series) != 1 {
		return fmt.Errorf("device %s sensor %s: %d series in the answer, want 1", dv.name, sensor, len(ans.Series))
	}
	if got := len(ans.Series[0].Values); got < wantMin {
		return fmt.Errorf("device %s sensor %s [%d, %d]: %d values, want at least %d", dv.name, sensor, req.StartMs, req.EndMs, got, wantMin)
	}
	if op == opLatest && ans.Series[0].TimestampsMs[0] < dv.startMs+newest*intervalMs {
		return fmt.Errorf("device %s sensor %s: latest point at %d, older than the newest acknowledged row %d",
			dv.name, sensor, ans.Series[0].TimestampsMs[0], dv.startMs+newest*intervalMs)
	}
	return nil
}

func printIoTDB(o IoTDBOptions, host Host, res IoTDBResult) {
	w := o.Out
	fmt.Fprintf(w, "iotdb workload: %d groups × %d devices × %d sensors, %d rows per write, out-of-order ratio %.1f, %s per run\n",
		o.Groups, o.Devices, o.Sensors, o.BatchRows, o.OutOfOrderRatio, o.Duration)
	fmt.Fprintf(w, "machine: %s\n\n", host)
	t := report.Table{Header: []string{"mode", "clients", "points/s", "ooo writes"}, RightAlign: []bool{false, true, true, true}}
	for _, r := range res.Runs {
		t.Add(r.Mode, strconv.Itoa(r.Clients), report.Int(int64(r.PointsPerS)), report.Int(r.OutOfOrderWrites))
	}
	t.Write(w)
	fmt.Fprintln(w)
	hdr := append([]string{"mode", "clients", "operation", "ops", "ops/s"}, PercentileNames...)
	for i := 5; i < len(hdr); i++ {
		hdr[i] += " ms"
	}
	t = report.Table{Header: hdr, RightAlign: []bool{false, true, false, true, true, true, true, true, true, true, true, true}}
	for _, r := range res.Runs {
		for _, op := range append([]string{opWrite}, iotdbReads...) {
			l, ok := r.Ops[op]
			if !ok {
				continue
			}
			row := []string{r.Mode, strconv.Itoa(r.Clients), op, report.Int(int64(l.Ops)), report.Float(l.OpsPerS, 0)}
			for _, v := range l.Values() {
				row = append(row, report.Float(v, 2))
			}
			t.Add(row...)
		}
	}
	t.Write(w)
	fmt.Fprintf(w, "\npublished (other hardware): TickTockDB on a Raspberry Pi Zero W, IoTDB-benchmark write-only: 58,000 points/s\n")
}

func plotIoTDB(o IoTDBOptions, res IoTDBResult) ([]string, error) {
	if o.ResultsDir == "" {
		return nil, nil
	}
	var plots []string
	// Throughput vs clients, one line per mode.
	tp := benchplot.Chart{Title: "iotdb: write throughput vs clients", XLabel: "clients", YLabel: "points/s written"}
	for _, mode := range []string{"write_only", "read_write"} {
		s := benchplot.Series{Name: mode}
		for _, r := range res.Runs {
			if r.Mode == mode {
				s.X, s.Y = append(s.X, float64(r.Clients)), append(s.Y, r.PointsPerS)
			}
		}
		tp.Series = append(tp.Series, s)
	}
	path, err := savePlot(o.Common, "iotdb", "throughput", tp)
	if err != nil {
		return nil, err
	}
	plots = append(plots, path)
	// Latency percentiles per operation, read-write mix at the most clients.
	last := res.Runs[len(res.Runs)-1]
	lc := benchplot.Chart{Title: fmt.Sprintf("iotdb: latency per operation (%s, %d clients)", last.Mode, last.Clients),
		XLabel: "percentile", YLabel: "ms", XNames: PercentileNames, LogY: true}
	for _, op := range append([]string{opWrite}, iotdbReads...) {
		l, ok := last.Ops[op]
		if !ok {
			continue
		}
		s := benchplot.Series{Name: op, Y: l.Values()}
		for i := range s.Y {
			s.X = append(s.X, float64(i))
		}
		lc.Series = append(lc.Series, s)
	}
	if path, err = savePlot(o.Common, "iotdb", "latency", lc); err != nil {
		return nil, err
	}
	return append(plots, path), nil
}
