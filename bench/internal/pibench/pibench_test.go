package pibench

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

func TestParseStats(t *testing.T) {
	s, err := parseStats("123.5MiB / 512MiB|87.25%")
	if err != nil {
		t.Fatal(err)
	}
	if s.MemBytes != int64(123.5*(1<<20)) || s.LimitBytes != 512<<20 || s.CPUPct != 87.25 {
		t.Fatalf("parsed %+v", s)
	}
	if s, err := parseStats("1.2GiB / 2GiB|0.00%"); err != nil || s.MemBytes != 1_288_490_188 {
		t.Fatalf("GiB: %+v, %v", s, err)
	}
	for _, bad := range []string{"", "12MiB / 512MiB", "12XB / 512MiB|1%", "12MiB / 512MiB|x%"} {
		if _, err := parseStats(bad); err == nil {
			t.Errorf("%q parses", bad)
		}
	}
}

func TestCompareSeries_CountsEveryKindOfDifference(t *testing.T) {
	a := []*tributaryv1.Label{{Name: "__name__", Value: "t"}, {Name: "device", Value: "d1"}}
	aSorted := []*tributaryv1.Label{{Name: "device", Value: "d1"}, {Name: "__name__", Value: "t"}}
	b := []*tributaryv1.Label{{Name: "__name__", Value: "t"}, {Name: "device", Value: "d2"}}
	want := map[string]nodeclient.Series{
		nodeclient.SeriesKey(a): {Labels: a, TimestampsMs: []int64{1, 2}, Values: []float64{1.5, 2.5}},
		nodeclient.SeriesKey(b): {Labels: b, TimestampsMs: []int64{1}, Values: []float64{3}},
	}
	same := []nodeclient.Series{
		{Labels: aSorted, TimestampsMs: []int64{1, 2}, Values: []float64{1.5, 2.5}},
		{Labels: b, TimestampsMs: []int64{1}, Values: []float64{3}},
	}
	if n := compareSeries(want, same); n != 0 {
		t.Fatalf("identical answer: %d mismatches", n)
	}
	changed := []nodeclient.Series{
		{Labels: a, TimestampsMs: []int64{1, 2}, Values: []float64{1.5, 2.6}},
		{Labels: []*tributaryv1.Label{{Name: "__name__", Value: "stray"}}, TimestampsMs: []int64{1}, Values: []float64{0}},
	}
	// a's value differs, the stray series is unexpected, b is missing.
	if n := compareSeries(want, changed); n != 3 {
		t.Fatalf("%d mismatches, want 3", n)
	}
}

func TestQueryMix_ShapesFollowTheWorkload(t *testing.T) {
	gen, err := workload.NewSensor(workload.SensorOptions{Series: 40, StartMs: 0, IntervalMs: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	qs := queryMix(gen, 10*3_600_000, 1000)
	if len(qs) != 4 {
		t.Fatalf("%d query types", len(qs))
	}
	if qs[0].wantPoints != 300 || qs[0].req.EndMs-qs[0].req.StartMs != 299_999 {
		t.Errorf("raw 5 min: %+v", qs[0])
	}
	if qs[3].wantSeries != 10 || qs[3].req.Mode != tributaryv1.QueryMode_QUERY_MODE_LAST_POINT {
		t.Errorf("last point over the 10 temperature series: %+v", qs[3])
	}
	if err := checkAnswer(qs[0], nodeclient.Answer{Series: []nodeclient.Series{{TimestampsMs: make([]int64, 299)}}}); err == nil {
		t.Error("a raw answer one point short passes")
	}
}

func TestOptions_Validate(t *testing.T) {
	o := DefaultOptions()
	o.Out = &bytes.Buffer{}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	o.Series, o.Duration, o.Memory = 1, time.Millisecond, ""
	err := o.Validate()
	for _, want := range []string{"series", "duration", "memory"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}
