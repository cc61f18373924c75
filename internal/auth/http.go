package auth

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// InfluxV1Paths are the InfluxDB 1.x endpoints, the only ones whose
// clients put the token in the URL ("?p=<token>").
var InfluxV1Paths = []string{"/write", "/query"}

// FromHTTP extracts the token of an HTTP request from its headers. It
// accepts what the clients Tributary speaks to send: "Authorization:
// Bearer <t>" (Prometheus, Grafana, the SDKs), "Authorization: Token <t>"
// (InfluxDB 2.x clients) and HTTP basic auth with the token as password
// (InfluxDB 1.x clients, Telegraf, Node-RED). The InfluxDB 1.x "p" query
// parameter is not read here: HTTPOptions.QueryTokenPaths allows it where
// it is needed.
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
	return ""
}

// HTTPOptions configure Tokens.HTTP.
type HTTPOptions struct {
	// Open lists the paths that need no token (e.g. "/ping", "/healthz").
	Open []string
	// QueryTokenPaths lists the paths where the token may also come as
	// the "p" query parameter (InfluxV1Paths). Anywhere else a token in
	// the URL is ignored: URLs end up in proxy and access logs.
	QueryTokenPaths []string
	// OnDeny, when not nil, is called for each refused request.
	OnDeny func(*http.Request)
}

// HTTP wraps next so that requests without a valid token get 401 (with a
// WWW-Authenticate header and a JSON body) before anything reads their
// body. With no tokens next is returned unchanged.
func (t Tokens) HTTP(next http.Handler, o HTTPOptions) http.Handler {
	if !t.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(o.Open, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		tok := FromHTTP(r)
		if tok == "" && slices.Contains(o.QueryTokenPaths, r.URL.Path) {
			tok = r.URL.Query().Get("p")
		}
		if t.Valid(tok) {
			next.ServeHTTP(w, r)
			return
		}
		if o.OnDeny != nil {
			o.OnDeny(r)
		}
		msg := ErrNoToken.Error()
		if tok != "" {
			msg = ErrBadToken.Error()
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="tributary"`)
		w.Header().Set("Content-Type", "application/json")
		// The body was not read: do not keep a connection whose unread
		// upload would have to be drained first.
		if r.ContentLength != 0 {
			w.Header().Set("Connection", "close")
		}
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "{\"code\":\"unauthorized\",\"message\":%q}\n", msg)
	})
}
