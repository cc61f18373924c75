package restart

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/bench/internal/fakenode"
	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

const testStartMs int64 = 1_772_614_800_000 // a whole hour

func TestExpect_CountsAcknowledgedWindowsPerSeries(t *testing.T) {
	gen, err := workload.NewSensor(workload.SensorOptions{Series: 6, StartMs: testStartMs, IntervalMs: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	reqs := gen.Requests(2, 10) // three requests of two series × 10 points
	limitMs := testStartMs + 25_000
	reqs[0].Next(10)
	reqs[0].Next(10) // 20 points, ends at +19 s
	reqs[1].Next(10)
	reqs[1].Next(10)
	reqs[1].Next(10) // +20..+29 s passes the limit: filled but never sent
	// reqs[2] never sent anything.
	e := expect(gen, reqs, 10, limitMs)
	if e.Points != 2*20+2*20 {
		t.Errorf("%d points, want 80", e.Points)
	}
	if len(e.Counts) != 4 {
		t.Errorf("%d series, want the 4 written: %v", len(e.Counts), e.Counts)
	}
	for _, b := range reqs[1].Msg.Batches {
		if n := e.Counts[nodeclient.SeriesKey(b.Series.Labels)]; n != 20 {
			t.Errorf("%s: %d, want 20", nodeclient.SeriesKey(b.Series.Labels), n)
		}
	}
	if strings.Join(e.MetricNames, " ") != "humidity pressure temperature voltage" {
		t.Errorf("metric names %v", e.MetricNames)
	}
}

func TestVerify_FindsEveryKindOfDifference(t *testing.T) {
	ls := func(name, sensor string) []*tributaryv1.Label {
		return []*tributaryv1.Label{{Name: "__name__", Value: name}, {Name: "sensor", Value: sensor}}
	}
	grid := func(n int, skip int) []int64 {
		var ts []int64
		for i := 0; len(ts) < n; i++ {
			if i != skip {
				ts = append(ts, testStartMs+int64(i)*1000)
			}
		}
		return ts
	}
	tests := []struct {
		name     string
		stored   map[string][]int64 // sensor → timestamps of metric "t"
		expected map[string]int64   // sensor → acknowledged points
		want     []string           // problems, in order; none when empty
	}{
		{"all there, over several messages", map[string][]int64{"s1": grid(120, -1), "s2": grid(7, -1)}, map[string]int64{"s1": 120, "s2": 7}, nil},
		{"short series", map[string][]int64{"s1": grid(119, -1)}, map[string]int64{"s1": 120}, []string{"{__name__=t, sensor=s1}: 119 of 120 acknowledged points"}},
		{"gap with the right count", map[string][]int64{"s1": grid(120, 60)}, map[string]int64{"s1": 120},
			[]string{"{__name__=t, sensor=s1}: sample 61 is at " + fmtMs(testStartMs+61_000) + ", want " + fmtMs(testStartMs+60_000)}},
		{"missing series", map[string][]int64{"s1": grid(5, -1)}, map[string]int64{"s1": 5, "s2": 5}, []string{"{__name__=t, sensor=s2}: no points, want 5"}},
		{"stray series", map[string][]int64{"s1": grid(5, -1), "s9": grid(3, -1)}, map[string]int64{"s1": 5},
			[]string{"{__name__=t, sensor=s9}: 3 points in a series that was never written"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHead()
			for sensor, ts := range tc.stored {
				h.add(&tributaryv1.SeriesBatch{Series: &tributaryv1.Series{Labels: ls("t", sensor)}, TimestampsMs: ts, Values: make([]float64, len(ts))})
			}
			e := expectation{StartMs: testStartMs, IntervalMs: 1000, Counts: map[string]int64{}, MetricNames: []string{"t"}}
			for sensor, n := range tc.expected {
				e.Counts[nodeclient.SeriesKey(ls("t", sensor))] = n
				e.Points += n
			}
			v, err := verify(context.Background(), queryClient(t, h), e, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if v.NumProblems != len(tc.want) {
				t.Fatalf("%d problems %q, want %q", v.NumProblems, v.Problems, tc.want)
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(v.Problems[i], want) {
					t.Errorf("problem %q, want it to start %q", v.Problems[i], want)
				}
			}
		})
	}
}

// queryClient serves qs on a loopback port for the length of the test.
func queryClient(t *testing.T, qs tributaryv1.QueryServiceServer) tributaryv1.QueryServiceClient {
	t.Helper()
	addr := fakenode.ServeServices(t, func(s grpc.ServiceRegistrar) { tributaryv1.RegisterQueryServiceServer(s, qs) })
	conn, err := nodeclient.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return tributaryv1.NewQueryServiceClient(conn)
}
