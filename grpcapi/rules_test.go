package grpcapi_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/model"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

func TestRuleGroups_ServedFromTheRuleSourceAndRoundTrip(t *testing.T) {
	_, qc, srv := serveWith(t, 0)
	ctx := context.Background()
	resp, err := qc.RuleGroups(ctx, &pb.RuleGroupsRequest{})
	if err != nil || len(resp.Groups) != 0 {
		t.Fatalf("a node without rules: %v, %v", resp, err)
	}
	at := time.Date(2026, 11, 28, 10, 0, 0, 123456789, time.UTC)
	want := []model.RuleGroup{{Name: "can", File: "can.yml", Interval: 15 * time.Second, Limit: 3,
		EvaluationTime: 1500 * time.Microsecond, LastEvaluation: at, Rules: []model.Rule{
			{Type: model.RuleAlerting, Name: "Hot", Query: "coolant_temp > 105", Labels: map[string]string{"severity": "page"},
				Health: "ok", EvaluationTime: time.Millisecond, LastEvaluation: at, Annotations: map[string]string{"summary": "hot"},
				State: "firing", For: 30 * time.Second, KeepFiringFor: time.Minute, Alerts: []model.RuleAlert{
					{Labels: map[string]string{"alertname": "Hot"}, Annotations: map[string]string{"summary": "hot"}, State: "firing",
						ActiveAt: at.Add(-time.Minute), KeepFiringSince: at, Value: 107.5}}},
			{Type: model.RuleRecording, Name: "coolant:avg", Query: "avg(coolant_temp)", Health: "err", LastError: "boom"},
		}}}
	var got model.RuleFilter
	srv.SetRuleGroups(func(_ context.Context, f model.RuleFilter) ([]model.RuleGroup, error) {
		got = f
		return want, nil
	})
	filter := model.RuleFilter{Type: model.RuleFilterAlert, RuleNames: []string{"Hot"}, RuleGroups: []string{"can"},
		Files: []string{"can.yml"}, ExcludeAlerts: true}
	resp, err = qc.RuleGroups(ctx, grpcapi.RuleFilterToProto(filter))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, filter) {
		t.Errorf("filter %+v, want %+v", got, filter)
	}
	if back := grpcapi.RuleGroupsFromProto(resp.Groups); !reflect.DeepEqual(back, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, want)
	}
	if _, err := qc.RuleGroups(ctx, &pb.RuleGroupsRequest{Type: "alerts"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown type: %v, want InvalidArgument", err)
	}
}
