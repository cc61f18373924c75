package transport

import (
	"crypto/x509"
	"net/url"
	"testing"
)

func TestCertHasName_MatchesDNSOrURISANExactly(t *testing.T) {
	u, _ := url.Parse("spiffe://tributary/coordinator/1")
	c := &x509.Certificate{DNSNames: []string{"coord-1.tributary.svc"}, URIs: []*url.URL{u}}
	c.Subject.CommonName = "coord-2.tributary.svc"
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"coord-1.tributary.svc", true},
		{"spiffe://tributary/coordinator/1", true},
		{"coord-2.tributary.svc", false}, // the common name does not count
		{"spiffe://tributary/coordinator/10", false},
		{"COORD-1.tributary.svc", false},
		{"", false},
	} {
		if got := certHasName(c, tc.name); got != tc.want {
			t.Errorf("certHasName(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
