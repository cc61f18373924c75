//go:build linux

package lpbench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/fakenode"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/report/reporttest"
)

// The test binary doubles as a fake tributary binary: with fakenode.Env set
// it serves a fakeStore over HTTP as `tributary node` (kept in the data
// directory across restarts) and reports its points as `tributary
// compact`. The variable names a mode: "ok", "lossy" (compact reports half
// the points), "closed-left" (wrong query windows) or "no-http" (the node
// serves no HTTP API, as a node without the HTTP listener would not).
func TestMain(m *testing.M) { fakenode.Main(m, fakeTributary) }

func fakeTributary(mode string, args []string) int {
	if len(args) == 0 {
		return 2
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "")
	httpListen := fs.String("http-listen", "", "")
	for _, name := range []string{"listen", "wal-sync", "log-level", "node-id"} {
		fs.String(name, "", "")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	storePath := filepath.Join(*dataDir, "store.json")
	store := newFakeStore()
	if err := store.load(storePath); err != nil {
		log.Error("load", "err", err)
		return 1
	}
	switch args[0] {
	case "compact":
		n := store.Points
		if mode == "lossy" {
			n /= 2
		}
		fmt.Printf("{\"sst_bytes\":%d,\"points\":%d,\"series\":%d}\n", n*4/10, n, len(store.User)*10)
		return 0
	case "node":
	default:
		return 2
	}
	if mode == "closed-left" {
		store.Mode = mode
	}
	handler := store.handler()
	if mode == "no-http" {
		handler = http.NotFoundHandler()
	}
	lis, err := net.Listen("tcp", *httpListen)
	if err != nil {
		log.Error("listen", "err", err)
		return 1
	}
	srv := &http.Server{Handler: handler}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		_ = srv.Shutdown(context.Background())
	}()
	log.Info("node ready", "http", lis.Addr())
	if err := srv.Serve(lis); err != http.ErrServerClosed {
		log.Error("serve", "err", err)
		return 1
	}
	if _, _, disorder := store.stats(); len(disorder) > 0 {
		log.Error("lines out of time order", "examples", disorder)
		return 1
	}
	if err := store.save(storePath); err != nil {
		log.Error("save", "err", err)
		return 1
	}
	return 0
}

func fakeRunOptions(t *testing.T, mode string) (Options, *bytes.Buffer) {
	var out bytes.Buffer
	o := DefaultOptions()
	o.Binary = os.Args[0]
	o.Env = []string{fakenode.Env + "=" + mode}
	o.Hosts = 5
	o.Span = 2 * time.Hour
	o.BatchLines = 500
	o.WarmupQueries = 10
	o.Queries = 40
	o.TSBSQueries = false // the fake answers only the kdb+ blog query
	o.WorkDir = t.TempDir()
	o.Settle = 100 * time.Millisecond
	o.Commit = "test"
	o.Out = &out
	o.Now = func() time.Time { return time.Now().Add(-time.Minute) } // any clock works for the fake
	return o, &out
}

func TestRun_AgainstFakeNodeProcess(t *testing.T) {
	o, out := fakeRunOptions(t, "ok")
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out)
	}
	if res.Points != 5*720*10 || res.CompactPoints != res.Points || res.Lines != 5*720 || res.Series != 50 {
		t.Errorf("points %d, compact points %d, lines %d, series %d", res.Points, res.CompactPoints, res.Lines, res.Series)
	}
	if float64(res.BytesPerPoint) != 0.4 {
		t.Errorf("bytes/point %v, want the fake's 0.4", res.BytesPerPoint)
	}
	if res.Queries != 40 || res.QueriesChecked != 50 || res.QueriesWrong != 0 {
		t.Errorf("queries %d, checked %d, wrong %d", res.Queries, res.QueriesChecked, res.QueriesWrong)
	}
	for name, x := range map[string]float64{
		"points/s": float64(res.PointsPerS), "peak RSS": float64(res.PeakRSSMiB), "query p50": float64(res.PromQLP50Ms),
		"query RSS": float64(res.PeakRSSQueryMiB), "cpu": float64(res.CPUSPerMillionPoints), "ping": float64(res.PingP50Ms),
	} {
		if !(x > 0) {
			t.Errorf("%s not measured: %v", name, x)
		}
	}
	last := reporttest.LastJSONLine(t, out.String())
	if last["points"] != float64(res.Points) || last["commit"] != "test" || last["precision"] != "ns" {
		t.Errorf("JSON line %v", last)
	}
	for _, s := range []string{"≥ 2,500,000", "≤ 0.33", "≤ 0.45", "≤ 128", "≤ 0.20", "50 of 50 answers matched"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out)
		}
	}
	entries, _ := os.ReadDir(o.WorkDir)
	if len(entries) != 0 {
		t.Errorf("work dir not removed: %v", entries)
	}
	t.Logf("output:\n%s", out)
}

func TestRun_Failures(t *testing.T) {
	tests := []struct {
		mode, want string
		report     bool // the report is printed before the error
	}{
		{"lossy", "acknowledged points were lost", true},
		{"closed-left", "query answers did not match the written data", true},
		{"no-http", "404 Not Found", false},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			o, out := fakeRunOptions(t, tc.mode)
			_, err := Run(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if got := strings.Contains(out.String(), `"points_per_s"`); got != tc.report {
				t.Errorf("report printed: %v, want %v:\n%s", got, tc.report, out)
			}
			entries, _ := os.ReadDir(o.WorkDir)
			if len(entries) != 1 {
				t.Errorf("a failed run should keep its work dir, found %v", entries)
			}
		})
	}
}

func TestRun_MissingBinary(t *testing.T) {
	o, _ := fakeRunOptions(t, "ok")
	o.Binary = filepath.Join(t.TempDir(), "no-such-tributary")
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "find tributary binary") {
		t.Fatalf("got %v", err)
	}
}

func TestOptions_Validate(t *testing.T) {
	ok, _ := fakeRunOptions(t, "ok")
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := map[string]func(*Options){
		"no binary":              func(o *Options) { o.Binary = "" },
		"no hosts":               func(o *Options) { o.Hosts = 0 },
		"interval not a minute":  func(o *Options) { o.Interval = 7 * time.Second },
		"span too short":         func(o *Options) { o.Span = time.Hour },
		"span past retention":    func(o *Options) { o.Span = 20 * 24 * time.Hour },
		"span not whole rows":    func(o *Options) { o.Span = 2*time.Hour + 5*time.Second },
		"more clients than host": func(o *Options) { o.Clients = 6 },
		"no query clients":       func(o *Options) { o.QueryClients = 0 },
		"no queries":             func(o *Options) { o.Queries = 0 },
		"no db":                  func(o *Options) { o.DB = "" },
		"no timeout":             func(o *Options) { o.CallTimeout = 0 },
	}
	for name, mutate := range tests {
		o := ok
		mutate(&o)
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The five figures with targets lead the JSON line, in the order.
func TestResult_JSONStartsWithTheFiveFigures(t *testing.T) {
	b, err := json.Marshal(Result{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"points_per_s":0,"cpu_s_per_million_points":0,"bytes_per_point":0,"peak_rss_mib":0,"promql_1h_max_by_min_p50_ms":0,`
	if !strings.HasPrefix(string(b), want) {
		t.Errorf("JSON starts %s", b[:min(len(b), len(want)+20)])
	}
}

// TestTSBSTargets_ThePairOfTheDataSet: the 1,000-host, 12-hour data set
// is held to its own TSBS targets, in the table and in the JSON line;
// every other data set to the default ones.
func TestTSBSTargets_ThePairOfTheDataSet(t *testing.T) {
	if got, big := tsbsTargetsFor(1000, 12*time.Hour); !big || got != TSBSTargets1000 {
		t.Errorf("1,000 hosts over 12 h: %+v, %v", got, big)
	}
	for _, c := range []struct {
		hosts int
		span  time.Duration
	}{{100, 24 * time.Hour}, {1000, 24 * time.Hour}, {10, 12 * time.Hour}} {
		if got, big := tsbsTargetsFor(c.hosts, c.span); big || got != TSBSTargets {
			t.Errorf("%d hosts over %v: %+v, %v; want the default targets", c.hosts, c.span, got, big)
		}
	}
	r := Result{Hosts: 1000, RowsPerHost: 4320, IntervalS: 10, Provenance: report.Provenance{Targets: map[string]float64{}}}
	r.TSBSFigures = TSBSFigures{QLastpointP50Ms: 6, TSBSQueriesChecked: 1}
	var out strings.Builder
	if err := writeTSBSTable(&out, r.TSBSFigures, TSBSTargets1000); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "p50 ≤ 10") || !regexp.MustCompile(`lastpoint .*p50 ≤ 10\s+met`).MatchString(out.String()) {
		t.Errorf("1,000-host table:\n%s", out.String())
	}
	if err := WriteReport(&out, r); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`lastpoint .*p50 ≤ 10\s+met`).MatchString(out.String()) {
		t.Errorf("WriteReport does not hold a 1,000-host result to its targets:\n%s", out.String())
	}
}
