package fanoutbench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// testData: two edges' worth of series, 10 s points over 3 minutes.
func testData() []dataSeries {
	mk := func(name, sensor, device string, base float64) dataSeries {
		d := dataSeries{labels: map[string]string{"__name__": name, "sensor": sensor, "device": device}}
		for i := range 18 {
			d.ts = append(d.ts, 60_000+int64(i)*10_000)
			d.vs = append(d.vs, base+float64(i%5))
		}
		return d
	}
	return []dataSeries{
		mk("temperature", "s0", "dev-0000", 20),
		mk("humidity", "s1", "dev-0000", 50),
		mk("temperature", "s0", "dev-0001", 30),
		mk("humidity", "s1", "dev-0001", 40),
	}
}

func TestExpected_RawSelectsByLabelsAndRange(t *testing.T) {
	q := querySpec{name: "raw", match: map[string]string{"sensor": "s0"}, startMs: 70_000, endMs: 90_000,
		mode: tributaryv1.QueryMode_QUERY_MODE_RAW}
	got, err := expected(testData(), q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d series, want 2", len(got))
	}
	if got[0].key >= got[1].key {
		t.Errorf("series not sorted by key: %s, %s", got[0].key, got[1].key)
	}
	if want := []int64{70_000, 80_000, 90_000}; !equalInts(got[0].ts, want) {
		t.Errorf("timestamps %v, want %v", got[0].ts, want)
	}
	if want := []float64{21, 22, 23}; !equalFloats(got[0].vs, want) {
		t.Errorf("values %v, want %v", got[0].vs, want)
	}
}

func TestExpected_DownsampleBucketsByStepMultiples(t *testing.T) {
	q := querySpec{name: "avg", match: map[string]string{"device": "dev-0000", "sensor": "s0"}, startMs: 0, endMs: 1 << 40,
		mode: tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE, stepMs: 60_000, downsample: tributaryv1.Aggregate_AGGREGATE_MAX}
	got, err := expected(testData(), q)
	if err != nil {
		t.Fatal(err)
	}
	// Points at 60 s … 230 s: buckets 60 s (6 points), 120 s (6), 180 s (6).
	if want := []int64{60_000, 120_000, 180_000}; len(got) != 1 || !equalInts(got[0].ts, want) {
		t.Fatalf("got %+v, want buckets %v", got, want)
	}
	if want := []float64{24, 24, 24}; !equalFloats(got[0].vs, want) {
		t.Errorf("max values %v, want %v", got[0].vs, want)
	}
	q.downsample = tributaryv1.Aggregate_AGGREGATE_COUNT
	got, _ = expected(testData(), q)
	if want := []float64{6, 6, 6}; !equalFloats(got[0].vs, want) {
		t.Errorf("counts %v, want %v", got[0].vs, want)
	}
}

func TestExpected_LastPointAndGroups(t *testing.T) {
	last := querySpec{name: "last", match: map[string]string{"sensor": "s1"}, startMs: 0, endMs: 100_000,
		mode: tributaryv1.QueryMode_QUERY_MODE_LAST_POINT}
	got, err := expected(testData(), last)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		if !equalInts(s.ts, []int64{100_000}) {
			t.Errorf("%s: last point at %v, want 100000", s.key, s.ts)
		}
	}
	group := querySpec{name: "group", match: map[string]string{}, startMs: 0, endMs: 1 << 40,
		mode: tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE, stepMs: 60_000, downsample: tributaryv1.Aggregate_AGGREGATE_MAX,
		aggregate: tributaryv1.Aggregate_AGGREGATE_MAX, groupBy: []string{"sensor"}}
	got, err = expected(testData(), group)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].key != `{sensor="s0"}` || got[1].key != `{sensor="s1"}` {
		t.Fatalf("groups %+v, want s0 and s1", got)
	}
	if !equalFloats(got[0].vs, []float64{34, 34, 34}) || !equalFloats(got[1].vs, []float64{54, 54, 54}) {
		t.Errorf("group maxima %v and %v, want 34s and 54s", got[0].vs, got[1].vs)
	}
	group.aggregate = tributaryv1.Aggregate_AGGREGATE_AVG
	if _, err := expected(testData(), group); err == nil {
		t.Error("an order-dependent cross-series avg was accepted")
	}
}

func answerOf(want []expSeries) nodeclient.Answer {
	var a nodeclient.Answer
	for _, w := range want {
		var ls []*tributaryv1.Label
		inner := strings.TrimSuffix(strings.TrimPrefix(w.key, "{"), "}")
		for _, kv := range strings.Split(inner, ",") {
			name, val, _ := strings.Cut(kv, "=")
			ls = append(ls, &tributaryv1.Label{Name: name, Value: strings.Trim(val, `"`)})
		}
		a.Series = append(a.Series, nodeclient.Series{Labels: ls, TimestampsMs: append([]int64(nil), w.ts...),
			Values: append([]float64(nil), w.vs...)})
	}
	return a
}

func TestCompare_FindsEveryKindOfDifference(t *testing.T) {
	q := querySpec{name: "avg", match: map[string]string{"sensor": "s0"}, startMs: 0, endMs: 1 << 40,
		mode: tributaryv1.QueryMode_QUERY_MODE_DOWNSAMPLE, stepMs: 60_000, downsample: tributaryv1.Aggregate_AGGREGATE_AVG}
	want, err := expected(testData(), q)
	if err != nil {
		t.Fatal(err)
	}
	if err := compare(q, answerOf(want), want); err != nil {
		t.Fatalf("identical answer: %v", err)
	}
	cases := map[string]func(a *nodeclient.Answer){
		"missing series": func(a *nodeclient.Answer) { a.Series = a.Series[1:] },
		"extra series":   func(a *nodeclient.Answer) { a.Series = append(a.Series, nodeclient.Series{}) },
		"duplicate":      func(a *nodeclient.Answer) { a.Series = append(a.Series, a.Series[0]) },
		"missing point": func(a *nodeclient.Answer) {
			a.Series[0].TimestampsMs, a.Series[0].Values = a.Series[0].TimestampsMs[1:], a.Series[0].Values[1:]
		},
		"moved point":  func(a *nodeclient.Answer) { a.Series[1].TimestampsMs[0]++ },
		"wrong value":  func(a *nodeclient.Answer) { a.Series[1].Values[2] += 1e-6 },
		"nan for zero": func(a *nodeclient.Answer) { a.Series[0].Values[0] = math.NaN() },
	}
	for name, mutate := range cases {
		a := answerOf(want)
		mutate(&a)
		if err := compare(q, a, want); err == nil {
			t.Errorf("%s: not detected", name)
		}
	}
	// An average may differ in the last bits (summation order), nothing else.
	a := answerOf(want)
	a.Series[0].Values[0] = math.Nextafter(a.Series[0].Values[0], math.Inf(1))
	if err := compare(q, a, want); err != nil {
		t.Errorf("one-ulp difference in an average rejected: %v", err)
	}
	q.downsample = tributaryv1.Aggregate_AGGREGATE_MAX
	want, _ = expected(testData(), q)
	a = answerOf(want)
	a.Series[0].Values[0] = math.Nextafter(a.Series[0].Values[0], math.Inf(1))
	if err := compare(q, a, want); err == nil {
		t.Error("one-ulp difference in a maximum accepted: it must be exact")
	}
}

func TestWorstPause(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	cases := []struct {
		name     string
		advances []time.Time
		end      time.Time
		want     time.Duration
	}{
		{"first advance after the kill", []time.Time{at(-500), at(1800), at(2800)}, at(5000), 1800 * time.Millisecond},
		{"a later stall is worse", []time.Time{at(200), at(1200), at(4200)}, at(5000), 3000 * time.Millisecond},
		{"no advance in the window", []time.Time{at(-100)}, at(5000), 5000 * time.Millisecond},
		{"advances after the window are ignored", []time.Time{at(300), at(9000)}, at(5000), 300 * time.Millisecond},
	}
	for _, tc := range cases {
		if got := worstPause(tc.advances, t0, tc.end); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestLatencyMs(t *testing.T) {
	ds := make([]time.Duration, 0, 100)
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p50, p99 := latencyMs(ds)
	if p50 != 50 || p99 != 99 {
		t.Errorf("p50, p99 = %v, %v; want 50, 99", p50, p99)
	}
	if p50, p99 := latencyMs(nil); !math.IsNaN(p50) || !math.IsNaN(p99) {
		t.Errorf("empty: %v, %v; want NaN", p50, p99)
	}
}

func TestParseGauge(t *testing.T) {
	text := "# HELP tributary_replication_acked_through_seq x\n" +
		"tributary_replication_acked_through_seq_total 9\n" +
		"tributary_replication_acked_through_seq 42\n"
	v, err := parseGauge(bufio.NewScanner(strings.NewReader(text)), ackedThroughMetric)
	if err != nil || v != 42 {
		t.Errorf("got %v, %v; want 42", v, err)
	}
	if _, err := parseGauge(bufio.NewScanner(strings.NewReader("other 1\n")), ackedThroughMetric); err == nil {
		t.Error("a missing metric was not reported")
	}
}

func TestOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	o.Binary = "tributary"
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	o.Interval = 7 * time.Second
	o.Edges = 1
	o.Coordinators = 2
	err := o.Validate()
	for _, want := range []string{"interval", "edges", "leader kills"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %s", err, want)
		}
	}
}

func TestWriteReport_EndsWithOneJSONLine(t *testing.T) {
	m := measurement{measured: true, tailLatency: []time.Duration{time.Millisecond}, gaps: []time.Duration{2 * time.Second}}
	res := m.result(DefaultOptions())
	var buf bytes.Buffer
	if err := WriteReport(&buf, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, buf.String())
	}
	for _, k := range []string{"fanout_p99_ms", "fanout_p50_ms", "failover_gap_s", "series_registrations_per_s",
		"catalog_proposals_per_s", "stopped_edge_flagged", "answers_checked", "edges", "series_per_edge"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON line lacks %s", k)
		}
	}
	if got["series_registrations_per_s"] != nil {
		t.Errorf("unmeasured registrations/s = %v, want null", got["series_registrations_per_s"])
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNewCluster_CommandLines(t *testing.T) {
	o := DefaultOptions()
	o.Binary = "tributary"
	c, err := newCluster(o, "/bin/tributary", t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.coords) != 3 || len(c.edges) != 10 {
		t.Fatalf("%d coordinators and %d edges, want 3 and 10", len(c.coords), len(c.edges))
	}
	args := strings.Join(c.coords[1].Opts.Args(), " ")
	if !strings.HasPrefix(args, "coordinator ") || !strings.Contains(args, "--id c2 --raft-id 2") ||
		strings.Count(args, "@127.0.0.1:") != 3 || !strings.Contains(args, "--insecure-cluster") {
		t.Errorf("coordinator command line: %s", args)
	}
	args = strings.Join(c.edges[3].Opts.Args(), " ")
	if !strings.HasPrefix(args, "node ") || !strings.Contains(args, "--node-id edge-03") ||
		!strings.Contains(args, "--replicate-to "+c.coords[0].intake+","+c.coords[1].intake+","+c.coords[2].intake) ||
		!strings.Contains(args, "--advertise-query-addr "+c.edges[3].grpcAddr) || !strings.Contains(args, "--wal-segment-age 1s") {
		t.Errorf("edge command line: %s", args)
	}
}
