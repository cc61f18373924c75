package grpcapi_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The conversions cast enumerations; each API name must mean the same
// model value.
func TestConvert_EnumsMirrorTheAPI(t *testing.T) {
	for r := model.RejectReason(1); r < model.NumRejectReasons; r++ {
		if got, want := pb.RejectReason(r).String(), "REJECT_REASON_"+strings.ToUpper(r.String()); got != want {
			t.Errorf("reject reason %d is %s in the API, %s in model", int(r), got, want)
		}
	}
	if n := len(pb.RejectReason_name) - 1; n != int(model.NumRejectReasons)-1 {
		t.Errorf("the API has %d reject reasons, model %d", n, model.NumRejectReasons-1)
	}
	for f := rollup.FuncAvg; f <= rollup.FuncLast; f++ {
		if got, want := pb.Aggregate(f).String(), "AGGREGATE_"+strings.ToUpper(f.String()); got != want {
			t.Errorf("function %d is %s in the API, %s in rollup", int(f), got, want)
		}
	}
	modes := map[model.QueryMode]pb.QueryMode{
		model.ModeRaw: pb.QueryMode_QUERY_MODE_RAW, model.ModeDownsample: pb.QueryMode_QUERY_MODE_DOWNSAMPLE,
		model.ModeLastPoint: pb.QueryMode_QUERY_MODE_LAST_POINT,
	}
	for m, want := range modes {
		req, err := grpcapi.QueryToProto(model.Query{Mode: m, Step: 60_000})
		if err != nil || req.Mode != want {
			t.Errorf("mode %d: %v %v, want %v", m, req.GetMode(), err, want)
		}
	}
	types := map[labels.MatchType]pb.Matcher_Type{
		labels.MatchEqual: pb.Matcher_EQUAL, labels.MatchNotEqual: pb.Matcher_NOT_EQUAL,
		labels.MatchRegexp: pb.Matcher_REGEX, labels.MatchNotRegexp: pb.Matcher_NOT_REGEX,
	}
	for lt, want := range types {
		m, err := labels.NewMatcher(lt, "a", "b")
		if err != nil {
			t.Fatal(err)
		}
		if got := grpcapi.MatchersToProto([]*labels.Matcher{m})[0].Type; got != want {
			t.Errorf("matcher type %s: %v, want %v", lt, got, want)
		}
	}
}

func TestConvert_QueryRoundTrips(t *testing.T) {
	cpu, err := labels.NewMatcher(labels.MatchEqual, labels.MetricName, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	host, err := labels.NewMatcher(labels.MatchRegexp, "host", "pi-.*")
	if err != nil {
		t.Fatal(err)
	}
	ms := []*labels.Matcher{cpu, host}
	for _, q := range []model.Query{
		{Matchers: ms, Start: 1, End: 2, Mode: model.ModeRaw},
		{Matchers: ms, Start: 0, End: 3_600_000, Mode: model.ModeDownsample, Step: 60_000, Downsample: rollup.FuncMax, LimitSeries: 7},
		{Matchers: ms, End: 1, Mode: model.ModeDownsample, Step: 1000, Offset: 3000, Downsample: rollup.FuncSum, GroupBy: []string{"site"}, Aggregate: rollup.FuncAvg},
		{Matchers: ms, End: 1, Mode: model.ModeLastPoint},
		{Matchers: ms, Start: 1, End: 2, Mode: model.ModeRaw, MaxStaleness: 30_000},
		{Matchers: ms, Start: 1, End: 2, Mode: model.ModeRaw, MaxStaleness: model.AlwaysFresh},
	} {
		req, err := grpcapi.QueryToProto(q)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		got, err := grpcapi.QueryFromProto(req)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		// A whole-step offset selects the same buckets; the API drops it.
		want := q
		want.Offset = 0
		if !sameQuery(got, want) {
			t.Errorf("round trip of %+v gave %+v", q, got)
		}
	}
}

func sameQuery(a, b model.Query) bool {
	str := func(ms []*labels.Matcher) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.String())
		}
		return out
	}
	am, bm := a.Matchers, b.Matchers
	a.Matchers, b.Matchers = nil, nil
	ag, bg := a.GroupBy, b.GroupBy
	a.GroupBy, b.GroupBy = nil, nil
	return reflect.DeepEqual(a, b) && slices.Equal(str(am), str(bm)) && slices.Equal(ag, bg)
}

func TestConvert_QueryToProtoRefusesAnOffsetTheAPICannotCarry(t *testing.T) {
	cpu, _ := labels.NewMatcher(labels.MatchEqual, labels.MetricName, "cpu")
	_, err := grpcapi.QueryToProto(model.Query{Matchers: []*labels.Matcher{cpu}, Mode: model.ModeDownsample, Step: 60_000, Offset: 1000, Downsample: rollup.FuncAvg})
	if err == nil || !strings.Contains(err.Error(), "no bucket offset") {
		t.Fatalf("offset of a part of the step: %v", err)
	}
}

func TestConvert_QueryFromProtoFillsDefaultsAndNamesBadMatchers(t *testing.T) {
	eq := []*pb.Matcher{{Name: "__name__", Value: "x"}}
	q, err := grpcapi.QueryFromProto(&pb.QueryRequest{Matchers: eq, StepMs: 1000})
	if err != nil || q.Mode != model.ModeDownsample || q.Downsample != rollup.FuncAvg {
		t.Fatalf("unspecified mode with a step: %+v %v, want an averaging downsample", q, err)
	}
	if q, err := grpcapi.QueryFromProto(&pb.QueryRequest{Matchers: eq}); err != nil || q.Mode != model.ModeRaw {
		t.Fatalf("unspecified mode without a step: %+v %v, want raw", q, err)
	}
	_, err = grpcapi.QueryFromProto(&pb.QueryRequest{Matchers: append(eq, &pb.Matcher{Type: pb.Matcher_REGEX, Name: "a", Value: "("})})
	if err == nil || !strings.Contains(err.Error(), "matcher 1") {
		t.Fatalf("bad regexp: %v, want it named as matcher 1", err)
	}
}

// max_staleness_ms: unset is the server's default, 0 always fresh, a
// positive value an allowance; a negative one is refused by name.
func TestConvert_MaxStaleness(t *testing.T) {
	eq := []*pb.Matcher{{Name: "__name__", Value: "x"}}
	for _, tc := range []struct {
		set  *int64
		want int64
	}{
		{nil, 0},
		{proto.Int64(0), model.AlwaysFresh},
		{proto.Int64(30_000), 30_000},
	} {
		q, err := grpcapi.QueryFromProto(&pb.QueryRequest{Matchers: eq, MaxStalenessMs: tc.set})
		if err != nil || q.MaxStaleness != tc.want {
			t.Errorf("max_staleness_ms %v: %d %v, want %d", tc.set, q.MaxStaleness, err, tc.want)
		}
		req, err := grpcapi.QueryToProto(q)
		if err != nil || (req.MaxStalenessMs == nil) != (tc.set == nil) || req.GetMaxStalenessMs() != func() int64 {
			if tc.set == nil {
				return 0
			}
			return *tc.set
		}() {
			t.Errorf("max_staleness_ms %v back to the API: %v %v", tc.set, req.MaxStalenessMs, err)
		}
	}
	_, err := grpcapi.QueryFromProto(&pb.QueryRequest{Matchers: eq, MaxStalenessMs: proto.Int64(-5)})
	if err == nil || !strings.Contains(err.Error(), "max_staleness_ms -5 is negative") {
		t.Fatalf("negative max_staleness_ms: %v", err)
	}
	if _, err := grpcapi.QueryToProto(model.Query{MaxStaleness: -7}); err == nil {
		t.Fatal("QueryToProto took a negative max staleness")
	}
}
