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

// ruleFilter is the query string of /api/v1/rules: type (alert or
// record), rule_name[], rule_group[], file[] and exclude_alerts.
type ruleFilter struct {
	alerts, records bool
	names, groups   []string
	files           []string
	excludeAlerts   bool
}

func parseRuleFilter(r *http.Request) (ruleFilter, *apiError) {
	if err := r.ParseForm(); err != nil {
		return ruleFilter{}, badData("parse the form: " + err.Error())
	}
	f := ruleFilter{alerts: true, records: true,
		names: r.Form["rule_name[]"], groups: r.Form["rule_group[]"], files: r.Form["file[]"]}
	switch t := r.Form.Get("type"); t {
	case "":
	case "alert":
		f.records = false
	case "record":
		f.alerts = false
	default:
		return f, badData(`type must be "alert" or "record", not ` + strconv.Quote(t))
	}
	if s := r.Form.Get("exclude_alerts"); s != "" {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return f, badData("exclude_alerts must be true or false: " + err.Error())
		}
		f.excludeAlerts = v
	}
	return f, nil
}

func matchesAny(list []string, s string) bool { return len(list) == 0 || slices.Contains(list, s) }

// serveRules answers GET /api/v1/rules from the rule manager: every group
// with its rules, their health, last error and evaluation times, and the
// active alerts of the alerting rules.
func (a *API) serveRules(w http.ResponseWriter, r *http.Request) {
	f, e := parseRuleFilter(r)
	if e != nil {
		a.fail(w, e)
		return
	}
	groups := []ruleGroupJSON{}
	if src := a.ruleSource(); src != nil {
		for _, g := range src.RuleGroups() {
			if !matchesAny(f.groups, g.Name()) || !matchesAny(f.files, g.File()) {
				continue
			}
			if jg, ok := groupJSON(g, f); ok {
				groups = append(groups, jg)
			}
		}
	}
	a.respondJSON(w, r, map[string]any{"groups": groups})
}

// groupJSON is g as the API shows it under f; false when f leaves none of
// its rules (Prometheus then omits the group).
func groupJSON(g *rules.Group, f ruleFilter) (ruleGroupJSON, bool) {
	jg := ruleGroupJSON{Name: g.Name(), File: g.File(), Rules: []any{}, Interval: g.Interval().Seconds(),
		Limit: g.Limit(), EvaluationTime: g.GetEvaluationTime().Seconds(), LastEvaluation: g.GetLastEvaluation()}
	for _, rule := range g.Rules() {
		if !matchesAny(f.names, rule.Name()) {
			continue
		}
		lastErr := ""
		if err := rule.LastError(); err != nil {
			lastErr = err.Error()
		}
		switch rule := rule.(type) {
		case *rules.AlertingRule:
			if !f.alerts {
				continue
			}
			jr := alertingRuleJSON{State: rule.State().String(), Name: rule.Name(), Query: rule.Query().String(),
				Duration: rule.HoldDuration().Seconds(), KeepFiringFor: rule.KeepFiringFor().Seconds(),
				Labels: rule.Labels().Map(), Annotations: rule.Annotations().Map(), Alerts: []alertJSON{},
				Health: string(rule.Health()), LastError: lastErr, EvaluationTime: rule.GetEvaluationDuration().Seconds(),
				LastEvaluation: rule.GetEvaluationTimestamp(), Type: "alerting"}
			if !f.excludeAlerts {
				jr.Alerts = alertsJSON(rule.ActiveAlerts())
			}
			jg.Rules = append(jg.Rules, jr)
		case *rules.RecordingRule:
			if !f.records {
				continue
			}
			jg.Rules = append(jg.Rules, recordingRuleJSON{Name: rule.Name(), Query: rule.Query().String(),
				Labels: rule.Labels().Map(), Health: string(rule.Health()), LastError: lastErr,
				EvaluationTime: rule.GetEvaluationDuration().Seconds(), LastEvaluation: rule.GetEvaluationTimestamp(), Type: "recording"})
		}
	}
	filtered := len(f.names) > 0 || !f.alerts || !f.records
	return jg, len(jg.Rules) > 0 || !filtered
}

func alertsJSON(list []*rules.Alert) []alertJSON {
	out := make([]alertJSON, 0, len(list))
	for _, al := range list {
		ja := alertJSON{Labels: al.Labels.Map(), Annotations: al.Annotations.Map(), State: al.State.String(),
			Value: strconv.FormatFloat(al.Value, 'e', -1, 64)}
		if !al.ActiveAt.IsZero() {
			t := al.ActiveAt
			ja.ActiveAt = &t
		}
		if !al.KeepFiringSince.IsZero() {
			t := al.KeepFiringSince
			ja.KeepFiringSince = &t
		}
		out = append(out, ja)
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
	a.respondJSON(w, r, map[string]any{"alerts": alerts})
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
// Prometheus envelope (the rule lists are small; the query answers have
// their own encoder).
func (a *API) respondJSON(w http.ResponseWriter, r *http.Request, data any) {
	body, err := json.Marshal(data)
	if err != nil {
		a.fail(w, &apiError{typ: errInternal, status: http.StatusInternalServerError, msg: "encode the answer: " + err.Error()})
		return
	}
	respond(w, r, func(b []byte) []byte { return append(b, body...) }, nil, nil)
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
