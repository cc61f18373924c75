// Package k8sapi reads the little that Tributary asks of the Kubernetes
// API from inside a pod: the desired replica count of a StatefulSet (its
// scale subresource, what `kubectl scale` writes), with the pod's service
// account. It is a small HTTPS client on purpose: the coordinator needs
// one GET, not client-go.
//
// In a pod, InCluster finds everything the kubelet provides:
//
//	KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT   the API server
//	/var/run/secrets/kubernetes.io/serviceaccount/token      bearer token
//	/var/run/secrets/kubernetes.io/serviceaccount/ca.crt     the API server's CA
//	/var/run/secrets/kubernetes.io/serviceaccount/namespace  the pod's namespace
//
// The token file is read again for every request: projected service
// account tokens are rotated by the kubelet (hourly by default), and a
// token read once would expire. The CA is read once, by New.
//
// The request is GET /apis/apps/v1/namespaces/NS/statefulsets/NAME/scale;
// the answer must be an autoscaling/v1 Scale object, whose spec.replicas
// is the count (absent: 0, a StatefulSet scaled to zero). The service
// account needs "get" on statefulsets/scale for that name (a Role with
// resourceNames). Every answer is read up to MaxResponseBytes and no
// further, the token file up to maxTokenBytes.
//
// A Client is safe for concurrent use.
package k8sapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// The files and variables a pod's service account provides.
const (
	ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	hostEnv           = "KUBERNETES_SERVICE_HOST"
	portEnv           = "KUBERNETES_SERVICE_PORT"
)

// Limits of what a Client reads.
const (
	// MaxResponseBytes bounds one answer of the API server: a Scale object
	// is a few hundred bytes, a Status (an error) about as much.
	MaxResponseBytes = 64 << 10
	// maxTokenBytes bounds the token file (a JWT of a few KiB).
	maxTokenBytes = 64 << 10
	// maxCABytes bounds the CA bundle file.
	maxCABytes = 1 << 20
	// DefaultTimeout bounds one request when the caller's context does
	// not end sooner.
	DefaultTimeout = 10 * time.Second
)

// Config says where the API server is and how to authenticate to it.
type Config struct {
	// Server is the API server's base URL, https://HOST:PORT.
	Server string
	// TokenFile holds the bearer token; it is read for every request.
	TokenFile string
	// CAFile holds the PEM CA bundle the API server's certificate must
	// chain to.
	CAFile string
	// Namespace is the pod's own namespace (the default of the calls that
	// take one).
	Namespace string
	// Timeout bounds one request (0: DefaultTimeout).
	Timeout time.Duration
}

// InCluster returns the Config of the pod this process runs in: the
// API server from KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, the
// token, CA and namespace from the service account directory.
func InCluster() (Config, error) {
	return inCluster(os.Getenv, ServiceAccountDir)
}

func inCluster(getenv func(string) string, dir string) (Config, error) {
	host, port := getenv(hostEnv), getenv(portEnv)
	if host == "" || port == "" {
		return Config{}, fmt.Errorf("kubernetes api: %s and %s are not set: not running in a pod (or the pod has no service links to the API server)", hostEnv, portEnv)
	}
	ns, err := readFileMax(dir+"/namespace", 256)
	if err != nil {
		return Config{}, fmt.Errorf("kubernetes api: the pod's namespace: %w (is a service account token mounted? automountServiceAccountToken)", err)
	}
	return Config{
		Server:    "https://" + net.JoinHostPort(host, port),
		TokenFile: dir + "/token",
		CAFile:    dir + "/ca.crt",
		Namespace: strings.TrimSpace(string(ns)),
	}, nil
}

// Client calls the API server.
type Client struct {
	server    *url.URL
	tokenFile string
	namespace string
	timeout   time.Duration
	http      *http.Client
}

// New checks cfg and reads its CA.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("kubernetes api: server %q: want https://HOST:PORT", cfg.Server)
	}
	if cfg.TokenFile == "" || cfg.CAFile == "" {
		return nil, errors.New("kubernetes api: a token file and a CA file are required")
	}
	if cfg.Namespace != "" {
		if err := checkName("namespace", cfg.Namespace, dnsLabel); err != nil {
			return nil, err
		}
	}
	caPEM, err := readFileMax(cfg.CAFile, maxCABytes)
	if err != nil {
		return nil, fmt.Errorf("kubernetes api: read the CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("kubernetes api: no PEM certificate in %s", cfg.CAFile)
	}
	if _, err := readToken(cfg.TokenFile); err != nil {
		return nil, err
	}
	tr := &http.Transport{
		TLSClientConfig:        &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  10 * time.Second,
		MaxIdleConns:           1,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: MaxResponseBytes,
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{server: u, tokenFile: cfg.TokenFile, namespace: cfg.Namespace, timeout: timeout,
		http: &http.Client{Transport: tr, CheckRedirect: noRedirect}}, nil
}

// noRedirect refuses redirects: the token must go to the API server only.
func noRedirect(*http.Request, []*http.Request) error {
	return errors.New("the API server answered with a redirect, which is not followed")
}

// Namespace is the namespace of the Config (the pod's own with
// InCluster).
func (c *Client) Namespace() string { return c.namespace }

// StatefulSetReplicas reads the desired replica count of StatefulSet
// name in namespace ns ("": the Config's namespace) from its scale
// subresource.
func (c *Client) StatefulSetReplicas(ctx context.Context, ns, name string) (uint64, error) {
	if ns == "" {
		ns = c.namespace
	}
	if err := checkName("namespace", ns, dnsLabel); err != nil {
		return 0, err
	}
	if err := checkName("statefulset name", name, dnsSubdomain); err != nil {
		return 0, err
	}
	path := "/apis/apps/v1/namespaces/" + ns + "/statefulsets/" + name + "/scale"
	what := fmt.Sprintf("get the scale of statefulset %s/%s", ns, name)
	body, err := c.get(ctx, path)
	if err != nil {
		return 0, fmt.Errorf("kubernetes api: %s: %w", what, err)
	}
	var scale struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			Replicas *int64 `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &scale); err != nil {
		return 0, fmt.Errorf("kubernetes api: %s: decode the answer: %w", what, err)
	}
	if scale.Kind != "Scale" {
		return 0, fmt.Errorf("kubernetes api: %s: the answer is a %q, not a Scale", what, scale.Kind)
	}
	if scale.Spec.Replicas == nil {
		return 0, nil // omitted when zero
	}
	if *scale.Spec.Replicas < 0 {
		return 0, fmt.Errorf("kubernetes api: %s: spec.replicas %d is negative", what, *scale.Spec.Replicas)
	}
	return uint64(*scale.Spec.Replicas), nil
}

// get makes one authenticated GET and returns the body of a 200 answer;
// any other status is an error carrying the API server's message.
func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	tok, err := readToken(c.tokenFile)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	u := *c.server
	u.Path = path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if len(body) > MaxResponseBytes {
		return nil, fmt.Errorf("%s: the answer is over %d bytes", resp.Status, MaxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp.Status, body)
	}
	return body, nil
}

// StatusError is an answer other than 200 OK.
type StatusError struct {
	Status  string // "403 Forbidden"
	Message string // the API server's Status message, or the body's start
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return e.Status
	}
	return e.Status + ": " + e.Message
}

// statusError reads the message of a Status object, or quotes the body.
func statusError(status string, body []byte) error {
	var st struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	msg := ""
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		msg = st.Message
	} else {
		msg = string(bytes.TrimSpace(body))
	}
	const maxMsg = 512
	if len(msg) > maxMsg {
		msg = msg[:maxMsg] + "..."
	}
	return &StatusError{Status: status, Message: msg}
}

// readToken reads the bearer token file.
func readToken(path string) (string, error) {
	b, err := readFileMax(path, maxTokenBytes)
	if err != nil {
		return "", fmt.Errorf("kubernetes api: read the service account token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("kubernetes api: the service account token in %s is empty or not one word", path)
	}
	return tok, nil
}

// readFileMax reads a file of at most limit bytes.
func readFileMax(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is over %d bytes", path, limit)
	}
	return b, nil
}

// Kubernetes object names: a namespace is a DNS label, a StatefulSet's
// name a DNS subdomain (RFC 1123, lower case).
var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

func checkName(what, name string, re *regexp.Regexp) error {
	if len(name) > 253 || !re.MatchString(name) {
		return fmt.Errorf("kubernetes api: %s %q is not a valid Kubernetes name", what, name)
	}
	return nil
}
