package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

func TestNode_CreatedSeriesListsNewSeriesInCreationOrder(t *testing.T) {
	dir := t.TempDir()
	n := mustOpen(t, testOptions(t, dir))
	ts := base.Add(39 * 24 * time.Hour).UnixMilli()
	write := func(names ...string) {
		t.Helper()
		var bs []model.Batch
		for _, name := range names {
			bs = append(bs, model.Batch{Labels: []labels.Label{{Name: "__name__", Value: name}}, Ts: []int64{ts}, Vs: []float64{1}})
		}
		if _, err := n.Write(context.Background(), bs); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "b", "c")
	got, next := n.CreatedSeries(0, 2)
	if len(got) != 2 || got[0].Get("__name__") != "a" || got[1].Get("__name__") != "b" {
		t.Fatalf("first page %v", got)
	}
	got, next = n.CreatedSeries(next, 10)
	if len(got) != 1 || got[0].Get("__name__") != "c" {
		t.Fatalf("second page %v", got)
	}
	if got, _ := n.CreatedSeries(next, 10); len(got) != 0 {
		t.Fatalf("nothing new, got %v", got)
	}
	write("a", "d") // a is known: only d is new
	got, next2 := n.CreatedSeries(next, 10)
	if len(got) != 1 || got[0].Get("__name__") != "d" || next2 <= next {
		t.Fatalf("after a second write %v (next %d → %d)", got, next, next2)
	}
	// After a restart the series come back from the store, same order.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	m := mustOpen(t, testOptions(t, dir))
	defer m.Close()
	all, _ := m.CreatedSeries(1, 100)
	if got := fmt.Sprint(all); got != "[a{} b{} c{} d{}]" {
		t.Fatalf("all series after a restart %s", got)
	}
}
