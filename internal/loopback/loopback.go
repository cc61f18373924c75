// Package loopback finds free TCP addresses on the loopback interface for
// the processes the end-to-end tests and the benchmarks start: ports free
// on 127.0.0.1, and a block of loopback hosts that share four free ports,
// as the pods of one Helm release share their container ports. IsAddr
// tells whether an address names this host's loopback interface.
//
// An address is free when it was listened on a moment ago; another
// process may take it before it is used, and the process given it then
// fails to start with an address-in-use error in its log.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
)

// IsAddr reports whether addr (host:port) names a loopback address: an IP
// of 127.0.0.0/8 or ::1, or localhost in any case. An address without a
// port, or with an empty host (every interface), is not one.
func IsAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// FreePorts returns n distinct 127.0.0.1 addresses that were free a moment
// ago: all listened on at once, so that no two are the same port.
func FreePorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// ReserveHosts picks a loopback block 127.A.B.0/24 at random and four
// ports free on every address 127.A.B.1..n of it; it returns the block's
// prefix "127.A.B." and the ports. It tries 20 blocks before giving up.
func ReserveHosts(n int) (base string, ports [4]string, err error) {
	var last error
	for range 20 {
		base = fmt.Sprintf("127.%d.%d.", 100+rand.IntN(150), 1+rand.IntN(250))
		if last = tryHosts(base, n, &ports); last == nil {
			return base, ports, nil
		}
	}
	return "", ports, fmt.Errorf("reserve %d loopback hosts with four common free ports: %w", n, last)
}

// tryHosts picks four free ports on host base+"1" and checks that they
// are free on hosts 2..n too.
func tryHosts(base string, n int, ports *[4]string) error {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", base+"1:0")
		if err != nil {
			return err
		}
		ls = append(ls, l)
		_, ports[i], _ = net.SplitHostPort(l.Addr().String())
	}
	for k := 2; k <= n; k++ {
		for _, p := range ports {
			l, err := net.Listen("tcp", net.JoinHostPort(base+strconv.Itoa(k), p))
			if err != nil {
				return err
			}
			ls = append(ls, l)
		}
	}
	return nil
}
