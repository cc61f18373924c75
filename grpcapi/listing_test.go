package grpcapi_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// warningBackend lists nothing and says an edge may be missing, as a
// coordinator's front end does.
type warningBackend struct{ failingBackend }

func (warningBackend) Series(ctx context.Context, _ []*labels.Matcher, _ int) ([]labels.Labels, error) {
	backend.Warn(ctx, "edge pi-1 unreachable")
	return nil, nil
}

func (warningBackend) LabelNames(ctx context.Context, _ []*labels.Matcher) ([]string, error) {
	backend.Warn(ctx, "edge pi-1 unreachable")
	return nil, nil
}

func (warningBackend) LabelValues(ctx context.Context, _ string, _ []*labels.Matcher) ([]string, error) {
	backend.Warn(ctx, "edge pi-1 unreachable")
	return nil, nil
}

func TestAPI_ListingsCarryTheBackendsWarnings(t *testing.T) {
	g, conn := serveBackend(t, grpcapi.New(warningBackend{}, grpcapi.Options{}).Register)
	t.Cleanup(func() { conn.Close(); g.Stop() })
	qc := pb.NewQueryServiceClient(conn)
	ctx := context.Background()
	want := []string{"edge pi-1 unreachable"}
	sr, err := qc.Series(ctx, &pb.SeriesRequest{Matchers: []*pb.Matcher{{Name: "__name__", Value: "x"}}})
	if err != nil || !slices.Equal(sr.GetWarnings(), want) {
		t.Fatalf("series: %v %v", sr, err)
	}
	nr, err := qc.LabelNames(ctx, &pb.LabelNamesRequest{})
	if err != nil || !slices.Equal(nr.GetWarnings(), want) {
		t.Fatalf("label names: %v %v", nr, err)
	}
	vr, err := qc.LabelValues(ctx, &pb.LabelValuesRequest{Name: "host"})
	if err != nil || !slices.Equal(vr.GetWarnings(), want) {
		t.Fatalf("label values: %v %v", vr, err)
	}
}
