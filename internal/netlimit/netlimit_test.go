package netlimit

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// served accepts connections on l and reports each on accepted until l
// is closed.
func served(t *testing.T, l net.Listener) <-chan net.Conn {
	t.Helper()
	accepted := make(chan net.Conn, 64)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	})
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return accepted
}

// refusedByServer reports whether the server closed c without a word.
func refusedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestListener_RefusesPastThePerIPBoundAndAdmitsAfterAClose(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	refused := map[string]int{}
	l, err := Wrap(raw, Options{MaxConns: 10, MaxConnsPerIP: 2, OnRefuse: func(_ net.Addr, r string) { mu.Lock(); refused[r]++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	accepted := served(t, l)
	addr := raw.Addr().String()
	dial(t, addr)
	dial(t, addr)
	first, second := <-accepted, <-accepted
	third := dial(t, addr)
	if !refusedByServer(third) {
		t.Fatal("a third connection from one address was not closed")
	}
	mu.Lock()
	if refused[ReasonPerIP] != 1 {
		t.Errorf("refusals %v, want one %s", refused, ReasonPerIP)
	}
	mu.Unlock()
	first.Close()
	first.Close() // a second Close must not free a second slot
	dial(t, addr)
	<-accepted
	if !refusedByServer(dial(t, addr)) {
		t.Fatal("a double Close freed two slots")
	}
	if l.Open() != 2 {
		t.Errorf("open = %d, want 2", l.Open())
	}
	second.Close()
}

func TestListener_RefusesPastTheListenerBound(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	var mu sync.Mutex
	l, err := Wrap(raw, Options{MaxConns: 1, OnRefuse: func(_ net.Addr, r string) { mu.Lock(); reasons = append(reasons, r); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	accepted := served(t, l)
	dial(t, raw.Addr().String())
	<-accepted
	if !refusedByServer(dial(t, raw.Addr().String())) {
		t.Fatal("a connection past MaxConns was not closed")
	}
	// The refusal is reported once the connection is closed: the client
	// may see the close first.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(reasons)
		mu.Unlock()
		if n > 0 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reasons) != 1 || reasons[0] != ReasonListenerFull {
		t.Errorf("reasons %v, want [%s]", reasons, ReasonListenerFull)
	}
}

func TestClientKey_GroupsIPv6By64(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 1}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1"), Port: 1}, "2001:db8:1:2::"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:bbbb::9"), Port: 1}, "2001:db8:1:2::"},
	} {
		got, ok := clientKey(tc.addr)
		if !ok || got != netip.MustParseAddr(tc.want) {
			t.Errorf("clientKey(%v) = %v, %v; want %s", tc.addr, got, ok, tc.want)
		}
	}
	if _, ok := clientKey(&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}); ok {
		t.Error("a Unix socket address was keyed")
	}
}

func TestOptions_RefusesNegativeBounds(t *testing.T) {
	if _, err := Wrap(nil, Options{MaxConnsPerIP: -1}); err == nil {
		t.Fatal("negative bound accepted")
	}
}

func TestListener_NoBoundsAcceptsEverythingAndCounts(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := Wrap(raw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	accepted := served(t, l)
	var conns []net.Conn
	for range 20 {
		dial(t, raw.Addr().String())
		conns = append(conns, <-accepted)
	}
	if st := l.Stats(); st.Open != 20 || st.PeakOpen != 20 || st.Accepted != 20 || st.AddressesOpen != 1 || st.RefusedFull+st.RefusedPerIP != 0 {
		t.Fatalf("stats %+v", st)
	}
	for _, c := range conns {
		c.Close()
	}
	if st := l.Stats(); st.Open != 0 || st.PeakOpen != 20 || st.AddressesOpen != 0 {
		t.Fatalf("stats after closing %+v", st)
	}
}

func TestListener_StatsCountRefusalsByReason(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var remotes []net.Addr
	var mu sync.Mutex
	l, err := Wrap(raw, Options{MaxConns: 3, MaxConnsPerIP: 2, OnRefuse: func(a net.Addr, _ string) { mu.Lock(); remotes = append(remotes, a); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	accepted := served(t, l)
	for range 2 {
		dial(t, raw.Addr().String())
		<-accepted
	}
	if c := dial(t, raw.Addr().String()); !refusedByServer(c) {
		t.Fatal("a third connection from one address was kept")
	}
	if st := l.Stats(); st.RefusedPerIP != 1 || st.RefusedFull != 0 || st.Accepted != 2 {
		t.Fatalf("stats %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(remotes) != 1 || remotes[0] == nil {
		t.Fatalf("OnRefuse got %v", remotes)
	}
}

func TestListener_AcceptReturnsTheUnderlyingError(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := Wrap(raw, Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}
