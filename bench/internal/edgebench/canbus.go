package edgebench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"

	"github.com/tributarydb/tributary/bench/internal/benchplot"
	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/workload"
)

// CANBusOptions configure the canbus workload, after the Warp 10 Raspberry
// Pi benchmark: Vehicles vehicles, each logging the 22 CAN-bus channels at
// 10 Hz for Minutes minutes, written as line protocol over HTTP twice, on
// fresh nodes: once with one series (field) per line, once as multi-field
// rows carrying all 22 channels of an instant.
type CANBusOptions struct {
	Common
	Vehicles, Minutes, Clients int
	// PointsPerRequest is the points of each request, in both modes.
	PointsPerRequest int
}

// DefaultCANBusOptions is the short profile: 20 vehicles × 20 minutes
// (5.3 M points a mode).
func DefaultCANBusOptions() CANBusOptions {
	return CANBusOptions{Common: defaultCommon(), Vehicles: 20, Minutes: 20, Clients: 2, PointsPerRequest: 22_000}
}

func (o CANBusOptions) validate() error {
	errs := []error{o.Common.validate()}
	if o.Vehicles <= 0 || o.Minutes <= 0 || o.Clients <= 0 || o.Clients > o.Vehicles {
		errs = append(errs, fmt.Errorf("vehicles, minutes and clients must be positive and clients at most the vehicles, got %d, %d, %d", o.Vehicles, o.Minutes, o.Clients))
	}
	if o.PointsPerRequest < 22 {
		errs = append(errs, fmt.Errorf("points per request must be at least 22 (one row), got %d", o.PointsPerRequest))
	}
	return errors.Join(errs...)
}

// CANBusMode is the figures of one way of writing.
type CANBusMode struct {
	Mode         string  `json:"mode"` // series_per_line or multi_field_rows
	Lines        int64   `json:"lines"`
	Points       int64   `json:"points"`
	Bytes        int64   `json:"bytes"`
	Seconds      float64 `json:"seconds"`
	PointsPerS   float64 `json:"points_per_s"`
	MiBPerS      float64 `json:"mib_per_s"`
	WriteLatency Latency `json:"write_latency"`
}

// CANBusResult holds both modes.
type CANBusResult struct {
	Modes []CANBusMode `json:"modes"`
}

const canHz = 10

// RunCANBus runs both modes.
func RunCANBus(ctx context.Context, o CANBusOptions) (CANBusResult, error) {
	var res CANBusResult
	if err := o.validate(); err != nil {
		return res, fmt.Errorf("canbus: %w", err)
	}
	host := detectHost()
	for _, multi := range []bool{false, true} {
		m, err := runCANBusMode(ctx, o, multi)
		if err != nil {
			return res, fmt.Errorf("canbus %s: %w", m.Mode, err)
		}
		res.Modes = append(res.Modes, m)
	}
	host.finish()
	printCANBus(o, host, res)
	var plots []string
	if o.ResultsDir != "" {
		c := benchplot.Chart{Title: "canbus: write latency per request", XLabel: "percentile", YLabel: "ms", XNames: PercentileNames, LogY: true}
		for _, m := range res.Modes {
			s := benchplot.Series{Name: fmt.Sprintf("%s (%s points/s)", m.Mode, report.Int(int64(m.PointsPerS))), Y: m.WriteLatency.Values()}
			for i := range s.Y {
				s.X = append(s.X, float64(i))
			}
			c.Series = append(c.Series, s)
		}
		p, err := savePlot(o.Common, "canbus", "latency", c)
		if err != nil {
			return res, err
		}
		plots = append(plots, p)
	}
	return res, finishRecord(o.Common, Record{
		Workload: "canbus", Profile: o.Profile, Time: time.Now().UTC(), Commit: o.Commit, Machine: host,
		Config: map[string]any{"vehicles": o.Vehicles, "minutes": o.Minutes, "channels": len(workload.CANChannels()),
			"hz": canHz, "clients": o.Clients, "points_per_request": o.PointsPerRequest, "wal_sync": o.WALSync, "seed": o.Seed},
		Figures: res, Plots: plots,
		Published: map[string]string{
			"warp10_pi4_series_per_line_points_per_s":  "55000 (Warp 10, Raspberry Pi 4; other hardware)",
			"warp10_pi4_multi_field_rows_points_per_s": "300000 (Warp 10, Raspberry Pi 4; other hardware)",
		},
	})
}

// renderCANBus renders every vehicle's log as line protocol, per client.
func renderCANBus(o CANBusOptions, multi bool, startMs int64) ([][]lpBody, error) {
	g, err := workload.NewCANBus(workload.CANBusOptions{Vehicles: o.Vehicles, StartMs: startMs, Seed: o.Seed})
	if err != nil {
		return nil, err
	}
	chans := workload.CANChannels()
	rowsPerReq := max(1, o.PointsPerRequest/len(chans))
	total := o.Minutes * 60 * canHz
	perClient := make([][]lpBody, o.Clients)
	for v, req := range g.Requests(len(chans), rowsPerReq) {
		c := v * o.Clients / o.Vehicles
		tags := "can,vehicle=" + workload.VehicleID(v) + " "
		for done := 0; done < total; {
			n := min(rowsPerReq, total-done)
			req.Next(n)
			var b []byte
			var lines int64
			for i := range n {
				ts := req.Msg.Batches[0].TimestampsMs[i]
				for ch, batch := range req.Msg.Batches {
					if multi && ch > 0 {
						b = append(b, ',')
					} else {
						b = append(b, tags...)
					}
					b = append(b, chans[ch].Name...)
					b = append(b, '=')
					b = strconv.AppendFloat(b, batch.Values[i], 'f', -1, 64)
					if !multi {
						b = append(b, ' ')
						b = strconv.AppendInt(b, ts, 10)
						b = append(b, '\n')
						lines++
					}
				}
				if multi {
					b = append(b, ' ')
					b = strconv.AppendInt(b, ts, 10)
					b = append(b, '\n')
					lines++
				}
			}
			perClient[c] = append(perClient[c], lpBody{body: b, lines: lines, points: int64(n * len(chans))})
			done += n
		}
	}
	return perClient, nil
}

func runCANBusMode(ctx context.Context, o CANBusOptions, multi bool) (m CANBusMode, err error) {
	m.Mode = "series_per_line"
	if multi {
		m.Mode = "multi_field_rows"
	}
	span := int64(o.Minutes) * 60_000
	startMs := time.Now().Truncate(time.Minute).UnixMilli() - span
	o.Log().Info("canbus: rendering line protocol", "mode", m.Mode, "vehicles", o.Vehicles, "minutes", o.Minutes)
	perClient, err := renderCANBus(o, multi, startMs)
	if err != nil {
		return m, err
	}
	for _, bs := range perClient {
		for _, b := range bs {
			m.Bytes += int64(len(b.body))
		}
	}
	n, err := startNode(ctx, o.Common, "canbus")
	if err != nil {
		return m, err
	}
	failed := true
	defer func() {
		if serr := n.stop(failed); serr != nil && err == nil {
			err = serr
		}
	}()
	ws, err := writeLP(ctx, "http://"+n.httpAddr+"/write?db=can&precision=ms", perClient)
	if err != nil {
		return m, err
	}
	m.Lines, m.Points = ws.Lines, ws.Points
	m.Seconds = report.Round(ws.Elapsed.Seconds(), 2)
	m.PointsPerS = report.Round(float64(ws.Points)/ws.Elapsed.Seconds(), 0)
	m.MiBPerS = report.Round(float64(m.Bytes)/(1<<20)/ws.Elapsed.Seconds(), 1)
	m.WriteLatency = summarize(ws.Latencies, ws.Elapsed)
	if err := checkCANBus(ctx, n.grpcAddr, o, startMs); err != nil {
		return m, err
	}
	failed = false
	return m, nil
}

// checkCANBus requires every series, and every sample of the last
// vehicle's speed, to be there.
func checkCANBus(ctx context.Context, addr string, o CANBusOptions, startMs int64) error {
	conn, err := nodeclient.Dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	qc := tributaryv1.NewQueryServiceClient(conn)
	endMs := startMs + int64(o.Minutes)*60_000 - 1
	last, err := nodeclient.Query(ctx, qc, &tributaryv1.QueryRequest{
		Matchers: []*tributaryv1.Matcher{{Type: tributaryv1.Matcher_REGEX, Name: "__name__", Value: "can_.*"}},
		EndMs:    endMs, Mode: tributaryv1.QueryMode_QUERY_MODE_LAST_POINT})
	if err != nil {
		return err
	}
	if want := o.Vehicles * len(workload.CANChannels()); len(last.Series) != want {
		return fmt.Errorf("check: %d series stored, want %d", len(last.Series), want)
	}
	raw, err := nodeclient.Query(ctx, qc, &tributaryv1.QueryRequest{
		Matchers: []*tributaryv1.Matcher{{Name: "__name__", Value: "can_speed"}, {Name: "vehicle", Value: workload.VehicleID(o.Vehicles - 1)}},
		StartMs:  startMs, EndMs: endMs, Mode: tributaryv1.QueryMode_QUERY_MODE_RAW})
	if err != nil {
		return err
	}
	want := o.Minutes * 60 * canHz
	if len(raw.Series) != 1 || len(raw.Series[0].Values) != want {
		got := 0
		if len(raw.Series) > 0 {
			got = len(raw.Series[0].Values)
		}
		return fmt.Errorf("check: %s speed holds %d samples, want %d", workload.VehicleID(o.Vehicles-1), got, want)
	}
	return nil
}

func printCANBus(o CANBusOptions, host Host, r CANBusResult) {
	w := o.Out
	fmt.Fprintf(w, "canbus workload: %d vehicles × %d channels at %d Hz for %d minutes, line protocol over HTTP, %d clients, %s points a request\n",
		o.Vehicles, len(workload.CANChannels()), canHz, o.Minutes, o.Clients, report.Int(int64(o.PointsPerRequest)))
	fmt.Fprintf(w, "machine: %s\n\n", host)
	t := report.Table{Header: []string{"mode", "lines", "points", "MiB", "seconds", "points/s", "MiB/s", "p50 ms", "p99 ms", "published (Warp 10, Pi 4)"},
		RightAlign: []bool{false, true, true, true, true, true, true, true, true, true}}
	for _, m := range r.Modes {
		pub := "55,000"
		if m.Mode == "multi_field_rows" {
			pub = "300,000"
		}
		t.Add(m.Mode, report.Int(m.Lines), report.Int(m.Points), report.Float(float64(m.Bytes)/(1<<20), 1), report.Float(m.Seconds, 2),
			report.Int(int64(m.PointsPerS)), report.Float(m.MiBPerS, 1), report.Float(m.WriteLatency.P50Ms, 1), report.Float(m.WriteLatency.P99Ms, 1), pub)
	}
	t.Write(w)
	fmt.Fprintln(w, "\nevery series and every sample of one series were read back after each mode; the published figures are other hardware")
}
