package demo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// TestDemoScript runs scripts/demo.sh with a freshly built tributary binary:
// act 1 must start tributary local, write and read back over gRPC and HTTP
// (line protocol, PromQL, OpenTSDB) with every answer matching the data
// written, and see every acknowledged point held by the coordinator; act 2
// must answer the same queries from the coordinator alone; both processes
// must stop cleanly with SIGTERM.
func TestDemoScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tributary and runs tribench through go run")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "tributary")
	build := exec.Command(goCmd(), "build", "-o", bin, "./cmd/tributary")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build tributary: %v\n%s", err, out)
	}
	demoDir := t.TempDir()
	cmd := exec.Command(bash, filepath.Join(root, "scripts", "demo.sh"), "--vehicles", "2", "--minutes", "2")
	cmd.Env = append(os.Environ(), "BIN="+bin, "DEMO_DIR="+demoDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{"local ready", "Writing 52,800 points", "matches the data written",
		"204 No Content", "PromQL: mean temperature per room", "OpenTSDB: newest temperature",
		"every acknowledged point is held by the cloud, none twice", "stopping local (SIGTERM)",
		"coordinator ready", "Not writing: checking the answers", "stopping the coordinator (SIGTERM)",
		"data is in " + demoDir} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), "matches the data written"); n != 10 {
		t.Errorf("%d answers match the data written, want 5 in each act:\n%s", n, out)
	}
	if strings.Contains(string(out), "✗") {
		t.Errorf("a demo query failed:\n%s", out)
	}
	for _, pat := range []string{"*.local.log", "*.coordinator.log"} {
		logs, _ := filepath.Glob(filepath.Join(demoDir, pat))
		if len(logs) != 1 {
			t.Fatalf("logs %s: %v, want one", pat, logs)
		}
		if log, _ := os.ReadFile(logs[0]); !strings.Contains(string(log), "stopped cleanly") {
			t.Errorf("%s: not stopped cleanly with SIGTERM; its log:\n%s", logs[0], log)
		}
	}
}

// goCmd finds the go command; `go test` puts its own on the test's PATH.
func goCmd() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// Not on a minute boundary, so that the first and last minute buckets are
// partial.
var testNow = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

func testOptions(addr string) (Options, *bytes.Buffer) {
	var out bytes.Buffer
	o := DefaultOptions()
	o.Addr = addr
	o.Vehicles = 2
	o.Minutes = 3
	o.Now = func() time.Time { return testNow }
	o.Location = time.UTC
	o.Out = &out
	return o, &out
}

func TestRun_WritesAndAnswersEveryQueryAgainstFakeNode(t *testing.T) {
	f := newFakeNode()
	o, out := testOptions(serveFake(t, f))
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out)
	}
	if want := int64(2 * 22 * 3 * 600); sum.Points != want {
		t.Errorf("wrote %d points, want %d", sum.Points, want)
	}
	if len(sum.Queries) != 5 {
		t.Fatalf("%d queries, want 5", len(sum.Queries))
	}
	text := out.String()
	for _, want := range []string{
		"2 vehicles × 22 CAN-bus channels at 10 Hz, 3 minutes of driving from 15:06:26 to 15:09:26 UTC",
		`node ` + o.Addr + `: id "fake"`,
		"Writing 79,200 points",
		`Query {__name__="speed", vehicle="car-01"} RAW from 15:09:16.5 to 15:09:26.5`,
		`Query {__name__="speed"} DOWNSAMPLE step=1m0s downsample=avg aggregate=avg by (vehicle)`,
		`Query {__name__="rpm"} DOWNSAMPLE step=1m0s downsample=max aggregate=max from`,
		`Query {vehicle="car-01"} LAST_POINT`,
		`Series {vehicle=~".+"}`,
		"minute  car-01  car-02", "15:06", "15:09",
		"gps_lat", "coolant_temp", "°C",
		"answered in",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := strings.Count(text, "matches the data written"); n != 5 {
		t.Errorf("%d answers match, want 5", n)
	}
	t.Logf("output:\n%s", text)
}

func TestRun_WrongAnswerFailsAndSaysWhich(t *testing.T) {
	f := newFakeNode()
	f.avgIsSum = true
	o, out := testOptions(serveFake(t, f))
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "Average speed per vehicle") || strings.Contains(err.Error(), "rpm") {
		t.Fatalf("got %v, want only the average query to fail", err)
	}
	if !strings.Contains(out.String(), "✗") {
		t.Errorf("output does not flag the wrong answer:\n%s", out)
	}
}

func TestRun_RejectedWriteFails(t *testing.T) {
	f := newFakeNode()
	f.rejectAll = true
	o, _ := testOptions(serveFake(t, f))
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "REJECT_REASON_TOO_OLD") {
		t.Fatalf("got %v, want the rejection reason", err)
	}
}

func TestQuery_JoinsContinuedSeries(t *testing.T) {
	f := newFakeNode()
	f.chunkPoints = 7
	addr := serveFake(t, f)
	conn, err := nodeclient.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := &tributaryv1.WriteRequest{}
	for _, car := range []string{"a", "b"} {
		b := &tributaryv1.SeriesBatch{Series: &tributaryv1.Series{Labels: []*tributaryv1.Label{{Name: "__name__", Value: "x"}, {Name: "car", Value: car}}}}
		for i := range 30 {
			b.TimestampsMs = append(b.TimestampsMs, int64(i))
			b.Values = append(b.Values, float64(i))
		}
		req.Batches = append(req.Batches, b)
	}
	ctx := context.Background()
	if _, err := tributaryv1.NewWriteServiceClient(conn).Write(ctx, req); err != nil {
		t.Fatal(err)
	}
	ans, err := nodeclient.Query(ctx, tributaryv1.NewQueryServiceClient(conn), &tributaryv1.QueryRequest{
		Matchers: []*tributaryv1.Matcher{{Name: "__name__", Value: "x"}}, StartMs: 0, EndMs: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ans.Series) != 2 || ans.Source != "raw" {
		t.Fatalf("got %d series from %q, want 2 from raw", len(ans.Series), ans.Source)
	}
	for _, s := range ans.Series {
		if len(s.Values) != 30 || s.Values[29] != 29 {
			t.Errorf("series %s: %d values, want 30 joined from 5 messages", s.Label("car"), len(s.Values))
		}
	}
}

func TestOptions_Validate(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	o.Vehicles, o.Minutes, o.Addr = 0, -1, ""
	err := o.Validate()
	if err == nil {
		t.Fatal("bad options validated")
	}
	for _, want := range []string{"vehicles", "minutes", "--addr"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
