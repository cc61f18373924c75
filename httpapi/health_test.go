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
	if code, body := get("/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	code, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "wal replay in progress") {
		t.Fatalf("/readyz not ready = %d %q", code, body)
	}
	notReady = nil
	if code, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz ready = %d %q", code, body)
	}
	if code, _ := get("/readyz?x=1"); code != 200 {
		t.Fatalf("/readyz with a query = %d", code)
	}
}
