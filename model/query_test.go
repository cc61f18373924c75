package model_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

func matcher(t *testing.T, typ labels.MatchType, name, value string) *labels.Matcher {
	t.Helper()
	m, err := labels.NewMatcher(typ, name, value)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestQuery_ValidateRefusesBadQueriesWithErrBadQuery(t *testing.T) {
	cpu := matcher(t, labels.MatchEqual, labels.MetricName, "cpu")
	anyHost := matcher(t, labels.MatchRegexp, "host", ".*")
	for _, tc := range []struct {
		name string
		q    model.Query
		want string // "" for a valid query
	}{
		{"raw", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeRaw, End: 10}, ""},
		{"last point", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeLastPoint}, ""},
		{"downsample", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeDownsample, Step: 10, Downsample: rollup.FuncMax, End: 100}, ""},
		{"no matchers", model.Query{Mode: model.ModeRaw}, "at least one matcher is required"},
		{"end before start", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeRaw, Start: 5, End: 4}, "end 4 is before start 5"},
		{"no step", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeDownsample, Downsample: rollup.FuncAvg}, "positive step"},
		{"no function", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeDownsample, Step: 1}, "needs a function"},
		{"unknown mode", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: 9}, "unknown mode 9"},
		{"zero mode", model.Query{Matchers: []*labels.Matcher{cpu}}, "unknown mode 0"},
		{"unknown downsample function", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeRaw, Downsample: rollup.FuncLast + 1}, "unknown aggregate function"},
		{"unknown aggregate", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeRaw, Aggregate: -1}, "unknown aggregate function -1"},
		{"too many buckets", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeDownsample, Step: 1, Downsample: rollup.FuncSum, End: model.MaxBuckets + 1}, "more than 1000000"},
		{"negative max staleness", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeRaw, MaxStaleness: -2}, "max staleness -2 ms is negative"},
		{"always fresh", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeRaw, MaxStaleness: model.AlwaysFresh}, ""},
		{"just enough buckets", model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeDownsample, Step: 1, Downsample: rollup.FuncSum, End: model.MaxBuckets}, ""},
		{"only empty-matching matchers", model.Query{Matchers: []*labels.Matcher{anyHost}, Mode: model.ModeRaw}, "must not match the empty string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid query refused: %v", err)
			case tc.want == "":
			case err == nil:
				t.Fatalf("accepted, want an error containing %q", tc.want)
			case !errors.Is(err, model.ErrBadQuery) || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q, want one wrapping ErrBadQuery containing %q", err, tc.want)
			}
		})
	}
}

func TestQuery_ValidateSortsAndDeduplicatesGroupBy(t *testing.T) {
	q := model.Query{Matchers: []*labels.Matcher{matcher(t, labels.MatchEqual, labels.MetricName, "cpu")}, Mode: model.ModeRaw,
		GroupBy: []string{"site", "host", "site"}, Aggregate: rollup.FuncSum}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"host", "site"}; !slices.Equal(q.GroupBy, want) {
		t.Fatalf("GroupBy %q, want %q", q.GroupBy, want)
	}
}

func TestQuery_SourceNamesTheTierThatAnswers(t *testing.T) {
	ds := func(step, off int64) model.Query {
		return model.Query{Mode: model.ModeDownsample, Step: step, Offset: off, Downsample: rollup.FuncAvg}
	}
	for _, tc := range []struct {
		name string
		q    model.Query
		want string
	}{
		{"raw", model.Query{Mode: model.ModeRaw, Step: rollup.Day}, "raw"},
		{"last", model.Query{Mode: model.ModeLastPoint}, "last"},
		{"minute step", ds(60_000, 0), "raw"},
		{"hour step", ds(rollup.Hour, 0), "rollup_1h"},
		{"three hours", ds(3*rollup.Hour, 0), "rollup_1h"},
		{"day step", ds(rollup.Day, 0), "rollup_1d"},
		{"two days", ds(2*rollup.Day, 0), "rollup_1d"},
		{"hour step, whole-step offset", ds(rollup.Hour, -2*rollup.Hour), "rollup_1h"},
		{"hour step, shifted buckets", ds(rollup.Hour, 15*60_000), "raw"},
		{"day step, shifted buckets", ds(rollup.Day, rollup.Hour), "raw"},
	} {
		if got := tc.q.Source(); got != tc.want {
			t.Errorf("%s: Source %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestQuery_BucketOffsetIsOffsetModuloStep(t *testing.T) {
	for _, tc := range []struct{ step, offset, want int64 }{
		{0, 5, 0}, {-10, 5, 0}, {10, 0, 0}, {10, 3, 3}, {10, 13, 3}, {10, -3, 7}, {10, -13, 7}, {10, -10, 0}, {10, 30, 0},
	} {
		q := model.Query{Step: tc.step, Offset: tc.offset}
		if got := q.BucketOffset(); got != tc.want {
			t.Errorf("step %d offset %d: BucketOffset %d, want %d", tc.step, tc.offset, got, tc.want)
		}
		if got := q.BucketOffset(); tc.step > 0 && (got < 0 || got >= tc.step || (got-tc.offset)%tc.step != 0) {
			t.Errorf("step %d offset %d: %d is not Offset reduced to [0, Step)", tc.step, tc.offset, got)
		}
	}
}
