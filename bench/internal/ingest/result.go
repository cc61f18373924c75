package ingest

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/tributarydb/tributary/bench/internal/diskio"
	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/workload"
)

// Targets are the goals for the sensor workload with 10,000 series,
// 10,000-point requests and WAL fsync before ack. They are printed next to
// the measured figures; missing one never fails the run.
var Targets = struct {
	PointsPerS           report.Target
	CPUSPerMillionPoints report.Target
	PeakRSSMiB           report.Target
	BytesPerPoint        report.Target
}{
	PointsPerS:           report.Target{Value: 3_000_000},
	CPUSPerMillionPoints: report.Target{Value: 0.3, AtMost: true},
	PeakRSSMiB:           report.Target{Value: 128, AtMost: true},
	BytesPerPoint:        report.Target{Value: 1.0, AtMost: true},
}

// Result is the outcome of one run; its JSON form is the last line the
// benchmark prints.
type Result struct {
	Workload                string `json:"workload"`
	Series                  int    `json:"series"`
	BatchPoints             int    `json:"batch_points"`
	SeriesPerBatch          int    `json:"series_per_batch"`
	PointsPerSeriesPerBatch int    `json:"points_per_series_per_batch"`
	IntervalMs              int64  `json:"interval_ms"`
	Clients                 int    `json:"clients"`
	WALSync                 string `json:"wal_sync"`

	Points   int64         `json:"points"`
	Requests int64         `json:"requests"`
	Duration report.Number `json:"duration_s"`

	// The four figures with targets.
	PointsPerS           report.Number `json:"points_per_s"`
	CPUSPerMillionPoints report.Number `json:"cpu_s_per_million_points"` // node CPU from load start through its final flush
	PeakRSSMiB           report.Number `json:"peak_rss_mib"`             // node peak RSS over its whole life
	BytesPerPoint        report.Number `json:"bytes_per_point"`          // SST bytes after full compaction / points

	diskio.PerPointResult

	WriteP50Ms report.Number `json:"write_p50_ms"`
	WriteP99Ms report.Number `json:"write_p99_ms"`

	// Node detail.
	CPUSPerMillionPointsLoad report.Number `json:"cpu_s_per_million_points_load"` // load window only
	NodeCPUS                 report.Number `json:"node_cpu_s"`                    // load start through exit
	NodeCores                report.Number `json:"node_cores"`                    // during the load window
	PeakRSSLoadMiB           report.Number `json:"peak_rss_load_mib"`             // VmHWM when the load ended
	StopS                    report.Number `json:"stop_s"`                        // SIGTERM to exit
	SSTBytes                 int64         `json:"sst_bytes"`
	CompactPoints            int64         `json:"compact_points"`
	CompactS                 report.Number `json:"compact_s"`
	DataDirBytes             int64         `json:"data_dir_bytes"` // after compaction, WAL included

	// Load generator detail (this process).
	GeneratorCPUS           report.Number `json:"generator_cpu_s"`
	GeneratorCores          report.Number `json:"generator_cores"`
	GeneratorRefillPointsPS report.Number `json:"generator_refill_points_per_s"`
	MachineCPUUtil          report.Number `json:"machine_cpu_util"`     // (node + generator) / (nproc × seconds)
	ClientWaitFraction      report.Number `json:"client_wait_fraction"` // time clients spent in Write calls

	report.Provenance
}

// measurement is everything a run measured, before derivation.
type measurement struct {
	opts          Options
	gen           *workload.Generator
	reqs          []*workload.Request
	clients       int
	stats         load.Stats
	before, after nodeproc.Usage
	exit          nodeproc.Exit
	compact       nodeproc.CompactResult
	dataBytes     int64
	disk          diskio.Figures
	selfCPU       time.Duration
	selfCPUErr    error
	machine       report.Machine
}

const mib = 1 << 20

func (m measurement) result() Result {
	secs := m.stats.Elapsed.Seconds()
	mpoints := float64(m.stats.Points) / 1e6
	perMillion := func(d time.Duration) report.Number {
		if m.stats.Points == 0 {
			return report.Number(math.NaN())
		}
		return report.Number(report.Round(d.Seconds()/mpoints, 4))
	}
	nodeLoadCPU := m.after.CPU - m.before.CPU
	nodeCPU := m.exit.CPU - m.before.CPU
	genCPU := report.Number(report.Round(m.selfCPU.Seconds(), 3))
	if m.selfCPUErr != nil {
		genCPU = report.Number(math.NaN())
	}
	lat := append([]time.Duration(nil), m.stats.Latencies...)
	ms := func(d time.Duration) report.Number {
		if len(lat) == 0 {
			return report.Number(math.NaN())
		}
		return report.Number(report.Round(float64(d)/float64(time.Millisecond), 3))
	}
	ratio := func(a, b float64) report.Number {
		if b == 0 || math.IsNaN(a) {
			return report.Number(math.NaN())
		}
		return report.Number(report.Round(a/b, 4))
	}
	r := Result{
		Workload:                m.gen.Name(),
		Series:                  m.gen.NumSeries(),
		SeriesPerBatch:          m.reqs[0].NumSeries(),
		PointsPerSeriesPerBatch: m.opts.PointsPerSeriesPerBatch,
		BatchPoints:             m.reqs[0].NumSeries() * m.opts.PointsPerSeriesPerBatch,
		IntervalMs:              m.gen.IntervalMs(),
		Clients:                 m.clients,
		WALSync:                 m.opts.WALSync,

		Points:   m.stats.Points,
		Requests: m.stats.Requests,
		Duration: report.Number(report.Round(secs, 3)),

		PointsPerS:           ratio(float64(m.stats.Points), secs),
		CPUSPerMillionPoints: perMillion(nodeCPU),
		PeakRSSMiB:           report.Number(report.Round(float64(max(m.after.HWMBytes, m.exit.MaxRSSBytes))/mib, 1)),
		BytesPerPoint:        ratio(float64(m.compact.SSTBytes), float64(m.stats.Points)),

		PerPointResult: m.disk.PerPoint(m.stats.Points),

		WriteP50Ms: ms(load.Percentile(lat, 0.50)),
		WriteP99Ms: ms(load.Percentile(lat, 0.99)),

		CPUSPerMillionPointsLoad: perMillion(nodeLoadCPU),
		NodeCPUS:                 report.Number(report.Round(nodeCPU.Seconds(), 3)),
		NodeCores:                ratio(nodeLoadCPU.Seconds(), secs),
		PeakRSSLoadMiB:           report.Number(report.Round(float64(m.after.HWMBytes)/mib, 1)),
		StopS:                    report.Number(report.Round(m.exit.StopDuration.Seconds(), 3)),
		SSTBytes:                 m.compact.SSTBytes,
		CompactPoints:            m.compact.Points,
		CompactS:                 report.Number(report.Round(m.compact.Elapsed.Seconds(), 3)),
		DataDirBytes:             m.dataBytes,

		GeneratorCPUS:           genCPU,
		GeneratorCores:          ratio(float64(genCPU), secs),
		GeneratorRefillPointsPS: ratio(float64(m.stats.Points), m.stats.FillTime.Seconds()),
		MachineCPUUtil:          ratio(nodeLoadCPU.Seconds()+float64(genCPU), secs*float64(m.machine.NProc)),
		ClientWaitFraction:      ratio(m.stats.WaitTime.Seconds(), secs*float64(m.clients)),

		Provenance: report.NewProvenance(map[string]float64{
			"points_per_s":             Targets.PointsPerS.Value,
			"cpu_s_per_million_points": Targets.CPUSPerMillionPoints.Value,
			"peak_rss_mib":             Targets.PeakRSSMiB.Value,
			"bytes_per_point":          Targets.BytesPerPoint.Value,
		}, m.opts.Commit, m.machine),
	}
	r.Notes = notes(r, m)
	return r
}

// notes explains what limited the run and anything that makes the figures
// not comparable with the targets.
func notes(r Result, m measurement) []string {
	var ns []string
	if m.stats.CaughtUp {
		ns = append(ns, fmt.Sprintf("the run ended after %.1f s instead of %v: the generated samples reached the wall clock (they start far enough back for %s points/s)",
			float64(r.Duration), m.opts.Duration, report.Int(ceilingPointsPerS)))
	}
	util, gen, node := float64(r.MachineCPUUtil), float64(r.GeneratorCores), float64(r.NodeCores)
	switch {
	case util >= 0.9:
		ns = append(ns, fmt.Sprintf("the machine was CPU-bound: the node used %.2f and the load generator %.2f of %d cores; the generator's CPU is CPU the node did not get, so points/s is a lower bound",
			node, gen, m.machine.NProc))
	case gen >= node:
		ns = append(ns, fmt.Sprintf("the load generator used more CPU (%.2f cores) than the node (%.2f): the generator, not the node, may be the limit", gen, node))
	case float64(r.ClientWaitFraction) >= 0.9:
		ns = append(ns, fmt.Sprintf("clients spent %.0f%% of their time waiting for acks while %.0f%% of the CPU was idle: the run was latency-bound (fsync, locking or queueing in the node set the pace, not CPU)",
			100*float64(r.ClientWaitFraction), 100*(1-util)))
	}
	if r.CompactPoints != r.Points {
		ns = append(ns, fmt.Sprintf("compact counted %s points, the node acknowledged %s", report.Int(r.CompactPoints), report.Int(r.Points)))
	}
	if r.Workload != "sensor" || r.Series != 10_000 || r.BatchPoints != 10_000 || r.WALSync != "always" {
		ns = append(ns, "the targets are set for the sensor workload with 10,000 series, 10,000-point requests and --wal-sync always")
	}
	return ns
}

// WriteReport prints the table for people and then, as the last line, the
// JSON form of r.
func WriteReport(w io.Writer, r Result) error {
	fmt.Fprintf(w, "tribench ingest: %s\n", describeArgs(r))
	fmt.Fprintf(w, "machine: %s; commit %s\n\n", r.Machine, r.Commit)

	tb := report.Table{Header: []string{"metric", "measured", "target", ""}, RightAlign: []bool{false, true, true, false}}
	tb.Add("workload", r.Workload, "", "")
	tb.Add("series", report.Int(int64(r.Series)), "", "")
	tb.Add("points", report.Int(r.Points), "", "")
	tb.Add("seconds", r.Duration.Text(2), "", "")
	tb.AddTarget("points/s", report.Whole(float64(r.PointsPerS)), Targets.PointsPerS, report.Whole, r.PointsPerS)
	tb.AddTarget("CPU-s per million points", r.CPUSPerMillionPoints.Text(3), Targets.CPUSPerMillionPoints, report.Decimals(2), r.CPUSPerMillionPoints)
	tb.AddTarget("peak RSS (MiB)", r.PeakRSSMiB.Text(1), Targets.PeakRSSMiB, report.Decimals(0), r.PeakRSSMiB)
	tb.AddTarget("bytes/point", r.BytesPerPoint.Text(3), Targets.BytesPerPoint, report.Decimals(1), r.BytesPerPoint)
	tb.Add(fmt.Sprintf("storage writes/point (load + %gs)", float64(r.SettleS)), r.StorageWriteBytesPerPoint.Text(3), "", "")
	tb.Add(fmt.Sprintf("data dir bytes/point %gs after the load", float64(r.SettleS)), r.DiskAtRestBytesPerPoint.Text(3), "", "")
	tb.Add("data dir bytes/point after a clean stop", r.DiskAfterStopBytesPerPoint.Text(3), "", "")
	tb.Add("write latency p50 (ms)", r.WriteP50Ms.Text(2), "", "")
	tb.Add("write latency p99 (ms)", r.WriteP99Ms.Text(2), "", "")
	if err := tb.Write(w); err != nil {
		return err
	}

	fmt.Fprintln(w)
	err := report.KeyValues(w, [][2]string{
		{"node CPU", fmt.Sprintf("%s s from load start through exit (%s CPU-s per million points in the load window alone); %s cores while loading",
			r.NodeCPUS.Text(2), r.CPUSPerMillionPointsLoad.Text(3), r.NodeCores.Text(2))},
		{"node memory", fmt.Sprintf("peak RSS %s MiB at the end of the load, %s MiB over its life (shutdown flush included)", r.PeakRSSLoadMiB.Text(1), r.PeakRSSMiB.Text(1))},
		{"node shutdown", fmt.Sprintf("exited %s s after SIGTERM", r.StopS.Text(2))},
		{"storage", fmt.Sprintf("%s SST bytes for %s points after a %s s full compaction; data dir %s bytes", report.Int(r.SSTBytes), report.Int(r.CompactPoints), r.CompactS.Text(2), report.Int(r.DataDirBytes))},
		{"load generator", fmt.Sprintf("%s cores (%s CPU-s), %s requests; refills requests at %s points/s; clients waited on the node %s%% of the time",
			r.GeneratorCores.Text(2), r.GeneratorCPUS.Text(2), report.Int(r.Requests), report.Whole(float64(r.GeneratorRefillPointsPS)), (100 * r.ClientWaitFraction).Text(0))},
		{"machine CPU", fmt.Sprintf("%s%% busy (node + generator, of %d cores)", (100 * r.MachineCPUUtil).Text(0), r.Machine.NProc)},
	})
	if err != nil {
		return err
	}
	return report.WriteNotesAndJSONLine(w, r.Notes, r)
}
