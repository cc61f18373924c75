package coordinator

import "testing"

// TestLoopbackAddr: only addresses of this host count as loopback (their
// replica files go uncompressed).
func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7001": true, "127.0.0.3:7001": true, "[::1]:7001": true, "localhost:7001": true, "LOCALHOST:1": true,
		"10.0.0.5:7001": false, "[fe80::1]:7001": false, "coord-1.coord:7001": false, "127.0.0.1": false, "": false,
	} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}
