package healbench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// answerOf returns what a store holding exactly l's points of series
// 0..series-1 in [from, to] answers, acknowledged and in doubt alike.
func answerOf(l *ledger, from, to int64) map[string][]point {
	out := map[string][]point{}
	for _, r := range l.reqs {
		for k := range r.n {
			ts := r.startMs + int64(k)*r.stepMs
			if ts < from || ts > to {
				continue
			}
			for i := range l.series {
				out[seriesName(i)] = append(out[seriesName(i)], point{ts, value(i, ts)})
			}
		}
	}
	return out
}

func TestLedger_CheckCountsEachFault(t *testing.T) {
	l := newLedger(2)
	for _, r := range []struct {
		start, step int64
		n           int
		acked       bool
	}{{1000, 10, 5, true}, {1050, 10, 5, false}, {1100, 10, 5, true}, {2000, 100, 3, true}} {
		if err := l.record(r.start, r.step, r.n, r.acked); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.record(2100, 10, 1, true); err == nil {
		t.Fatal("a request overlapping the previous one was recorded")
	}
	if got := l.acked(); got != 2*13 {
		t.Fatalf("acked %d, want 26", got)
	}
	if f, last := l.span(); f != 1000 || last != 2200 {
		t.Fatalf("span %d..%d, want 1000..2200", f, last)
	}
	cases := []struct {
		name   string
		mutate func(map[string][]point) map[string][]point
		from   int64
		want   verdict
	}{
		{"exact", func(a map[string][]point) map[string][]point { return a }, 0, verdict{returned: 36, inDoubt: 10}},
		{"in-doubt points absent", func(a map[string][]point) map[string][]point {
			for s, pts := range a {
				var keep []point
				for _, p := range pts {
					if p.ts < 1050 || p.ts >= 1100 {
						keep = append(keep, p)
					}
				}
				a[s] = keep
			}
			return a
		}, 0, verdict{returned: 26}},
		{"one lost", func(a map[string][]point) map[string][]point { a["s000"] = a["s000"][1:]; return a }, 0, verdict{returned: 35, lost: 1, inDoubt: 10}},
		{"a series missing", func(a map[string][]point) map[string][]point { delete(a, "s001"); return a }, 0, verdict{returned: 18, lost: 13, inDoubt: 5}},
		{"duplicate", func(a map[string][]point) map[string][]point { a["s000"] = append(a["s000"], a["s000"][0]); return a }, 0, verdict{returned: 37, duplicated: 1, inDoubt: 10}},
		{"off the grid", func(a map[string][]point) map[string][]point {
			a["s000"] = append(a["s000"], point{1001, value(0, 1001)})
			return a
		}, 0, verdict{returned: 37, phantom: 1, inDoubt: 10}},
		{"after the last request", func(a map[string][]point) map[string][]point {
			a["s000"] = append(a["s000"], point{9000, value(0, 9000)})
			return a
		}, 0, verdict{returned: 37, phantom: 1, inDoubt: 10}},
		{"wrong series' value", func(a map[string][]point) map[string][]point {
			a["s000"][0].v = value(1, a["s000"][0].ts)
			return a
		}, 0, verdict{returned: 36, wrongValue: 1, inDoubt: 10}},
		{"unknown series", func(a map[string][]point) map[string][]point { a["s999"] = []point{{1000, 0}}; return a }, 0, verdict{returned: 37, phantom: 1, inDoubt: 10}},
		{"window", func(a map[string][]point) map[string][]point { return a }, 1100, verdict{returned: 16}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from := c.from
			got := l.check(c.mutate(answerOf(l, from, 5000)), from, 5000)
			got.examples = nil
			if got.String() != c.want.String() {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			if (got.lost+got.duplicated+got.phantom+got.wrongValue == 0) != got.ok() {
				t.Fatalf("ok() %v disagrees with %v", got.ok(), got)
			}
		})
	}
}

func TestOptions_ValidateNamesEveryBadField(t *testing.T) {
	o := DefaultOptions()
	o.Out = &bytes.Buffer{}
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if got := o.pointsPerSecond(); got != 4000 {
		t.Fatalf("default load %v points/s, want the issue's 4,000", got)
	}
	o.Coordinators, o.Victim, o.PointsPerWrite, o.DeadAfter, o.Out = 1, "edge", 3, 0, nil
	err := o.Validate()
	for _, want := range []string{"coordinators 1", `victim "edge"`, "points per write 3", "dead-after", "out is required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
}

func TestReport_EndsWithTheIssuesJSONLine(t *testing.T) {
	o := DefaultOptions()
	m := measurement{measured: true, ackPause: 1500 * time.Millisecond, replaced: 42 * time.Second, restored: 80 * time.Second,
		copiedBytes: 300 << 20, firstCopy: time.Unix(100, 0), restoredAt: time.Unix(106, 0)}
	res := m.result(o)
	var buf bytes.Buffer
	if err := WriteReport(&buf, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, `{"ack_pause_s":1.5,"replaced_s":42,"history_restored_s":80,"rereplicate_mib_per_s":50,"edge_restore_mib_per_s":null,"lost":0,"duplicated":0,"wrong_answers":0,`) {
		t.Fatalf("last line %s", last)
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(last), &back); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"≤ 90 s (dead-after + 60)", "≥ 50 MiB/s", "edge restore (tributary node restore)   n/a MiB/s"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the table does not say %q:\n%s", want, buf.String())
		}
	}
	// A restore that answered its whole ledger gives its rate; one that
	// did not is not a figure.
	m.restoreCmd = true
	m.restore = &edgeRestore{edge: "edge-01", bytes: 60 << 20, took: 4 * time.Second}
	if got := m.result(o).EdgeRestoreMiBPerS; !math.IsNaN(float64(got)) {
		t.Errorf("an unchecked restore gives %v MiB/s", got)
	}
	m.restore.checked = true
	if got := m.result(o).EdgeRestoreMiBPerS; got != 15 {
		t.Errorf("edge restore %v MiB/s, want 15", got)
	}
	// Unmeasured figures are null, never 0.
	res = measurement{}.result(o)
	if !math.IsNaN(float64(res.ReplacedS)) || !math.IsNaN(float64(res.RereplicateMiBPerS)) {
		t.Fatalf("unmeasured figures: %+v", res)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"replaced_s":null`) {
		t.Fatalf("unmeasured replaced_s: %s", b)
	}
}

func TestParseCopies_EachEdgesLargestCopyIsItsHistory(t *testing.T) {
	log := `time=2026-11-27T12:51:01.726Z level=INFO msg="repaired: copied a run this replica lacked" component=heal edge=edge-02 first_seq=1 last_seq=46 source=c2 bytes=62335929 took=2.25s
time=2026-11-27T12:51:02.000Z level=INFO msg="registered in the catalog" component=coordinator coordinator=c1
time=2026-11-27T12:51:04.095Z level=INFO msg="repaired: copied a run this replica lacked" component=heal edge=edge-03 first_seq=1 last_seq=47 source=c2 bytes=100 took=2.37s
time=2026-11-27T12:51:06.469Z level=INFO msg="repaired: copied a run this replica lacked" component=heal edge=edge-03 first_seq=48 last_seq=50 source=c2 bytes=300 took=2.24s
`
	cs := parseCopies(log)
	if len(cs) != 3 || cs[0] != (copyLog{"edge-02", 1, 62335929}) || cs[2] != (copyLog{"edge-03", 48, 300}) {
		t.Fatalf("copies %+v", cs)
	}
	if got := historyBytes(cs); got != 62335929+300 {
		t.Fatalf("history bytes %d", got)
	}
}
