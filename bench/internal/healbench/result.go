package healbench

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
)

// The targets (bench uses dead-after 30 s: replaced within 90 s).
var (
	targetAckPauseS     = report.Target{Value: 3, AtMost: true}
	targetRestoredS     = report.Target{Value: 600, AtMost: true}
	targetRereplicateMi = report.Target{Value: 50}
)

// measurement is what the phases measured, before it becomes a Result.
type measurement struct {
	machine  report.Machine
	measured bool // the fault was healed; the report is worth printing

	loadBefore, loadAtKill, loadAtRestored, loadAfter string

	historyPoints     int64
	historyWrite      time.Duration
	historyReplicated time.Duration
	loadStarted       time.Time
	loadStopped       time.Time
	failedWrites      int
	failedScrapes     int

	ackPause     time.Duration
	ackPauseEdge string
	restarted    time.Duration // kill → the restarted coordinator was ready
	replaced     time.Duration
	restored     time.Duration
	restoredAt   time.Time
	settled      time.Duration

	copiedBytes   float64
	victimLogFrom int64     // the restarted coordinator's log offset at its start
	copies        []copyLog // the copies it logged until history_restored
	firstCopy     time.Time // the last sample before the first copy ran
	lastNoCopy    time.Time
	lastCopy      time.Time

	probes, probeErrors, flagged, falseAlarms, wrong int
	wrongSamples                                     []string

	replicaChecks, frontChecks      int
	lost, duplicated                int64
	wrongReplicaAnswers, wrongFinal int

	restoreCmd bool
	restore    *edgeRestore // nil: not measured
}

// Result is the JSON line: the figures first.
type Result struct {
	AckPauseS           report.Number `json:"ack_pause_s"`
	ReplacedS           report.Number `json:"replaced_s"`
	HistoryRestoredS    report.Number `json:"history_restored_s"`
	RereplicateMiBPerS  report.Number `json:"rereplicate_mib_per_s"`
	EdgeRestoreMiBPerS  report.Number `json:"edge_restore_mib_per_s"`
	Lost                int64         `json:"lost"`
	Duplicated          int64         `json:"duplicated"`
	WrongAnswers        int           `json:"wrong_answers"`
	Benchmark           string        `json:"benchmark"`
	Commit              string        `json:"commit"`
	Machine             string        `json:"machine"`
	LoadAverage         []string      `json:"load_average"` // before, at the kill, at restored, after
	Victim              string        `json:"victim"`
	DeadAfterS          float64       `json:"dead_after_s"`
	RestartDelayS       float64       `json:"restart_delay_s"`
	RestartedS          float64       `json:"restarted_s"`
	AckPauseEdge        string        `json:"ack_pause_edge"`
	CopiedMiB           float64       `json:"copied_mib"`
	Copies              int           `json:"copies"`
	HistoryMiB          float64       `json:"history_mib"`
	HistoryMiBPerS      report.Number `json:"history_mib_per_s"`
	HistoryPoints       int64         `json:"history_points"`
	PointsPerS          float64       `json:"points_per_s"`
	Coordinators        int           `json:"coordinators"`
	Edges               int           `json:"edges"`
	ReplicaChecks       int           `json:"replica_checks"`
	FrontChecks         int           `json:"front_checks"`
	Probes              int           `json:"probes"`
	ProbesFlagged       int           `json:"probes_flagged"`
	ProbeFalseAlarms    int           `json:"probe_false_alarms"`
	ProbeErrors         int           `json:"probe_errors"`
	NodeRestoreInBinary bool          `json:"node_restore_in_binary"`
	EdgeRestoreMiB      report.Number `json:"edge_restore_mib"`
	EdgeRestorePoints   int64         `json:"edge_restore_points"`
	EdgeRestorePointsPS report.Number `json:"edge_restore_points_per_s"`
	Notes               []string      `json:"notes"`
}

func seconds(d time.Duration) report.Number {
	if d <= 0 {
		return report.Number(math.NaN())
	}
	return report.Number(report.Round(d.Seconds(), 2))
}

func (m measurement) result(o Options) Result {
	res := Result{
		AckPauseS: seconds(m.ackPause), ReplacedS: seconds(m.replaced), HistoryRestoredS: seconds(m.restored),
		RereplicateMiBPerS: report.Number(math.NaN()), EdgeRestoreMiBPerS: report.Number(math.NaN()),
		Lost: m.lost, Duplicated: m.duplicated, WrongAnswers: m.wrong + m.wrongReplicaAnswers + m.wrongFinal,
		Benchmark: "heal", Commit: o.Commit, Machine: m.machine.String(),
		LoadAverage: []string{m.loadBefore, m.loadAtKill, m.loadAtRestored, m.loadAfter},
		Victim:      o.Victim, DeadAfterS: o.DeadAfter.Seconds(), RestartDelayS: o.RestartDelay.Seconds(),
		RestartedS: report.Round(m.restarted.Seconds(), 2), AckPauseEdge: m.ackPauseEdge,
		CopiedMiB: report.Round(m.copiedBytes/(1<<20), 1), HistoryPoints: m.historyPoints,
		PointsPerS: o.pointsPerSecond(), Coordinators: o.Coordinators, Edges: o.Edges,
		ReplicaChecks: m.replicaChecks, FrontChecks: m.frontChecks, Probes: m.probes, ProbesFlagged: m.flagged,
		ProbeFalseAlarms: m.falseAlarms, ProbeErrors: m.probeErrors, NodeRestoreInBinary: m.restoreCmd,
		EdgeRestoreMiB: report.Number(math.NaN()), EdgeRestorePointsPS: report.Number(math.NaN()),
	}
	res.HistoryMiBPerS = report.Number(math.NaN())
	hist := historyBytes(m.copies)
	res.Copies, res.HistoryMiB = len(m.copies), report.Round(float64(hist)/(1<<20), 1)
	if !m.firstCopy.IsZero() && !m.restoredAt.IsZero() && m.restoredAt.After(m.firstCopy) {
		window := m.restoredAt.Sub(m.firstCopy).Seconds()
		res.RereplicateMiBPerS = report.Number(report.Round(m.copiedBytes/(1<<20)/window, 1))
		if hist > 0 {
			res.HistoryMiBPerS = report.Number(report.Round(float64(hist)/(1<<20)/window, 1))
		}
	}
	if rs := m.restore; rs != nil && rs.checked && rs.took > 0 {
		res.EdgeRestoreMiBPerS = report.Number(report.Round(float64(rs.bytes)/(1<<20)/rs.took.Seconds(), 1))
		res.EdgeRestoreMiB = report.Number(report.Round(float64(rs.bytes)/(1<<20), 1))
		res.EdgeRestorePoints = rs.rawPoints
		res.EdgeRestorePointsPS = report.Number(math.Round(float64(rs.rawPoints) / rs.took.Seconds()))
	}
	res.Notes = m.notes(o, res)
	return res
}

func (m measurement) notes(o Options, res Result) []string {
	notes := []string{
		fmt.Sprintf("%d coordinators (replication factor %d, write quorum %d), %d edges × %d series; history %v at %v (%s points) loaded first; steady load %s points/s",
			o.Coordinators, o.rf(), max(1, o.rf()-1), o.Edges, o.SeriesPerEdge, o.History, o.HistoryStep, report.Int(m.historyPoints), report.Whole(o.pointsPerSecond())),
		fmt.Sprintf("the %s was killed with SIGKILL and its data directory deleted; %v later it was started with its flags plus --rejoin (ready %.2f s after the kill); dead-after %v",
			o.Victim, o.RestartDelay, m.restarted.Seconds(), o.DeadAfter),
		fmt.Sprintf("ack_pause_s: the longest time an edge's acked-through gauge (read every %v) did not move, over the steady load (%s); a pause of about the segment age (%v) is normal", o.AckPoll, m.ackPauseEdge, o.SegmentAge),
		fmt.Sprintf("rereplicate_mib_per_s: %.1f MiB of segment bytes copied by the restarted coordinator, from the start of its first copy to history_restored (repairs paced at --repair-bytes-per-sec, 64 MiB/s by default)", m.copiedBytes/(1<<20)),
		fmt.Sprintf("history_mib_per_s: of those, %.1f MiB are each edge's largest copy (its history once), over the same time; %d copies for %d edges (a copy goes by time span: a few segments lacked later are copied with the whole span of the run they touched)",
			res.HistoryMiB, res.Copies, o.Edges),
		fmt.Sprintf("checked: %d replica stores asked alone and %d front-end answers after the heal; %d answers compared with the ledger while healing (%d flagged as incomplete, %d complete with a warning, %d failed)",
			m.replicaChecks, m.frontChecks, m.probes, m.flagged, m.falseAlarms, m.probeErrors),
		fmt.Sprintf("load average (1, 5, 15 min) before %s, at the kill %s, at history restored %s, after %s", m.loadBefore, m.loadAtKill, m.loadAtRestored, m.loadAfter),
	}
	switch rs := m.restore; {
	case rs != nil && rs.checked:
		notes = append(notes, fmt.Sprintf("edge_restore_mib_per_s: %s's data directory deleted after the heal; `tributary node restore` received %.1f MiB (%s raw points, in the compressed form the cloud sends) from the cloud in %.2f s (the command's wall time, start-up included), and the edge, started again, answered its whole ledger asked alone",
			rs.edge, float64(rs.bytes)/(1<<20), report.Int(rs.rawPoints), rs.took.Seconds()))
	case m.restoreCmd:
		notes = append(notes, "edge_restore_mib_per_s: null, the restore was not measured: the heal's checks failed first, or the restore failed (see the error)")
	default:
		notes = append(notes, "edge_restore_mib_per_s: null, this binary has no `tributary node restore` (a Pi's history restored from the cloud is not built yet)")
	}
	if m.failedScrapes > 0 {
		notes = append(notes, fmt.Sprintf("%d reads of the edges' gauges failed: pauses are measured between successful reads, so a failed read can only make one look longer", m.failedScrapes))
	}
	for _, s := range m.wrongSamples {
		notes = append(notes, "wrong answer: "+s)
	}
	return notes
}

// WriteReport prints the table, the notes and the JSON line.
func WriteReport(w io.Writer, res Result) error {
	fmt.Fprintf(w, "\ntribench heal: %d coordinators, %d edges, %s lost its disk, commit %s\n%s\n\n",
		res.Coordinators, res.Edges, res.Victim, res.Commit, res.Machine)
	s := func(x report.Number) string { return x.Text(2) + " s" }
	verdict := func(t report.Target, x report.Number) string { return t.Verdict(float64(x)) }
	replacedTarget := report.Target{Value: res.DeadAfterS + 60, AtMost: true}
	zero := func(n int64) string { return map[bool]string{true: "met", false: "missed"}[n == 0] }
	tb := report.Table{Header: []string{"figure", "measured", "target", ""}, RightAlign: []bool{false, true, false, false}}
	tb.Add("acknowledgement pause, worst edge", s(res.AckPauseS), "≤ 3 s", verdict(targetAckPauseS, res.AckPauseS))
	tb.Add("every edge at RF healthy replicas", s(res.ReplacedS), fmt.Sprintf("≤ %.0f s (dead-after + 60)", res.DeadAfterS+60), verdict(replacedTarget, res.ReplacedS))
	tb.Add("every edge's whole history at RF", s(res.HistoryRestoredS), "≤ 600 s", verdict(targetRestoredS, res.HistoryRestoredS))
	tb.Add("re-replication (segment bytes copied)", res.RereplicateMiBPerS.Text(1)+" MiB/s", "≥ 50 MiB/s", verdict(targetRereplicateMi, res.RereplicateMiBPerS))
	tb.Add("  of which each edge's history once", res.HistoryMiBPerS.Text(1)+" MiB/s", "", "")
	tb.Add("edge restore (tributary node restore)", res.EdgeRestoreMiBPerS.Text(1)+" MiB/s", "", "")
	tb.Add("  points restored per second", report.Whole(float64(res.EdgeRestorePointsPS)), "", "")
	tb.Add("points lost (every replica alone)", report.Int(res.Lost), "0", zero(res.Lost))
	tb.Add("points duplicated", report.Int(res.Duplicated), "0", zero(res.Duplicated))
	tb.Add("wrong answers", report.Int(int64(res.WrongAnswers)), "0", zero(int64(res.WrongAnswers)))
	if err := tb.Write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return report.WriteNotesAndJSONLine(w, res.Notes, res)
}

// historyBytes adds up each edge's largest copy: its history, copied once.
func historyBytes(cs []copyLog) int64 {
	most := map[string]int64{}
	for _, c := range cs {
		most[c.edge] = max(most[c.edge], c.bytes)
	}
	var n int64
	for _, b := range most {
		n += b
	}
	return n
}
