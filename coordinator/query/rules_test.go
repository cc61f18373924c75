package query_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/model"
)

// ruleEdge is an edge's Source that lists rule groups: one group named
// after the edge, or err.
type ruleEdge struct {
	query.Source
	edge string
	err  error
	// asked records the filter each call got; inFlight and most count
	// the calls running at once.
	mu             *sync.Mutex
	asked          *[]model.RuleFilter
	inFlight, most *atomic.Int64
}

func (e ruleEdge) RuleGroups(ctx context.Context, f model.RuleFilter) ([]model.RuleGroup, error) {
	n := e.inFlight.Add(1)
	defer e.inFlight.Add(-1)
	for m := e.most.Load(); n > m && !e.most.CompareAndSwap(m, n); m = e.most.Load() {
	}
	e.mu.Lock()
	*e.asked = append(*e.asked, f)
	e.mu.Unlock()
	if e.err != nil {
		return nil, e.err
	}
	if e.edge == "slow" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return []model.RuleGroup{{Name: "g-" + e.edge, File: "rules.yml", Interval: 15 * time.Second,
		Rules: []model.Rule{{Type: model.RuleRecording, Name: "r", Query: "up", Health: "ok"}}}}, nil
}

// ruleCatalog is a catalog of coordinator c1 and the edges given (e9
// revoked), and c1's rules edge.
func ruleCatalog(t *testing.T, edges []string) *catalog.FSM {
	t.Helper()
	cat := catalog.New()
	idx := uint64(1)
	if err := cat.ApplyMembership(idx, catalog.Membership{Voters: []uint64{1}}); err != nil {
		t.Fatal(err)
	}
	apply := func(c catalog.Command) {
		idx++
		if _, err := cat.ApplyCommand(idx, c); err != nil {
			t.Fatalf("apply %T: %v", c, err)
		}
	}
	apply(catalog.RegisterNode{ID: "c1", Role: catalog.RoleCoordinator, RaftID: 1, Addr: "c1:7000", TimeMs: 1})
	for _, e := range append(slices.Clone(edges), query.CoordinatorRulesEdge("c1")) {
		apply(catalog.RegisterNode{ID: e, Role: catalog.RoleEdge, Addr: e + ":7070", TimeMs: 1})
	}
	if slices.Contains(edges, "e9") {
		apply(catalog.SetRevoked{ID: "e9", Revoked: true})
	}
	return cat
}

func TestFrontend_EdgeRuleGroupsMergesByEdgeAndNamesTheUnreachable(t *testing.T) {
	edges := []string{"e3", "e1", "down", "e2", "slow", "noaddr", "e9", "plain"}
	cat := ruleCatalog(t, edges)
	var mu sync.Mutex
	var asked []model.RuleFilter
	var inFlight, most atomic.Int64
	var dialled []string
	f, err := query.New(query.Options{Catalog: cat, MaxParallelEdges: 2, EdgeTimeout: 200 * time.Millisecond,
		Replica: func(string) (query.ReplicaSource, error) { return nil, errors.New("no replicas") },
		Edge: func(id, addr string) (query.Source, error) {
			mu.Lock()
			dialled = append(dialled, id)
			mu.Unlock()
			switch id {
			case "noaddr":
				return nil, errors.New("no address")
			case "plain":
				return loggedSource{edge: id, log: &askLog{}}, nil // lists no rules
			}
			e := ruleEdge{edge: id, mu: &mu, asked: &asked, inFlight: &inFlight, most: &most}
			if id == "down" {
				e.err = errors.New("connection refused")
			}
			return e, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, warns := backend.WithWarnings(context.Background())
	filter := model.RuleFilter{Type: model.RuleFilterRecord, RuleNames: []string{"r"}}
	got, err := f.EdgeRuleGroups(ctx, nil, filter)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, eg := range got {
		listed = append(listed, eg.Edge)
		if eg.Edge != "plain" && (len(eg.Groups) != 1 || eg.Groups[0].Name != "g-"+eg.Edge) {
			t.Errorf("edge %s: groups %+v", eg.Edge, eg.Groups)
		}
	}
	if want := []string{"e1", "e2", "e3", "plain"}; !slices.Equal(listed, want) {
		t.Errorf("edges listed %v, want %v (sorted; unreachable, revoked and the rules edge left out)", listed, want)
	}
	for _, id := range dialled {
		if id == "e9" || id == "c1-rules" {
			t.Errorf("asked %s: revoked edges and coordinators' rules edges are not asked", id)
		}
	}
	w := warns.List()
	if len(w) != 1 || !strings.HasPrefix(w[0], "3 edges unreachable (down, noaddr, slow): their rule groups are not listed") {
		t.Errorf("warnings %q", w)
	}
	for _, a := range asked {
		if a.Type != filter.Type || !slices.Equal(a.RuleNames, filter.RuleNames) {
			t.Errorf("an edge was asked with filter %+v, want %+v", a, filter)
		}
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d edges asked at once, MaxParallelEdges is 2", m)
	}
}

func TestFrontend_EdgeRuleGroupsAsksOnlyTheEdgesNamed(t *testing.T) {
	cat := ruleCatalog(t, []string{"e1", "e2", "e3"})
	var mu sync.Mutex
	var asked []model.RuleFilter
	var inFlight, most atomic.Int64
	var dialled []string
	f, err := query.New(query.Options{Catalog: cat,
		Replica: func(string) (query.ReplicaSource, error) { return nil, errors.New("no replicas") },
		Edge: func(id, addr string) (query.Source, error) {
			mu.Lock()
			dialled = append(dialled, id)
			mu.Unlock()
			return ruleEdge{edge: id, mu: &mu, asked: &asked, inFlight: &inFlight, most: &most}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, warns := backend.WithWarnings(context.Background())
	got, err := f.EdgeRuleGroups(ctx, []string{"e3", "e1", "ghost", "c1", "e3"}, model.RuleFilter{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dialled)
	if !slices.Equal(dialled, []string{"e1", "e3"}) {
		t.Errorf("asked %v, want e1 and e3", dialled)
	}
	if len(got) != 2 || got[0].Edge != "e1" || got[1].Edge != "e3" {
		t.Errorf("got %+v", got)
	}
	w := warns.List()
	if want := fmt.Sprintf("2 edges asked for are not in the catalog (%s, %s): no rule groups listed for them", "c1", "ghost"); len(w) != 1 || w[0] != want {
		t.Errorf("warnings %q, want %q", w, want)
	}
}
