package rules

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// authAlertmanager is an HTTPS Alertmanager stand-in that takes alerts
// only with the expected credentials (check) and records the bodies it
// took and the refusals.
type authAlertmanager struct {
	check func(*http.Request) bool

	mu       sync.Mutex
	bodies   []string
	refusals int
}

func (a *authAlertmanager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v2/alerts" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.check(r) {
		a.refusals++
		w.Header().Set("WWW-Authenticate", `Basic realm="alertmanager"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	a.bodies = append(a.bodies, string(body))
}

func (a *authAlertmanager) counts() (received, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.bodies), a.refusals
}

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sumMetric adds up the data points of the counter name.
func sumMetric(t *testing.T, reader *sdkmetric.ManualReader, name string) float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[float64]); ok && m.Name == name {
				for _, p := range s.DataPoints {
					total += p.Value
				}
			}
		}
	}
	return total
}

// TestManager_AlertmanagerAuthAndTLS sends alerts over TLS (a private CA)
// to an Alertmanager that requires basic auth or a bearer token. The
// secret files first hold a wrong secret: the sends fail, are logged with
// the status and counted, and nothing crashes; once the file holds the
// right secret (no restart, no reload) the alert arrives. No secret is
// ever logged.
func TestManager_AlertmanagerAuthAndTLS(t *testing.T) {
	const user, good, bad = "pi-7", "s3cret-good-pw", "s3cret-wrong-pw"
	for _, tc := range []struct {
		name  string
		check func(*http.Request) bool
		http  func(secretFile string) AlertmanagerHTTP
	}{
		{"basic auth", func(r *http.Request) bool {
			u, p, ok := r.BasicAuth()
			return ok && u == user && p == good
		}, func(f string) AlertmanagerHTTP {
			return AlertmanagerHTTP{BasicAuthUser: user, BasicAuthPasswordFile: f}
		}},
		{"bearer token", func(r *http.Request) bool {
			return r.Header.Get("Authorization") == "Bearer "+good
		}, func(f string) AlertmanagerHTTP { return AlertmanagerHTTP{BearerTokenFile: f} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			am := &authAlertmanager{check: tc.check}
			srv := httptest.NewTLSServer(am)
			defer srv.Close()
			dir := t.TempDir()
			ca := filepath.Join(dir, "ca.pem")
			if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
				t.Fatal(err)
			}
			secret := filepath.Join(dir, "secret")
			if err := os.WriteFile(secret, []byte(bad+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			h := tc.http(secret)
			h.CAFile, h.ServerName = ca, "example.com" // httptest's certificate names example.com
			logs := &lockedBuffer{}
			reader := sdkmetric.NewManualReader()
			files := writeFile(t, t.TempDir(), "can.yml", overheatRules)
			e := newEnv(t, t.TempDir(), Options{Files: []string{files}, Alertmanagers: []string{srv.URL},
				AlertmanagerHTTP: h, ResendDelay: time.Second, AlertmanagerTimeout: 2 * time.Second,
				Logger:        slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
			e.write(time.Now(), 110, "coolant_temp", "vehicle", "truck-1")

			eventually(t, 20*time.Second, "a refused send counted", func() bool {
				return sumMetric(t, reader, "tributary.rules.notifications.errors") > 0
			})
			if got, _ := am.counts(); got != 0 {
				t.Fatalf("%d sends taken with the wrong secret", got)
			}
			if !strings.Contains(logs.String(), "401") {
				t.Errorf("the refusal's status is not logged:\n%s", logs.String())
			}

			if err := os.WriteFile(secret, []byte(good+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, "the alert received with the right secret", func() bool {
				got, _ := am.counts()
				return got > 0
			})
			am.mu.Lock()
			body := am.bodies[0]
			am.mu.Unlock()
			if !strings.Contains(body, "CoolantOverheat") || !strings.Contains(body, "truck-1") {
				t.Errorf("alert body %s", body)
			}
			if sumMetric(t, reader, "tributary.rules.notifications.sent") == 0 {
				t.Error("no send counted")
			}
			if l := logs.String(); strings.Contains(l, good) || strings.Contains(l, bad) {
				t.Errorf("a secret is in the logs:\n%s", l)
			}
		})
	}
}

// TestManager_AlertmanagerUntrustedCertificateFails: without the CA that
// signs the Alertmanager's certificate, sends fail and are counted.
func TestManager_AlertmanagerUntrustedCertificateFails(t *testing.T) {
	am := &authAlertmanager{check: func(*http.Request) bool { return true }}
	srv := httptest.NewTLSServer(am)
	defer srv.Close()
	reader := sdkmetric.NewManualReader()
	files := writeFile(t, t.TempDir(), "can.yml", overheatRules)
	e := newEnv(t, t.TempDir(), Options{Files: []string{files}, Alertmanagers: []string{srv.URL},
		ResendDelay: time.Second, AlertmanagerTimeout: 2 * time.Second,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	e.write(time.Now(), 110, "coolant_temp", "vehicle", "truck-1")
	eventually(t, 20*time.Second, "a failed send counted", func() bool {
		return sumMetric(t, reader, "tributary.rules.notifications.errors") > 0
	})
	if got, _ := am.counts(); got != 0 {
		t.Errorf("%d sends taken over an unverified connection", got)
	}
}

func TestAlertmanagerHTTP_Validate(t *testing.T) {
	dir := t.TempDir()
	f := writeFile(t, dir, "pw", "x")
	for _, tc := range []struct {
		name string
		h    AlertmanagerHTTP
		want string // "" when valid
	}{
		{"none", AlertmanagerHTTP{}, ""},
		{"basic", AlertmanagerHTTP{BasicAuthUser: "u", BasicAuthPasswordFile: f}, ""},
		{"user without password", AlertmanagerHTTP{BasicAuthUser: "u"}, "go together"},
		{"basic and bearer", AlertmanagerHTTP{BasicAuthUser: "u", BasicAuthPasswordFile: f, BearerTokenFile: f}, "exclude"},
		{"missing token file", AlertmanagerHTTP{BearerTokenFile: filepath.Join(dir, "nope")}, "bearer token file"},
		{"cert without key", AlertmanagerHTTP{CertFile: f}, "go together"},
		{"missing CA", AlertmanagerHTTP{CAFile: filepath.Join(dir, "nope")}, "CA file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{AlertmanagerHTTP: tc.h}
			err := o.Validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}

// amPassword and amPasswordHash (bcrypt, cost 4) are the basic auth
// credentials of the Alertmanager behind authentication.
const (
	amPassword     = "am-test-password"
	amPasswordHash = "$2a$04$fkANxAEXlViHjeKn0/XcXeUP5ICtw4hVKW.1Vvg37ux1y1UnfX1Bq"
)

// writeTestCA writes into dir a CA certificate (ca.pem) and a server
// certificate for 127.0.0.1 signed by it (server.pem, server-key.pem).
func writeTestCA(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test alertmanager CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "alertmanager"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	for f, b := range map[string]*pem.Block{caFile: {Type: "CERTIFICATE", Bytes: caDER}, certFile: {Type: "CERTIFICATE", Bytes: der},
		keyFile: {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(f, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return caFile, certFile, keyFile
}

// basicAuthTransport adds basic auth to every request.
type basicAuthTransport struct {
	user, password string
	base           http.RoundTripper
}

func (b basicAuthTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.user, b.password)
	return b.base.RoundTrip(r)
}

// TestManager_AlertsReachARealAlertmanagerBehindAuthAndTLS runs Debian's
// Alertmanager with a web config that serves TLS (a private CA) and
// requires basic auth: the alert reaches its webhook receiver.
func TestManager_AlertsReachARealAlertmanagerBehindAuthAndTLS(t *testing.T) {
	if _, err := exec.LookPath("prometheus-alertmanager"); err != nil {
		t.Skip("prometheus-alertmanager is not installed (scripts/deps.sh installs it)")
	}
	dir := t.TempDir()
	caFile, certFile, keyFile := writeTestCA(t, dir)
	hook := &webhook{}
	hsrv := httptest.NewServer(hook)
	defer hsrv.Close()
	amAddr := freePort(t)
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: basicAuthTransport{"pi-7", amPassword,
		&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	startAlertmanagerWeb(t, amAddr, hsrv.URL, fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  pi-7: %q\n",
		certFile, keyFile, amPasswordHash), client, "https")
	// The Alertmanager refuses a request without credentials.
	noAuth := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if resp, err := noAuth.Get("https://" + amAddr + "/api/v2/status"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without credentials: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	pw := writeFile(t, dir, "am-password", amPassword+"\n")
	files := writeFile(t, t.TempDir(), "can.yml", overheatRules)
	e := newEnv(t, t.TempDir(), Options{Files: []string{files}, Alertmanagers: []string{"https://" + amAddr},
		AlertmanagerHTTP: AlertmanagerHTTP{BasicAuthUser: "pi-7", BasicAuthPasswordFile: pw, CAFile: caFile},
		ResendDelay:      time.Second, AlertmanagerTimeout: 2 * time.Second})
	e.write(time.Now(), 110, "coolant_temp", "vehicle", "truck-1")
	eventually(t, 30*time.Second, "the firing alert forwarded by the Alertmanager behind auth and TLS", func() bool {
		return len(hook.status("CoolantOverheat")) > 0
	})
	if m := hook.status("CoolantOverheat")[0]; m.Status != "firing" || m.Alerts[0].Labels["vehicle"] != "truck-1" {
		t.Errorf("forwarded %+v", m)
	}
}
