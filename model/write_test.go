package model_test

import (
	"context"
	"testing"

	"github.com/tributarydb/tributary/model"
)

func TestWriteResult_RejectCountsEveryPointAndKeepsTheFirstDetails(t *testing.T) {
	var r model.WriteResult
	for i := range model.MaxRejectionDetails + 10 {
		reason := model.RejectTooOld
		if i%2 == 1 {
			reason = model.RejectInvalidSeries
		}
		r.Reject(model.Rejection{BatchIndex: i, PointIndex: -1, Reason: reason, Points: 3})
	}
	n := int64(model.MaxRejectionDetails + 10)
	if r.Rejected != 3*n || r.Accepted != 0 {
		t.Fatalf("rejected %d accepted %d, want %d and 0", r.Rejected, r.Accepted, 3*n)
	}
	if r.RejectedBy[model.RejectTooOld] != 3*(n/2) || r.RejectedBy[model.RejectInvalidSeries] != 3*(n/2) {
		t.Fatalf("by reason %v", r.RejectedBy)
	}
	if len(r.Rejections) != model.MaxRejectionDetails {
		t.Fatalf("%d details kept, want %d", len(r.Rejections), model.MaxRejectionDetails)
	}
	for i, rj := range r.Rejections {
		if rj.BatchIndex != i {
			t.Fatalf("detail %d is of batch %d: the first ones must be kept", i, rj.BatchIndex)
		}
	}
}

func TestRejectReason_StringNamesEveryReason(t *testing.T) {
	want := map[model.RejectReason]string{
		model.RejectInvalidSeries:  "invalid_series",
		model.RejectLengthMismatch: "length_mismatch",
		model.RejectTooOld:         "too_old",
		model.RejectTooFarInFuture: "too_far_in_future",
		model.RejectInvalidValue:   "invalid_value",
		model.RejectLimitExceeded:  "limit_exceeded",
	}
	if len(want) != int(model.NumRejectReasons)-1 {
		t.Fatalf("%d reasons named here, NumRejectReasons says %d", len(want), model.NumRejectReasons-1)
	}
	for r, s := range want {
		if r.String() != s {
			t.Errorf("reason %d: %q, want %q", int(r), r.String(), s)
		}
	}
	if s := model.NumRejectReasons.String(); s != "unknown" {
		t.Errorf("out of range reason: %q", s)
	}
}

func TestQueryAPI_TagReadsBack(t *testing.T) {
	if api, ok := model.QueryAPIFrom(context.Background()); ok || api != "" {
		t.Fatalf("untagged context: %q %v", api, ok)
	}
	ctx := model.WithQueryAPI(context.Background(), model.QueryAPIPromQL)
	if api, ok := model.QueryAPIFrom(ctx); !ok || api != model.QueryAPIPromQL {
		t.Fatalf("tagged context: %q %v", api, ok)
	}
}
