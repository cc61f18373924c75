package fanoutbench

import (
	"context"
	"slices"
	"testing"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

func TestSimQuery_LabelNamesAndValuesAreTheSortedDistinctOnesOfTheMatchingSeries(t *testing.T) {
	o := DefaultOptions()
	e := newSimEdge(&o, "sim-0001", 3, true)
	q := simQuery{e: e}
	ctx := context.Background()
	byEdge := []*tributaryv1.Matcher{{Type: tributaryv1.Matcher_EQUAL, Name: simEdgeName, Value: "sim-0001"}}

	names, err := q.LabelNames(ctx, &tributaryv1.LabelNamesRequest{Matchers: byEdge})
	if want := []string{"__name__", simEdgeName, simProbe}; err != nil || !slices.Equal(names.GetNames(), slices.Sorted(slices.Values(want))) {
		t.Errorf("label names: %v, %v; want %v", names.GetNames(), err, want)
	}
	values, err := q.LabelValues(ctx, &tributaryv1.LabelValuesRequest{Name: simProbe, Matchers: byEdge})
	if err != nil || !slices.Equal(values.GetValues(), []string{"p0", "p1", "p2"}) {
		t.Errorf("values of %s: %v, %v", simProbe, values.GetValues(), err)
	}
	other := []*tributaryv1.Matcher{{Type: tributaryv1.Matcher_EQUAL, Name: simEdgeName, Value: "sim-0002"}}
	if values, err := q.LabelValues(ctx, &tributaryv1.LabelValuesRequest{Name: simProbe, Matchers: other}); err != nil || len(values.GetValues()) != 0 {
		t.Errorf("values on another edge: %v, %v", values.GetValues(), err)
	}
	regex := []*tributaryv1.Matcher{{Type: tributaryv1.Matcher_REGEX, Name: simEdgeName, Value: ".*"}}
	if _, err := q.LabelNames(ctx, &tributaryv1.LabelNamesRequest{Matchers: regex}); err == nil {
		t.Error("a regex matcher was accepted")
	}
}
