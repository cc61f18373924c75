package rulesbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/tick"
)

// apiClient talks to the node's Prometheus API and its reload endpoint.
type apiClient struct {
	base   string
	client *http.Client
}

// reload is POST /-/reload, which must answer 200.
func (a *apiClient) reload(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/-/reload", nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("reload rules: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reload rules: %s: %s", resp.Status, body)
	}
	return nil
}

// get GETs path with query and decodes the API's data into v.
func (a *apiClient) get(ctx context.Context, path string, query url.Values, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path+"?"+query.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&env); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || env.Status != "success" {
		return fmt.Errorf("GET %s?%s: %s: %s", path, query.Encode(), resp.Status, env.Error)
	}
	return json.Unmarshal(env.Data, v)
}

// ruleJSON and groupJSON are the parts of /api/v1/rules read here.
type (
	ruleJSON struct {
		Name      string `json:"name"`
		Query     string `json:"query"`
		Health    string `json:"health"`
		LastError string `json:"lastError"`
	}
	groupJSON struct {
		Name           string     `json:"name"`
		Rules          []ruleJSON `json:"rules"`
		EvaluationTime float64    `json:"evaluationTime"`
		LastEvaluation time.Time  `json:"lastEvaluation"`
	}
)

// errNoGroup: the bench group is not loaded (the rules are off).
var errNoGroup = fmt.Errorf("rule group %q not loaded", GroupName)

// group returns the bench group, with the rules named ruleName ("" all).
func (a *apiClient) group(ctx context.Context, ruleName string) (groupJSON, error) {
	q := url.Values{"type": {"record"}, "rule_group[]": {GroupName}}
	if ruleName != "" {
		q.Set("rule_name[]", ruleName)
	}
	var data struct {
		Groups []groupJSON `json:"groups"`
	}
	if err := a.get(ctx, "/api/v1/rules", q, &data); err != nil {
		return groupJSON{}, err
	}
	if len(data.Groups) != 1 {
		return groupJSON{}, errNoGroup
	}
	return data.Groups[0], nil
}

// scalar evaluates query at t and returns its one value; an empty answer
// or several series are errors.
func (a *apiClient) scalar(ctx context.Context, query string, t time.Time) (float64, error) {
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	ts := strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
	if err := a.get(ctx, "/api/v1/query", url.Values{"query": {query}, "time": {ts}}, &data); err != nil {
		return 0, err
	}
	if len(data.Result) != 1 {
		return 0, fmt.Errorf("query %s at %s: %d series, want 1", query, ts, len(data.Result))
	}
	s, ok := data.Result[0].Value[1].(string)
	if !ok {
		return 0, fmt.Errorf("query %s: value %v is not a string", query, data.Result[0].Value[1])
	}
	return strconv.ParseFloat(s, 64)
}

// closeEnough compares a recorded value with its expression's: equal but
// for the last bits of a float.
func closeEnough(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

// evalPoller reads the bench group's last evaluation every interval and
// keeps the duration of each evaluation it has not seen yet. It asks for
// the rules of one name only, a quarter of them, to keep its own cost on
// the node small; it polls in the phases without rules too (then the
// node answers no group), so both phases bear it.
type evalPoller struct {
	api      *apiClient
	ruleName string

	mu    sync.Mutex
	last  time.Time
	evals []time.Duration
	errs  int
}

func newEvalPoller(api *apiClient, ruleName string) *evalPoller {
	return &evalPoller{api: api, ruleName: ruleName}
}

func (p *evalPoller) run(ctx context.Context, every time.Duration) {
	tick.Every(ctx, every, func(time.Time) bool {
		g, err := p.api.group(ctx, p.ruleName)
		p.mu.Lock()
		defer p.mu.Unlock()
		switch {
		case err == errNoGroup || (err == nil && g.LastEvaluation.IsZero()):
		case err != nil:
			if ctx.Err() == nil {
				p.errs++
			}
		case !g.LastEvaluation.Equal(p.last):
			p.last = g.LastEvaluation
			p.evals = append(p.evals, time.Duration(g.EvaluationTime*float64(time.Second)))
		}
		return true
	})
}

// count is the number of evaluations seen so far.
func (p *evalPoller) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.evals)
}

// since returns the durations of the evaluations seen after the first i.
func (p *evalPoller) since(i int) []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.evals[i:]...)
}

// failures is the number of polls that failed.
func (p *evalPoller) failures() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errs
}
