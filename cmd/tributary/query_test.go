package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// queryFixture stores temp of rooms a and b (floor 1) and hum of room a
// (floor 2) at 0, 30 and 60 seconds past base, a whole minute.
func queryFixture(t *testing.T, n *cliNode) time.Time {
	t.Helper()
	base := time.Now().Truncate(time.Minute).Add(-2 * time.Minute)
	at := func(sec int) int64 { return base.Add(time.Duration(sec) * time.Second).UnixMilli() }
	res, err := n.c.Write(context.Background(),
		tributary.Batch{Labels: tributary.Metric("temp", "room", "a", "floor", "1"), TimestampsMs: []int64{at(0), at(30), at(60)}, Values: []float64{10, 20, 30}},
		tributary.Batch{Labels: tributary.Metric("temp", "room", "b", "floor", "1"), TimestampsMs: []int64{at(0), at(30), at(60)}, Values: []float64{1, 2, 3}},
		tributary.Batch{Labels: tributary.Metric("hum", "room", "a", "floor", "2"), TimestampsMs: []int64{at(0), at(30), at(60)}, Values: []float64{50, 55.5, 60}},
	)
	if err != nil || res.Accepted != 9 {
		t.Fatalf("fixture: %+v %v", res, err)
	}
	return base
}

// rows returns the non-empty lines of out split on runs of spaces.
func rows(out string) [][]string {
	var r [][]string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			r = append(r, f)
		}
	}
	return r
}

func TestQuery_TableShapes(t *testing.T) {
	n := startCLINode(t, "")
	base := queryFixture(t, n)
	start := base.UTC().Format(time.RFC3339)
	end := base.Add(90 * time.Second).UTC().Format(time.RFC3339)
	t0, t30, t60 := fmtTime(base.UnixMilli()), fmtTime(base.Add(30*time.Second).UnixMilli()), fmtTime(base.Add(time.Minute).UnixMilli())
	cases := []struct {
		name string
		args []string
		want [][]string
	}{
		{"raw, flags after the selector", []string{`temp{room="a"}`, "--start", start, "--end", end},
			[][]string{{"SERIES", "TIME", "VALUE"}, {`temp{floor="1",room="a"}`, t0, "10"}, {`temp{floor="1",room="a"}`, t30, "20"}, {`temp{floor="1",room="a"}`, t60, "30"}}},
		{"downsample", []string{"--start", start, "--end", end, "--step", "1m", "--fn", "max", "temp"},
			[][]string{{"SERIES", "TIME", "VALUE"}, {`temp{floor="1",room="a"}`, t0, "20"}, {`temp{floor="1",room="a"}`, t60, "30"}, {`temp{floor="1",room="b"}`, t0, "2"}, {`temp{floor="1",room="b"}`, t60, "3"}}},
		{"grouped", []string{"--start", start, "--end", end, "--step", "1m", "--fn", "max", "--agg", "sum", "--group-by", "floor", `{floor=~".+"}`},
			[][]string{{"SERIES", "TIME", "VALUE"}, {`{floor="1"}`, t0, "22"}, {`{floor="1"}`, t60, "33"}, {`{floor="2"}`, t0, "55.5"}, {`{floor="2"}`, t60, "60"}}},
		{"last", []string{"--last", "--since", "1d", `{room="a"}`},
			[][]string{{"SERIES", "TIME", "VALUE"}, {`hum{floor="2",room="a"}`, t60, "60"}, {`temp{floor="1",room="a"}`, t60, "30"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := cli(append([]string{"query", "--addr", n.addr}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			got := rows(out)
			if len(got) > len(c.want) && strings.ContainsAny(got[len(got)-1][0], "▁▂▃▄▅▆▇█") {
				got = got[:len(got)-1] // the sparkline of a single series
			}
			if !slices.EqualFunc(got, c.want, slices.Equal) {
				t.Fatalf("got\n%s\nwant %q", out, c.want)
			}
		})
	}
}

func TestQuery_TableAlignsColumnsAndDrawsASparkline(t *testing.T) {
	n := startCLINode(t, "")
	queryFixture(t, n)
	code, out, errOut := cli("query", "--addr", n.addr, "--since", "1h", `hum`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("output:\n%s", out)
	}
	col := strings.Index(lines[0], "VALUE")
	for _, l := range lines[1:4] {
		if len(l) <= col || l[col-1] != ' ' || l[col] < '0' || l[col] > '9' {
			t.Errorf("value column not aligned at %d:\n%s", col, out)
		}
	}
	if want := "▁▄█  min 50  max 60  (3 points)"; lines[4] != want {
		t.Errorf("sparkline %q, want %q", lines[4], want)
	}
	// Two series: no sparkline.
	_, out, _ = cli("query", "--addr", n.addr, "--since", "1h", `temp`)
	if strings.ContainsAny(out, "▁█") {
		t.Errorf("sparkline for two series:\n%s", out)
	}
}

func TestQuery_CSVRoundTripsThroughWrite(t *testing.T) {
	src := startCLINode(t, "")
	queryFixture(t, src)
	code, out, errOut := cli("query", "--addr", src.addr, "--since", "1h", "--format", "csv", `{floor=~".+"}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 10 || !slices.Equal(recs[0], []string{"metric", "timestamp", "value", "floor", "room"}) {
		t.Fatalf("csv:\n%s", out)
	}
	if r := recs[1]; r[0] != "hum" || r[2] != "50" || r[3] != "2" || r[4] != "a" {
		t.Errorf("first record %q", r)
	}

	dst := startCLINode(t, "")
	code, sum, errOut := cli("write", "--addr", dst.addr, "--format", "csv", writeFile(t, "export.csv", out))
	if code != 0 || !strings.Contains(sum, "9 accepted") {
		t.Fatalf("write back: exit %d\n%s\n%s", code, sum, errOut)
	}
	if a, b := src.stored(t, `{floor=~".+"}`), dst.stored(t, `{floor=~".+"}`); len(a) != 3 || !mapsEqual(a, b) {
		t.Fatalf("round trip changed the data:\n%v\n%v", a, b)
	}
}

func mapsEqual(a, b map[string][]tributary.Point) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestQuery_JSON(t *testing.T) {
	n := startCLINode(t, "")
	base := queryFixture(t, n)
	code, out, errOut := cli("query", "--addr", n.addr, "--since", "1h", "--format", "json", "--step", "1m", "--fn", "count", `temp`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Series []struct {
			Labels map[string]string `json:"labels"`
			Points [][2]float64      `json:"points"`
		} `json:"series"`
		Source   string   `json:"source"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	m0, m1 := float64(base.UnixMilli()), float64(base.Add(time.Minute).UnixMilli())
	if len(doc.Series) != 2 || doc.Source != "raw" || doc.Warnings == nil ||
		doc.Series[1].Labels["room"] != "b" || doc.Series[1].Labels["__name__"] != "temp" ||
		!slices.Equal(doc.Series[1].Points, [][2]float64{{m0, 2}, {m1, 1}}) {
		t.Fatalf("json:\n%s", out)
	}
	// An empty answer is still a document.
	code, out, errOut = cli("query", "--addr", n.addr, "--format", "json", `nothing`)
	if code != 0 || !strings.Contains(errOut, "no series matched") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Series) != 0 {
		t.Fatalf("empty answer %v:\n%s", err, out)
	}
}

func TestQuery_BadInvocations(t *testing.T) {
	n := startCLINode(t, "")
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"by without agg":    {[]string{"--by", "host", "cpu"}, "--by needs --agg"},
		"fn without step":   {[]string{"--fn", "max", "cpu"}, "--fn needs --step"},
		"step and last":     {[]string{"--step", "1m", "--last", "cpu"}, "exclude each other"},
		"bad format":        {[]string{"--format", "xml", "cpu"}, "--format"},
		"bad start":         {[]string{"--start", "yesterday-ish", "cpu"}, "--start"},
		"reversed range":    {[]string{"--start", "now", "--end", "-1h", "cpu"}, "before --start"},
		"bad agg":           {[]string{"--agg", "median", "cpu"}, "--agg"},
		"sub-ms step":       {[]string{"--step", "1us", "cpu"}, "--step"},
		"server refuses it": {[]string{`{host!="x"}`}, "InvalidArgument"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := cli(append([]string{"query", "--addr", n.addr}, c.args...)...)
			if code == 0 || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	nowMs := now.UnixMilli()
	for in, want := range map[string]int64{
		"":                          -7,
		"now":                       nowMs,
		"-1h":                       nowMs - 3_600_000,
		"now-30m":                   nowMs - 1_800_000,
		"now+5m":                    nowMs + 300_000,
		"-2d":                       nowMs - 2*86_400_000,
		"-1w1d":                     nowMs - 8*86_400_000,
		"2024-05-01T10:00:00Z":      nowMs - 2*3_600_000,
		"2024-05-01T12:00:00+02:00": nowMs - 2*3_600_000,
		"2024-05-01T11:00:00.5Z":    nowMs - 3_600_000 + 500,
		"2024-05-01":                nowMs - 12*3_600_000,
		"2024-05-01 06:00:00":       nowMs - 6*3_600_000,
		"1714564800":                nowMs,
		"1714564800000":             nowMs,
	} {
		got, err := parseTime(in, now, -7)
		if err != nil || got != want {
			t.Errorf("parseTime(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"soon", "-1x", "2024-13-01", "now-", "99999999999999999999"} {
		if _, err := parseTime(bad, now, 0); err == nil {
			t.Errorf("parseTime(%q) accepted", bad)
		}
	}
}

func TestSparkline(t *testing.T) {
	pts := func(vs ...float64) []tributary.Point {
		out := make([]tributary.Point, len(vs))
		for i, v := range vs {
			out[i] = tributary.Point{TimestampMs: int64(i), Value: v}
		}
		return out
	}
	nan := func() float64 { var z float64; return z / z }()
	for _, c := range []struct {
		in    []tributary.Point
		width int
		want  string
	}{
		{pts(0, 7, 1, 6), 10, "▁█▂▇  min 0  max 7  (4 points)"},
		{pts(5, 5), 10, "▅▅  min 5  max 5  (2 points)"},
		{pts(0, nan, 7), 10, "▁ █  min 0  max 7  (3 points)"},
		{pts(0, 0, 7, 7), 2, "▁█  min 0  max 7  (4 points)"},
		{pts(nan, nan), 10, "  "},
	} {
		if got := sparkline(c.in, c.width); got != c.want {
			t.Errorf("sparkline(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
