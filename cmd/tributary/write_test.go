package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// cliNode is a real storage node served over gRPC on loopback for the
// client commands to talk to, with an SDK client to check what they did.
type cliNode struct {
	addr string
	c    *tributary.Client
}

// startCLINode starts a node; with a token, every call must carry it.
func startCLINode(t *testing.T, token string) *cliNode {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	check := func(ctx context.Context) error {
		if token == "" {
			return nil
		}
		md, _ := metadata.FromIncomingContext(ctx)
		if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+token {
			return status.Error(codes.Unauthenticated, "missing or bad token")
		}
		return nil
	}
	g := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := check(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := check(ss.Context()); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	)
	testNodeAPI(n, "test").Register(g)
	go g.Serve(lis)
	opts := []tributary.Option{}
	if token != "" {
		opts = append(opts, tributary.WithToken(token))
	}
	c, err := tributary.Dial(context.Background(), lis.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		g.Stop()
		if err := n.Close(); err != nil {
			t.Errorf("close node: %v", err)
		}
	})
	return &cliNode{addr: lis.Addr().String(), c: c}
}

// cli runs the binary's entry point with args and returns its exit code
// and output.
func cli(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// stored returns the raw points of the series matching selector in the
// last day, keyed by series.
func (n *cliNode) stored(t *testing.T, selector string) map[string][]tributary.Point {
	t.Helper()
	got, err := n.c.Query(context.Background(), tributary.Raw(selector, time.Now().Add(-24*time.Hour), time.Now().Add(time.Minute))).Collect()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][]tributary.Point{}
	for _, s := range got {
		m[s.Labels.String()] = s.Points
	}
	return m
}

func TestWrite_CSVFromFile(t *testing.T) {
	n := startCLINode(t, "")
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UTC()
	ms := base.UnixMilli()
	csv := "# exported from the greenhouse\n" +
		"timestamp,metric,value,room,note\n" +
		"\n" +
		base.Format(time.RFC3339Nano) + ",temp,20.5,a,\n" +
		" " + itoa(ms+1000) + " , temp, 21 , a, \"hello, world\"\n" +
		"\"" + base.Add(2*time.Second).Format("2006-01-02 15:04:05") + "\",temp,-1.5e1,b,\"say \"\"hi\"\"\"\r\n" +
		itoa(ms+3000) + ",hum,NaN,a,\n"
	path := writeFile(t, "in.csv", csv)
	code, out, errOut := cli("write", "--addr", n.addr, "--format", "csv", "--db", "farm", path)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"4 read, 0 refused", "4 accepted, 0 rejected", "points/s"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	got := n.stored(t, `{db="farm"}`)
	want := map[string][]tributary.Point{
		`temp{db="farm",room="a"}`:                     {{TimestampMs: ms, Value: 20.5}},
		`temp{db="farm",note="hello, world",room="a"}`: {{TimestampMs: ms + 1000, Value: 21}},
		`temp{db="farm",note="say \"hi\"",room="b"}`:   {{TimestampMs: ms + 2000, Value: -15}},
	}
	for k, w := range want {
		if p := got[k]; len(p) != 1 || p[0] != w[0] {
			t.Errorf("%s: %v, want %v", k, p, w)
		}
	}
	if p := got[`hum{db="farm",room="a"}`]; len(p) != 1 || p[0].Value == p[0].Value {
		t.Errorf("hum: %v, want one NaN", p)
	}
	if len(got) != 4 {
		t.Errorf("series %v", got)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestWrite_CSVProblemsAreListedByLine(t *testing.T) {
	n := startCLINode(t, "")
	now := time.Now().UnixMilli()
	old := time.Now().Add(-60 * 24 * time.Hour).UnixMilli()
	csv := "metric,timestamp,value,host\n" +
		"cpu," + itoa(now) + ",1,a\n" +
		"cpu," + itoa(now) + ",one,a\n" +
		"cpu,yesterday,1,a\n" +
		"cpu," + itoa(now) + ",1\n" +
		"cpu," + itoa(now) + ",1,\"unterminated\n" +
		"cpu," + itoa(old) + ",2,a\n" +
		"," + itoa(now) + ",1,a\n"
	code, out, errOut := cli("write", "--addr", n.addr, "--format", "csv", writeFile(t, "bad.csv", csv))
	if code != 1 || !strings.Contains(errOut, "not everything was stored: 5 lines refused, 1 points rejected") {
		t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", code, errOut, out)
	}
	for _, want := range []string{
		"7 read, 5 refused",
		"1 accepted, 1 rejected",
		`line 3: value "one" is not a number`,
		`line 4: timestamp "yesterday"`,
		"line 5: 3 fields, the header has 4",
		"line 6: field 4: unterminated quoted field",
		"rejected TOO_OLD cpu{host=\"a\"}",
		"line 8: empty metric",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestWrite_CSVHeaderErrorsStopAtOnce(t *testing.T) {
	n := startCLINode(t, "")
	for name, c := range map[string]struct{ csv, want string }{
		"no value column":   {"metric,timestamp,host\ncpu,1,a\n", "want columns metric and value"},
		"bad label name":    {"metric,value,1host\n", `"1host" is not a valid label name`},
		"duplicate column":  {"metric,value,__name__\n", `both "metric"`},
		"empty input":       {"# nothing\n\n", "no CSV header"},
		"unterminated head": {"metric,\"value\n", "unterminated"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := cli("write", "--addr", n.addr, "--format", "csv", writeFile(t, "h.csv", c.csv))
			if code != 2 || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
		})
	}
}

func TestWrite_LineProtocolFromStdin(t *testing.T) {
	n := startCLINode(t, "")
	ns := time.Now().Add(-time.Minute).UnixNano()
	lp := "# telegraf\n" +
		"cpu,host=pi-1 usage_idle=91.5,usage_user=3i " + itoa(ns) + "\n" +
		"cpu,host=pi-2 usage_idle=88 " + itoa(ns+int64(time.Second)) + "\n" +
		"cpu,host=pi-2 usage_idle=\"busy\" " + itoa(ns) + "\n" +
		"mem,host=pi-1 free=1024u\n"
	old := stdin
	stdin = strings.NewReader(lp)
	defer func() { stdin = old }()
	code, out, errOut := cli("write", "--addr", n.addr, "--db", "telegraf", "-")
	if code != 0 {
		t.Fatalf("exit %d (want 0: the string field is skipped)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"4 read, 0 refused", "1 string fields skipped", "4 accepted, 0 rejected"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	got := n.stored(t, `{db="telegraf"}`)
	ms := ns / 1e6
	if p := got[`cpu_usage_idle{db="telegraf",host="pi-1"}`]; len(p) != 1 || p[0] != (tributary.Point{TimestampMs: ms, Value: 91.5}) {
		t.Errorf("cpu_usage_idle pi-1: %v (stored %v)", p, got)
	}
	if p := got[`cpu_usage_user{db="telegraf",host="pi-1"}`]; len(p) != 1 || p[0].Value != 3 {
		t.Errorf("cpu_usage_user: %v", p)
	}
	if p := got[`mem_free{db="telegraf",host="pi-1"}`]; len(p) != 1 || time.Since(time.UnixMilli(p[0].TimestampMs)) > time.Minute {
		t.Errorf("mem_free without timestamp: %v", p)
	}
}

func TestWrite_OverlongLinesAreSkippedAndCounted(t *testing.T) {
	n := startCLINode(t, "")
	now := time.Now().Unix()
	var b strings.Builder
	b.WriteString("a v=1 " + itoa(now) + "\n")
	b.WriteString("b,pad=" + strings.Repeat("x", maxLineBytes+10) + " v=1 " + itoa(now) + "\n")
	for i := range 3000 {
		b.WriteString("c,i=" + itoa(int64(i)) + " v=1 " + itoa(now) + "\n")
	}
	b.WriteString("d v=oops " + itoa(now) + "\n")
	code, out, _ := cli("write", "--addr", n.addr, "--precision", "s", writeFile(t, "big.lp", b.String()))
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{"3,003 read, 2 refused", "3,001 accepted", "line 2: longer than 1048576 bytes", "line 3003, column"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestWrite_ProgressAndBadInvocations(t *testing.T) {
	n := startCLINode(t, "")
	path := writeFile(t, "p.lp", "m v=1\n")
	code, out, errOut := cli("write", "--addr", n.addr, "--progress", "always", path)
	if code != 0 || !strings.Contains(errOut, "[##############################] 100%") || !strings.Contains(errOut, "points/s") {
		t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", code, errOut, out)
	}
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"bad format":     {[]string{"--format", "xml", path}, "--format"},
		"bad precision":  {[]string{"--precision", "fortnight", path}, "--precision"},
		"bad db":         {[]string{"--db", "a\x00b", path}, "--db"},
		"two files":      {[]string{path, path}, "at most one input file"},
		"missing file":   {[]string{"/nonexistent/points.lp"}, "open input"},
		"zero attempts":  {[]string{"--max-attempts", "0", path}, "--max-attempts"},
		"token in clear": {[]string{"--addr", "192.0.2.1:7070", "--token", "secret-token", path}, "refusing to send a token"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := cli(append([]string{"write", "--addr", n.addr}, c.args...)...)
			if code == 0 || !strings.Contains(errOut, c.want) {
				t.Fatalf("exit %d, stderr:\n%s", code, errOut)
			}
		})
	}
}

func TestWrite_TokenFromTheEnvironment(t *testing.T) {
	const token = "cli-test-token-1234"
	n := startCLINode(t, token)
	path := writeFile(t, "t.lp", "m v=1\n")
	t.Setenv(tokenEnv, "")
	code, out, errOut := cli("write", "--addr", n.addr, "--max-attempts", "1", path)
	if code != 1 || !strings.Contains(out, "1 not delivered") || !strings.Contains(out, "Unauthenticated") {
		t.Fatalf("without token: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Setenv(tokenEnv, token)
	if code, out, errOut := cli("write", "--addr", n.addr, path); code != 0 || !strings.Contains(out, "1 accepted") {
		t.Fatalf("with $%s: exit %d\nstdout:\n%s\nstderr:\n%s", tokenEnv, code, out, errOut)
	}
	t.Setenv(tokenEnv, "")
	if code, _, errOut := cli("write", "--addr", n.addr, "--token", token, path); code != 0 {
		t.Fatalf("with --token: exit %d\n%s", code, errOut)
	}
}

func TestWrite_UnreachableServerIsReported(t *testing.T) {
	path := writeFile(t, "u.lp", "m v=1\nm v=2 1\n")
	// Nothing listens on port 1 of loopback.
	code, out, errOut := cli("write", "--addr", "127.0.0.1:1", "--max-attempts", "1", "--precision", "s", path)
	if code != 1 || !strings.Contains(out, "2 not delivered") || !strings.Contains(out, "Unavailable") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
