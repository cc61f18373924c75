package tributary

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Option configures a Client; pass options to Dial.
type Option func(*options) error

type options struct {
	tlsConfig      *tls.Config // nil: plaintext
	caFile         string
	certFile       string
	keyFile        string
	skipVerify     bool
	token          string
	tokenPlaintext bool
	keepaliveTime  time.Duration
	keepaliveWait  time.Duration
	timeout        time.Duration
	retry          RetryPolicy
	userAgent      string
	block          bool
	maxRecvBytes   int
	dialOptions    []grpc.DialOption
	tracer         trace.TracerProvider // nil: calls are not instrumented
}

// Defaults of the client options.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultUserAgent    = "tributary-go"
	DefaultMaxRecvBytes = 64 << 20
)

func defaultOptions() options {
	return options{
		timeout:      DefaultTimeout,
		retry:        DefaultRetryPolicy,
		userAgent:    DefaultUserAgent,
		maxRecvBytes: DefaultMaxRecvBytes,
	}
}

func (o *options) tlsEnabled() bool {
	return o.tlsConfig != nil || o.caFile != "" || o.skipVerify || o.certFile != ""
}

// buildTLS assembles the TLS configuration from the options; nil means
// plaintext.
func (o *options) buildTLS(serverName string) (*tls.Config, error) {
	if !o.tlsEnabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.tlsConfig != nil {
		cfg = o.tlsConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = serverName
	}
	if o.caFile != "" {
		pem, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", o.caFile)
		}
		cfg.RootCAs = pool
	}
	if o.certFile != "" {
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate %s / %s: %w", o.certFile, o.keyFile, err)
		}
		cfg.Certificates = append(cfg.Certificates, cert)
	}
	if o.skipVerify {
		cfg.InsecureSkipVerify = true
	}
	return cfg, nil
}

// WithTLSConfig uses TLS with a copy of cfg (nil: the system's root CAs).
func WithTLSConfig(cfg *tls.Config) Option {
	return func(o *options) error {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		o.tlsConfig = cfg.Clone()
		return nil
	}
}

// WithCAFile uses TLS and trusts the PEM certificates in path (instead of
// the system's root CAs) to verify the server.
func WithCAFile(path string) Option {
	return func(o *options) error {
		if path == "" {
			return errors.New("WithCAFile: empty path")
		}
		o.caFile = path
		return nil
	}
}

// WithClientCertificate uses TLS and presents the PEM certificate and key
// to servers that demand client certificates (mutual TLS).
func WithClientCertificate(certFile, keyFile string) Option {
	return func(o *options) error {
		if certFile == "" || keyFile == "" {
			return errors.New("WithClientCertificate: both a certificate and a key file are required")
		}
		o.certFile, o.keyFile = certFile, keyFile
		return nil
	}
}

// WithInsecureSkipVerify uses TLS without verifying the server's
// certificate. The traffic is encrypted but anyone on the path can
// impersonate the server: for tests and first setup only.
func WithInsecureSkipVerify() Option {
	return func(o *options) error {
		o.skipVerify = true
		return nil
	}
}

// WithToken sends token as "authorization: Bearer <token>" on every call.
// Dial refuses to send it in clear text to an address that is not loopback
// unless WithTokenOverPlaintext is given too.
func WithToken(token string) Option {
	return func(o *options) error {
		token = strings.TrimSpace(token)
		if token == "" {
			return errors.New("WithToken: empty token")
		}
		for i := 0; i < len(token); i++ {
			if c := token[i]; c < 0x21 || c > 0x7e {
				return fmt.Errorf("WithToken: character %d of the token is not printable ASCII", i)
			}
		}
		o.token = token
		return nil
	}
}

// WithTokenOverPlaintext allows sending the token without TLS to an address
// that is not loopback. Anyone on the network path can then read it.
func WithTokenOverPlaintext() Option {
	return func(o *options) error {
		o.tokenPlaintext = true
		return nil
	}
}

// WithKeepalive pings the server after interval without activity and drops
// the connection when no answer comes within timeout, so a dead link is
// noticed between calls. Servers refuse pings more often than they allow
// (a Tributary server: every 10 s); interval must be at least 10 s.
func WithKeepalive(interval, timeout time.Duration) Option {
	return func(o *options) error {
		if interval < 10*time.Second {
			return fmt.Errorf("WithKeepalive: interval %s is below the 10s minimum", interval)
		}
		if timeout <= 0 {
			return fmt.Errorf("WithKeepalive: timeout must be positive, got %s", timeout)
		}
		o.keepaliveTime, o.keepaliveWait = interval, timeout
		return nil
	}
}

// WithTimeout bounds each attempt of a call (default DefaultTimeout; 0: no
// bound beyond the caller's context). For a query it bounds the wait for
// the first answer; the rest of the stream lives as long as the caller's
// context.
func WithTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("WithTimeout: negative timeout %s", d)
		}
		o.timeout = d
		return nil
	}
}

// WithRetry sets the retry policy (default DefaultRetryPolicy). Zero fields
// take their default; RetryPolicy{MaxAttempts: 1} disables retries.
func WithRetry(p RetryPolicy) Option {
	return func(o *options) error {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("WithRetry: %w", err)
		}
		o.retry = p
		return nil
	}
}

// WithUserAgent names the client in the user-agent header (default
// DefaultUserAgent).
func WithUserAgent(ua string) Option {
	return func(o *options) error {
		o.userAgent = ua
		return nil
	}
}

// WithBlock makes Dial wait until the connection is ready, or fail when its
// context ends first. Without it Dial returns at once and the first call
// connects.
func WithBlock() Option {
	return func(o *options) error {
		o.block = true
		return nil
	}
}

// WithMaxRecvBytes bounds one message received from the server (default
// DefaultMaxRecvBytes). A long Series or LabelValues answer is one message.
func WithMaxRecvBytes(n int) Option {
	return func(o *options) error {
		if n <= 0 {
			return fmt.Errorf("WithMaxRecvBytes: %d is not positive", n)
		}
		o.maxRecvBytes = n
		return nil
	}
}

// WithTracerProvider traces the client's calls with tp: each call gets an
// OpenTelemetry client span (a child of the span in the call's context)
// and sends its context in the W3C traceparent header, so the server's
// spans (node.write, node.query, ...) join the caller's trace. Off by
// default: without it the connection carries no instrumentation at all.
// The package never uses the OpenTelemetry globals.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) error {
		if tp == nil {
			return errors.New("WithTracerProvider: nil provider")
		}
		o.tracer = tp
		return nil
	}
}

// WithGRPCDialOptions passes extra options to grpc.NewClient, after the
// ones this package sets (an escape hatch: custom dialers, interceptors).
func WithGRPCDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) error {
		o.dialOptions = append(o.dialOptions, opts...)
		return nil
	}
}
