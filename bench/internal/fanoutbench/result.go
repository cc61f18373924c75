package fanoutbench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/load"
	"github.com/tributarydb/tributary/bench/internal/report"
)

// measurement is what the phases measured, before it becomes a Result.
type measurement struct {
	machine  report.Machine
	measured bool // the load phase finished

	points         int64 // acknowledged by the edges
	loadWrite      time.Duration
	loadReplicated time.Duration

	checked, wrong int
	checkNames     []string
	headlineSeries int

	tailLatency    []time.Duration
	replicaLatency []time.Duration

	regSeries  int
	regWrite   time.Duration
	regElapsed time.Duration
	proposals  int64 // raft applied index delta over regElapsed

	gaps     []time.Duration
	restarts []time.Duration // per kill: from the kill until the restarted coordinator was ready
	probes   int64

	stoppedEdge       string
	stoppedChecked    bool
	stoppedFlagged    bool
	stoppedWarnings   []string
	stoppedAnswerDiff string

	scale scaleMeasurement
}

// Result is the JSON line.
type Result struct {
	Benchmark string `json:"benchmark"`
	Commit    string `json:"commit"`
	Machine   string `json:"machine"`

	FanoutP50Ms        report.Number `json:"fanout_p50_ms"`
	FanoutP99Ms        report.Number `json:"fanout_p99_ms"`
	FanoutReplicaP50Ms report.Number `json:"fanout_replica_p50_ms"`
	FanoutReplicaP99Ms report.Number `json:"fanout_replica_p99_ms"`
	FailoverGapS       report.Number `json:"failover_gap_s"`
	FailoverGapsS      []float64     `json:"failover_gaps_s"`
	FailoverRestartsS  []float64     `json:"failover_restarts_s"`
	RegistrationsPerS  report.Number `json:"series_registrations_per_s"`
	ProposalsPerS      report.Number `json:"catalog_proposals_per_s"`
	StoppedEdgeFlagged bool          `json:"stopped_edge_flagged"`
	AnswersChecked     int           `json:"answers_checked"`
	AnswersWrong       int           `json:"answers_wrong"`

	StoppedEdge          string   `json:"stopped_edge"`
	StoppedEdgeWarnings  []string `json:"stopped_edge_warnings"`
	StoppedEdgeComplete  bool     `json:"stopped_edge_answer_complete"`
	RegisteredSeries     int      `json:"registered_series"`
	RegistrationWriteS   float64  `json:"registration_write_s"`
	RegistrationCatalogS float64  `json:"registration_catalog_s"`
	CatalogProposals     int64    `json:"catalog_proposals"`
	LoadReplicatedS      float64  `json:"load_replicated_s"`
	HeadlineSeries       int      `json:"headline_series"`
	CheckQueries         []string `json:"check_queries"`
	FailoverProbeWrites  int64    `json:"failover_probe_writes"`

	Coordinators       int     `json:"coordinators"`
	Edges              int     `json:"edges"`
	SeriesPerEdge      int     `json:"series_per_edge"`
	HistoryS           float64 `json:"history_s"`
	IntervalS          float64 `json:"interval_s"`
	SegmentAgeS        float64 `json:"segment_age_s"`
	Points             int64   `json:"points"`
	Queries            int     `json:"queries"`
	WarmupQueries      int     `json:"warmup_queries"`
	QueryClients       int     `json:"query_clients"`
	Kills              int     `json:"kills"`
	RegistrationTarget int     `json:"registration_series_planned"`
	RegistrationBatch  int     `json:"registration_batch"`

	// The fleet-scale phase (simulated edges; NaN when none ran).
	EdgesAskedOneSeries     report.Number `json:"edges_asked_one_series"`
	SeriesVisibleS          report.Number `json:"series_visible_s"`
	SeriesVisibleP50S       report.Number `json:"series_visible_p50_s"`
	OneSeriesP50Ms          report.Number `json:"one_series_p50_ms"`
	OneSeriesP99Ms          report.Number `json:"one_series_p99_ms"`
	SimEdgeQueriesOneSeries report.Number `json:"sim_edge_queries_one_series"`
	EdgesAskedEndNow        report.Number `json:"edges_asked_one_series_end_now"`
	OneSeriesEndNowMs       report.Number `json:"one_series_end_now_ms"`
	EndNowWarnings          int           `json:"one_series_end_now_warnings"`
	// The same query ending now with max_staleness_ms (EndNowStalenessS).
	EdgesAskedEndNowStale  report.Number `json:"edges_asked_one_series_end_now_stale"`
	OneSeriesEndNowStaleMs report.Number `json:"one_series_end_now_stale_ms"`
	EndNowStaleBehindS     report.Number `json:"one_series_end_now_stale_behind_s"`
	EndNowStaleWarnings    int           `json:"one_series_end_now_stale_warnings"`
	EndNowStalenessS       float64       `json:"one_series_end_now_max_staleness_s"`
	ListingComplete        bool          `json:"listing_complete"`
	ListingWarnings        []string      `json:"listing_warnings"`
	ListingEdgeRequests    int64         `json:"listing_edge_requests"`
	ListingFlaggedEdges    int           `json:"listing_flagged_edges"`
	ProcessEdges           int           `json:"process_edges"`
	SimulatedEdges         int           `json:"simulated_edges"`
	UnreachableEdges       int           `json:"unreachable_edges"`
	SimReadyS              float64       `json:"simulated_edges_ready_s"`
	OneSeriesQueries       int           `json:"one_series_queries"`
	VisibilityTrials       int           `json:"visibility_trials"`

	Targets map[string]string `json:"targets"`
	Notes   []string          `json:"notes"`
}

// latencyMs returns the p50 and p99 of ds in milliseconds, NaN when empty.
func latencyMs(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return math.NaN(), math.NaN()
	}
	ms := func(d time.Duration) float64 { return report.Round(float64(d)/float64(time.Millisecond), 3) }
	return ms(load.Percentile(ds, 0.50)), ms(load.Percentile(ds, 0.99))
}

// perSecond is n / d, NaN when d is zero.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return math.NaN()
	}
	return report.Round(float64(n)/d.Seconds(), 1)
}

func (m measurement) result(o Options) Result {
	res := Result{
		Benchmark: "fanout", Commit: o.Commit, Machine: m.machine.String(),
		StoppedEdgeFlagged: m.stoppedFlagged, AnswersChecked: m.checked, AnswersWrong: m.wrong,
		StoppedEdge: m.stoppedEdge, StoppedEdgeWarnings: m.stoppedWarnings,
		StoppedEdgeComplete: m.stoppedChecked && m.stoppedAnswerDiff == "",
		RegisteredSeries:    m.regSeries, RegistrationWriteS: report.Round(m.regWrite.Seconds(), 3),
		RegistrationCatalogS: report.Round(m.regElapsed.Seconds(), 3), CatalogProposals: m.proposals,
		LoadReplicatedS: report.Round(m.loadReplicated.Seconds(), 3), HeadlineSeries: m.headlineSeries,
		CheckQueries: m.checkNames, FailoverProbeWrites: m.probes,
		Coordinators: o.Coordinators, Edges: o.Edges, ProcessEdges: o.procEdges(), SeriesPerEdge: o.SeriesPerEdge,
		HistoryS: o.History.Seconds(), IntervalS: o.Interval.Seconds(), SegmentAgeS: o.SegmentAge.Seconds(),
		Points: m.points, Queries: o.Queries, WarmupQueries: o.WarmupQueries, QueryClients: o.QueryClients,
		Kills: o.Kills, RegistrationTarget: o.RegistrationSeries, RegistrationBatch: o.RegistrationBatch,
		Targets: map[string]string{
			"fanout_p99_ms":              targetP99Ms.Format(report.Decimals(0)),
			"failover_gap_s":             targetFailoverS.Format(report.Decimals(0)),
			"series_registrations_per_s": targetRegsPerS.Format(report.Whole),
			"edges_asked_one_series":     targetEdgesAsked.Format(report.Decimals(0)),
			"series_visible_s":           targetVisibleS.Format(report.Decimals(0)),
			"one_series_p99_ms":          targetP99Ms.Format(report.Decimals(0)),
		},
	}
	m.scale.fill(&res)
	p50, p99 := latencyMs(m.tailLatency)
	res.FanoutP50Ms, res.FanoutP99Ms = report.Number(p50), report.Number(p99)
	p50, p99 = latencyMs(m.replicaLatency)
	res.FanoutReplicaP50Ms, res.FanoutReplicaP99Ms = report.Number(p50), report.Number(p99)
	worst := math.NaN()
	res.FailoverGapsS = []float64{}
	for _, g := range m.gaps {
		s := report.Round(g.Seconds(), 3)
		res.FailoverGapsS = append(res.FailoverGapsS, s)
		if math.IsNaN(worst) || s > worst {
			worst = s
		}
	}
	res.FailoverGapS = report.Number(worst)
	res.FailoverRestartsS = []float64{}
	for _, d := range m.restarts {
		res.FailoverRestartsS = append(res.FailoverRestartsS, report.Round(d.Seconds(), 3))
	}
	if m.regSeries > 0 {
		res.RegistrationsPerS = report.Number(perSecond(int64(m.regSeries), m.regElapsed))
		res.ProposalsPerS = report.Number(perSecond(m.proposals, m.regElapsed))
	} else {
		res.RegistrationsPerS, res.ProposalsPerS = report.Number(math.NaN()), report.Number(math.NaN())
	}
	res.Notes = m.notes(o, res)
	return res
}

// fill sets the fleet-scale figures of res.
func (sm scaleMeasurement) fill(res *Result) {
	nan := report.Number(math.NaN())
	res.EdgesAskedOneSeries, res.SeriesVisibleS, res.SeriesVisibleP50S = nan, nan, nan
	res.OneSeriesP50Ms, res.OneSeriesP99Ms, res.SimEdgeQueriesOneSeries = nan, nan, nan
	res.EdgesAskedEndNow, res.OneSeriesEndNowMs = nan, nan
	res.EdgesAskedEndNowStale, res.OneSeriesEndNowStaleMs, res.EndNowStaleBehindS = nan, nan, nan
	res.EndNowStalenessS = endNowStaleness.Seconds()
	res.ListingWarnings = []string{}
	res.SimulatedEdges, res.UnreachableEdges, res.SimReadyS = sm.simEdges, sm.unreachable, report.Round(sm.readyS, 2)
	res.OneSeriesQueries, res.VisibilityTrials = sm.oneQueries, len(sm.visible)
	if !sm.ran {
		return
	}
	if sm.oneQueries > 0 {
		res.EdgesAskedOneSeries = report.Number(report.Round(float64(sm.edgeLegs)/float64(sm.oneQueries), 3))
		res.SimEdgeQueriesOneSeries = report.Number(report.Round(float64(sm.simCalls)/float64(sm.oneQueries), 3))
	}
	p50, p99 := latencyMs(sm.oneLatency)
	res.OneSeriesP50Ms, res.OneSeriesP99Ms = report.Number(p50), report.Number(p99)
	if sm.nowAsked {
		res.EdgesAskedEndNow = report.Number(sm.nowEdgeLegs)
		res.OneSeriesEndNowMs = report.Number(report.Round(float64(sm.nowLatency)/float64(time.Millisecond), 1))
		res.EndNowWarnings = sm.nowWarnings
	}
	if sm.staleAsked {
		res.EdgesAskedEndNowStale = report.Number(sm.staleEdgeLegs)
		res.OneSeriesEndNowStaleMs = report.Number(report.Round(float64(sm.staleLatency)/float64(time.Millisecond), 1))
		res.EndNowStaleBehindS = report.Number(report.Round(sm.staleBehind.Seconds(), 3))
		res.EndNowStaleWarnings = sm.staleWarnings
	}
	res.ListingComplete, res.ListingEdgeRequests, res.ListingFlaggedEdges = sm.listComplete, sm.listLegs, sm.flagged
	if sm.listWarnings != nil {
		res.ListingWarnings = sm.listWarnings
	}
	if len(sm.visible) > 0 {
		res.SeriesVisibleS = report.Number(report.Round(slices.Max(sm.visible).Seconds(), 3))
		res.SeriesVisibleP50S = report.Number(report.Round(load.Percentile(sm.visible, 0.5).Seconds(), 3))
	}
}

func (m measurement) notes(o Options, res Result) []string {
	var notes []string
	if m.scale.ran {
		notes = append(notes, fmt.Sprintf("fleet scale: %d edges in the catalog (%d processes, %d simulated in the benchmark's process with the real replicator announcing their series; %d of them accept query connections and never answer); "+
			"one series (1 h, 1-minute avg, ending at the current minute as a dashboard aligns its range) on a random reachable simulated edge, %d timed after %d warm-up, every answer checked; edges asked = edge requests the coordinators sent (tributary_query_legs_total{kind=\"edge\"}) per query; "+
			"the same query ending now asked %s edges and took %s ms (%d warnings): an end past the edges' registration watermarks (up to one announce interval old) must ask every edge or warn",
			res.Edges, res.ProcessEdges, m.scale.simEdges, m.scale.unreachable, m.scale.oneQueries, o.WarmupQueries,
			res.EdgesAskedEndNow.Text(0), res.OneSeriesEndNowMs.Text(1), res.EndNowWarnings))
		notes = append(notes, fmt.Sprintf("the same query ending now with max_staleness_ms %s s asked %s edges and took %s ms (%d warnings); its answer said it was fresh through %s s before its end, and was checked through then",
			report.Float(res.EndNowStalenessS, 0), res.EdgesAskedEndNowStale.Text(0), res.OneSeriesEndNowStaleMs.Text(1),
			res.EndNowStaleWarnings, res.EndNowStaleBehindS.Text(3)))
		notes = append(notes, fmt.Sprintf("series visible: %d new series, each on a random reachable simulated edge, timed from its creation until a coordinator's Series listing (from the catalog) returns it; worst %s s, median %s s",
			len(m.scale.visible), res.SeriesVisibleS.Text(3), res.SeriesVisibleP50S.Text(3)))
		notes = append(notes, fmt.Sprintf("listing of the simulated edges: complete %v, %d edge requests, warnings %q; with the %d unreachable edges offline, a listing flagged %d edges",
			res.ListingComplete, res.ListingEdgeRequests, res.ListingWarnings, m.scale.unreachable, res.ListingFlaggedEdges))
	} else {
		notes = append(notes, "fleet scale not run: --edges is not above --process-edges, so no edge was simulated")
	}
	notes = append(notes, fmt.Sprintf("the %d-series, 1-hour, 1-minute-step avg query: %d timed after %d warm-up from %d clients, each on its own coordinator; every answer checked",
		m.headlineSeries, o.Queries, o.WarmupQueries, o.QueryClients))
	if len(m.gaps) > 0 {
		notes = append(notes, fmt.Sprintf("failover gap: per leader kill (the killed coordinator restarted at once: kill to ready took %v s), the longest pause in the edge's acked-through sequence (polled every %v) from the kill until the restarted coordinator sees a leader plus %v; a pause of about the segment age (%v) is normal",
			res.FailoverRestartsS, pollEvery, settle, o.SegmentAge))
	}
	if m.regSeries > 0 {
		notes = append(notes, fmt.Sprintf("registrations: %s new series, 1 point each, from the first write until the catalog's series count reached them (writes took %.2f s, sealing after up to %v included); %d raft entries applied meanwhile → %s catalog proposals/s",
			report.Int(int64(m.regSeries)), m.regWrite.Seconds(), o.SegmentAge, m.proposals, report.Whole(float64(res.ProposalsPerS))))
	}
	if m.stoppedChecked && !m.stoppedFlagged {
		notes = append(notes, fmt.Sprintf("the query with %s stopped carried no warning naming it (warnings: %q)", m.stoppedEdge, m.stoppedWarnings))
	}
	if m.stoppedAnswerDiff != "" {
		notes = append(notes, fmt.Sprintf("with %s stopped the answer differed from the full one: %s", m.stoppedEdge, strings.ReplaceAll(m.stoppedAnswerDiff, "\n", "; ")))
	}
	if m.wrong > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d answers were wrong or failed", m.wrong, m.checked))
	}
	return notes
}

// WriteReport prints the table, the notes and the JSON line.
func WriteReport(w io.Writer, res Result) error {
	fmt.Fprintf(w, "\ntribench fanout: %d coordinators, %d edges × %d sensor series, %v of history at %v (%s points), commit %s\n%s\n\n",
		res.Coordinators, res.Edges, res.SeriesPerEdge, time.Duration(res.HistoryS*float64(time.Second)),
		time.Duration(res.IntervalS*float64(time.Second)), report.Int(res.Points), res.Commit, res.Machine)
	ms := func(x report.Number) string { return x.Text(2) + " ms" }
	verdict := func(t report.Target, x report.Number) string { return t.Verdict(float64(x)) }
	tb := report.Table{Header: []string{"figure", "measured", "target", ""}, RightAlign: []bool{false, true, false, false}}
	tb.Add("fan-out p99 (edges queried for tails)", ms(res.FanoutP99Ms), "≤ 50 ms", verdict(targetP99Ms, res.FanoutP99Ms))
	tb.Add("fan-out p50 (edges queried for tails)", ms(res.FanoutP50Ms), "", "")
	tb.Add("fan-out p99 (range within replicas)", ms(res.FanoutReplicaP99Ms), "", "")
	tb.Add("fan-out p50 (range within replicas)", ms(res.FanoutReplicaP50Ms), "", "")
	tb.Add("failover gap, worst of "+fmt.Sprint(len(res.FailoverGapsS))+" leader kills", res.FailoverGapS.Text(2)+" s", "≤ 3 s",
		verdict(targetFailoverS, res.FailoverGapS))
	tb.Add("series registrations/s", report.Whole(float64(res.RegistrationsPerS)), "≥ 10,000", verdict(targetRegsPerS, res.RegistrationsPerS))
	tb.Add("catalog proposals/s", report.Whole(float64(res.ProposalsPerS)), "", "")
	tb.Add("answers checked (wrong)", fmt.Sprintf("%s (%d)", report.Int(int64(res.AnswersChecked)), res.AnswersWrong), "0 wrong", map[bool]string{true: "met", false: "missed"}[res.AnswersWrong == 0])
	tb.Add("stopped edge reported missing", fmt.Sprint(res.StoppedEdgeFlagged), "true", map[bool]string{true: "met", false: "missed"}[res.StoppedEdgeFlagged])
	tb.Add(fmt.Sprintf("edges asked, one series (%d edges)", res.Edges), res.EdgesAskedOneSeries.Text(2), "≤ 2", verdict(targetEdgesAsked, res.EdgesAskedOneSeries))
	tb.Add("one series over 1 h p99", ms(res.OneSeriesP99Ms), "≤ 50 ms", verdict(targetP99Ms, res.OneSeriesP99Ms))
	tb.Add("one series over 1 h p50", ms(res.OneSeriesP50Ms), "", "")
	tb.Add("one series ending now: edges asked", res.EdgesAskedEndNow.Text(0), "", "")
	tb.Add("one series ending now: latency", ms(res.OneSeriesEndNowMs), "", "")
	tb.Add(fmt.Sprintf("ending now, max_staleness %s s: edges asked", report.Float(res.EndNowStalenessS, 0)), res.EdgesAskedEndNowStale.Text(0), "", "")
	tb.Add(fmt.Sprintf("ending now, max_staleness %s s: latency", report.Float(res.EndNowStalenessS, 0)), ms(res.OneSeriesEndNowStaleMs), "", "")
	tb.Add("series visible, worst", res.SeriesVisibleS.Text(3)+" s", "≤ 2 s", verdict(targetVisibleS, res.SeriesVisibleS))
	tb.Add("listing flagged offline edges", fmt.Sprintf("%d of %d", res.ListingFlaggedEdges, res.UnreachableEdges), "all", map[bool]string{true: "met", false: "missed"}[res.ListingFlaggedEdges >= res.UnreachableEdges])
	if err := tb.Write(w); err != nil {
		return err
	}
	if len(res.FailoverGapsS) > 0 {
		fmt.Fprintf(w, "\nfailover gaps (s): %v\n", res.FailoverGapsS)
	}
	if len(res.StoppedEdgeWarnings) > 0 {
		fmt.Fprintf(w, "warnings with %s stopped: %s\n", res.StoppedEdge, strings.Join(res.StoppedEdgeWarnings, " | "))
	}
	fmt.Fprintln(w)
	return report.WriteNotesAndJSONLine(w, res.Notes, res)
}
