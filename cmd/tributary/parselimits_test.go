package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node"
)

// TestServe_ParseLimitFlagsReachTheParsers: --max-fields-per-line,
// --max-line-bytes and --max-series-per-request are what the HTTP write
// APIs enforce.
func TestServe_ParseLimitFlagsReachTheParsers(t *testing.T) {
	var sf serveFlags
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	sf.register(fs)
	if err := fs.Parse([]string{"--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
		"--max-fields-per-line=3", "--max-line-bytes=300", "--max-series-per-request=5"}); err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	fe, err := sf.start(n, testNodeAPI(n, "test").Register, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer fe.stop(time.Second)
	var base string
	for i := 0; i+1 < len(fe.addrs); i += 2 {
		if fe.addrs[i] == "http" {
			base = "http://" + fe.addrs[i+1].(string)
		}
	}
	post := func(path, body string) (int, string) {
		resp, err := http.Post(base+path, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		says             string
	}{
		{"fields", "/write?db=d", "m a=1,b=2,c=3,d=4\n", 400, "at most 3 fields"},
		{"line bytes", "/write?db=d", "m,t=" + strings.Repeat("x", 300) + " v=1\n", 400, "the limit is 300 bytes"},
		{"series", "/write?db=d", "m a=1,b=1,c=1\nn a=1,b=1,c=1\n", 413, "more than 5 series"},
		{"opentsdb series", "/api/put", func() string {
			var b strings.Builder
			b.WriteByte('[')
			for i := range 6 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"metric":"m","timestamp":%d,"value":1,"tags":{"h":"%d"}}`, time.Now().Unix(), i)
			}
			return b.String() + "]"
		}(), 413, "more than 5 series"},
	} {
		if st, body := post(tc.path, tc.body); st != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, st, body, tc.status, tc.says)
		}
	}
}
