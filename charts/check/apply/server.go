// Package apply starts a throwaway Kubernetes API server (kube-apiserver on
// an etcd of its own, both as child processes) and creates rendered objects
// in it, so that the API server's own checks judge the charts and the k3s
// manifests: unknown fields (every request is sent with
// fieldValidation=Strict), the validation of built-in kinds (pod templates,
// ports, selectors, volume claim templates) and the OpenAPI schemas of the
// custom resource definitions installed with InstallCRDs.
//
// make k8s-test builds kube-apiserver (charts/k8stest/apiserver) and runs
// this package's tests with TRIBUTARY_KUBE_APISERVER pointing at it; without
// that variable the tests skip, so make test stays free of the API server.
//
// A Server is safe for concurrent use once Start has returned.
package apply

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Options locate the binaries and the working directory.
type Options struct {
	// APIServer is the kube-apiserver binary (required).
	APIServer string
	// Etcd is the etcd binary; default "etcd" from PATH.
	Etcd string
	// Dir holds etcd's data, the certificates and the token file; it must
	// exist and is not removed by Stop.
	Dir string
	// Log receives both processes' output; nil discards it.
	Log io.Writer
	// StartTimeout bounds the wait for /readyz; default 90 s.
	StartTimeout time.Duration
}

// Server is a running etcd and kube-apiserver pair.
type Server struct {
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config

	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu    sync.Mutex
	procs []*proc
}

// proc is one child process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // of Wait; read after done is closed
}

// Start starts etcd and kube-apiserver on free loopback ports and waits
// until the API server reports ready. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.APIServer == "" {
		return nil, errors.New("start api server: Options.APIServer is empty")
	}
	if opts.Dir == "" {
		return nil, errors.New("start api server: Options.Dir is empty")
	}
	if opts.Etcd == "" {
		opts.Etcd = "etcd"
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	etcdBin, err := exec.LookPath(opts.Etcd)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w (scripts/deps.sh k8s installs Debian's etcd-server)", err)
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdClient := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	etcdPeer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	apiPort := ports[2]

	files, err := writeCredentials(opts.Dir)
	if err != nil {
		return nil, err
	}
	s := &Server{}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if err := s.spawn(opts.Log, etcdBin,
		"--name", "k8stest",
		"--data-dir", filepath.Join(opts.Dir, "etcd"),
		"--listen-client-urls", etcdClient,
		"--advertise-client-urls", etcdClient,
		"--listen-peer-urls", etcdPeer,
		"--initial-advertise-peer-urls", etcdPeer,
		"--initial-cluster", "k8stest="+etcdPeer,
		"--log-level", "warn",
	); err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	if err := s.spawn(opts.Log, opts.APIServer,
		"--etcd-servers", etcdClient,
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(apiPort),
		"--cert-dir", filepath.Join(opts.Dir, "apiserver"),
		"--tls-cert-file", files.serverCert,
		"--tls-private-key-file", files.serverKey,
		"--token-auth-file", files.tokens,
		"--authorization-mode", "RBAC",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", files.saKey,
		"--service-account-signing-key-file", files.saKey,
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		// The kubernetes Service's endpoints are not kept: the address is
		// loopback, which the reconciler refuses, and nothing here uses it.
		"--endpoint-reconciler-type", "none",
	); err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	s.Config = &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", apiPort),
		BearerToken:     files.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: files.caPEM},
		QPS:             200,
		Burst:           400,
	}
	if err := s.waitReady(ctx, opts.StartTimeout); err != nil {
		return nil, err
	}
	if s.dyn, err = dynamic.NewForConfig(s.Config); err != nil {
		return nil, fmt.Errorf("api server client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(s.Config)
	if err != nil {
		return nil, fmt.Errorf("api server discovery client: %w", err)
	}
	s.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	ok = true
	return s, nil
}

// spawn starts one child process, killed with the test binary if that
// dies first (see sysProcAttr).
func (s *Server) spawn(log io.Writer, bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return nil
}

// waitReady polls /readyz until it answers ok, a child exits, or the
// timeout passes.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	dc, err := discovery.NewDiscoveryClientForConfig(s.Config)
	if err != nil {
		return fmt.Errorf("api server client: %w", err)
	}
	rc := dc.RESTClient()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		body, err := rc.Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
			return nil
		}
		last = err
		s.mu.Lock()
		procs := s.procs
		s.mu.Unlock()
		for _, p := range procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited before the api server was ready: %v", filepath.Base(p.cmd.Path), p.err)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("api server not ready after %s: %v", timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop kills kube-apiserver, then etcd, and waits for both.
func (s *Server) Stop() {
	s.mu.Lock()
	procs := s.procs
	s.procs = nil
	s.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		_ = procs[i].cmd.Process.Kill()
		<-procs[i].done
	}
}

// InstallCRDs creates the CustomResourceDefinitions in the YAML files and
// waits until each is Established, so that objects of their kinds can be
// created next.
func (s *Server) InstallCRDs(ctx context.Context, paths ...string) error {
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("install crd: %w", err)
		}
		u, err := toUnstructured(data)
		if err != nil {
			return fmt.Errorf("install crd %s: %w", filepath.Base(p), err)
		}
		if _, err := s.dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			return fmt.Errorf("install crd %s: %w", filepath.Base(p), err)
		}
		if err := s.waitEstablished(ctx, gvr, u.GetName()); err != nil {
			return fmt.Errorf("install crd %s: %w", filepath.Base(p), err)
		}
	}
	s.mapper.Reset()
	return nil
}

func (s *Server) waitEstablished(ctx context.Context, gvr schema.GroupVersionResource, name string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		u, err := s.dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not established: %v", name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// EnsureNamespace creates namespace ns unless it exists.
func (s *Server) EnsureNamespace(ctx context.Context, ns string) error {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	if _, err := s.dyn.Resource(gvr).Get(ctx, ns, metav1.GetOptions{}); err == nil {
		return nil
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns},
	}}
	if _, err := s.dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// Create creates one object from its JSON or YAML document, in namespace
// ns unless the document names its own, with fieldValidation=Strict. The
// namespace must exist (EnsureNamespace). The error names the object and
// carries the API server's message.
func (s *Server) Create(ctx context.Context, ns string, doc []byte) error {
	u, err := toUnstructured(doc)
	if err != nil {
		return err
	}
	gvk := u.GroupVersionKind()
	what := fmt.Sprintf("%s %s", gvk.Kind, u.GetName())
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("create %s: %w", what, err)
	}
	ri := s.dyn.Resource(m.Resource)
	var r dynamic.ResourceInterface = ri
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		r = ri.Namespace(u.GetNamespace())
	}
	if _, err := r.Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict", FieldManager: "k8s-test"}); err != nil {
		return fmt.Errorf("create %s: %w", what, err)
	}
	return nil
}

// Get reads one object back.
func (s *Server) Get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", gvk.Kind, name, err)
	}
	var r dynamic.ResourceInterface = s.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = s.dyn.Resource(m.Resource).Namespace(ns)
	}
	return r.Get(ctx, name, metav1.GetOptions{})
}

// credentials are the files written by writeCredentials.
type credentials struct {
	serverCert, serverKey, saKey, tokens string
	token                                string
	caPEM                                []byte
}

// writeCredentials writes a CA, a serving certificate for 127.0.0.1 signed
// by it, a service-account signing key and a static token file whose one
// token belongs to system:masters.
func writeCredentials(dir string) (credentials, error) {
	var c credentials
	fail := func(err error) (credentials, error) {
		return credentials{}, fmt.Errorf("write api server credentials: %w", err)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "k8s-test ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fail(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fail(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// Loopback for the harness; the ClusterIP of Service
		// default/kubernetes (the first of --service-cluster-ip-range) and
		// its names for pods (make k8s-e2e's service accounts).
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return fail(err)
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fail(err)
	}
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return fail(err)
	}
	c.token = fmt.Sprintf("%x", tok)
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	c.serverCert = filepath.Join(dir, "apiserver.crt")
	c.serverKey = filepath.Join(dir, "apiserver.key")
	c.saKey = filepath.Join(dir, "service-account.key")
	c.tokens = filepath.Join(dir, "tokens.csv")
	srvKeyPEM, err := keyPEM(srvKey)
	if err != nil {
		return fail(err)
	}
	saKeyPEM, err := keyPEM(saKey)
	if err != nil {
		return fail(err)
	}
	for path, data := range map[string][]byte{
		c.serverCert: append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}), c.caPEM...),
		c.serverKey:  srvKeyPEM,
		c.saKey:      saKeyPEM,
		c.tokens:     []byte(c.token + ",k8s-test,k8s-test,system:masters\n"),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return fail(err)
		}
	}
	return c, nil
}

// keyPEM encodes k as an "EC PRIVATE KEY" block: --service-account-key-file
// reads public keys from that form, not from PKCS #8.
func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// toUnstructured decodes one JSON or YAML object.
func toUnstructured(doc []byte) (*unstructured.Unstructured, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	return u, nil
}
