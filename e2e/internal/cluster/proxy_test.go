package cluster

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer answers every line with the same line until closed.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				io.Copy(c, c)
			})
		}
	})
	return l.Addr().String()
}

// roundTrip dials addr, sends one line and reads the answer within d.
func roundTrip(addr string, d time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(d))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestFaultProxy_CutHealAndToxics(t *testing.T) {
	p, err := NewFaultProxy("echo", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got, err := roundTrip(p.Listen, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}

	p.Cut()
	if _, err := roundTrip(p.Listen, time.Second); err == nil {
		t.Fatal("a cut proxy passed a round trip")
	}
	if err := p.Heal(); err != nil {
		t.Fatal(err)
	}
	if got, err := roundTrip(p.Listen, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after healing: %q, %v", got, err)
	}

	// A timeout toxic of 0 swallows the data and keeps the connection.
	if err := p.AddToxic("hole", "timeout", "downstream", map[string]any{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	_, err = roundTrip(p.Listen, 300*time.Millisecond)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a black hole: %v, want a read deadline", err)
	}
	if err := p.RemoveToxic("hole"); err != nil {
		t.Fatal(err)
	}
	if got, err := roundTrip(p.Listen, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after removing the toxic: %q, %v", got, err)
	}

	if err := p.AddToxic("x", "timeout", "sideways", nil); err == nil || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("bad stream: %v", err)
	}
	if err := p.AddToxic("x", "no-such-toxic", "upstream", nil); err == nil {
		t.Error("unknown toxic type accepted")
	}
	if err := p.RemoveToxic("absent"); err == nil {
		t.Error("removing an absent toxic succeeded")
	}
}
