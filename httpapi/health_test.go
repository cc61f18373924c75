package httpapi_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/httpapi"
)

func TestHealthEndpoints(t *testing.T) {
	var notReady error = errors.New("wal replay in progress")
	mux := http.NewServeMux()
	httpapi.RegisterHealth(mux, func() error { return nil }, func() error { return notReady }, nil)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/healthz", "/-/healthy"} {
		if code, body := get(p); code != 200 || body != "ok\n" {
			t.Fatalf("%s = %d %q", p, code, body)
		}
	}
	for _, p := range []string{"/readyz", "/-/ready"} {
		code, body := get(p)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "wal replay in progress") {
			t.Fatalf("%s not ready = %d %q", p, code, body)
		}
	}
	notReady = nil
	for _, p := range []string{"/readyz", "/-/ready"} {
		if code, body := get(p); code != 200 || body != "ready\n" {
			t.Fatalf("%s ready = %d %q", p, code, body)
		}
	}
	if code, _ := get("/readyz?x=1"); code != 200 {
		t.Fatalf("/readyz with a query = %d", code)
	}
}
