package loopback

import (
	"net"
	"strings"
	"testing"
)

func TestFreePorts(t *testing.T) {
	addrs, err := FreePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		if seen[a] || !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("addresses %v: want 5 distinct 127.0.0.1 ones", addrs)
		}
		seen[a] = true
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s is not free: %v", a, err)
		}
		l.Close()
	}
}

func TestReserveHosts(t *testing.T) {
	base, ports, err := ReserveHosts(3)
	if err != nil {
		t.Skipf("no loopback block (a host without 127.0.0.0/8 on lo): %v", err)
	}
	if !strings.HasPrefix(base, "127.") || strings.Count(base, ".") != 3 {
		t.Fatalf("base %q", base)
	}
	for _, h := range []string{"1", "2", "3"} {
		for _, p := range ports {
			l, err := net.Listen("tcp", net.JoinHostPort(base+h, p))
			if err != nil {
				t.Fatalf("%s%s:%s is not free: %v", base, h, p, err)
			}
			l.Close()
		}
	}
}

// TestIsAddr: only addresses of this host count as loopback.
func TestIsAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7001": true, "127.0.0.3:7001": true, "[::1]:7001": true, "localhost:7001": true, "LOCALHOST:1": true,
		"10.0.0.5:7001": false, "[fe80::1]:7001": false, "coord-1.coord:7001": false, "127.0.0.1": false, "": false, ":7001": false,
	} {
		if got := IsAddr(addr); got != want {
			t.Errorf("IsAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}
