// Package auth guards Tributary's client listeners: optional bearer tokens
// for HTTP and gRPC, TLS configuration from certificate files, and the rule
// that a plaintext listener binds only to loopback unless the operator says
// otherwise.
//
// A Tokens value is immutable after construction and safe for concurrent
// use.
package auth

import (
	"bufio"
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Tokens is the set of accepted bearer tokens. The zero value (no tokens)
// accepts every request: authentication is off.
type Tokens struct {
	list [][]byte
}

// NewTokens returns a set holding the non-empty tokens given.
func NewTokens(tokens ...string) Tokens {
	var t Tokens
	for _, s := range tokens {
		if s = strings.TrimSpace(s); s != "" {
			t.list = append(t.list, []byte(s))
		}
	}
	return t
}

// LoadTokens reads tokens from a file, one per line; blank lines and lines
// starting with '#' are ignored.
func LoadTokens(path string) (Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return Tokens{}, fmt.Errorf("open token file: %w", err)
	}
	defer f.Close()
	var list []string
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		if len(s) < 16 {
			return Tokens{}, fmt.Errorf("token file %s line %d: token is %d characters; use at least 16", path, ln, len(s))
		}
		list = append(list, s)
	}
	if err := sc.Err(); err != nil {
		return Tokens{}, fmt.Errorf("read token file %s: %w", path, err)
	}
	if len(list) == 0 {
		return Tokens{}, fmt.Errorf("token file %s holds no tokens", path)
	}
	return NewTokens(list...), nil
}

// First returns the first token of the set ("" when empty): the one a
// client sends.
func (t Tokens) First() string {
	if len(t.list) == 0 {
		return ""
	}
	return string(t.list[0])
}

// Enabled reports whether requests must carry a token.
func (t Tokens) Enabled() bool { return len(t.list) > 0 }

// Valid reports whether tok is one of the accepted tokens, in time that
// does not depend on where the tokens differ.
func (t Tokens) Valid(tok string) bool {
	if !t.Enabled() {
		return true
	}
	ok := 0
	for _, want := range t.list {
		ok |= subtle.ConstantTimeCompare(want, []byte(tok))
	}
	return ok == 1 && tok != ""
}

// ErrNoToken and ErrBadToken are the two ways a request fails
// authentication.
var (
	ErrNoToken  = errors.New("authentication required: send 'Authorization: Bearer <token>'")
	ErrBadToken = errors.New("the token is not valid")
)

// FromHTTP extracts the token of an HTTP request. It accepts what the
// clients Tributary speaks to send: "Authorization: Bearer <t>" (Prometheus,
// Grafana, the SDKs), "Authorization: Token <t>" (InfluxDB 2.x clients),
// HTTP basic auth with the token as password (InfluxDB 1.x clients,
// Telegraf, Node-RED) and the InfluxDB 1.x "p" query parameter.
func FromHTTP(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if scheme, rest, ok := strings.Cut(h, " "); ok {
		switch strings.ToLower(scheme) {
		case "bearer", "token":
			return strings.TrimSpace(rest)
		case "basic":
			raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
			if err == nil {
				if _, pw, ok := strings.Cut(string(raw), ":"); ok {
					return pw
				}
			}
		}
	}
	return r.URL.Query().Get("p")
}

// HTTP wraps next so that requests without a valid token get 401 (with a
// WWW-Authenticate header and a JSON body); onDeny, when not nil, is called
// for each refused request (for counting). With no tokens next is returned
// unchanged. Paths in open (e.g. "/ping", "/healthz") need no token.
func (t Tokens) HTTP(next http.Handler, onDeny func(*http.Request), open ...string) http.Handler {
	if !t.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range open {
			if r.URL.Path == p {
				next.ServeHTTP(w, r)
				return
			}
		}
		tok := FromHTTP(r)
		if t.Valid(tok) {
			next.ServeHTTP(w, r)
			return
		}
		if onDeny != nil {
			onDeny(r)
		}
		msg := ErrNoToken.Error()
		if tok != "" {
			msg = ErrBadToken.Error()
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="tributary"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "{\"code\":\"unauthorized\",\"message\":%q}\n", msg)
	})
}

// fromGRPC extracts the bearer token from incoming gRPC metadata.
func fromGRPC(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if scheme, rest, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

func (t Tokens) checkGRPC(ctx context.Context) error {
	tok := fromGRPC(ctx)
	if t.Valid(tok) {
		return nil
	}
	if tok == "" {
		return status.Error(codes.Unauthenticated, ErrNoToken.Error()+" (gRPC metadata 'authorization')")
	}
	return status.Error(codes.Unauthenticated, ErrBadToken.Error())
}

// ServerOptions returns gRPC server options that demand a valid token on
// every call, or none when authentication is off. onDeny, when not nil,
// is called with the method of each refused call.
func (t Tokens) ServerOptions(onDeny func(method string)) []grpc.ServerOption {
	if !t.Enabled() {
		return nil
	}
	deny := func(m string) {
		if onDeny != nil {
			onDeny(m)
		}
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := t.checkGRPC(ctx); err != nil {
				deny(info.FullMethod)
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := t.checkGRPC(ss.Context()); err != nil {
				deny(info.FullMethod)
				return err
			}
			return h(srv, ss)
		}),
	}
}

// TLSFiles names the PEM files of a TLS listener. ClientCA, when set,
// makes the listener demand client certificates signed by it (mTLS).
type TLSFiles struct {
	Cert, Key, ClientCA string
}

// Enabled reports whether TLS is configured.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" }

// ServerConfig loads the files into a server TLS configuration (TLS 1.2 or
// newer). It returns nil, nil when TLS is not configured.
func (f TLSFiles) ServerConfig() (*tls.Config, error) {
	if !f.Enabled() {
		if f.ClientCA != "" {
			return nil, errors.New("tls: a client CA needs a server certificate and key too")
		}
		return nil, nil
	}
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("tls: both a certificate and a key file are required")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: load key pair %s / %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls: read client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: client CA %s holds no PEM certificate", f.ClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// CheckListen refuses a plaintext listener on a non-loopback address
// unless allowInsecure is set: data and tokens would cross the network in
// clear text. what names the listener in the error ("--http-listen").
func CheckListen(what, addr string, tlsOn, allowInsecure bool) error {
	if tlsOn || allowInsecure {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %w", what, addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s %q: a plaintext listener binds only to loopback; configure TLS, or pass --insecure-listen to serve plaintext on %q anyway", what, addr, host)
}

// With returns a set holding t's tokens and the non-empty ones given.
func (t Tokens) With(tokens ...string) Tokens {
	out := Tokens{list: append([][]byte(nil), t.list...)}
	out.list = append(out.list, NewTokens(tokens...).list...)
	return out
}

// MutualTLS loads a member's certificate and key and the CA that signs its
// peers into a server configuration that requires and verifies client
// certificates from that CA, and a client configuration that presents the
// certificate and trusts only that CA. Used for the links between
// coordinators and from edges to coordinators (mTLS both ways).
func MutualTLS(certFile, keyFile, caFile string) (server, client *tls.Config, err error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, nil, errors.New("tls: a certificate, its key and a CA file are all required for mutual TLS")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: load key pair %s / %s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("tls: CA %s holds no PEM certificate", caFile)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client, nil
}
