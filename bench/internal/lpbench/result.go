package lpbench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/diskio"
	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/workload"
)

// Targets are the goals for the default settings. They are printed
// next to the measured figures; missing one never fails the run.
var Targets = struct {
	PointsPerS           report.Target
	CPUSPerMillionPoints report.Target
	BytesPerPoint        report.Target
	PeakRSSMiB           report.Target
	PromQLP50Ms          report.Target
	StorageWrite         report.Target
	DiskAtRest           report.Target
	DiskAfterStop        report.Target
}{
	PointsPerS:           report.Target{Value: 2_500_000},
	CPUSPerMillionPoints: report.Target{Value: 0.33, AtMost: true},
	BytesPerPoint:        report.Target{Value: 0.45, AtMost: true},
	PeakRSSMiB:           report.Target{Value: 128, AtMost: true},
	PromQLP50Ms:          report.Target{Value: 0.20, AtMost: true},
	StorageWrite:         report.Target{Value: 1.5, AtMost: true},
	DiskAtRest:           report.Target{Value: 0.40, AtMost: true},
	DiskAfterStop:        report.Target{Value: 0.40, AtMost: true},
}

// Result is the outcome of one run; its JSON form is the last line the
// benchmark prints. The five figures with targets come first.
type Result struct {
	PointsPerS           report.Number `json:"points_per_s"`
	CPUSPerMillionPoints report.Number `json:"cpu_s_per_million_points"`    // node CPU from write start through its exit after SIGTERM
	BytesPerPoint        report.Number `json:"bytes_per_point"`             // SST bytes after full compaction / points
	PeakRSSMiB           report.Number `json:"peak_rss_mib"`                // node VmHWM, start through exit of the write phase
	PromQLP50Ms          report.Number `json:"promql_1h_max_by_min_p50_ms"` // client round trip

	diskio.PerPointResult

	PromQLP99Ms           report.Number `json:"promql_1h_max_by_min_p99_ms"`
	PingP50Ms             report.Number `json:"http_ping_p50_ms"` // GET /ping round trip: the floor under the query latency
	QueriesPerS           report.Number `json:"queries_per_s"`
	QueryNodeCPUMsPerQ    report.Number `json:"query_node_cpu_ms_per_query"` // node CPU over warm-up and timed queries
	PeakRSSQueryMiB       report.Number `json:"peak_rss_query_mib"`          // node VmHWM, query phase through exit
	Queries               int64         `json:"queries"`
	WarmupQueries         int           `json:"warmup_queries"`
	QueriesChecked        int64         `json:"queries_checked"`
	QueriesWrong          int64         `json:"queries_wrong"`
	QueryClients          int           `json:"query_clients"`
	Hosts                 int           `json:"hosts"`
	Series                int           `json:"series"`
	RowsPerHost           int           `json:"rows_per_host"`
	IntervalS             float64       `json:"interval_s"`
	Lines                 int64         `json:"lines"`
	Points                int64         `json:"points"` // acknowledged
	BatchLines            int           `json:"batch_lines"`
	Clients               int           `json:"clients"`
	Requests              int64         `json:"requests"`
	DB                    string        `json:"db"`
	Precision             string        `json:"precision"`
	WALSync               string        `json:"wal_sync"`
	WriteS                report.Number `json:"write_s"`
	WriteP50Ms            report.Number `json:"write_p50_ms"`
	WriteP99Ms            report.Number `json:"write_p99_ms"`
	WireMiBPerS           report.Number `json:"wire_mib_per_s"`
	BytesPerLine          report.Number `json:"wire_bytes_per_line"`
	CPUSPerMillionPtsLoad report.Number `json:"cpu_s_per_million_points_load"` // write window only
	NodeCPUS              report.Number `json:"node_cpu_s"`                    // write start through exit
	NodeCores             report.Number `json:"node_cores"`                    // during the write window
	PeakRSSLoadMiB        report.Number `json:"peak_rss_load_mib"`             // VmHWM when the writes ended
	StopS                 report.Number `json:"stop_s"`
	SSTBytes              int64         `json:"sst_bytes"`
	CompactPoints         int64         `json:"compact_points"`
	CompactS              report.Number `json:"compact_s"`
	GenerateS             report.Number `json:"generate_s"` // rendering every body before the node starts
	ClientCPUS            report.Number `json:"client_cpu_s"`
	ClientCores           report.Number `json:"client_cores"`
	OtherCores            report.Number `json:"other_cores"`      // the rest of the machine during the write window
	MachineCPUUtil        report.Number `json:"machine_cpu_util"` // whole machine during the write window
	ClientWaitFraction    report.Number `json:"client_wait_fraction"`

	report.Provenance

	TSBSFigures
	InfluxQLFigures
}

// measurement is everything a run measured, before derivation.
type measurement struct {
	opts            Options
	gen             *workload.TSBSCPU
	generate        time.Duration
	bodyBytes       int64
	plannedRequests int

	write         writeStats
	before, after nodeproc.Usage
	exit          nodeproc.Exit
	hwm           int64 // VmHWM sampled until exit
	disk          diskio.Figures
	compact       nodeproc.CompactResult
	selfCPU       time.Duration
	selfCPUErr    error
	machineBusy   time.Duration
	machineTotal  time.Duration
	machineErr    error

	pings           []time.Duration // GET /ping round trips, nil if not measured
	query           queryStats
	qBefore, qAfter nodeproc.Usage
	qExit           nodeproc.Exit
	qHWM            int64
	tsbs            map[string]timedStats  // TSBS query types by name
	influx          map[string]influxStats // the same through InfluxQL, nil if not run
	influxNote      string                 // why the InfluxQL phase did not run, if it did not

	machine report.Machine
}

const mib = 1 << 20

func (m measurement) result() Result {
	nan := report.Number(math.NaN())
	round := func(x float64, d int) report.Number { return report.Number(report.Round(x, d)) }
	ratio := func(a, b float64, d int) report.Number {
		if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
			return nan
		}
		return round(a/b, d)
	}
	ms := func(ds []time.Duration, q float64) report.Number {
		if len(ds) == 0 {
			return nan
		}
		return round(float64(load.Percentile(ds, q))/float64(time.Millisecond), 4)
	}
	secs := m.write.Elapsed.Seconds()
	points := m.write.Lines * workload.TSBSCPUFields
	mpoints := float64(points) / 1e6
	nodeLoadCPU := (m.after.CPU - m.before.CPU).Seconds()
	nodeCPU := (m.exit.CPU - m.before.CPU).Seconds()
	clientCPU := m.selfCPU.Seconds()
	if m.selfCPUErr != nil {
		clientCPU = math.NaN()
	}
	other, util := math.NaN(), math.NaN()
	if m.machineErr == nil && m.machineTotal > 0 {
		util = m.machineBusy.Seconds() / m.machineTotal.Seconds()
		other = max(0, m.machineBusy.Seconds()-nodeLoadCPU-clientCPU) / secs
	}
	wlat := append([]time.Duration(nil), m.write.Latencies...)
	qlat := append([]time.Duration(nil), m.query.Latencies...)
	qCount := float64(m.query.Queries) + float64(m.query.Warmup)

	r := Result{
		PointsPerS:           ratio(float64(points), secs, 0),
		CPUSPerMillionPoints: ratio(nodeCPU, mpoints, 4),
		BytesPerPoint:        ratio(float64(m.compact.SSTBytes), float64(points), 4),
		PeakRSSMiB:           round(float64(max(m.after.HWMBytes, m.hwm))/mib, 1),
		PromQLP50Ms:          ms(qlat, 0.50),

		PerPointResult: m.disk.PerPoint(points),

		PromQLP99Ms:        ms(qlat, 0.99),
		PingP50Ms:          ms(append([]time.Duration(nil), m.pings...), 0.50),
		QueriesPerS:        ratio(float64(m.query.Queries), m.query.Elapsed.Seconds(), 0),
		QueryNodeCPUMsPerQ: ratio((m.qAfter.CPU-m.qBefore.CPU).Seconds()*1e3, qCount, 4),
		PeakRSSQueryMiB:    round(float64(max(m.qAfter.HWMBytes, m.qHWM))/mib, 1),
		Queries:            m.query.Queries,
		WarmupQueries:      m.query.Warmup,
		QueriesChecked:     m.query.Checked,
		QueriesWrong:       m.query.Wrong,
		QueryClients:       m.opts.QueryClients,

		Hosts:        m.gen.Hosts(),
		Series:       m.gen.Hosts() * workload.TSBSCPUFields,
		RowsPerHost:  m.gen.Rows(),
		IntervalS:    time.Duration(m.gen.IntervalNs()).Seconds(),
		Lines:        m.write.Lines,
		Points:       points,
		BatchLines:   m.opts.BatchLines,
		Clients:      m.opts.Clients,
		Requests:     m.write.Requests,
		DB:           m.opts.DB,
		Precision:    "ns",
		WALSync:      m.opts.WALSync,
		WriteS:       round(secs, 3),
		WriteP50Ms:   ms(wlat, 0.50),
		WriteP99Ms:   ms(wlat, 0.99),
		WireMiBPerS:  ratio(float64(m.bodyBytes)/mib, secs, 1),
		BytesPerLine: ratio(float64(m.bodyBytes), float64(m.gen.Lines()), 1),

		CPUSPerMillionPtsLoad: ratio(nodeLoadCPU, mpoints, 4),
		NodeCPUS:              round(nodeCPU, 3),
		NodeCores:             ratio(nodeLoadCPU, secs, 3),
		PeakRSSLoadMiB:        round(float64(m.after.HWMBytes)/mib, 1),
		StopS:                 round(m.exit.StopDuration.Seconds(), 3),
		SSTBytes:              m.compact.SSTBytes,
		CompactPoints:         m.compact.Points,
		CompactS:              round(m.compact.Elapsed.Seconds(), 3),
		GenerateS:             round(m.generate.Seconds(), 3),
		ClientCPUS:            round(clientCPU, 3),
		ClientCores:           ratio(clientCPU, secs, 3),
		OtherCores:            round(other, 3),
		MachineCPUUtil:        round(util, 3),
		ClientWaitFraction:    ratio(m.write.WaitTime.Seconds(), secs*float64(m.opts.Clients), 3),

		Provenance: report.NewProvenance(map[string]float64{
			"points_per_s":                    Targets.PointsPerS.Value,
			"cpu_s_per_million_points":        Targets.CPUSPerMillionPoints.Value,
			"bytes_per_point":                 Targets.BytesPerPoint.Value,
			"peak_rss_mib":                    Targets.PeakRSSMiB.Value,
			"promql_1h_max_by_min_p50_ms":     Targets.PromQLP50Ms.Value,
			"storage_write_bytes_per_point":   Targets.StorageWrite.Value,
			"disk_at_rest_bytes_per_point":    Targets.DiskAtRest.Value,
			"disk_after_stop_bytes_per_point": Targets.DiskAfterStop.Value,
		}, m.opts.Commit, m.machine),
	}
	r.TSBSFigures = tsbsFigures(m.tsbs)
	r.InfluxQLFigures = influxFigures(m.influx)
	tsbsTargets, _ := tsbsTargetsFor(m.opts.Hosts, m.opts.Span)
	addTSBSTargets(r.Targets, tsbsTargets)
	r.Notes = notes(r, m)
	return r
}

// notes explains what limited the run and anything that makes the figures
// not comparable with the targets.
func notes(r Result, m measurement) []string {
	ns := []string{}
	if r.QueriesWrong > 0 {
		ns = append(ns, fmt.Sprintf("%d of %d query answers did not match the written data", r.QueriesWrong, r.QueriesChecked))
	}
	if r.CompactPoints != r.Points {
		ns = append(ns, fmt.Sprintf("compact counted %s points, the node acknowledged %s", report.Int(r.CompactPoints), report.Int(r.Points)))
	}
	if other := float64(r.OtherCores); other >= 0.25 {
		ns = append(ns, fmt.Sprintf("other processes used %.2f cores during the writes: the node had less of the machine than it would alone", other))
	}
	util, client, node := float64(r.MachineCPUUtil), float64(r.ClientCores), float64(r.NodeCores)
	switch {
	case util >= 0.9:
		ns = append(ns, fmt.Sprintf("the machine was CPU-bound during the writes: the node used %.2f and the clients %.2f of %d cores, so points/s is a lower bound",
			node, client, m.machine.NProc))
	case client >= node:
		ns = append(ns, fmt.Sprintf("the clients used more CPU (%.2f cores) than the node (%.2f): the clients, not the node, may be the limit", client, node))
	}
	if m.influxNote != "" {
		ns = append(ns, m.influxNote)
	}
	if float64(r.PeakRSSQueryMiB) > float64(r.PeakRSSMiB) {
		ns = append(ns, fmt.Sprintf("the node's peak RSS while answering queries (%.1f MiB) is above its write-phase peak", float64(r.PeakRSSQueryMiB)))
	}
	d := DefaultOptions()
	o := m.opts
	if o.Hosts != d.Hosts || o.Span != d.Span || o.Interval != d.Interval || o.BatchLines != d.BatchLines ||
		o.Clients != d.Clients || o.QueryClients != d.QueryClients || o.WALSync != d.WALSync {
		note := "the targets are set for 100 hosts, one day at 10 s, 10,000-line requests, 2 write and 2 query clients and --wal-sync always"
		if _, big := tsbsTargetsFor(o.Hosts, o.Span); big && o.Interval == d.Interval && o.QueryClients == d.QueryClients {
			note = "the TSBS query types' targets are those of 1,000 hosts over 12 h; the others are set for 100 hosts, one day at 10 s, 10,000-line requests, 2 write and 2 query clients and --wal-sync always"
		}
		ns = append(ns, note)
	}
	return ns
}

// WriteReport prints the table for people and then, as the last line, the
// JSON form of r.
func WriteReport(w io.Writer, r Result) error {
	fmt.Fprintf(w, "tribench lp: %s\n", describe(r))
	fmt.Fprintf(w, "machine: %s; commit %s\n\n", r.Machine, r.Commit)

	tb := report.Table{Header: []string{"figure", "measured", "target", "met?"}, RightAlign: []bool{false, true, true, false}}
	tb.AddTarget("points/s (HTTP line protocol)", report.Whole(float64(r.PointsPerS)), Targets.PointsPerS, report.Whole, r.PointsPerS)
	tb.AddTarget("node CPU-s per million points", r.CPUSPerMillionPoints.Text(3), Targets.CPUSPerMillionPoints, report.Decimals(2), r.CPUSPerMillionPoints)
	tb.AddTarget("bytes/point at rest (compacted)", r.BytesPerPoint.Text(3), Targets.BytesPerPoint, report.Decimals(2), r.BytesPerPoint)
	tb.AddTarget(fmt.Sprintf("storage writes/point (write_bytes, load + %gs)", float64(r.SettleS)), r.StorageWriteBytesPerPoint.Text(3), Targets.StorageWrite, report.Decimals(2), r.StorageWriteBytesPerPoint)
	tb.AddTarget(fmt.Sprintf("data dir bytes/point %gs after the load", float64(r.SettleS)), r.DiskAtRestBytesPerPoint.Text(3), Targets.DiskAtRest, report.Decimals(2), r.DiskAtRestBytesPerPoint)
	tb.AddTarget("data dir bytes/point after a clean stop", r.DiskAfterStopBytesPerPoint.Text(3), Targets.DiskAfterStop, report.Decimals(2), r.DiskAfterStopBytesPerPoint)
	tb.AddTarget("node peak RSS (MiB)", r.PeakRSSMiB.Text(1), Targets.PeakRSSMiB, report.Decimals(0), r.PeakRSSMiB)
	tb.AddTarget("PromQL 1h max by minute p50 (ms)", r.PromQLP50Ms.Text(3), Targets.PromQLP50Ms, report.Decimals(2), r.PromQLP50Ms)
	tb.Add("PromQL 1h max by minute p99 (ms)", r.PromQLP99Ms.Text(3), "", "")
	tb.Add("HTTP round trip floor, GET /ping p50 (ms)", r.PingP50Ms.Text(3), "", "")
	tb.Add("write request p50 / p99 (ms)", r.WriteP50Ms.Text(1)+" / "+r.WriteP99Ms.Text(1), "", "")
	if err := tb.Write(w); err != nil {
		return err
	}

	fmt.Fprintln(w)
	err := report.KeyValues(w, [][2]string{
		{"writes", fmt.Sprintf("%s points (%s lines, %s series) in %s s; %s requests; %s MiB/s of line protocol (%s bytes a line)",
			report.Int(r.Points), report.Int(r.Lines), report.Int(int64(r.Series)), r.WriteS.Text(2), report.Int(r.Requests), r.WireMiBPerS.Text(1), r.BytesPerLine.Text(0))},
		{"node CPU", fmt.Sprintf("%s s from the first write through exit (%s CPU-s per million points in the write window alone); %s cores while writing",
			r.NodeCPUS.Text(2), r.CPUSPerMillionPtsLoad.Text(3), r.NodeCores.Text(2))},
		{"node memory", fmt.Sprintf("peak RSS %s MiB when the writes ended, %s MiB through exit; %s MiB while answering queries",
			r.PeakRSSLoadMiB.Text(1), r.PeakRSSMiB.Text(1), r.PeakRSSQueryMiB.Text(1))},
		{"storage", fmt.Sprintf("%s SST bytes for %s points after a %s s full compaction; node exited %s s after SIGTERM",
			report.Int(r.SSTBytes), report.Int(r.CompactPoints), r.CompactS.Text(2), r.StopS.Text(2))},
		{"queries", fmt.Sprintf("%s timed after %d warm-up, %s/s from %d clients; %s node CPU-ms a query; %d of %d answers matched the data",
			report.Int(r.Queries), r.WarmupQueries, report.Whole(float64(r.QueriesPerS)), r.QueryClients, r.QueryNodeCPUMsPerQ.Text(3),
			r.QueriesChecked-r.QueriesWrong, r.QueriesChecked)},
		{"clients", fmt.Sprintf("rendered every body in %s s before the node started; %s cores while writing; waited on the node %s%% of the time",
			r.GenerateS.Text(2), r.ClientCores.Text(2), (100 * r.ClientWaitFraction).Text(0))},
		{"machine CPU", fmt.Sprintf("%s%% busy while writing (of %d cores); other processes %s cores", (100 * r.MachineCPUUtil).Text(0), r.Machine.NProc, r.OtherCores.Text(2))},
	})
	if err != nil {
		return err
	}
	tsbsTargets, _ := tsbsTargetsFor(r.Hosts, time.Duration(float64(r.RowsPerHost)*r.IntervalS*float64(time.Second)))
	if err := writeTSBSTable(w, r.TSBSFigures, tsbsTargets); err != nil {
		return err
	}
	if err := writeInfluxTable(w, r.InfluxQLFigures, r.TSBSFigures, r.QueryClients); err != nil {
		return err
	}
	return report.WriteNotesAndJSONLine(w, r.Notes, r)
}

// describe renders the run's settings for the heading.
func describe(r Result) string {
	parts := []string{
		fmt.Sprintf("TSBS cpu-only, %d hosts × %d rows every %gs", r.Hosts, r.RowsPerHost, r.IntervalS),
		fmt.Sprintf("%s-line requests to /write?db=%s&precision=%s from %d clients", report.Int(int64(r.BatchLines)), r.DB, r.Precision, r.Clients),
		fmt.Sprintf("--wal-sync %s", r.WALSync),
		fmt.Sprintf("%d query clients", r.QueryClients),
	}
	return strings.Join(parts, ", ")
}
