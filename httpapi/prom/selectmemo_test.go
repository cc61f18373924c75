package prom

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// TestSelectKey_DistinguishesSelects: Selects that may answer differently
// get different keys; the same Select, with matchers built anew, the same.
func TestSelectKey_DistinguishesSelects(t *testing.T) {
	m := func(typ labels.MatchType, n, v string) *labels.Matcher { return labels.MustNewMatcher(typ, n, v) }
	h := &storage.SelectHints{Start: 1, End: 60_000, Step: 60_000, Range: 60_000, Func: "max_over_time"}
	base := func() string {
		return selectKey(true, nil, 1, 60_000, h, []*labels.Matcher{m(labels.MatchEqual, "a", "b")})
	}
	if k1, k2 := base(), base(); k1 != k2 {
		t.Fatalf("the same Select has two keys: %q and %q", k1, k2)
	}
	others := map[string]string{
		"no downsampling": selectKey(false, nil, 1, 60_000, h, []*labels.Matcher{m(labels.MatchEqual, "a", "b")}),
		"folded by max":   selectKey(true, &groupFold{max: true}, 1, 60_000, h, []*labels.Matcher{m(labels.MatchEqual, "a", "b")}),
		"folded by min":   selectKey(true, &groupFold{by: []string{"a"}}, 1, 60_000, h, []*labels.Matcher{m(labels.MatchEqual, "a", "b")}),
		"range":           selectKey(true, nil, 1, 60_001, h, []*labels.Matcher{m(labels.MatchEqual, "a", "b")}),
		"no hints":        selectKey(true, nil, 1, 60_000, nil, []*labels.Matcher{m(labels.MatchEqual, "a", "b")}),
		"function":        selectKey(true, nil, 1, 60_000, &storage.SelectHints{Start: 1, End: 60_000, Step: 60_000, Range: 60_000, Func: "min_over_time"}, []*labels.Matcher{m(labels.MatchEqual, "a", "b")}),
		"not equal":       selectKey(true, nil, 1, 60_000, h, []*labels.Matcher{m(labels.MatchNotEqual, "a", "b")}),
		"name with !":     selectKey(true, nil, 1, 60_000, h, []*labels.Matcher{m(labels.MatchEqual, "a!", "b")}),
		"two matchers":    selectKey(true, nil, 1, 60_000, h, []*labels.Matcher{m(labels.MatchEqual, "a", "b"), m(labels.MatchRegexp, "c", "d")}),
	}
	seen := map[string]string{base(): "base"}
	for name, k := range others {
		if prev, ok := seen[k]; ok {
			t.Errorf("%s and %s have the same key %q", name, prev, k)
		}
		seen[k] = name
	}
}
