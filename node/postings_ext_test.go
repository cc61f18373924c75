package node_test

import (
	"context"
	"testing"

	"github.com/tributarydb/tributary/model"
)

// A query whose postings were cached must see a series added afterwards.
func TestQuery_SeesSeriesAddedAfterPostingsWereCached(t *testing.T) {
	o := testOptions(t, t.TempDir())
	n := mustOpen(t, o)
	defer n.Close()
	now := o.Now().UnixMilli()
	count := func() int {
		got := 0
		_, err := n.Query(context.Background(), model.Query{Matchers: sel(t, `temp{site="a"}`), Start: now - 1000, End: now + 1000, Mode: model.ModeRaw}, func(model.Series) error { got++; return nil })
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
			if got := count(); got != i+1 {
				t.Fatalf("after %d series: query sees %d", i+1, got)
			}
		}
	}
}
