package node_test

import (
	"context"
	"testing"

	"github.com/tributarydb/tributary/model"
)

// A query whose postings were cached must see a series added afterwards,
// whatever its matchers: equality, a regexp of a few literals (answered by
// equality lookups), any other regexp, and a negative one.
func TestQuery_SeesSeriesAddedAfterPostingsWereCached(t *testing.T) {
	o := testOptions(t, t.TempDir())
	n := mustOpen(t, o)
	defer n.Close()
	now := o.Now().UnixMilli()
	count := func(selector string) int {
		got := 0
		_, err := n.Query(context.Background(), model.Query{Matchers: sel(t, selector), Start: now - 1000, End: now + 1000, Mode: model.ModeRaw}, func(model.Series) error { got++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i, dev := range []string{"d1", "d2", "d3"} {
		if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "temp", "site", "a", "dev", dev), Ts: []int64{now}, Vs: []float64{1}}}); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second query is answered from the cache
			for selector, want := range map[string]int{
				`temp{site="a"}`:             i + 1,
				`temp{dev=~"d1|d3|d9"}`:      1 + map[bool]int{true: 1}[i >= 2],
				`temp{dev=~"d.*",site=~"a"}`: i + 1,
				`temp{dev!~"d2"}`:            i + 1 - map[bool]int{true: 1}[i >= 1],
				`temp{dev!~"d1|d3|"}`:        map[bool]int{true: 1}[i >= 1],
			} {
				if got := count(selector); got != want {
					t.Fatalf("after %d series: %s sees %d, want %d", i+1, selector, got, want)
				}
			}
		}
	}
}
