package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"golang.org/x/net/dns/dnsmessage"
)

// clusterZone is the cluster domain the responder answers for.
const clusterZone = "svc.cluster.local."

// dnsServer answers A queries for the names Kubernetes' DNS specification
// gives Services and their pods, from the API server's Services and
// EndpointSlices (informers):
//
//	SVC.NS.svc.cluster.local        the ClusterIP; for a headless Service
//	                                the addresses of its ready endpoints
//	                                (all of them with
//	                                publishNotReadyAddresses)
//	HOST.SVC.NS.svc.cluster.local   the endpoint with that hostname (a
//	                                StatefulSet pod under its headless
//	                                Service)
//
// A known name asked for another type gets an empty answer; any other
// name, NXDOMAIN (nothing is forwarded: the pods need no outside names).
// It is the part CoreDNS's kubernetes plugin plays in a real cluster, kept
// to what the charts use.
type dnsServer struct {
	svcs   corelisters.ServiceLister
	slices discoverylisters.EndpointSliceLister
	udp    net.PacketConn
	tcp    net.Listener
	stop   context.CancelFunc
	wg     sync.WaitGroup
	log    io.Writer
}

func startDNS(ctx context.Context, client kubernetes.Interface, addr string, log io.Writer) (*dnsServer, error) {
	udp, err := net.ListenPacket("udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("dns: %w", err)
	}
	tcp, err := net.Listen("tcp4", addr)
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("dns: %w", err)
	}
	ictx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactory(client, 0)
	s := &dnsServer{
		svcs:   f.Core().V1().Services().Lister(),
		slices: f.Discovery().V1().EndpointSlices().Lister(),
		udp:    udp, tcp: tcp, stop: cancel, log: log,
	}
	f.Start(ictx.Done())
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	for typ, ok := range f.WaitForCacheSync(sctx.Done()) {
		if !ok {
			s.Close()
			return nil, fmt.Errorf("dns: %v informer did not sync", typ)
		}
	}
	s.wg.Add(2)
	go s.serveUDP()
	go s.serveTCP()
	return s, nil
}

// Close stops the listeners and the informers.
func (s *dnsServer) Close() {
	s.stop()
	s.udp.Close()
	s.tcp.Close()
	s.wg.Wait()
}

func (s *dnsServer) serveUDP() {
	defer s.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := s.udp.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := s.answer(buf[:n], 512); resp != nil {
			s.udp.WriteTo(resp, from)
		}
	}
}

func (s *dnsServer) serveTCP() {
	defer s.wg.Done()
	for {
		conn, err := s.tcp.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			var l [2]byte
			for {
				if _, err := io.ReadFull(conn, l[:]); err != nil {
					return
				}
				q := make([]byte, binary.BigEndian.Uint16(l[:]))
				if _, err := io.ReadFull(conn, q); err != nil {
					return
				}
				resp := s.answer(q, 65535)
				if resp == nil {
					return
				}
				out := binary.BigEndian.AppendUint16(nil, uint16(len(resp)))
				if _, err := conn.Write(append(out, resp...)); err != nil {
					return
				}
			}
		}()
	}
}

// answer builds the response to one query message, or nil for garbage.
func (s *dnsServer) answer(msg []byte, maxLen int) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	ips, known := s.lookup(strings.ToLower(q.Name.String()))
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		for i, ip := range ips {
			if i >= 16 && maxLen <= 512 {
				break
			}
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1},
				dnsmessage.AResource{A: ip.As4()})
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// lookup resolves name (lower case, with the trailing dot); known is false
// for names that do not exist.
func (s *dnsServer) lookup(name string) (ips []netip.Addr, known bool) {
	rest, ok := strings.CutSuffix(name, "."+clusterZone)
	if !ok {
		return nil, false
	}
	parts := strings.Split(rest, ".")
	var host, svcName, ns string
	switch len(parts) {
	case 2:
		svcName, ns = parts[0], parts[1]
	case 3:
		host, svcName, ns = parts[0], parts[1], parts[2]
	default:
		return nil, false
	}
	svc, err := s.svcs.Services(ns).Get(svcName)
	if err != nil {
		return nil, false
	}
	if host == "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		if a, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil && a.Is4() {
			return []netip.Addr{a}, true
		}
		return nil, true
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return nil, false // pod names exist under headless Services only
	}
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svcName})
	eps, _ := s.slices.EndpointSlices(ns).List(sel)
	found := host == ""
	for _, es := range eps {
		if es.AddressType != discoveryv1.AddressTypeIPv4 {
			continue
		}
		for _, ep := range es.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if !ready && !svc.Spec.PublishNotReadyAddresses {
				continue
			}
			if host != "" && (ep.Hostname == nil || *ep.Hostname != host) {
				continue
			}
			found = true
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					ips = append(ips, ip)
				}
			}
		}
	}
	return ips, found
}
