package rules

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

const backfillRules = `
groups:
  - name: climate
    interval: 1m
    labels:
      site: hq
    rules:
      - record: room:temp:avg5m
        expr: avg_over_time(temp[5m])
      - record: site:temp:max
        expr: max by (site) (room:temp:avg5m)
        labels:
          tier: summary
      - alert: TooWarm
        expr: temp > 30
`

// backfillEnv is a node with two rooms' temperatures every 15 s over the
// two hours before base, and the rule file above.
func backfillEnv(t *testing.T) (*env, string, time.Time) {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir}
	e.n, e.api = openNode(t, dir)
	t.Cleanup(e.close)
	base := time.Now().Truncate(time.Minute)
	for ts := base.Add(-2 * time.Hour); ts.Before(base); ts = ts.Add(15 * time.Second) {
		k := float64(ts.Unix() % 3600)
		e.write(ts, 20+k/600, "temp", "room", "a")
		e.write(ts, 25-k/900, "temp", "room", "b")
	}
	return e, writeFile(t, dir, "climate.yml", backfillRules), base
}

func (e *env) backfill(file string, start, end time.Time) (BackfillReport, error) {
	return Backfill(context.Background(), EngineEvaluator{e.api.Engine(), e.api.Queryable()}, BackendWriteFunc(e.n),
		BackfillOptions{Files: []string{file}, Start: start, End: end, StepsPerQuery: 7})
}

// instant evaluates expr at t with the node's engine: the oracle.
func (e *env) instant(expr string, t time.Time) map[string]float64 {
	e.t.Helper()
	v, err := EngineEvaluator{e.api.Engine(), e.api.Queryable()}.Instant(context.Background(), expr, t)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]float64{}
	for _, s := range v {
		out[s.Metric.String()] = s.F
	}
	return out
}

// The backfilled series hold, at every minute of the range, what the rule
// evaluated then gives, with the group's and the rule's labels; a rule
// reading another's series sees its backfilled samples; alerting rules are
// skipped.
func TestBackfill_WritesWhatTheRulesGiveAtEveryEvaluation(t *testing.T) {
	e, file, base := backfillEnv(t)
	start, end := base.Add(-90*time.Minute).Add(20*time.Second), base.Add(-30*time.Minute)
	rep, err := e.backfill(file, start, end)
	if err != nil {
		t.Fatal(err)
	}
	first := start.Truncate(time.Minute).Add(time.Minute)
	steps := int(end.Sub(first)/time.Minute) + 1 // 60
	if rep.Groups != 1 || rep.Rules != 2 || rep.AlertingSkipped != 1 || rep.Series != 3 || rep.Samples != int64(3*steps) ||
		!rep.First.Equal(first) || !rep.Last.Equal(end) {
		t.Errorf("report %+v, want 1 group, 2 rules, 1 alerting skipped, 3 series, %d samples from %s to %s", rep, 3*steps, first, end)
	}
	got := e.samples(start.Add(-time.Hour), "room:temp:avg5m")
	if len(got) != 2 {
		t.Fatalf("room:temp:avg5m series: %v", got)
	}
	for _, room := range []string{"a", "b"} {
		s, ok := got[fmt.Sprintf(`room:temp:avg5m{room=%q,site="hq"}`, room)]
		if !ok {
			t.Fatalf("no series for room %s: %v", room, got)
		}
		if len(s.Ts) != steps {
			t.Fatalf("room %s: %d samples, want %d", room, len(s.Ts), steps)
		}
		for i, ts := range s.Ts {
			at := first.Add(time.Duration(i) * time.Minute)
			if ts != at.UnixMilli() {
				t.Fatalf("room %s sample %d at %d, want %s", room, i, ts, at)
			}
			want := e.instant(fmt.Sprintf(`avg_over_time(temp{room=%q}[5m])`, room), at)
			if w := want[fmt.Sprintf(`{room=%q}`, room)]; math.Abs(s.Vs[i]-w) > 1e-12 {
				t.Fatalf("room %s at %s: %v, the expression gives %v", room, at, s.Vs[i], w)
			}
		}
	}
	top := e.samples(start.Add(-time.Hour), "site:temp:max")
	s, ok := top[`site:temp:max{site="hq",tier="summary"}`]
	if !ok || len(s.Ts) != steps {
		t.Fatalf("site:temp:max: %v", top)
	}
	for i, ts := range s.Ts {
		at := time.UnixMilli(ts)
		want := math.Max(e.instant(`room:temp:avg5m{room="a"}`, at)[`{__name__="room:temp:avg5m", room="a", site="hq"}`],
			e.instant(`room:temp:avg5m{room="b"}`, at)[`{__name__="room:temp:avg5m", room="b", site="hq"}`])
		if s.Vs[i] != want {
			t.Fatalf("site:temp:max at %s: %v, want the larger backfilled room average %v", at, s.Vs[i], want)
		}
	}
	if n := len(e.samples(start.Add(-time.Hour), "ALERTS")); n != 0 {
		t.Errorf("%d ALERTS series written", n)
	}
}

// A second backfill of the same range, or of one overlapping it, is
// refused before it writes anything; a range after the backfilled one is
// not (its series have nothing there or later).
func TestBackfill_RefusesToOverwriteOrDuplicate(t *testing.T) {
	e, file, base := backfillEnv(t)
	if _, err := e.backfill(file, base.Add(-100*time.Minute), base.Add(-60*time.Minute)); err != nil {
		t.Fatal(err)
	}
	before := e.samples(base.Add(-3*time.Hour), "room:temp:avg5m")
	_, err := e.backfill(file, base.Add(-70*time.Minute), base.Add(-40*time.Minute))
	if !errors.Is(err, ErrBackfillConflict) {
		t.Fatalf("overlapping backfill: %v, want ErrBackfillConflict", err)
	}
	for _, want := range []string{`{__name__="room:temp:avg5m",site="hq"}`, "22 samples in 2 series", "nothing written", "holds 11 from " + base.Add(-70*time.Minute).UTC().Format(time.RFC3339) + " to " + base.Add(-60*time.Minute).UTC().Format(time.RFC3339)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	after := e.samples(base.Add(-3*time.Hour), "room:temp:avg5m")
	for k, s := range after {
		if len(s.Ts) != len(before[k].Ts) {
			t.Errorf("%s: %d samples after the refused backfill, %d before", k, len(s.Ts), len(before[k].Ts))
		}
	}
	if _, err := e.backfill(file, base.Add(-59*time.Minute), base.Add(-20*time.Minute)); err != nil {
		t.Fatalf("backfill after the backfilled range: %v", err)
	}
	if got := len(e.samples(base.Add(-3*time.Hour), "room:temp:avg5m")[`room:temp:avg5m{room="a",site="hq"}`].Ts); got != 41+40 {
		t.Errorf("room a holds %d samples, want 81", got)
	}
}

// A range before samples the rule's series already hold (the rule has
// been evaluated live) is refused: the node would refuse the older points.
func TestBackfill_RefusesARangeBeforeLiveSamples(t *testing.T) {
	e, file, base := backfillEnv(t)
	e.write(base.Add(-10*time.Minute), 21, "site:temp:max", "site", "hq", "tier", "summary")
	_, err := e.backfill(file, base.Add(-100*time.Minute), base.Add(-60*time.Minute))
	if !errors.Is(err, ErrBackfillConflict) || !strings.Contains(err.Error(), "out-of-order window") {
		t.Fatalf("backfill before live samples: %v, want a conflict naming the out-of-order window", err)
	}
	if n := len(e.samples(base.Add(-3*time.Hour), "room:temp:avg5m")); n != 0 {
		t.Errorf("%d series written by a refused backfill", n)
	}
}

func TestBackfill_BadInput(t *testing.T) {
	e, file, base := backfillEnv(t)
	if _, err := e.backfill(file, base, base.Add(-time.Hour)); err == nil || !strings.Contains(err.Error(), "must be after the start") {
		t.Errorf("end before start: %v", err)
	}
	if _, err := e.backfill(e.dir+"/none-*.yml", base.Add(-time.Hour), base); err == nil || !strings.Contains(err.Error(), "no rule file") {
		t.Errorf("no file: %v", err)
	}
	bad := writeFile(t, e.dir, "bad.yml", "groups:\n  - name: g\n    rules:\n      - record: x\n        expr: sum(\n")
	if _, err := e.backfill(bad, base.Add(-time.Hour), base); err == nil || !strings.Contains(err.Error(), "bad.yml") {
		t.Errorf("invalid file: %v", err)
	}
}
