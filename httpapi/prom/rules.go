package prom

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
)

// RuleSource is what /api/v1/rules, /api/v1/alerts and POST /-/reload are
// served from: the process's rule manager (package rules of this project).
// Implementations are safe for concurrent use.
type RuleSource interface {
	// RuleGroups returns the groups being evaluated, in a stable order.
	RuleGroups() []*rules.Group
	// Reload reads the rule files again and applies them; on an error
	// the rules evaluated before stay in place.
	Reload() error
}

// ruleState is where the rules and alerts API answers from.
type ruleState struct {
	src RuleSource
	// fromSeries: /api/v1/alerts lists the alerts of the ALERTS series
	// the backend holds (after src's own, if set).
	fromSeries bool
}

// SetRules makes the API answer /api/v1/rules, /api/v1/alerts and
// POST /-/reload from src. Without it (or with nil) the lists are empty
// and a reload has nothing to do. Safe to call while serving.
func (a *API) SetRules(src RuleSource) {
	if src == nil {
		a.rules.Store(nil)
		return
	}
	a.rules.Store(&ruleState{src: src})
}

// SetRulesWithSeriesAlerts is SetRules for a process that evaluates
// rules and also holds the ALERTS series of others (a coordinator
// evaluating rules over the fleet): /api/v1/alerts lists src's active
// alerts, with their annotations and values, and then the alerts of the
// ALERTS series (ServeAlertsFromSeries) that src does not list: an alert
// in both, by its labels, appears once, as src has it.
func (a *API) SetRulesWithSeriesAlerts(src RuleSource) {
	a.rules.Store(&ruleState{src: src, fromSeries: true})
}

// ServeAlertsFromSeries makes /api/v1/alerts (when no RuleSource is set)
// list the alerts that the ALERTS series the backend holds say are pending
// or firing now, for a process that evaluates no rules itself but holds
// the ALERTS series written by the rules of others: a coordinator, whose
// backend holds the fleet's replicated series and reaches the edges'
// fresh tails. An alert's activeAt is the value of its ALERTS_FOR_STATE
// series; its value is not in the series and is reported as NaN.
func (a *API) ServeAlertsFromSeries() { a.rules.Store(&ruleState{fromSeries: true}) }

func (a *API) ruleSource() RuleSource {
	if p := a.rules.Load(); p != nil {
		return p.src
	}
	return nil
}

// Engine is the PromQL engine the query API evaluates with; rule
// evaluation shares it (its sample limit and timeout).
func (a *API) Engine() promql.QueryEngine { return a.engine }

// Queryable reads the backend the way the query API does (the same
// matchers, series and sample limits), for callers that evaluate PromQL
// outside an HTTP request: each Querier counts the samples of one query
// against Options.MaxLoadedSamples. It never answers from downsampled
// windows, so any expression evaluates exactly as on raw data.
func (a *API) Queryable() storage.Queryable { return perQuery{a} }

// perQuery starts a fresh sample count at every Querier, which the engine
// asks for once per query.
type perQuery struct{ a *API }

func (p perQuery) Querier(mint, maxt int64) (storage.Querier, error) {
	return (&queryable{api: p.a}).Querier(mint, maxt)
}

// The JSON shapes of Prometheus's rules and alerts API.
type (
	ruleGroupJSON struct {
		Name           string    `json:"name"`
		File           string    `json:"file"`
		Rules          []any     `json:"rules"`
		Interval       float64   `json:"interval"`
		Limit          int       `json:"limit"`
		EvaluationTime float64   `json:"evaluationTime"`
		LastEvaluation time.Time `json:"lastEvaluation"`
		// Edge names the edge whose group this is, on a coordinator
		// (not in Prometheus's answer; Grafana ignores it).
		Edge string `json:"edge,omitempty"`
	}
	alertingRuleJSON struct {
		State          string            `json:"state"`
		Name           string            `json:"name"`
		Query          string            `json:"query"`
		Duration       float64           `json:"duration"`
		KeepFiringFor  float64           `json:"keepFiringFor"`
		Labels         map[string]string `json:"labels"`
		Annotations    map[string]string `json:"annotations"`
		Alerts         []alertJSON       `json:"alerts"`
		Health         string            `json:"health"`
		LastError      string            `json:"lastError,omitempty"`
		EvaluationTime float64           `json:"evaluationTime"`
		LastEvaluation time.Time         `json:"lastEvaluation"`
		Type           string            `json:"type"`
	}
	recordingRuleJSON struct {
		Name           string            `json:"name"`
		Query          string            `json:"query"`
		Labels         map[string]string `json:"labels,omitempty"`
		Health         string            `json:"health"`
		LastError      string            `json:"lastError,omitempty"`
		EvaluationTime float64           `json:"evaluationTime"`
		LastEvaluation time.Time         `json:"lastEvaluation"`
		Type           string            `json:"type"`
	}
	alertJSON struct {
		Labels          map[string]string `json:"labels"`
		Annotations     map[string]string `json:"annotations"`
		State           string            `json:"state"`
		ActiveAt        *time.Time        `json:"activeAt,omitempty"`
		KeepFiringSince *time.Time        `json:"keepFiringSince,omitempty"`
		Value           string            `json:"value"`
	}
)

// ruleQuery is the query string of /api/v1/rules: Prometheus's filters
// (type, rule_name[], rule_group[], file[], exclude_alerts) and, on a
// coordinator, the edges to ask (edge[]; none given: every edge).
type ruleQuery struct {
	f     model.RuleFilter
	edges []string
}

func parseRuleQuery(r *http.Request) (ruleQuery, *apiError) {
	if err := r.ParseForm(); err != nil {
		return ruleQuery{}, badData("parse the form: " + err.Error())
	}
	q := ruleQuery{f: model.RuleFilter{Type: r.Form.Get("type"), RuleNames: r.Form["rule_name[]"],
		RuleGroups: r.Form["rule_group[]"], Files: r.Form["file[]"]}, edges: r.Form["edge[]"]}
	switch q.f.Type {
	case "", model.RuleFilterAlert, model.RuleFilterRecord:
	default:
		return q, badData(`type must be "alert" or "record", not ` + strconv.Quote(q.f.Type))
	}
	if s := r.Form.Get("exclude_alerts"); s != "" {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return q, badData("exclude_alerts must be true or false: " + err.Error())
		}
		q.f.ExcludeAlerts = v
	}
	return q, nil
}

// serveRules answers GET /api/v1/rules: the groups of the rule manager,
// every group with its rules, their health, last error and evaluation
// times, and the active alerts of the alerting rules; then, on a backend
// that lists the rules of others (a coordinator's front end,
// backend.RuleLister), the groups of each edge asked, whose file is
// "<edge>/<file>" and whose "edge" field names the edge. An edge that
// could not be asked is named in the answer's warnings.
func (a *API) serveRules(w http.ResponseWriter, r *http.Request) {
	q, e := parseRuleQuery(r)
	if e != nil {
		a.fail(w, e)
		return
	}
	groups := []ruleGroupJSON{}
	if src := a.ruleSource(); src != nil {
		for _, g := range ListRuleGroups(src, q.f) {
			groups = append(groups, groupJSON(g, ""))
		}
	}
	lister, ok := a.b.(backend.RuleLister)
	if !ok {
		a.respondJSON(w, r, map[string]any{"groups": groups}, nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.opts.QueryTimeout)
	defer cancel()
	ctx, warns := backend.WithWarnings(ctx)
	asked := q.f
	asked.Files = nil // the edges' files are matched as listed: <edge>/<file>
	fleet, err := lister.EdgeRuleGroups(ctx, q.edges, asked)
	if err != nil {
		a.fail(w, classifyQueryError(err))
		return
	}
	for _, eg := range fleet {
		for _, g := range eg.Groups {
			g.File = EdgeRuleFile(eg.Edge, g.File)
			if slices.Contains(q.f.Files, g.File) || len(q.f.Files) == 0 {
				groups = append(groups, groupJSON(g, eg.Edge))
			}
		}
	}
	a.respondJSON(w, r, map[string]any{"groups": groups}, warns.List())
}

// EdgeRuleFile is the file a coordinator's /api/v1/rules shows for a
// group of edge's read from file: "<edge>/<file>".
func EdgeRuleFile(edge, file string) string { return edge + "/" + file }

// ListRuleGroups is the groups of src under f, in src's order, as the
// rules API lists them: a group that f leaves without rules is left out
// when f selects rules by type or name (as Prometheus does).
func ListRuleGroups(src RuleSource, f model.RuleFilter) []model.RuleGroup {
	out := []model.RuleGroup{}
	for _, g := range src.RuleGroups() {
		if !f.KeepsGroup(g.Name(), g.File()) {
			continue
		}
		mg := model.RuleGroup{Name: g.Name(), File: g.File(), Interval: g.Interval(), Limit: g.Limit(),
			EvaluationTime: g.GetEvaluationTime(), LastEvaluation: g.GetLastEvaluation(), Rules: []model.Rule{}}
		for _, rule := range g.Rules() {
			if mr, ok := ruleOf(rule, f); ok {
				mg.Rules = append(mg.Rules, mr)
			}
		}
		if len(mg.Rules) > 0 || !f.FiltersRules() {
			out = append(out, mg)
		}
	}
	return out
}

// ruleOf is rule as the rules API lists it; false when f leaves it out.
func ruleOf(rule rules.Rule, f model.RuleFilter) (model.Rule, bool) {
	mr := model.Rule{Name: rule.Name(), Query: rule.Query().String(), Labels: rule.Labels().Map(),
		Health: string(rule.Health()), EvaluationTime: rule.GetEvaluationDuration(), LastEvaluation: rule.GetEvaluationTimestamp()}
	if err := rule.LastError(); err != nil {
		mr.LastError = err.Error()
	}
	switch rule := rule.(type) {
	case *rules.AlertingRule:
		mr.Type, mr.State, mr.Annotations = model.RuleAlerting, rule.State().String(), rule.Annotations().Map()
		mr.For, mr.KeepFiringFor = rule.HoldDuration(), rule.KeepFiringFor()
		if !f.ExcludeAlerts {
			for _, al := range rule.ActiveAlerts() {
				mr.Alerts = append(mr.Alerts, model.RuleAlert{Labels: al.Labels.Map(), Annotations: al.Annotations.Map(),
					State: al.State.String(), ActiveAt: al.ActiveAt, KeepFiringSince: al.KeepFiringSince, Value: al.Value})
			}
		}
	case *rules.RecordingRule:
		mr.Type = model.RuleRecording
	default:
		return mr, false
	}
	return mr, f.KeepsRule(mr.Type, mr.Name)
}

// groupJSON is g as the API shows it; edge names the edge it comes from
// ("": this process's).
func groupJSON(g model.RuleGroup, edge string) ruleGroupJSON {
	jg := ruleGroupJSON{Name: g.Name, File: g.File, Rules: make([]any, 0, len(g.Rules)), Interval: g.Interval.Seconds(),
		Limit: g.Limit, EvaluationTime: g.EvaluationTime.Seconds(), LastEvaluation: g.LastEvaluation, Edge: edge}
	for _, r := range g.Rules {
		if r.Type == model.RuleRecording {
			jg.Rules = append(jg.Rules, recordingRuleJSON{Name: r.Name, Query: r.Query, Labels: r.Labels, Health: r.Health,
				LastError: r.LastError, EvaluationTime: r.EvaluationTime.Seconds(), LastEvaluation: r.LastEvaluation, Type: r.Type})
			continue
		}
		jr := alertingRuleJSON{State: r.State, Name: r.Name, Query: r.Query, Duration: r.For.Seconds(),
			KeepFiringFor: r.KeepFiringFor.Seconds(), Labels: orEmpty(r.Labels), Annotations: orEmpty(r.Annotations),
			Alerts: make([]alertJSON, 0, len(r.Alerts)), Health: r.Health, LastError: r.LastError,
			EvaluationTime: r.EvaluationTime.Seconds(), LastEvaluation: r.LastEvaluation, Type: r.Type}
		for _, al := range r.Alerts {
			jr.Alerts = append(jr.Alerts, alertOf(al))
		}
		jg.Rules = append(jg.Rules, jr)
	}
	return jg
}

// orEmpty is m, or an empty map for nil (Prometheus lists {}, not null).
func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func alertOf(al model.RuleAlert) alertJSON {
	ja := alertJSON{Labels: orEmpty(al.Labels), Annotations: orEmpty(al.Annotations), State: al.State,
		Value: strconv.FormatFloat(al.Value, 'e', -1, 64)}
	return ja.withTimes(al.ActiveAt, al.KeepFiringSince)
}

// withTimes sets ja's activeAt and keepFiringSince, each left out when
// zero.
func (ja alertJSON) withTimes(activeAt, keepFiringSince time.Time) alertJSON {
	if !activeAt.IsZero() {
		ja.ActiveAt = &activeAt
	}
	if !keepFiringSince.IsZero() {
		ja.KeepFiringSince = &keepFiringSince
	}
	return ja
}

func alertsJSON(list []*rules.Alert) []alertJSON {
	out := make([]alertJSON, 0, len(list))
	for _, al := range list {
		ja := alertJSON{Labels: al.Labels.Map(), Annotations: al.Annotations.Map(), State: al.State.String(),
			Value: strconv.FormatFloat(al.Value, 'e', -1, 64)}
		out = append(out, ja.withTimes(al.ActiveAt, al.KeepFiringSince))
	}
	return out
}

// serveAlerts answers GET /api/v1/alerts: the pending and firing alerts of
// every alerting rule (and, for keep_firing_for, those kept firing), then
// those of the ALERTS series that are not among them.
func (a *API) serveAlerts(w http.ResponseWriter, r *http.Request) {
	alerts := []alertJSON{}
	st := a.rules.Load()
	own := map[string]bool{}
	if st != nil && st.src != nil {
		for _, g := range st.src.RuleGroups() {
			for _, rule := range g.AlertingRules() {
				for _, al := range rule.ActiveAlerts() {
					own[al.Labels.String()] = true
				}
				alerts = append(alerts, alertsJSON(rule.ActiveAlerts())...)
			}
		}
	}
	if st != nil && st.fromSeries {
		fleet, e := a.seriesAlerts(r.Context())
		if e != nil {
			a.fail(w, e)
			return
		}
		for _, al := range fleet {
			if !own[labels.FromMap(al.Labels).String()] {
				alerts = append(alerts, al)
			}
		}
	}
	a.respondJSON(w, r, map[string]any{"alerts": alerts}, nil)
}

// serveReload answers POST /-/reload: the rule files are read again. A
// file that does not load leaves the rules as they were and answers 500
// with the error, as Prometheus does.
func (a *API) serveReload(w http.ResponseWriter, _ *http.Request) {
	src := a.ruleSource()
	if src == nil {
		writeText(w, http.StatusOK, "", "no rule files to reload")
		return
	}
	if err := src.Reload(); err != nil {
		writeText(w, http.StatusInternalServerError, "", "reload rules: "+err.Error())
		return
	}
	writeText(w, http.StatusOK, "", "rules reloaded")
}

// respondJSON answers with data encoded by encoding/json in the
// Prometheus envelope, with warnings (the rule lists are small; the query
// answers have their own encoder).
func (a *API) respondJSON(w http.ResponseWriter, r *http.Request, data any, warnings []string) {
	body, err := json.Marshal(data)
	if err != nil {
		a.fail(w, &apiError{typ: errInternal, status: http.StatusInternalServerError, msg: "encode the answer: " + err.Error()})
		return
	}
	respond(w, r, func(b []byte) []byte { return append(b, body...) }, warnings, nil)
}

// seriesAlerts lists the alerts of the ALERTS series at the API's now:
// the instant vector ALERTS (lookback as for any query; a resolved alert
// ends with a staleness marker) joined with ALERTS_FOR_STATE on the
// alert's labels for its active time.
func (a *API) seriesAlerts(ctx context.Context) ([]alertJSON, *apiError) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.QueryTimeout)
	defer cancel()
	now := a.opts.Now()
	active, err := a.instant(ctx, "ALERTS", now)
	if err != nil {
		return nil, classifyQueryError(err)
	}
	forState, err := a.instant(ctx, "ALERTS_FOR_STATE", now)
	if err != nil {
		return nil, classifyQueryError(err)
	}
	since := make(map[string]float64, len(forState))
	for _, s := range forState {
		since[s.Metric.DropReserved(func(n string) bool { return n == "__name__" }).String()] = s.F
	}
	alerts := make([]alertJSON, 0, len(active))
	for _, s := range active {
		state := s.Metric.Get("alertstate")
		ls := labels.NewBuilder(s.Metric).Del("__name__", "alertstate").Labels()
		ja := alertJSON{Labels: ls.Map(), Annotations: map[string]string{}, State: state, Value: "NaN"}
		if v, ok := since[ls.String()]; ok && !math.IsNaN(v) {
			t := time.Unix(int64(v), 0).UTC()
			ja.ActiveAt = &t
		}
		alerts = append(alerts, ja)
	}
	return alerts, nil
}

// instant evaluates q at t over the backend.
func (a *API) instant(ctx context.Context, q string, t time.Time) (promql.Vector, error) {
	qry, err := a.engine.NewInstantQuery(ctx, a.Queryable(), nil, q, t)
	if err != nil {
		return nil, err
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return nil, res.Err
	}
	v, err := res.Vector()
	if err != nil {
		return nil, err
	}
	return slices.Clone(v), nil
}
