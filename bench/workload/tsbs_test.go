package workload

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

const tsbsTestStartNs = 1_700_000_000_000_000_000

func mustTSBSCPU(t testing.TB, o TSBSCPUOptions) *TSBSCPU {
	t.Helper()
	g, err := NewTSBSCPU(o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func smallTSBS(t testing.TB, seed uint64) *TSBSCPU {
	return mustTSBSCPU(t, TSBSCPUOptions{Hosts: 7, Rows: 500, StartNs: tsbsTestStartNs, IntervalNs: 10e9, Seed: seed})
}

// allLines drains a stream n lines at a time.
func allLines(s *TSBSCPUStream, n int) []byte {
	var out []byte
	for {
		var k int
		out, k = s.AppendLines(out, n)
		if k == 0 {
			return out
		}
	}
}

// lpLine is one parsed line of line protocol.
type lpLine struct {
	measurement string
	tags        [][2]string
	fields      [][2]string // values as written, with their type suffix
	tsNs        int64
}

// parseLP is a deliberately strict parser for the subset of line protocol
// the generator writes: no escapes, no quoted strings, every field an
// integer, a timestamp always present. It reports what is wrong and where.
func parseLP(text []byte) ([]lpLine, error) {
	if len(text) > 0 && text[len(text)-1] != '\n' {
		return nil, fmt.Errorf("text does not end with a newline")
	}
	var out []lpLine
	for i, raw := range strings.Split(strings.TrimSuffix(string(text), "\n"), "\n") {
		where := func(format string, a ...any) error {
			return fmt.Errorf("line %d %q: %s", i+1, raw, fmt.Sprintf(format, a...))
		}
		parts := strings.Split(raw, " ")
		if len(parts) != 3 {
			return nil, where("want 3 space-separated sections, got %d", len(parts))
		}
		series := strings.Split(parts[0], ",")
		l := lpLine{measurement: series[0]}
		if l.measurement == "" {
			return nil, where("empty measurement")
		}
		for _, kv := range series[1:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" || strings.ContainsAny(v, `="\`) {
				return nil, where("bad tag %q", kv)
			}
			l.tags = append(l.tags, [2]string{k, v})
		}
		for _, kv := range strings.Split(parts[1], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || !strings.HasSuffix(v, "i") {
				return nil, where("field %q is not an integer field", kv)
			}
			if _, err := strconv.ParseInt(strings.TrimSuffix(v, "i"), 10, 64); err != nil {
				return nil, where("field %q: %v", kv, err)
			}
			l.fields = append(l.fields, [2]string{k, v})
		}
		ts, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return nil, where("timestamp: %v", err)
		}
		l.tsNs = ts
		out = append(out, l)
	}
	return out, nil
}

func TestParseLP_RejectsWhatTheGeneratorMustNotWrite(t *testing.T) {
	for name, text := range map[string]string{
		"no newline":     "cpu,a=b x=1i 1",
		"float field":    "cpu,a=b x=1.5 1\n",
		"no timestamp":   "cpu,a=b x=1i\n",
		"empty tag":      "cpu,a= x=1i 1\n",
		"quoted tag":     "cpu,a=\"b\" x=1i 1\n",
		"bad integer":    "cpu,a=b x=1ai 1\n",
		"no measurement": ",a=b x=1i 1\n",
	} {
		if _, err := parseLP([]byte(text)); err == nil {
			t.Errorf("%s: parsed %q", name, text)
		}
	}
}

func TestTSBSCPU_LinesHaveTheTSBSShape(t *testing.T) {
	g := smallTSBS(t, 1)
	text := allLines(g.Stream(0, g.Hosts()), 1000)
	lines, err := parseLP(text)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(lines)) != g.Lines() || g.Lines() != 7*500 || g.Points() != 7*500*10 {
		t.Fatalf("%d lines, Lines %d, Points %d", len(lines), g.Lines(), g.Points())
	}
	for i, l := range lines {
		row, h := i/g.Hosts(), i%g.Hosts()
		if l.measurement != "cpu" {
			t.Fatalf("line %d: measurement %q", i, l.measurement)
		}
		if !slices.Equal(l.tags, g.HostTags(h)) {
			t.Fatalf("line %d: tags %v, want host %d's %v", i, l.tags, h, g.HostTags(h))
		}
		if l.tsNs != tsbsTestStartNs+int64(row)*10e9 || l.tsNs != g.TimestampNs(row) {
			t.Fatalf("line %d (row %d): timestamp %d", i, row, l.tsNs)
		}
		if len(l.fields) != TSBSCPUFields {
			t.Fatalf("line %d: %d fields", i, len(l.fields))
		}
		for f, kv := range l.fields {
			v, _ := strconv.Atoi(strings.TrimSuffix(kv[1], "i"))
			if kv[0] != TSBSCPUFieldNames[f] || v < 0 || v > 100 {
				t.Fatalf("line %d: field %d is %s=%s, want %s in [0, 100]", i, f, kv[0], kv[1], TSBSCPUFieldNames[f])
			}
		}
	}
}

// The node's own line-protocol parser takes every line and makes ten
// series per host, named <measurement>_<field>, whose points are the
// generated values.
func TestTSBSCPU_TheNodesParserTakesEveryLine(t *testing.T) {
	g := smallTSBS(t, 6)
	text := allLines(g.Stream(0, g.Hosts()), 10_000)
	res, err := influx.NewParser(influx.Options{}).Parse(text, "benchmark", influx.Nanosecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.RejectedLines != 0 || int64(res.Lines) != g.Lines() || int64(res.Points) != g.Points() {
		t.Fatalf("%d lines, %d rejected (%v), %d points; want %d lines, %d points", res.Lines, res.RejectedLines, res.Errors, res.Points, g.Lines(), g.Points())
	}
	if len(res.Batches) != g.Hosts()*TSBSCPUFields {
		t.Fatalf("%d series, want %d", len(res.Batches), g.Hosts()*TSBSCPUFields)
	}
	for _, b := range res.Batches {
		ls := labels.Labels(b.Labels)
		h, err := strconv.Atoi(strings.TrimPrefix(ls.Get("hostname"), "host_"))
		if err != nil || ls.Get("db") != "benchmark" || len(ls) != 1+len(TSBSCPUTagKeys)+1 {
			t.Fatalf("series %v", ls)
		}
		f := slices.Index(TSBSCPUFieldNames[:], strings.TrimPrefix(ls.Get("__name__"), "cpu_"))
		if f < 0 {
			t.Fatalf("series %v: not a cpu field", ls)
		}
		want := g.FieldValues(h, f)
		if len(b.Ts) != g.Rows() || len(b.Vs) != g.Rows() {
			t.Fatalf("series %v: %d points", ls, len(b.Ts))
		}
		for r := range b.Ts {
			if b.Ts[r] != g.TimestampNs(r)/1e6 || b.Vs[r] != float64(want[r]) {
				t.Fatalf("series %v point %d: (%d, %v), want (%d, %d)", ls, r, b.Ts[r], b.Vs[r], g.TimestampNs(r)/1e6, want[r])
			}
		}
	}
}

func TestTSBSCPU_HostTagsComeFromTheTSBSValueSets(t *testing.T) {
	g := mustTSBSCPU(t, TSBSCPUOptions{Hosts: 100, Rows: 1, IntervalNs: 1, Seed: 3})
	regions := map[string]bool{}
	for h := range g.Hosts() {
		tags := g.HostTags(h)
		for i, kv := range tags {
			if kv[0] != TSBSCPUTagKeys[i] {
				t.Fatalf("host %d: tag %d is %q, want %q", h, i, kv[0], TSBSCPUTagKeys[i])
			}
		}
		if tags[0][1] != "host_"+strconv.Itoa(h) || g.HostName(h) != tags[0][1] {
			t.Errorf("host %d: hostname %q", h, tags[0][1])
		}
		okRegion := false
		for _, r := range tsbsRegions {
			if r.name == tags[1][1] {
				okRegion = slices.Contains(r.datacenters, tags[2][1])
			}
		}
		if !okRegion {
			t.Errorf("host %d: datacenter %q is not in region %q", h, tags[2][1], tags[1][1])
		}
		regions[tags[1][1]] = true
		inRange := func(s string, n int) bool { v, err := strconv.Atoi(s); return err == nil && v >= 0 && v < n }
		if !inRange(tags[3][1], 100) || !inRange(tags[7][1], 20) || !inRange(tags[8][1], 2) {
			t.Errorf("host %d: rack %q, service %q, service_version %q", h, tags[3][1], tags[7][1], tags[8][1])
		}
		if !slices.Contains(tsbsOSes, tags[4][1]) || !slices.Contains(tsbsArches, tags[5][1]) ||
			!slices.Contains(tsbsTeams, tags[6][1]) || !slices.Contains(tsbsEnvironments, tags[9][1]) {
			t.Errorf("host %d: tags %v", h, tags)
		}
	}
	if len(regions) < 6 {
		t.Errorf("100 hosts fell in only %d regions: tags are not drawn per host", len(regions))
	}
}

func TestTSBSCPU_SameSeedSameLinesOtherSeedOtherValues(t *testing.T) {
	a := allLines(smallTSBS(t, 9).Stream(0, 7), 333)
	b := allLines(smallTSBS(t, 9).Stream(0, 7), 1000)
	if !bytes.Equal(a, b) {
		t.Fatal("same options, different lines")
	}
	c := allLines(smallTSBS(t, 10).Stream(0, 7), 1000)
	if bytes.Equal(a, c) {
		t.Fatal("different seeds, same lines")
	}
}

func TestTSBSCPU_HostGroupsDoNotChangeAHostsLines(t *testing.T) {
	g := smallTSBS(t, 5)
	byHost := func(text []byte) map[string][]string {
		out := map[string][]string{}
		for line := range strings.SplitSeq(strings.TrimSuffix(string(text), "\n"), "\n") {
			host, _, _ := strings.Cut(strings.TrimPrefix(line, "cpu,hostname="), ",")
			out[host] = append(out[host], line)
		}
		return out
	}
	whole := byHost(allLines(g.Stream(0, 7), 100))
	split := byHost(append(allLines(g.Stream(0, 3), 100), allLines(g.Stream(3, 7), 100)...))
	if len(whole) != 7 || len(split) != 7 {
		t.Fatalf("%d and %d hosts", len(whole), len(split))
	}
	for h, lines := range whole {
		if !slices.Equal(lines, split[h]) {
			t.Errorf("%s: lines differ when hosts are split into groups", h)
		}
	}
}

func TestTSBSCPU_FieldValuesMatchTheLines(t *testing.T) {
	g := smallTSBS(t, 2)
	lines, err := parseLP(allLines(g.Stream(0, 7), 1000))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []int{0, 4, 6} {
		for _, f := range []int{0, 3, 9} {
			vals := g.FieldValues(h, f)
			if len(vals) != g.Rows() {
				t.Fatalf("%d values, want %d", len(vals), g.Rows())
			}
			for r, v := range vals {
				got := lines[r*g.Hosts()+h].fields[f][1]
				if got != strconv.FormatInt(v, 10)+"i" {
					t.Fatalf("host %d field %d row %d: line has %s, FieldValues %d", h, f, r, got, v)
				}
			}
		}
	}
}

func TestTSBSCPU_ValuesAreAClampedRandomWalk(t *testing.T) {
	g := mustTSBSCPU(t, TSBSCPUOptions{Hosts: 20, Rows: 8640, StartNs: tsbsTestStartNs, IntervalNs: 10e9, Seed: 1})
	var steps, moved, atBound int
	for h := range g.Hosts() {
		for f := range TSBSCPUFields {
			vals := g.FieldValues(h, f)
			for r := 1; r < len(vals); r++ {
				d := vals[r] - vals[r-1]
				// A standard normal step moves the walk by more than 6
				// once in 500 million; truncation adds at most 1.
				if d < -7 || d > 7 {
					t.Fatalf("host %d field %d row %d: step %d → %d", h, f, r, vals[r-1], vals[r])
				}
				if vals[r] < 0 || vals[r] > 100 {
					t.Fatalf("host %d field %d row %d: value %d", h, f, r, vals[r])
				}
				steps++
				if d != 0 {
					moved++
				}
				if vals[r] == 0 || vals[r] == 100 {
					atBound++
				}
			}
		}
	}
	// With unit normal steps an integer-truncated walk changes its integer
	// part at well over half of the steps, and a day-long walk reaches its
	// bounds at times.
	if frac := float64(moved) / float64(steps); frac < 0.5 || frac > 0.95 {
		t.Errorf("the integer value changed at %.2f of the steps", frac)
	}
	if atBound == 0 {
		t.Errorf("no walk ever reached 0 or 100: not clamped at the bounds")
	}
}

func TestTSBSCPUStream_CountsAndBounds(t *testing.T) {
	g := smallTSBS(t, 4)
	s := g.Stream(2, 5)
	if s.Remaining() != 3*500 {
		t.Fatalf("remaining %d", s.Remaining())
	}
	maxLine := s.MaxLineBytes()
	buf, n := s.AppendLines(nil, 7)
	if n != 7 || s.Remaining() != 3*500-7 {
		t.Fatalf("appended %d, remaining %d", n, s.Remaining())
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(buf), "\n"), "\n") {
		if len(line)+1 > maxLine {
			t.Errorf("line of %d bytes exceeds MaxLineBytes %d", len(line)+1, maxLine)
		}
	}
	total := int64(7)
	for {
		var k int
		buf, k = s.AppendLines(buf[:0], 1000)
		if k == 0 {
			break
		}
		total += int64(k)
		if len(buf) > k*maxLine {
			t.Errorf("%d lines took %d bytes, more than %d × MaxLineBytes", k, len(buf), k)
		}
	}
	if total != 1500 || s.Remaining() != 0 {
		t.Errorf("stream gave %d lines, remaining %d", total, s.Remaining())
	}
}

func TestTSBSCPUStream_AppendLinesDoesNotAllocate(t *testing.T) {
	g := smallTSBS(t, 1)
	s := g.Stream(0, 7)
	buf := make([]byte, 0, 100*s.MaxLineBytes())
	allocs := testing.AllocsPerRun(20, func() {
		buf, _ = s.AppendLines(buf[:0], 100)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per AppendLines into a large enough buffer", allocs)
	}
}

func TestTSBSCPUOptions_Validate(t *testing.T) {
	for name, o := range map[string]TSBSCPUOptions{
		"no hosts":      {Rows: 1, IntervalNs: 1},
		"no rows":       {Hosts: 1, IntervalNs: 1},
		"no interval":   {Hosts: 1, Rows: 1},
		"before 1970":   {Hosts: 1, Rows: 1, IntervalNs: 1, StartNs: -1},
		"overflows ns":  {Hosts: 1, Rows: 1000, IntervalNs: 1e16, StartNs: tsbsTestStartNs},
		"negative rows": {Hosts: 1, Rows: -5, IntervalNs: 1},
	} {
		if _, err := NewTSBSCPU(o); err == nil {
			t.Errorf("%s: %+v accepted", name, o)
		}
	}
	if _, err := NewTSBSCPU(TSBSCPUOptions{Hosts: 100, Rows: 8640, StartNs: tsbsTestStartNs, IntervalNs: 10e9}); err != nil {
		t.Errorf("the benchmark's day: %v", err)
	}
}

func TestTSBSCPU_TheBenchmarkDayIsEightPointSixFourMillionPoints(t *testing.T) {
	g := mustTSBSCPU(t, TSBSCPUOptions{Hosts: 100, Rows: 86400 / 10, StartNs: tsbsTestStartNs, IntervalNs: 10e9})
	if g.Lines() != 864_000 || g.Points() != 8_640_000 {
		t.Errorf("%d lines, %d points", g.Lines(), g.Points())
	}
}

func BenchmarkTSBSCPUStream_AppendLines(b *testing.B) {
	g := mustTSBSCPU(b, TSBSCPUOptions{Hosts: 100, Rows: 8640, StartNs: tsbsTestStartNs, IntervalNs: 10e9, Seed: 1})
	s := g.Stream(0, 50)
	buf := make([]byte, 0, 10_000*s.MaxLineBytes())
	b.ReportAllocs()
	var lines, bytes int64
	for b.Loop() {
		if s.Remaining() == 0 {
			s = g.Stream(0, 50)
		}
		var n int
		buf, n = s.AppendLines(buf[:0], 10_000)
		lines += int64(n)
		bytes += int64(len(buf))
	}
	b.SetBytes(bytes / int64(b.N))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(lines), "ns/line")
	b.ReportMetric(float64(bytes)/float64(lines), "B/line")
}
