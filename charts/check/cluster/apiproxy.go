package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiProxy makes the API server reachable from the pods, which reach it
// as in any cluster: the kubelet gives every container
// KUBERNETES_SERVICE_HOST/PORT, the ClusterIP of Service default/kubernetes,
// and kube-proxy forwards that to the Service's endpoint. The API server
// listens on loopback only (apply.Start, shared with make k8s-test), and
// its endpoint reconciler is off (it refuses a loopback address), so the
// harness publishes the endpoint itself: the bridge's address, where this
// proxy copies each TCP connection to the API server on loopback. TLS is
// end to end: the serving certificate names the Service's ClusterIP.
type apiProxy struct {
	lis net.Listener
	wg  sync.WaitGroup
	mu  sync.Mutex
	cs  map[net.Conn]struct{} // open connections, closed by Close
}

// startAPIProxy listens on listen and forwards to target.
func startAPIProxy(listen, target string) (*apiProxy, error) {
	lis, err := net.Listen("tcp4", listen)
	if err != nil {
		return nil, fmt.Errorf("api proxy: %w", err)
	}
	p := &apiProxy{lis: lis, cs: map[net.Conn]struct{}{}}
	p.wg.Go(func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.forward(in, target) })
		}
	})
	return p, nil
}

func (p *apiProxy) track(c net.Conn, open bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !open {
		delete(p.cs, c)
		return true
	}
	if p.cs == nil { // closed
		return false
	}
	p.cs[c] = struct{}{}
	return true
}

func (p *apiProxy) forward(in net.Conn, target string) {
	defer in.Close()
	out, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer out.Close()
	if !p.track(in, true) || !p.track(out, true) {
		return
	}
	defer p.track(in, false)
	defer p.track(out, false)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	<-done
}

// Close stops accepting, closes the open connections and waits for the
// goroutines.
func (p *apiProxy) Close() {
	p.lis.Close()
	p.mu.Lock()
	for c := range p.cs {
		c.Close()
	}
	p.cs = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// publishAPIServer starts the proxy on the bridge's address at the API
// server's port and points Service default/kubernetes at it with an
// EndpointSlice of its own (what the endpoint reconciler would write).
func (c *Cluster) publishAPIServer(ctx context.Context) error {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fmt.Errorf("api server address %s: %w", c.Config.Host, err)
	}
	if c.apiProxy, err = startAPIProxy(net.JoinHostPort(c.Gateway.String(), u.Port()), u.Host); err != nil {
		return err
	}
	// The API server creates the Service shortly after it is ready.
	var svc *corev1.Service
	deadline := time.Now().Add(30 * time.Second)
	for {
		svc, err = c.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return fmt.Errorf("service default/kubernetes: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	portName := "https"
	if len(svc.Spec.Ports) == 1 {
		portName = svc.Spec.Ports[0].Name
	}
	ready, proto, p32 := true, corev1.ProtocolTCP, int32(port)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Labels: map[string]string{
			discoveryv1.LabelServiceName: "kubernetes",
			discoveryv1.LabelManagedBy:   "tributary-k8s-e2e",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{c.Gateway.String()}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Protocol: &proto, Port: &p32}},
	}
	if _, err = c.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("endpoint slice of service default/kubernetes: %w", err)
	}
	return nil
}
