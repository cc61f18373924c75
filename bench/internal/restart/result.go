package restart

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/workload"
)

// Targets are the goals, printed next to the measured figures;
// missing one never fails the run.
var Targets = struct {
	// ReadyS: ready to serve within 10 s of a restart with a WAL of
	// DefaultWALMiB.
	ReadyS report.Target
}{
	ReadyS: report.Target{Value: 10, AtMost: true},
}

// restartFigures is what one restart measured.
type restartFigures struct {
	// Ready is the time from the process's start to its ready line.
	Ready time.Duration
	// CPU is the node's user plus system time by then.
	CPU time.Duration
	// PeakRSSBytes is the node's VmHWM once it was ready.
	PeakRSSBytes int64
	// OtherCores is the CPU the rest of the machine used meanwhile (other
	// processes, and kernel threads, some of them working for the node), in
	// cores, or NaN where it could not be read.
	OtherCores float64
	// Opened is what the node logged about opening its data directory;
	// OpenedOK is false when it logged nothing readable.
	Opened   nodeOpened
	OpenedOK bool
}

// measurement is everything a run measured, before derivation.
type measurement struct {
	opts    Options
	gen     *workload.Generator
	clients int
	stats   load.Stats
	// headSamplesAtKill is the node's head_samples status just before the
	// crash, or -1 when the status call failed.
	headSamplesAtKill int64
	wal               walSize
	bigHead, dflt     restartFigures
	verify            verification
	machine           report.Machine
}

const mib = 1 << 20

// Result is the outcome of one run; its JSON form is the last line the
// benchmark prints.
type Result struct {
	Workload   string `json:"workload"`
	Series     int    `json:"series"`
	IntervalMs int64  `json:"interval_ms"`
	Clients    int    `json:"clients"`
	WALSync    string `json:"wal_sync"`
	// BigHeadArgs are the node flags of the load and restart a; restart b
	// runs without them.
	BigHeadArgs []string `json:"big_head_args"`

	WALTargetMiB    report.Number `json:"wal_target_mib"`
	WALMiB          report.Number `json:"wal_mib"` // *.seg files after the crash
	WALBytes        int64         `json:"wal_bytes"`
	WALSegments     int           `json:"wal_segments"`
	WALPoints       int64         `json:"wal_points"` // acknowledged points, all in the WAL
	WALBytesPerPt   report.Number `json:"wal_bytes_per_point"`
	LoadS           report.Number `json:"load_s"`
	LoadPointsPerS  report.Number `json:"load_points_per_s"`
	HeadSamplesKill int64         `json:"head_samples_at_kill"` // -1: unknown

	// The figure with the target: the worse of the two restarts.
	RestartReadyS report.Number `json:"restart_ready_s"`

	RestartReadyBigHeadS     report.Number `json:"restart_ready_big_head_s"`
	RestartPeakRSSMiBBigHead report.Number `json:"restart_peak_rss_mib_big_head"`
	RestartCPUSBigHead       report.Number `json:"restart_cpu_s_big_head"`
	RestartOtherCoresBigHead report.Number `json:"restart_other_cores_big_head"`
	NodeOpenSBigHead         report.Number `json:"node_open_s_big_head"`
	ReplayedPointsBigHead    int64         `json:"replayed_points_big_head"` // -1: not logged
	RestartReadyDefaultS     report.Number `json:"restart_ready_default_s"`
	RestartPeakRSSMiBDefault report.Number `json:"restart_peak_rss_mib_default"`
	RestartCPUSDefault       report.Number `json:"restart_cpu_s_default"`
	RestartOtherCoresDefault report.Number `json:"restart_other_cores_default"`
	NodeOpenSDefault         report.Number `json:"node_open_s_default"`
	ReplayedPointsDefault    int64         `json:"replayed_points_default"` // -1: not logged
	VerifiedPoints           int64         `json:"verified_points"`
	VerifiedSeries           int           `json:"verified_series"`
	VerifyProblemSeries      int           `json:"verify_problem_series"`
	VerifyS                  report.Number `json:"verify_s"`

	report.Provenance
}

func (m measurement) result() Result {
	secs := func(d time.Duration, decimals int) report.Number {
		return report.Number(report.Round(d.Seconds(), decimals))
	}
	rssMiB := func(b int64) report.Number { return report.Number(report.Round(float64(b)/mib, 1)) }
	cores := func(x float64) report.Number { return report.Number(report.Round(x, 2)) }
	opened := func(f restartFigures) (report.Number, int64) {
		if !f.OpenedOK {
			return report.Number(math.NaN()), -1
		}
		return secs(f.Opened.Took, 3), f.Opened.ReplayedPoints
	}
	ratio := func(a, b float64, decimals int) report.Number {
		if b == 0 {
			return report.Number(math.NaN())
		}
		return report.Number(report.Round(a/b, decimals))
	}
	openA, replayedA := opened(m.bigHead)
	openB, replayedB := opened(m.dflt)
	r := Result{
		Workload:    m.gen.Name(),
		Series:      m.gen.NumSeries(),
		IntervalMs:  m.gen.IntervalMs(),
		Clients:     m.clients,
		WALSync:     "always",
		BigHeadArgs: BigHeadArgs,

		WALTargetMiB:    report.Number(report.Round(float64(m.opts.WALBytes)/mib, 2)),
		WALMiB:          report.Number(report.Round(float64(m.wal.Bytes)/mib, 1)),
		WALBytes:        m.wal.Bytes,
		WALSegments:     m.wal.Segments,
		WALPoints:       m.stats.Points,
		WALBytesPerPt:   ratio(float64(m.wal.Bytes), float64(m.stats.Points), 2),
		LoadS:           secs(m.stats.Elapsed, 2),
		LoadPointsPerS:  ratio(float64(m.stats.Points), m.stats.Elapsed.Seconds(), 0),
		HeadSamplesKill: m.headSamplesAtKill,

		RestartReadyS: secs(max(m.bigHead.Ready, m.dflt.Ready), 3),

		RestartReadyBigHeadS:     secs(m.bigHead.Ready, 3),
		RestartPeakRSSMiBBigHead: rssMiB(m.bigHead.PeakRSSBytes),
		RestartCPUSBigHead:       secs(m.bigHead.CPU, 2),
		RestartOtherCoresBigHead: cores(m.bigHead.OtherCores),
		NodeOpenSBigHead:         openA,
		ReplayedPointsBigHead:    replayedA,
		RestartReadyDefaultS:     secs(m.dflt.Ready, 3),
		RestartPeakRSSMiBDefault: rssMiB(m.dflt.PeakRSSBytes),
		RestartCPUSDefault:       secs(m.dflt.CPU, 2),
		RestartOtherCoresDefault: cores(m.dflt.OtherCores),
		NodeOpenSDefault:         openB,
		ReplayedPointsDefault:    replayedB,
		VerifiedPoints:           m.verify.Points,
		VerifiedSeries:           m.verify.Series,
		VerifyProblemSeries:      m.verify.NumProblems,
		VerifyS:                  secs(m.verify.Elapsed, 2),

		Provenance: report.NewProvenance(map[string]float64{"restart_ready_s": Targets.ReadyS.Value}, m.opts.Commit, m.machine),
	}
	r.Notes = notes(r, m)
	return r
}

// contendedCores is how much CPU the rest of the machine may take during a
// restart before the figures are called contended. Restarts shorter than
// contendedMinReady are not judged: /proc/stat counts in 10 ms ticks, too
// coarse for them.
const (
	contendedCores    = 0.25
	contendedMinReady = time.Second
)

// notes explains anything that makes the figures not comparable with the
// target, or not what they seem.
func notes(r Result, m measurement) []string {
	ns := []string{} // [] rather than null in the JSON line
	if m.verify.NumProblems > 0 {
		ns = append(ns, fmt.Sprintf("LOST POINTS: %d series differ from what the node acknowledged; the node answered %s of %s points",
			m.verify.NumProblems, report.Int(m.verify.Points), report.Int(r.WALPoints)))
	}
	if m.headSamplesAtKill >= 0 && m.headSamplesAtKill != m.stats.Points {
		ns = append(ns, fmt.Sprintf("the node's head held %s points at the crash, not the %s acknowledged: some were flushed to RocksDB, so the WAL did not hold them all",
			report.Int(m.headSamplesAtKill), report.Int(m.stats.Points)))
	}
	if m.bigHead.OpenedOK && m.bigHead.Opened.ReplayedPoints != m.stats.Points {
		ns = append(ns, fmt.Sprintf("restart a replayed %s points, not the %s acknowledged",
			report.Int(m.bigHead.Opened.ReplayedPoints), report.Int(m.stats.Points)))
	}
	var busy []string
	for _, x := range []struct {
		name string
		f    restartFigures
	}{{"a", m.bigHead}, {"b", m.dflt}} {
		if x.f.OtherCores >= contendedCores && x.f.Ready >= contendedMinReady {
			busy = append(busy, fmt.Sprintf("%.2f cores during restart %s", x.f.OtherCores, x.name))
		}
	}
	if len(busy) > 0 {
		ns = append(ns, fmt.Sprintf("the rest of the machine (other processes and kernel threads) used %s (of %d): the restart times may be upper bounds",
			strings.Join(busy, " and "), m.machine.NProc))
	}
	if r.WALTargetMiB != DefaultWALMiB {
		ns = append(ns, fmt.Sprintf("the target is set for a %d MiB WAL", DefaultWALMiB))
	}
	return ns
}

// WriteReport prints the table for people and then, as the last line, the
// JSON form of r.
func WriteReport(w io.Writer, r Result) error {
	fmt.Fprintf(w, "tribench restart: %s workload, %s series at %s, %d clients, --wal-sync %s; crash with a %s MiB WAL, restart twice\n",
		r.Workload, report.Int(int64(r.Series)), time.Duration(r.IntervalMs)*time.Millisecond, r.Clients, r.WALSync, strconv.FormatFloat(float64(r.WALTargetMiB), 'f', -1, 64))
	fmt.Fprintf(w, "machine: %s; commit %s\n\n", r.Machine, r.Commit)

	tb := report.Table{Header: []string{"metric", "measured", "target", ""}, RightAlign: []bool{false, true, true, false}}
	tb.Add("WAL (MiB)", r.WALMiB.Text(1), "", "")
	tb.Add("points in WAL", report.Int(r.WALPoints), "", "")
	tb.AddTarget("a. big head: ready after restart (s)", r.RestartReadyBigHeadS.Text(2), Targets.ReadyS, report.Decimals(0), r.RestartReadyBigHeadS)
	tb.Add("a. big head: peak RSS (MiB)", r.RestartPeakRSSMiBBigHead.Text(1), "", "")
	tb.AddTarget("b. default flags: ready after restart (s)", r.RestartReadyDefaultS.Text(2), Targets.ReadyS, report.Decimals(0), r.RestartReadyDefaultS)
	tb.Add("b. default flags: peak RSS (MiB)", r.RestartPeakRSSMiBDefault.Text(1), "", "")
	tb.AddTarget("worst ready after restart (s)", r.RestartReadyS.Text(2), Targets.ReadyS, report.Decimals(0), r.RestartReadyS)
	if err := tb.Write(w); err != nil {
		return err
	}

	fmt.Fprintln(w)
	openedText := func(open report.Number, replayed int64) string {
		if replayed < 0 {
			return "the node logged no replay figures"
		}
		return fmt.Sprintf("the node replayed %s points and opened in %s s", report.Int(replayed), open.Text(2))
	}
	otherText := func(x report.Number) string {
		if math.IsNaN(float64(x)) {
			return "the rest of the machine's CPU unknown"
		}
		return fmt.Sprintf("the rest of the machine used %s cores", x.Text(2))
	}
	err := report.KeyValues(w, [][2]string{
		{"load", fmt.Sprintf("%s points in %s s (%s points/s) before the crash; WAL %s bytes in %d segments, %s bytes/point; node head held %s points",
			report.Int(r.WALPoints), r.LoadS.Text(1), report.Whole(float64(r.LoadPointsPerS)), report.Int(r.WALBytes), r.WALSegments, r.WALBytesPerPt.Text(2), headText(r.HeadSamplesKill))},
		{"a. big head", fmt.Sprintf("%s; %s; %s CPU-s to ready; %s", strings.Join(r.BigHeadArgs, " "),
			openedText(r.NodeOpenSBigHead, r.ReplayedPointsBigHead), r.RestartCPUSBigHead.Text(2), otherText(r.RestartOtherCoresBigHead))},
		{"b. default flags", fmt.Sprintf("head bounded at 32 MiB, replay flushes to RocksDB; %s; %s CPU-s to ready; %s",
			openedText(r.NodeOpenSDefault, r.ReplayedPointsDefault), r.RestartCPUSDefault.Text(2), otherText(r.RestartOtherCoresDefault))},
		{"verification", fmt.Sprintf("raw queries after b answered %s of %s acknowledged points in %s series in %s s; %d series differ",
			report.Int(r.VerifiedPoints), report.Int(r.WALPoints), report.Int(int64(r.VerifiedSeries)), r.VerifyS.Text(1), r.VerifyProblemSeries)},
	})
	if err != nil {
		return err
	}
	return report.WriteNotesAndJSONLine(w, r.Notes, r)
}

func headText(n int64) string {
	if n < 0 {
		return "an unknown number of"
	}
	return report.Int(n)
}
