package connlimit

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve accepts on l until it is closed, keeping every connection it gets.
func serve(t *testing.T, l *Listener) (accepted func() []net.Conn, stop func()) {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	accepted = func() []net.Conn {
		mu.Lock()
		defer mu.Unlock()
		return append([]net.Conn(nil), conns...)
	}
	stop = func() {
		l.Close()
		<-done
		for _, c := range accepted() {
			c.Close()
		}
	}
	return accepted, stop
}

// refused reports whether the server closed c without serving it: a read
// ends with EOF or a reset instead of timing out.
func refused(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestListener_CapPerIPClosesTheExtraConnectionsAndFreesPlacesOnClose(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refusals []string
	var mu sync.Mutex
	l := Listen(inner, Limits{MaxConns: 100, MaxConnsPerIP: 3}, func(_ net.Addr, reason string) {
		mu.Lock()
		refusals = append(refusals, reason)
		mu.Unlock()
	})
	accepted, stop := serve(t, l)
	defer stop()

	var kept []net.Conn
	for range 3 {
		kept = append(kept, dial(t, inner.Addr().String()))
	}
	waitFor(t, "3 accepted", func() bool { return len(accepted()) == 3 })
	for i := range 2 {
		if c := dial(t, inner.Addr().String()); !refused(t, c) {
			t.Fatalf("connection %d beyond the cap of 3 per address was kept open", 4+i)
		}
	}
	for _, c := range kept {
		if refused(t, c) {
			t.Fatal("a connection within the cap was closed")
		}
	}
	st := l.Stats()
	if st.Open != 3 || st.RefusedPerIP != 2 || st.RefusedTotal != 0 || st.Accepted != 3 || st.AddressesOpen != 1 {
		t.Fatalf("stats %+v, want 3 open, 2 refused per address", st)
	}
	mu.Lock()
	if len(refusals) != 2 {
		t.Errorf("onRefuse called %d times, want 2", len(refusals))
	}
	mu.Unlock()

	// Closing an accepted connection (twice: only one place) lets one more in.
	c0 := accepted()[0]
	c0.Close()
	c0.Close()
	if got := l.Stats().Open; got != 2 {
		t.Fatalf("%d open after closing one twice, want 2", got)
	}
	dial(t, inner.Addr().String())
	waitFor(t, "a fourth accepted", func() bool { return len(accepted()) == 4 })
	if c := dial(t, inner.Addr().String()); !refused(t, c) {
		t.Fatal("the cap was not restored after the new connection")
	}
}

func TestListener_TotalCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, Limits{MaxConns: 2}, nil)
	accepted, stop := serve(t, l)
	defer stop()
	dial(t, inner.Addr().String())
	dial(t, inner.Addr().String())
	waitFor(t, "2 accepted", func() bool { return len(accepted()) == 2 })
	if c := dial(t, inner.Addr().String()); !refused(t, c) {
		t.Fatal("a third connection beyond MaxConns 2 was kept")
	}
	if st := l.Stats(); st.RefusedTotal != 1 || st.PeakOpen != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestListener_NoCapsAcceptsEverything(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, Limits{}, nil)
	accepted, stop := serve(t, l)
	defer stop()
	for range 20 {
		dial(t, inner.Addr().String())
	}
	waitFor(t, "20 accepted", func() bool { return len(accepted()) == 20 })
}

func TestListener_AcceptReturnsTheUnderlyingError(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, Limits{MaxConns: 1}, nil)
	l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}

func TestLimits_Validate(t *testing.T) {
	if err := (Limits{MaxConns: -1}).Validate(); err == nil {
		t.Error("negative MaxConns accepted")
	}
	if err := (Limits{MaxConns: 1, MaxConnsPerIP: 1}).Validate(); err != nil {
		t.Error(err)
	}
}
