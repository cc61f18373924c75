package k8sapi

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/internal/testcert"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeAPI is an API server over TLS answering the scale subresource of
// StatefulSet "coord" in namespace "tsdb" to the token it expects.
type fakeAPI struct {
	mu       sync.Mutex
	token    string // the bearer token accepted
	answer   string // the body of a 200 answer
	paths    []string
	tokens   []string
	srv      *httptest.Server
	dir      string // token and CA files
	override http.HandlerFunc
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{token: "tok-1", answer: `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"coord","namespace":"tsdb"},"spec":{"replicas":5},"status":{"replicas":3}}`}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
	})
	f.dir = t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(f.dir, "ca.crt"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	f.setToken(t, "tok-1")
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	f.tokens = append(f.tokens, r.Header.Get("Authorization"))
	tok, answer, override := f.token, f.answer, f.override
	f.mu.Unlock()
	if override != nil {
		override(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+tok {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`))
		return
	}
	if r.URL.Path != "/apis/apps/v1/namespaces/tsdb/statefulsets/coord/scale" {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"statefulsets.apps \"other\" is forbidden: User \"system:serviceaccount:tsdb:coord\" cannot get resource \"statefulsets/scale\"","reason":"Forbidden","code":403}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(answer))
}

// setToken writes the token file the client reads (and the server accepts).
func (f *fakeAPI) setToken(t *testing.T, tok string) {
	t.Helper()
	f.mu.Lock()
	f.token = tok
	f.mu.Unlock()
	if err := os.WriteFile(filepath.Join(f.dir, "token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeAPI) config() Config {
	return Config{Server: f.srv.URL, TokenFile: filepath.Join(f.dir, "token"), CAFile: filepath.Join(f.dir, "ca.crt"), Namespace: "tsdb"}
}

func (f *fakeAPI) client(t *testing.T) *Client {
	t.Helper()
	c, err := New(f.config())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.http.CloseIdleConnections)
	return c
}

func TestStatefulSetReplicas_ReadsSpecReplicas(t *testing.T) {
	f := newFakeAPI(t)
	c := f.client(t)
	n, err := c.StatefulSetReplicas(context.Background(), "", "coord")
	if err != nil || n != 5 {
		t.Fatalf("replicas = %d, %v; want spec.replicas 5 (not status.replicas 3)", n, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.paths) != 1 || f.paths[0] != "GET /apis/apps/v1/namespaces/tsdb/statefulsets/coord/scale" {
		t.Fatalf("requests %v, want one GET of the scale subresource in the pod's namespace", f.paths)
	}
}

func TestStatefulSetReplicas_RereadsTheRotatedToken(t *testing.T) {
	f := newFakeAPI(t)
	c := f.client(t)
	if _, err := c.StatefulSetReplicas(context.Background(), "tsdb", "coord"); err != nil {
		t.Fatal(err)
	}
	f.setToken(t, "tok-2") // the kubelet rotated the projected token
	if n, err := c.StatefulSetReplicas(context.Background(), "tsdb", "coord"); err != nil || n != 5 {
		t.Fatalf("after the rotation: %d, %v", n, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []string{"Bearer tok-1", "Bearer tok-2"}; strings.Join(f.tokens, ",") != strings.Join(want, ",") {
		t.Fatalf("tokens sent %v, want %v", f.tokens, want)
	}
}

func TestStatefulSetReplicas_ZeroIsOmitted(t *testing.T) {
	f := newFakeAPI(t)
	f.answer = `{"kind":"Scale","apiVersion":"autoscaling/v1","spec":{},"status":{"replicas":0}}`
	if n, err := f.client(t).StatefulSetReplicas(context.Background(), "", "coord"); err != nil || n != 0 {
		t.Fatalf("replicas = %d, %v; want 0", n, err)
	}
}

func TestStatefulSetReplicas_Errors(t *testing.T) {
	cases := map[string]struct {
		answer   string
		override http.HandlerFunc
		ns, name string
		want     string
	}{
		"forbidden, with the API server's message": {ns: "tsdb", name: "other",
			want: `403 Forbidden: statefulsets.apps "other" is forbidden: User "system:serviceaccount:tsdb:coord" cannot get resource "statefulsets/scale"`},
		"not a Scale": {answer: `{"kind":"StatefulSet","spec":{"replicas":3}}`, ns: "tsdb", name: "coord",
			want: `the answer is a "StatefulSet", not a Scale`},
		"not JSON": {answer: `<html>`, ns: "tsdb", name: "coord", want: "decode the answer"},
		"negative": {answer: `{"kind":"Scale","spec":{"replicas":-1}}`, ns: "tsdb", name: "coord", want: "negative"},
		"too large": {answer: `{"kind":"Scale","spec":{"replicas":3},"pad":"` + strings.Repeat("x", MaxResponseBytes) + `"}`,
			ns: "tsdb", name: "coord", want: "over 65536 bytes"},
		"a redirect is not followed": {ns: "tsdb", name: "coord", want: "redirect",
			override: func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
			}},
		"an error that is not a Status": {ns: "tsdb", name: "coord", want: "502 Bad Gateway: upstream down",
			override: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "upstream down", http.StatusBadGateway) }},
		"bad name":      {ns: "tsdb", name: "../secrets", want: `statefulset name "../secrets" is not a valid Kubernetes name`},
		"bad namespace": {ns: "TSDB", name: "coord", want: `namespace "TSDB" is not a valid Kubernetes name`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFakeAPI(t)
			if tc.answer != "" {
				f.answer = tc.answer
			}
			f.override = tc.override
			_, err := f.client(t).StatefulSetReplicas(context.Background(), tc.ns, tc.name)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestStatefulSetReplicas_StatusErrorIsTyped(t *testing.T) {
	f := newFakeAPI(t)
	c := f.client(t)
	f.mu.Lock()
	f.token = "another" // the token was revoked
	f.mu.Unlock()
	_, err := c.StatefulSetReplicas(context.Background(), "", "coord")
	var se *StatusError
	if !errors.As(err, &se) || se.Status != "401 Unauthorized" || se.Message != "Unauthorized" {
		t.Fatalf("err = %v, want a StatusError 401 Unauthorized", err)
	}
}

func TestStatefulSetReplicas_UnknownCAIsRefused(t *testing.T) {
	f := newFakeAPI(t)
	other, err := os.ReadFile(testcert.New(t).CertFile) // another self-signed CA
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "ca.crt"), other, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = f.client(t).StatefulSetReplicas(context.Background(), "", "coord")
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("err = %v, want a certificate verification error", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.paths) != 0 {
		t.Fatalf("the server got %v: the token went to an unverified server", f.paths)
	}
}

func TestNew_RefusesBadConfigs(t *testing.T) {
	f := newFakeAPI(t)
	cases := map[string]func(*Config){
		"plain http":     func(c *Config) { c.Server = strings.Replace(c.Server, "https:", "http:", 1) },
		"a path":         func(c *Config) { c.Server += "/api" },
		"no token file":  func(c *Config) { c.TokenFile = "" },
		"missing token":  func(c *Config) { c.TokenFile = filepath.Join(f.dir, "nope") },
		"no CA in file":  func(c *Config) { c.CAFile = c.TokenFile },
		"bad namespace":  func(c *Config) { c.Namespace = "a/b" },
		"missing CA":     func(c *Config) { c.CAFile = filepath.Join(f.dir, "nope") },
		"empty token":    func(c *Config) { os.WriteFile(c.TokenFile, []byte("\n"), 0o600) },
		"token too long": func(c *Config) { os.WriteFile(c.TokenFile, []byte(strings.Repeat("t", maxTokenBytes+1)), 0o600) },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			f.setToken(t, "tok-1")
			cfg := f.config()
			edit(&cfg)
			if c, err := New(cfg); err == nil {
				c.http.CloseIdleConnections()
				t.Fatal("accepted")
			} else if !strings.HasPrefix(err.Error(), "kubernetes api: ") {
				t.Fatalf("err = %v, want it to start with kubernetes api: ", err)
			}
		})
	}
}

func TestInCluster(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "namespace"), []byte("tsdb"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{hostEnv: "fd00::1", portEnv: "443"}
	cfg, err := inCluster(func(k string) string { return env[k] }, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Server: "https://[fd00::1]:443", TokenFile: dir + "/token", CAFile: dir + "/ca.crt", Namespace: "tsdb"}
	if cfg != want {
		t.Fatalf("config %+v, want %+v", cfg, want)
	}
	delete(env, hostEnv)
	if _, err := inCluster(func(k string) string { return env[k] }, dir); err == nil || !strings.Contains(err.Error(), "not running in a pod") {
		t.Fatalf("without %s: err = %v", hostEnv, err)
	}
	env[hostEnv] = "10.96.0.1"
	if _, err := inCluster(func(k string) string { return env[k] }, t.TempDir()); err == nil || !strings.Contains(err.Error(), "automountServiceAccountToken") {
		t.Fatalf("without the service account files: err = %v", err)
	}
}
