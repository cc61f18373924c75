package rules

import (
	"errors"
	"fmt"
	"os"

	commonconfig "github.com/prometheus/common/config"
)

// AlertmanagerHTTP is the HTTP client configuration of the requests to
// the Alertmanagers: Prometheus's alertmanager_config http_config reduced
// to what an Alertmanager's --web.config.file asks of a client (basic
// auth, a bearer token, TLS with a private CA and a client certificate).
//
// Secrets come from files only, so that they are never in a command line
// or a log. The files are read again at every request (the upstream HTTP
// client does so), and the TLS files whenever they change: a rotated
// password, token or certificate is used without a restart, and so also
// after SIGHUP or POST /-/reload.
type AlertmanagerHTTP struct {
	// BasicAuthUser and BasicAuthPasswordFile: HTTP basic authentication
	// (both or neither).
	BasicAuthUser         string
	BasicAuthPasswordFile string
	// BearerTokenFile holds a token sent as "Authorization: Bearer
	// <token>" (not with basic authentication).
	BearerTokenFile string
	// CAFile is the PEM bundle that signs the Alertmanagers' certificates
	// (default: the system's roots).
	CAFile string
	// CertFile and KeyFile are the client certificate and key in PEM
	// (both or neither), for Alertmanagers that require one.
	CertFile, KeyFile string
	// ServerName is the name the Alertmanagers' certificates must carry
	// (default: the URL's host).
	ServerName string
	// InsecureSkipVerify accepts any certificate: for tests only.
	InsecureSkipVerify bool
}

// validate checks that the configuration is complete and its files can
// be read now (a file that goes away later fails the sends, which are
// logged and counted).
func (h AlertmanagerHTTP) validate() error {
	switch {
	case (h.BasicAuthUser == "") != (h.BasicAuthPasswordFile == ""):
		return errors.New("alertmanager basic auth: the user and the password file go together")
	case h.BasicAuthUser != "" && h.BearerTokenFile != "":
		return errors.New("alertmanager: basic auth and a bearer token exclude each other")
	case (h.CertFile == "") != (h.KeyFile == ""):
		return errors.New("alertmanager TLS: the client certificate and its key go together")
	}
	for _, f := range []struct{ what, path string }{
		{"basic auth password file", h.BasicAuthPasswordFile}, {"bearer token file", h.BearerTokenFile},
		{"CA file", h.CAFile}, {"client certificate", h.CertFile}, {"client key", h.KeyFile},
	} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return fmt.Errorf("alertmanager %s: %w", f.what, err)
		}
		fh.Close()
	}
	cfg := h.clientConfig()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("alertmanager HTTP client: %w", err)
	}
	return nil
}

// clientConfig is the upstream HTTP client configuration of h.
func (h AlertmanagerHTTP) clientConfig() commonconfig.HTTPClientConfig {
	c := commonconfig.DefaultHTTPClientConfig
	if h.BasicAuthUser != "" {
		c.BasicAuth = &commonconfig.BasicAuth{Username: h.BasicAuthUser, PasswordFile: h.BasicAuthPasswordFile}
	}
	if h.BearerTokenFile != "" {
		c.Authorization = &commonconfig.Authorization{Type: "Bearer", CredentialsFile: h.BearerTokenFile}
	}
	c.TLSConfig = commonconfig.TLSConfig{
		CAFile: h.CAFile, CertFile: h.CertFile, KeyFile: h.KeyFile,
		ServerName: h.ServerName, InsecureSkipVerify: h.InsecureSkipVerify,
	}
	return c
}
