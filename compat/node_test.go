package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Binaries built by TestMain (empty when the tests are skipped).
var (
	tributaryBin string
	grpcurlBin   string
)

// enabled reports whether the compatibility tests run (TRIBUTARY_COMPAT=1).
func enabled() bool { return os.Getenv("TRIBUTARY_COMPAT") == "1" }

func TestMain(m *testing.M) {
	if !enabled() {
		os.Exit(m.Run()) // every test skips itself
	}
	dir, err := os.MkdirTemp("", "tributary-compat-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		os.Exit(2)
	}
	code := 2
	defer func() { os.RemoveAll(dir); os.Exit(code) }()
	for _, b := range []struct {
		out *string
		pkg string
	}{{&tributaryBin, "github.com/tributarydb/tributary/cmd/tributary"}, {&grpcurlBin, "github.com/fullstorydev/grpcurl/cmd/grpcurl"}} {
		path := filepath.Join(dir, filepath.Base(b.pkg))
		cmd := exec.Command("go", "build", "-o", path, b.pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "compat: build %s: %v\n", b.pkg, err)
			return
		}
		*b.out = path
	}
	code = m.Run()
}

// requireCompat skips t unless the compatibility tests are on, and
// requires the named programs on PATH (or as absolute paths).
func requireCompat(t *testing.T, programs ...string) {
	t.Helper()
	if !enabled() {
		t.Skip("compatibility tests are off: set TRIBUTARY_COMPAT=1 (make compat)")
	}
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("%s is not installed (scripts/deps.sh compat installs it): %v", p, err)
		}
	}
}

// freeAddr returns a loopback address with a port free at the time of the
// call.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// node is a running `tributary node` process.
type node struct {
	t                  *testing.T
	dir                string
	grpc, http, telnet string
	extra              []string
	// local runs `tributary local` (an edge node and a coordinator in one
	// process: writes to the edge, queries through the coordinator) with
	// its cluster and intake listeners on these addresses.
	local           bool
	cluster, intake string
	cmd             *exec.Cmd
	out             *syncBuffer
	exited          chan struct{}
}

// syncBuffer collects a process's output for the failure message.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startNode starts a node on fresh loopback ports (gRPC, HTTP and the
// OpenTSDB telnet input) over a new data directory, with extra flags, and
// waits until /readyz answers 200. It is stopped when t ends.
func startNode(t *testing.T, extra ...string) *node {
	t.Helper()
	n := &node{t: t, dir: t.TempDir(), grpc: freeAddr(t), http: freeAddr(t), telnet: freeAddr(t), extra: extra}
	n.start()
	t.Cleanup(n.stop)
	return n
}

// startLocal is startNode for `tributary local`.
func startLocal(t *testing.T, extra ...string) *node {
	t.Helper()
	n := &node{t: t, dir: t.TempDir(), grpc: freeAddr(t), http: freeAddr(t), telnet: freeAddr(t), extra: extra,
		local: true, cluster: freeAddr(t), intake: freeAddr(t)}
	n.start()
	t.Cleanup(n.stop)
	return n
}

// start (re)starts the process over n's data directory and addresses.
func (n *node) start() {
	n.t.Helper()
	args := []string{"node", "--data-dir", n.dir, "--node-id", "compat-1"}
	if n.local {
		args = []string{"local", "--data-dir", n.dir, "--cluster-listen", n.cluster, "--intake-listen", n.intake}
	}
	args = append(append(args, "--listen", n.grpc, "--http-listen", n.http, "--opentsdb-listen", n.telnet), n.extra...)
	n.out = &syncBuffer{}
	n.cmd = exec.Command(tributaryBin, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	n.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(n.cmd, n.exited)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			n.t.Fatalf("tributary %s exited at start:\n%s", args[0], n.out.String())
		default:
		}
		if resp, err := http.Get("http://" + n.http + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.t.Fatalf("tributary %s not ready within 60s:\n%s", args[0], n.out.String())
}

// kill9 ends the process with SIGKILL: no shutdown, no flush.
func (n *node) kill9() {
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// stop ends the process with SIGTERM (SIGKILL after 20s).
func (n *node) stop() {
	select {
	case <-n.exited:
		return
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(20 * time.Second):
		n.kill9()
	}
}

// get sends GET path (with query values) to the HTTP listener and returns
// the status and body.
func (n *node) get(path string, q url.Values) (int, []byte) {
	n.t.Helper()
	u := "http://" + n.http + path
	if q != nil {
		u += "?" + q.Encode()
	}
	return n.do(http.MethodGet, u, "", nil)
}

// do sends a request to the node's HTTP listener.
func (n *node) do(method, u, contentType string, body io.Reader) (int, []byte) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		n.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		n.t.Fatal(err)
	}
	return resp.StatusCode, b
}

// write sends line protocol to /write?db=db (precision ms).
func (n *node) write(db, lines string) {
	n.t.Helper()
	st, b := n.do(http.MethodPost, "http://"+n.http+"/write?precision=ms&db="+url.QueryEscape(db), "text/plain", strings.NewReader(lines))
	if st != http.StatusNoContent {
		n.t.Fatalf("write: %d %s", st, b)
	}
}

// promSamples returns every raw sample of the series selected by sel in
// the last window, by series (its labels as JSON), from a PromQL range
// selector.
func (n *node) promSamples(sel string, window string) map[string]map[int64]float64 {
	n.t.Helper()
	st, b := n.get("/api/v1/query", url.Values{"query": {sel + "[" + window + "]"}})
	if st != http.StatusOK {
		n.t.Fatalf("query %s: %d %s", sel, st, b)
	}
	var ans struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		n.t.Fatalf("query %s: %v: %s", sel, err, b)
	}
	out := map[string]map[int64]float64{}
	for _, r := range ans.Data.Result {
		key, _ := json.Marshal(r.Metric)
		m := map[int64]float64{}
		for _, v := range r.Values {
			ts, _ := v[0].(float64)
			var f float64
			fmt.Sscan(v[1].(string), &f)
			m[int64(ts*1000+0.5)] = f
		}
		out[string(key)] = m
	}
	return out
}

// waitFor polls cond every 200ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
