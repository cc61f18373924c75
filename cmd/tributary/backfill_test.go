package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/rules"
)

const backfillRuleFile = `
groups:
  - name: climate
    interval: 1m
    rules:
      - record: room:temp:avg5m
        expr: avg_over_time(temp[5m])
      - alert: TooWarm
        expr: temp > 30
`

// backfilled reads the samples of room:temp:avg5m{room="a"}.
func backfilled(t *testing.T, n *node.Node) model.Series {
	t.Helper()
	m, err := labels.NewMatcher(labels.MatchEqual, "__name__", "room:temp:avg5m")
	if err != nil {
		t.Fatal(err)
	}
	ms := []*labels.Matcher{m}
	var got []model.Series
	_, err = n.Query(context.Background(), model.Query{Mode: model.ModeRaw, Matchers: ms, Start: 0, End: time.Now().Add(time.Hour).UnixMilli()},
		func(s model.Series) error {
			s.Ts, s.Vs = append([]int64(nil), s.Ts...), append([]float64(nil), s.Vs...)
			got = append(got, s)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Labels.String() != `room:temp:avg5m{room="a"}` {
		t.Fatalf("backfilled series: %v", got)
	}
	return got[0]
}

// checkBackfilled compares every backfilled sample with the rule's
// expression evaluated at its time.
func checkBackfilled(t *testing.T, n *node.Node, s model.Series) {
	t.Helper()
	api, err := prom.New(n, &httpapi.Config{}, prom.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := rules.EngineEvaluator{Engine: api.Engine(), Queryable: api.Queryable()}
	for i, ts := range s.Ts {
		if ts%time.Minute.Milliseconds() != 0 {
			t.Fatalf("sample at %d: not on the group's 1m grid", ts)
		}
		v, err := ev.Instant(context.Background(), `avg_over_time(temp{room="a"}[5m])`, time.UnixMilli(ts))
		if err != nil || len(v) != 1 || math.Abs(v[0].F-s.Vs[i]) > 1e-12 {
			t.Fatalf("at %d: backfilled %v, the expression gives %v (%v)", ts, s.Vs[i], v, err)
		}
	}
}

// The backfill writes into a running node through its HTTP API, refuses
// to write the same range again, and writes into a stopped node's data
// directory.
func TestRulesBackfill_RunningNodeThenDataDir(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir, dataDir := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "climate.yml")
	if err := os.WriteFile(file, []byte(backfillRuleFile), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: dataDir, NodeID: "pi-1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().Truncate(time.Minute)
	var b model.Batch
	b.Labels = labels.Labels{{Name: "__name__", Value: "temp"}, {Name: "room", Value: "a"}}
	for ts := base.Add(-3 * time.Hour); ts.Before(base); ts = ts.Add(15 * time.Second) {
		b.Ts, b.Vs = append(b.Ts, ts.UnixMilli()), append(b.Vs, 20+float64(ts.Unix()%3600)/600)
	}
	if res, err := n.Write(context.Background(), []model.Batch{b}); err != nil || res.Rejected > 0 {
		t.Fatal(err, res)
	}
	sf := serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0",
		prom: prom.Options{MaxSamples: 1_000_000, QueryTimeout: 10 * time.Second, LookbackDelta: 5 * time.Minute, MaxConcurrentQueries: 2}}
	fe, err := sf.start(n, testNodeAPI(n, "test").Register, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + frontAddr(t, fe, "http")
	rfc := func(d time.Duration) string { return base.Add(d).UTC().Format(time.RFC3339) }

	var out, errb bytes.Buffer
	err = runRules([]string{"backfill", "--rules", file, "--start", rfc(-90 * time.Minute), "--end", rfc(-30 * time.Minute), "--node", url, "--steps-per-query", "7"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	want := fmt.Sprintf("backfilled 1 recording rules of 1 groups (1 alerting rules skipped): 61 samples in 1 series, evaluated from %s to %s\n", rfc(-90*time.Minute), rfc(-30*time.Minute))
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	s := backfilled(t, n)
	if len(s.Ts) != 61 {
		t.Fatalf("%d samples, want 61", len(s.Ts))
	}
	checkBackfilled(t, n, s)

	out.Reset()
	err = runRules([]string{"backfill", "--rules", file, "--start", rfc(-40 * time.Minute), "--end", rfc(-20 * time.Minute), "--node", url}, &out, &errb)
	if err == nil || !errors.Is(err, rules.ErrBackfillConflict) || !strings.Contains(err.Error(), "nothing written") || out.Len() != 0 {
		t.Fatalf("overlapping backfill: %v, output %q; want a refusal", err, out.String())
	}
	if s := backfilled(t, n); len(s.Ts) != 61 {
		t.Fatalf("%d samples after a refused backfill, want 61", len(s.Ts))
	}
	fe.stop(time.Second)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	// The stopped node: the range after, into its data directory. (One
	// before would be refused: the series hold samples after it.)
	out.Reset()
	err = runRules([]string{"backfill", "--rules", file, "--start", rfc(-29 * time.Minute), "--end", rfc(-time.Minute), "--data-dir", dataDir, "--node-id", "pi-1"}, &out, &errb)
	if err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	if !strings.HasPrefix(out.String(), "backfilled 1 recording rules of 1 groups (1 alerting rules skipped): 29 samples in 1 series") {
		t.Errorf("output %q", out.String())
	}
	n, err = node.Open(node.Options{DataDir: dataDir, NodeID: "pi-1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s = backfilled(t, n)
	if len(s.Ts) != 90 || s.Ts[0] != base.Add(-90*time.Minute).UnixMilli() || s.Ts[89] != base.Add(-time.Minute).UnixMilli() {
		t.Fatalf("%d samples from %d, want 90 from %d", len(s.Ts), s.Ts[0], base.Add(-90*time.Minute).UnixMilli())
	}
	checkBackfilled(t, n, s)
}

func TestRulesBackfill_UsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"backfill", "--start", "-1h", "--end", "now", "--node", "http://127.0.0.1:1"},
		{"backfill", "--rules", "x.yml", "--end", "now", "--node", "http://127.0.0.1:1"},
		{"backfill", "--rules", "x.yml", "--start", "-1h", "--end", "now"},
		{"backfill", "--rules", "x.yml", "--start", "-1h", "--end", "now", "--node", "http://127.0.0.1:1", "--data-dir", "d"},
		{"backfill", "--rules", "x.yml", "--start", "yesterday", "--end", "now", "--node", "http://127.0.0.1:1"},
		{"backfill", "--rules", "x.yml", "--start", "-1h", "--end", "now", "--node", "127.0.0.1:7071"},
	} {
		err := runRules(args, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
