package qstream

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"

	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// fake is a stream that answers msgs, then err (io.EOF when nil).
type fake[T any] struct {
	grpc.ClientStream
	msgs []*T
	err  error
}

func (f *fake[T]) Recv() (*T, error) {
	if len(f.msgs) == 0 {
		if f.err != nil {
			return nil, f.err
		}
		return nil, io.EOF
	}
	m := f.msgs[0]
	f.msgs = f.msgs[1:]
	return m, nil
}

// collect gathers the runs of points as "name@ts=v" strings.
func collect(out *[]string) Points {
	return func(name string, ts []int64, vs []float64) error {
		for i, t := range ts {
			*out = append(*out, fmt.Sprintf("%s@%d=%v", name, t, vs[i]))
		}
		return nil
	}
}

func TestQuery(t *testing.T) {
	s := &fake[pb.QueryResponse]{msgs: []*pb.QueryResponse{
		{Series: &pb.Series{Labels: []*pb.Label{{Name: "__name__", Value: "m"}, {Name: "s", Value: "a"}}}, SeriesIndex: 0,
			TimestampsMs: []int64{1, 2}, Values: []float64{10, 20}, Warnings: []string{"w1"}, Source: "cloud"},
		{Series: &pb.Series{Labels: []*pb.Label{{Name: "s", Value: "b"}}}, SeriesIndex: 1, TimestampsMs: []int64{1}, Values: []float64{5}},
		{SeriesIndex: 0, TimestampsMs: []int64{3}, Values: []float64{30}, Warnings: []string{"w2"}},
	}}
	var got []string
	info, err := Query(s, "s", collect(&got))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a@1=10", "a@2=20", "b@1=5", "a@3=30"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("points %v, want %v", got, want)
	}
	if !reflect.DeepEqual(info, Info{Warnings: []string{"w1", "w2"}, Source: "cloud"}) {
		t.Errorf("info %+v", info)
	}
}

func TestQueryRefuses(t *testing.T) {
	for name, msg := range map[string]*pb.QueryResponse{
		"points before labels": {SeriesIndex: 3, TimestampsMs: []int64{1}, Values: []float64{1}},
		"unpaired":             {Series: &pb.Series{}, TimestampsMs: []int64{1, 2}, Values: []float64{1}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Query(&fake[pb.QueryResponse]{msgs: []*pb.QueryResponse{msg}}, "s", collect(new([]string)))
			if err == nil {
				t.Fatal("no error")
			}
		})
	}
	boom := errors.New("boom")
	if _, err := Query(&fake[pb.QueryResponse]{err: boom}, "s", collect(new([]string))); !errors.Is(err, boom) {
		t.Errorf("stream error %v, want boom", err)
	}
}

func TestReplica(t *testing.T) {
	lb := func(v string) []*clusterv1.Label { return []*clusterv1.Label{{Name: "s", Value: v}} }
	s := &fake[clusterv1.QueryResponse]{msgs: []*clusterv1.QueryResponse{
		{Info: &clusterv1.QueryInfo{Warnings: []string{"w"}, Source: "replica"}, Series: []*clusterv1.QuerySeries{
			{Edge: "e", Labels: lb("a"), TimestampsMs: []int64{1}, Values: []float64{1}},
			{Edge: "e", Continued: true, TimestampsMs: []int64{2}, Values: []float64{2}},
		}},
		{Series: []*clusterv1.QuerySeries{{Edge: "e", Labels: []*clusterv1.Label{{Name: "x", Value: "y"}}, TimestampsMs: []int64{7}, Values: []float64{7}}}},
	}}
	var got []string
	info, err := Replica(s, "s", "e", collect(&got))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != "a@1=1" || got[1] != "a@2=2" || !strings.HasPrefix(got[2], "(a series without a s label") {
		t.Errorf("points %v", got)
	}
	if info.Source != "replica" || len(info.Warnings) != 1 {
		t.Errorf("info %+v", info)
	}
	for name, series := range map[string]*clusterv1.QuerySeries{
		"other edge":         {Edge: "f", Labels: lb("a")},
		"continued at first": {Edge: "e", Continued: true},
		"unpaired":           {Edge: "e", Labels: lb("a"), TimestampsMs: []int64{1}},
	} {
		t.Run(name, func(t *testing.T) {
			msgs := []*clusterv1.QueryResponse{{Series: []*clusterv1.QuerySeries{series}}}
			if _, err := Replica(&fake[clusterv1.QueryResponse]{msgs: msgs}, "s", "e", collect(new([]string))); err == nil {
				t.Fatal("no error")
			}
		})
	}
}
