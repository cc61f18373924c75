// Package compat checks Tributary against the real third-party programs
// its users run, started as processes on loopback. The tests are skipped
// unless TRIBUTARY_COMPAT=1; they need the Debian packages that
// scripts/deps.sh installs.
package compat

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCompat_Prometheus: Debian's prometheus scrapes itself and Tributary,
// ships everything to a Tributary node over remote_write and reads it back
// over remote_read (read_recent: true). A second prometheus with an empty
// TSDB and only remote_read answers from Tributary alone. Every query must
// get the same answer from both (same engine, same data: remote_read gave
// back exactly what was written) and, within float rounding, from
// Tributary's own query API.
func TestCompat_Prometheus(t *testing.T) {
	if os.Getenv("TRIBUTARY_COMPAT") != "1" {
		t.Skip("set TRIBUTARY_COMPAT=1 to run the compatibility tests against real programs")
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (scripts/deps.sh installs Debian's package)")
	}
	dir := t.TempDir()
	trib := promStartTributary(t, dir)
	local := promStart(t, promBin, dir, "local", trib, true)
	remoteOnly := promStart(t, promBin, dir, "remote", trib, false)

	// Let a few dozen scrapes happen, then pick a time in the past that
	// Tributary already holds. The earliest window of the range queries
	// (20 s of steps, 15 s windows, the time 5 s ago) then starts 25 s or
	// more after the series do: close to a counter's first sample,
	// Prometheus 3's rate and increase (Tributary's engine) cut the
	// extrapolation at the counter's zero point in a different order than
	// Prometheus 2 does, and answer differently on purpose.
	time.Sleep(70 * time.Second)
	at := promEvalTime(t, local)
	promWaitShipped(t, trib, at)
	queries := promQueries()
	if len(queries) < 20 {
		t.Fatalf("only %d queries", len(queries))
	}
	for _, q := range queries {
		for _, rng := range []bool{false, true} {
			want := promAsk(t, local, q, at, rng)
			if got := promAsk(t, remoteOnly, q, at, rng); !promSame(got, want, 0) {
				t.Errorf("%s (range %v): prometheus over remote_read answers\n%v\nits local TSDB answers\n%v", q, rng, got, want)
			}
			if got := promAsk(t, trib, q, at, rng); !promSame(got, want, 1e-9) {
				t.Errorf("%s (range %v): tributary answers\n%v\nprometheus answers\n%v", q, rng, got, want)
			}
			if len(want.series) == 0 && q != promAbsentQuery {
				t.Errorf("%s (range %v): no series at all; the comparison proves nothing", q, rng)
			}
		}
	}
	t.Logf("%d queries, each as an instant and as a range query, compared between prometheus (local TSDB), prometheus (remote_read only) and tributary", len(queries))
}

const promAbsentQuery = `absent(no_such_metric)`

// promQueries are what the three servers must answer alike.
func promQueries() []string {
	return []string{
		`up`,
		`count(up)`,
		`sum by (job) (up)`,
		`up == 1`,
		`prometheus_http_requests_total`,
		`rate(prometheus_http_requests_total[10s])`,
		`sum by (job) (rate(scrape_samples_scraped[10s]))`,
		`avg_over_time(scrape_samples_scraped[15s])`,
		`max_over_time(scrape_duration_seconds[20s])`,
		`min_over_time(scrape_duration_seconds[20s])`,
		`count_over_time(up[20s])`,
		`last_over_time(go_goroutines[30s])`,
		`increase(prometheus_tsdb_head_samples_appended_total[15s])`,
		`irate(process_cpu_seconds_total[10s])`,
		`delta(process_resident_memory_bytes[10s])`,
		`deriv(go_memstats_alloc_bytes[20s])`,
		`changes(go_goroutines[30s])`,
		`resets(prometheus_http_requests_total[30s])`,
		`topk(3, go_goroutines)`,
		`bottomk(2, scrape_series_added)`,
		`quantile(0.9, scrape_duration_seconds)`,
		`histogram_quantile(0.9, sum by (le) (rate(prometheus_http_request_duration_seconds_bucket[20s])))`,
		`go_goroutines > 5`,
		`scrape_samples_post_metric_relabeling / scrape_samples_scraped`,
		`label_replace(up, "j", "$1", "job", "(.*)")`,
		`count by (__name__) ({job="prometheus", __name__=~"go_gc.*"})`,
		`sum by (job) (rate({__name__=~"prometheus_http_requests_total|process_cpu_seconds_total"}[10s]))`,
		`go_memstats_heap_alloc_bytes offset 5s`,
		promAbsentQuery,
	}
}

// promServer is one HTTP API answering PromQL.
type promServer struct {
	name, url string
}

// promFreeAddr returns a loopback address nobody listens on.
func promFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// promRun starts a process, its output in dir/name.log, killed at the
// end of the test (the log's tail is shown if the test failed).
func promRun(t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s log (tail):\n%s", name, b)
		}
	})
}

// promWaitOK polls url until it answers 200.
func promWaitOK(t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(u)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s did not answer 200 within a minute", u)
}

// promStartTributary builds and starts a Tributary node.
func promStartTributary(t *testing.T, dir string) promServer {
	t.Helper()
	bin := filepath.Join(dir, "tributary")
	build := exec.Command("go", "build", "-o", bin, "./cmd/tributary")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build tributary: %v\n%s", err, out)
	}
	httpAddr := promFreeAddr(t)
	promRun(t, dir, "tributary", bin, "node", "--data-dir", filepath.Join(dir, "node"),
		"--listen", promFreeAddr(t), "--http-listen", httpAddr)
	s := promServer{name: "tributary", url: "http://" + httpAddr}
	promWaitOK(t, s.url+"/readyz")
	return s
}

// promStart starts a prometheus that reads from Tributary over
// remote_read (read_recent: true); with scrape it also scrapes itself and
// Tributary and ships the samples over remote_write.
func promStart(t *testing.T, bin, dir, name string, trib promServer, scrape bool) promServer {
	t.Helper()
	addr := promFreeAddr(t)
	cfg := "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
	if scrape {
		tu, err := url.Parse(trib.url)
		if err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf(`scrape_configs:
  - job_name: prometheus
    static_configs: [{targets: [%q]}]
  - job_name: tributary
    static_configs: [{targets: [%q]}]
remote_write:
  - url: %s/api/v1/write
    queue_config: {batch_send_deadline: 1s, max_samples_per_send: 2000}
`, addr, tu.Host, trib.url)
	}
	cfg += fmt.Sprintf("remote_read:\n  - url: %s/api/v1/read\n    read_recent: true\n", trib.url)
	cfgPath := filepath.Join(dir, name+".yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promRun(t, dir, "prometheus-"+name, bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, name+"-tsdb"),
		"--web.listen-address="+addr, "--log.level=warn")
	s := promServer{name: "prometheus-" + name, url: "http://" + addr}
	promWaitOK(t, s.url+"/-/ready")
	return s
}

// promResult is an answer reduced to what must match: the series (labels
// as text) and their points.
type promResult struct {
	typ    string
	series map[string][][2]string
}

func (r promResult) String() string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range r.series {
			if !yield(k) {
				return
			}
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d series:", r.typ, len(keys))
	for i, k := range keys {
		if i == 8 {
			b.WriteString("\n  ...")
			break
		}
		fmt.Fprintf(&b, "\n  %s %v", k, r.series[k])
	}
	return b.String()
}

// promAsk asks s for q at time at (a range query over the 20 s before at,
// every 2 s, when rng).
func promAsk(t *testing.T, s promServer, q string, at time.Time, rng bool) promResult {
	t.Helper()
	v := url.Values{"query": {q}}
	path := "/api/v1/query"
	if rng {
		path = "/api/v1/query_range"
		v.Set("start", promUnix(at.Add(-20*time.Second)))
		v.Set("end", promUnix(at))
		v.Set("step", "2")
	} else {
		v.Set("time", promUnix(at))
	}
	resp, err := http.PostForm(s.url+path, v)
	if err != nil {
		t.Fatalf("%s: %v", s.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s %v", s.name, q, resp.StatusCode, body, err)
	}
	var env struct {
		Data struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("%s %s: %v in %s", s.name, q, err, body)
	}
	r := promResult{typ: env.Data.ResultType, series: map[string][][2]string{}}
	for _, s := range env.Data.Result {
		pts := s.Values
		if len(pts) == 0 {
			pts = [][2]any{s.Value}
		}
		var out [][2]string
		for _, p := range pts {
			out = append(out, [2]string{fmt.Sprint(p[0]), fmt.Sprint(p[1])})
		}
		r.series[promLabelText(s.Metric)] = out
	}
	return r
}

func promLabelText(m map[string]string) string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(m[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func promUnix(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// promSame compares two answers; values may differ by the relative
// tolerance tol (0: textually equal).
func promSame(a, b promResult, tol float64) bool {
	if a.typ != b.typ || len(a.series) != len(b.series) {
		return false
	}
	for k, pa := range a.series {
		pb, ok := b.series[k]
		if !ok || len(pa) != len(pb) {
			return false
		}
		for i := range pa {
			if pa[i][0] != pb[i][0] || !promValuesClose(pa[i][1], pb[i][1], tol) {
				return false
			}
		}
	}
	return true
}

func promValuesClose(a, b string, tol float64) bool {
	if a == b {
		return true
	}
	fa, errA := strconv.ParseFloat(a, 64)
	fb, errB := strconv.ParseFloat(b, 64)
	if errA != nil || errB != nil || tol == 0 {
		return false
	}
	return math.Abs(fa-fb) <= tol*math.Max(math.Abs(fa), math.Abs(fb))
}

// promEvalTime picks the time the queries are evaluated at: five seconds
// ago, its millisecond part half a second away from the scrape times'
// (both targets are scraped on the same offset within a few ms), so that
// no sample sits on the edge of a range or lookback window, where
// Prometheus 2 (closed windows) and 3 (left-open) differ.
func promEvalTime(t *testing.T, local promServer) time.Time {
	t.Helper()
	now := time.Now().Add(-5 * time.Second)
	r := promAsk(t, local, `timestamp(up{job="prometheus"})`, now, false)
	for _, pts := range r.series {
		ts, err := strconv.ParseFloat(pts[0][1], 64)
		if err != nil {
			t.Fatal(err)
		}
		offsetMs := int64(math.Round(ts*1000)) % 1000
		base := now.UnixMilli() - now.UnixMilli()%1000
		return time.UnixMilli(base + (offsetMs+500)%1000 - 1000)
	}
	t.Fatal("prometheus has no up{job=\"prometheus\"} yet")
	return time.Time{}
}

// promWaitShipped waits until Tributary holds every job's samples past at.
func promWaitShipped(t *testing.T, trib promServer, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r := promAsk(t, trib, `timestamp(up)`, at.Add(3*time.Second), false)
		done := len(r.series) == 2
		for _, pts := range r.series {
			ts, _ := strconv.ParseFloat(pts[0][1], 64)
			done = done && ts*1000 > float64(at.UnixMilli()+1000)
		}
		if done {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatal("remote_write did not bring both jobs' samples to tributary within a minute")
}
