package rules

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	promrules "github.com/prometheus/prometheus/rules"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

// env is a real node with the Prometheus API over it, and a rule manager
// evaluating over both.
type env struct {
	t   *testing.T
	dir string
	n   *node.Node
	api *prom.API
	m   *Manager
}

// openNode opens (or reopens) the node of dir.
func openNode(t *testing.T, dir string) (*node.Node, *prom.API) {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: dir, NodeID: "pi-1"})
	if err != nil {
		t.Fatal(err)
	}
	api, err := prom.New(n, &httpapi.Config{}, prom.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return n, api
}

// newEnv opens a node in dir and a started manager with opts.
func newEnv(t *testing.T, dir string, opts Options) *env {
	t.Helper()
	e := &env{t: t, dir: dir}
	e.n, e.api = openNode(t, dir)
	m, err := New(e.n, e.api.Engine(), e.api.Queryable(), opts)
	if err != nil {
		e.n.Close()
		t.Fatal(err)
	}
	e.m = m
	e.api.SetRules(m)
	m.Start()
	t.Cleanup(e.close)
	return e
}

// close stops the manager and closes the node (once).
func (e *env) close() {
	if e.m != nil {
		e.m.Stop()
		e.m = nil
	}
	if e.n != nil {
		if err := e.n.Close(); err != nil {
			e.t.Error(err)
		}
		e.n = nil
	}
}

// writeFile writes a rule file into dir and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// write stores one sample per series (name, label pairs) at ts.
func (e *env) write(ts time.Time, v float64, name string, kv ...string) {
	e.t.Helper()
	ls := labels.Labels{{Name: "__name__", Value: name}}
	for i := 0; i+1 < len(kv); i += 2 {
		ls = append(ls, labels.Label{Name: kv[i], Value: kv[i+1]})
	}
	res, err := e.n.Write(context.Background(), []model.Batch{{Labels: ls, Ts: []int64{ts.UnixMilli()}, Vs: []float64{v}}})
	if err != nil || res.Rejected != 0 {
		e.t.Fatalf("write %s: %v %+v", name, err, res)
	}
}

// samples reads every sample of the series matching name (and label pairs) since from.
func (e *env) samples(from time.Time, name string, kv ...string) map[string]model.Series {
	e.t.Helper()
	var ms []*labels.Matcher
	kv = append([]string{"__name__", name}, kv...)
	for i := 0; i+1 < len(kv); i += 2 {
		m, err := labels.NewMatcher(labels.MatchEqual, kv[i], kv[i+1])
		if err != nil {
			e.t.Fatal(err)
		}
		ms = append(ms, m)
	}
	out := map[string]model.Series{}
	_, err := e.n.Query(context.Background(), model.Query{Mode: model.ModeRaw, Matchers: ms, Start: from.UnixMilli(), End: time.Now().Add(time.Minute).UnixMilli()},
		func(s model.Series) error {
			s.Ts, s.Vs = append([]int64(nil), s.Ts...), append([]float64(nil), s.Vs...)
			out[s.Labels.String()] = s
			return nil
		})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// eventually polls cond every 50ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alertingRule returns the alerting rule named name.
func (e *env) alertingRule(name string) *promrules.AlertingRule {
	for _, g := range e.m.RuleGroups() {
		for _, r := range g.AlertingRules() {
			if r.Name() == name {
				return r
			}
		}
	}
	e.t.Fatalf("no alerting rule %q", name)
	return nil
}
