package cluster

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestDNS_AnswersServicesAndStatefulSetPods(t *testing.T) {
	yes, no := true, false
	h0, h1 := "db-0", "db-1"
	client := fake.NewSimpleClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db-headless", Namespace: "ns"}, Spec: corev1.ServiceSpec{ClusterIP: "None", PublishNotReadyAddresses: true}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "db-headless-x", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "db-headless"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.77.5"}, Hostname: &h0, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
				{Addresses: []string{"10.244.77.6"}, Hostname: &h1, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
			},
		},
		&discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "web-x", Namespace: "ns", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.77.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
				{Addresses: []string{"10.244.77.8"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
			},
		},
	)
	s, err := startDNS(context.Background(), client, "127.0.0.1:0", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		name   string
		want   []string
		rcode  dnsmessage.RCode
		qtype  dnsmessage.Type
		viaUDP bool
	}{
		{name: "db.ns.svc.cluster.local.", want: []string{"10.96.0.10"}},
		{name: "DB.NS.svc.cluster.local.", want: []string{"10.96.0.10"}},
		{name: "db-headless.ns.svc.cluster.local.", want: []string{"10.244.77.5", "10.244.77.6"}},
		{name: "db-1.db-headless.ns.svc.cluster.local.", want: []string{"10.244.77.6"}, viaUDP: true},
		{name: "db-0.db-headless.ns.svc.cluster.local.", want: []string{"10.244.77.5"}},
		{name: "web.ns.svc.cluster.local.", want: []string{"10.244.77.7"}},
		{name: "db-0.db-headless.ns.svc.cluster.local.", qtype: dnsmessage.TypeAAAA},
		{name: "db-2.db-headless.ns.svc.cluster.local.", rcode: dnsmessage.RCodeNameError},
		{name: "db-0.db.ns.svc.cluster.local.", rcode: dnsmessage.RCodeNameError},
		{name: "nope.ns.svc.cluster.local.", rcode: dnsmessage.RCodeNameError},
		{name: "db.ns.svc.cluster.local.ns.svc.cluster.local.", rcode: dnsmessage.RCodeNameError},
		{name: "example.com.", rcode: dnsmessage.RCodeNameError},
	} {
		qtype := tc.qtype
		if qtype == 0 {
			qtype = dnsmessage.TypeA
		}
		q := dnsmessage.Message{
			Header:    dnsmessage.Header{ID: 7, RecursionDesired: true},
			Questions: []dnsmessage.Question{{Name: dnsmessage.MustNewName(tc.name), Type: qtype, Class: dnsmessage.ClassINET}},
		}
		packed, err := q.Pack()
		if err != nil {
			t.Fatal(err)
		}
		var resp []byte
		if tc.viaUDP {
			resp = exchangeUDP(t, s.udp.LocalAddr().String(), packed)
		} else {
			resp = s.answer(packed, 512)
		}
		var m dnsmessage.Message
		if err := m.Unpack(resp); err != nil {
			t.Fatalf("%s: unpack: %v", tc.name, err)
		}
		if m.Header.ID != 7 || !m.Header.Response || m.Header.RCode != tc.rcode {
			t.Errorf("%s: header %+v, want rcode %v", tc.name, m.Header, tc.rcode)
		}
		var got []string
		for _, a := range m.Answers {
			if r, ok := a.Body.(*dnsmessage.AResource); ok {
				got = append(got, net.IP(r.A[:]).String())
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s %v: got %v, want %v", tc.name, qtype, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
			}
		}
	}
}

func exchangeUDP(t *testing.T, addr string, q []byte) []byte {
	t.Helper()
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(q); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}
