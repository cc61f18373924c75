package httpapi

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func req(body []byte, enc string, contentLength bool) *http.Request {
	r := httptest.NewRequest("POST", "/write", bytes.NewReader(body))
	if enc != "" {
		r.Header.Set("Content-Encoding", enc)
	}
	if !contentLength {
		r.ContentLength = -1
	}
	return r
}

func TestReadBody(t *testing.T) {
	const max = 1 << 10
	small := []byte(strings.Repeat("x", 100))
	big := []byte(strings.Repeat("y", max+1))
	bomb := gz(t, make([]byte, 64<<20)) // 64 MiB of zeros, ~64 KiB compressed
	for _, tc := range []struct {
		name    string
		r       *http.Request
		want    []byte
		status  int
		counter string
	}{
		{"plain", req(small, "", true), small, 0, ""},
		{"plain at limit", req(big[:max], "", true), big[:max], 0, ""},
		{"gzip", req(gz(t, small), "gzip", true), small, 0, ""},
		{"declared length over limit", req(big, "", true), nil, 413, ViolationBodyTooLarge},
		{"chunked over limit", req(big, "", false), nil, 413, ViolationBodyTooLarge},
		{"gzip expands over limit", req(gz(t, big), "gzip", true), nil, 413, ViolationBodyTooLarge},
		{"gzip bomb", req(bomb[:max], "gzip", true), nil, 0, ""}, // truncated stream: bad gzip or too large
		{"gzip bomb whole", req(bomb, "gzip", false), nil, 413, ViolationBodyTooLarge},
		{"not gzip", req(small, "gzip", true), nil, 400, ViolationBadEncoding},
		{"truncated gzip", req(gz(t, small)[:20], "gzip", true), nil, 400, ViolationBadEncoding},
		{"unknown encoding", req(small, "br", true), nil, 415, ViolationBadEncoding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStats()
			got, err := ReadBody(tc.r, max, st)
			if tc.want != nil {
				if err != nil || !bytes.Equal(got, tc.want) {
					t.Fatalf("got %d bytes, err %v; want %d bytes", len(got), err, len(tc.want))
				}
				return
			}
			var he *Error
			if !errors.As(err, &he) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if tc.status != 0 && he.Status != tc.status {
				t.Fatalf("status %d (%s), want %d", he.Status, he.Msg, tc.status)
			}
			if tc.counter != "" && st.Get(tc.counter) != 1 {
				t.Fatalf("counter %s = %d, want 1 (%v)", tc.counter, st.Get(tc.counter), st.Snapshot())
			}
		})
	}
}

func TestStatusFor(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		retry  bool
	}{
		{nil, 200, false},
		{Errorf(413, "too big"), 413, false},
		{fmt.Errorf("wrapped: %w", Errorf(415, "enc")), 415, false},
		{fmt.Errorf("q: %w", model.ErrBadQuery), 400, false},
		{fmt.Errorf("x: %w", model.ErrBadRequest), 400, false},
		{model.ErrOverloaded, 429, true},
		{model.ErrClosed, 503, true},
		{errors.New("fsync: input/output error"), 503, true},
	} {
		st, ra := StatusFor(tc.err)
		if st != tc.status || (ra != "") != tc.retry {
			t.Errorf("StatusFor(%v) = %d, %q; want %d, retry %v", tc.err, st, ra, tc.status, tc.retry)
		}
	}
}

func TestServer_RecoversPanicsAndSetsDeadline(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	mux.HandleFunc("/deadline", func(w http.ResponseWriter, r *http.Request) {
		d, ok := r.Context().Deadline()
		if !ok || time.Until(d) > 2*time.Second {
			http.Error(w, "no deadline", 500)
			return
		}
		io.WriteString(w, "ok")
	})
	srv := NewServer(ServerOptions{Handler: mux, Limits: Limits{RequestTimeout: time.Second}})
	ts := httptest.NewUnstartedServer(srv.Handler)
	ts.Config = srv
	ts.Start()
	defer ts.Close()
	for path, want := range map[string]int{"/panic": 500, "/deadline": 200} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", path, resp.StatusCode, want)
		}
	}
	if srv.ReadHeaderTimeout == 0 || srv.MaxHeaderBytes == 0 {
		t.Fatal("server is not hardened")
	}
}

func TestServer_TLSHandshakeErrorsAreLoggedOnceASecond(t *testing.T) {
	var buf bytes.Buffer
	srv := NewServer(ServerOptions{Handler: http.NewServeMux(), Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	for i := range 1000 {
		srv.ErrorLog.Printf("http: TLS handshake error from 127.0.0.1:%d: EOF", 40000+i)
	}
	srv.ErrorLog.Printf("http: superfluous response.WriteHeader call")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "TLS handshake error") || !strings.Contains(lines[1], "superfluous") {
		t.Fatalf("logged %d lines, want the first handshake error and the other line:\n%s", len(lines), buf.String())
	}
	buf.Reset()
	time.Sleep(handshakeLogInterval + 50*time.Millisecond)
	srv.ErrorLog.Printf("http: TLS handshake error from 127.0.0.1:1: EOF")
	if got := buf.String(); !strings.Contains(got, "TLS handshake error") || !strings.Contains(got, "similar_lines_left_out=999") {
		t.Errorf("after a second: %q, want the line with the 999 left out", got)
	}
}
