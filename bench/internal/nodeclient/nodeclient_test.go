package nodeclient

import (
	"strings"
	"testing"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

func TestCheckWrite(t *testing.T) {
	rej := func(i int32) *tributaryv1.Rejection {
		return &tributaryv1.Rejection{BatchIndex: i, PointIndex: -1, Reason: tributaryv1.RejectReason_REJECT_REASON_INVALID_SERIES, Message: "missing metric name", Points: 10}
	}
	tests := []struct {
		name    string
		resp    *tributaryv1.WriteResponse
		sent    int
		wantErr []string
	}{
		{"all accepted", &tributaryv1.WriteResponse{Accepted: 100}, 100, nil},
		{"short count without rejections", &tributaryv1.WriteResponse{Accepted: 90}, 100, []string{"accepted 90 and rejected 0 of 100"}},
		{"more accepted than sent", &tributaryv1.WriteResponse{Accepted: 101}, 100, []string{"accepted 101"}},
		{"rejections quoted", &tributaryv1.WriteResponse{Accepted: 90, Rejected: 10, Rejections: []*tributaryv1.Rejection{rej(3)}}, 100,
			[]string{"rejected 10", "batch 3 point -1: REJECT_REASON_INVALID_SERIES (10 points): missing metric name"}},
		{"many rejections summarised", &tributaryv1.WriteResponse{Rejected: 70, Rejections: []*tributaryv1.Rejection{rej(0), rej(1), rej(2), rej(3), rej(4), rej(5), rej(6)}}, 70,
			[]string{"batch 4 point", "and 2 more rejections"}},
		{"nil response", nil, 1, []string{"accepted 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckWrite(tc.resp, tc.sent)
			if (err != nil) != (tc.wantErr != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr != nil)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestSeriesKey_IgnoresLabelOrder(t *testing.T) {
	a := []*tributaryv1.Label{{Name: "__name__", Value: "t"}, {Name: "site", Value: "s1"}, {Name: "device", Value: "d"}}
	b := []*tributaryv1.Label{{Name: "device", Value: "d"}, {Name: "__name__", Value: "t"}, {Name: "site", Value: "s1"}}
	if SeriesKey(a) != SeriesKey(b) || SeriesKey(a) != "{__name__=t, device=d, site=s1}" {
		t.Errorf("%s vs %s", SeriesKey(a), SeriesKey(b))
	}
}
