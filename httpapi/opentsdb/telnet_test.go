package opentsdb

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// fakeBackend records writes; fail holds errors for the next writes.
type fakeBackend struct {
	mu     sync.Mutex
	writes [][]model.Batch
	fail   []error
}

func (f *fakeBackend) Write(_ context.Context, batches []model.Batch) (model.WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.fail) > 0 {
		err := f.fail[0]
		f.fail = f.fail[1:]
		return model.WriteResult{}, err
	}
	f.writes = append(f.writes, batches)
	var res model.WriteResult
	for _, b := range batches {
		res.Accepted += int64(len(b.Ts))
	}
	return res, nil
}

func (f *fakeBackend) Query(context.Context, model.Query, func(model.Series) error) (model.QueryInfo, error) {
	return model.QueryInfo{}, nil
}
func (f *fakeBackend) Series(context.Context, []*labels.Matcher, int) ([]labels.Labels, error) {
	return nil, nil
}
func (f *fakeBackend) LabelNames(context.Context, []*labels.Matcher) ([]string, error) {
	return nil, nil
}
func (f *fakeBackend) LabelValues(context.Context, string, []*labels.Matcher) ([]string, error) {
	return nil, nil
}

// points returns the number of writes and of points written.
func (f *fakeBackend) points() (writes, points int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.writes {
		for _, b := range w {
			points += len(b.Ts)
		}
	}
	return len(f.writes), points
}

// pipeListener hands out in-memory connections (net.Pipe), so that
// telnet tests can run under testing/synctest.
type pipeListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{} }
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.ch <- server
	return client
}

// startTelnet serves srv on l and returns a function that closes srv and
// checks that Serve returned ErrServerClosed.
func startTelnet(t *testing.T, srv *TelnetServer, l net.Listener) func() {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	return func() {
		t.Helper()
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve returned %v, want ErrServerClosed", err)
		}
	}
}

func TestTelnet_PutOverTCPThenQueryBack(t *testing.T) {
	e := newEnv(t)
	srv, err := NewTelnetServer(e.b, e.cfg, TelnetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	t0 := nowSec() - 600
	fmt.Fprintf(c, "put sys.if.bytes %d 100 host=web01 iface=eth0\r\n", t0)
	fmt.Fprintf(c, "put sys.if.bytes %d.500 150 host=web01 iface=eth0\n", t0+10)
	fmt.Fprintf(c, "put sys.if.bytes %d\n", t0+20) // line 3: too short
	fmt.Fprintf(c, "put sys.if.bytes %d 175 host=web01 iface=eth0\n", t0+20)
	fmt.Fprintf(c, "put sys.if.bytes %d 1 host=web01 iface=eth0\n", t0+86400) // line 5: far future
	fmt.Fprintf(c, "\nversion\n")
	want := []string{"put: illegal argument: line 3: not enough arguments", "tributary: OpenTSDB 2.4.0"}
	for _, w := range want {
		line, err := rd.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, w) {
			t.Fatalf("reply %q (%v), want prefix %q", line, err, w)
		}
	}
	fmt.Fprintf(c, "put sys.if.bytes %d 10 host=web02 iface=eth0\n", t0)
	fmt.Fprintf(c, "frobnicate\n")
	if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, `unknown command: "frobnicate"`) {
		t.Fatalf("reply %q to an unknown command", line)
	}
	fmt.Fprintf(c, "put sys.if.bytes %d 20 host=web02 iface=eth0", t0+10) // no final newline
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The far-future point is refused by the node when the batch is
	// flushed at the close; the error line names its line.
	if line, _ := rd.ReadString('\n'); !strings.Contains(line, "line 5:") || !strings.Contains(line, "ahead of the node clock") {
		t.Fatalf("reply %q, want the node's refusal of line 5", line)
	}
	c.Close()
	// Shutdown waits for the connection's handler, which has flushed.
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	var ans []queryAnswer
	e.getJSON(fmt.Sprintf("/api/query?start=%d&m=sum:sys.if.bytes{host=*}&ms=true", t0-1), &ans)
	got := map[string]map[string]float64{}
	for _, a := range ans {
		got[a.Tags["host"]] = a.Dps
	}
	wantDps := map[string]map[string]float64{
		"web01": {fmt.Sprint(t0 * 1000): 100, fmt.Sprint((t0+10)*1000 + 500): 150, fmt.Sprint((t0 + 20) * 1000): 175},
		"web02": {fmt.Sprint(t0 * 1000): 10, fmt.Sprint((t0 + 10) * 1000): 20},
	}
	if fmt.Sprint(got) != fmt.Sprint(wantDps) {
		t.Fatalf("queried %v, want %v", got, wantDps)
	}
	if a, r := e.cfg.Stats.Get("opentsdb_points_accepted"), e.cfg.Stats.Get("opentsdb_points_rejected"); a != 5 || r != 2 {
		t.Fatalf("accepted %d rejected %d, want 5 and 2", a, r)
	}
}

func TestTelnet_LongLineIsSkippedAndTheConnectionStaysOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBackend{}
		srv, err := NewTelnetServer(fb, &httpapi.Config{}, TelnetOptions{MaxLineBytes: 1024})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		stop := startTelnet(t, srv, l)
		c := l.dial()
		rd := bufio.NewReader(c)
		go func() {
			fmt.Fprintf(c, "put m 1709290000 1 h=%s\n", strings.Repeat("x", 5000))
			fmt.Fprintf(c, "put m 1709290000 2 h=a\nversion\n")
		}()
		for _, w := range []string{"put: illegal argument: line 1 is longer than 1024 bytes", "tributary:"} {
			if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, w) {
				t.Fatalf("reply %q (%v), want prefix %q", line, err, w)
			}
		}
		c.Close()
		synctest.Wait()
		if _, p := fb.points(); p != 1 {
			t.Fatalf("%d points written, want the one valid line", p)
		}
		stop()
	})
}

func TestTelnet_BatchesLinesAndFlushesOnTimeAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBackend{}
		srv, err := NewTelnetServer(fb, &httpapi.Config{}, TelnetOptions{FlushInterval: 200 * time.Millisecond, FlushPoints: 1000, IdleTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		stop := startTelnet(t, srv, l)
		c := l.dial()
		var lines strings.Builder
		for i := range 2500 {
			fmt.Fprintf(&lines, "put m %d %d host=h%d\n", 1709290000+i/10, i, i%10)
		}
		if _, err := io.WriteString(c, lines.String()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		// 2,500 points: two full batches went out, 500 wait for the timer.
		if w, p := fb.points(); w != 2 || p != 2000 {
			t.Fatalf("%d writes of %d points, want 2 of 2000 in all", w, p)
		}
		if n := len(fb.writes[0]); n != 10 {
			t.Fatalf("first write has %d batches, want one per series (10)", n)
		}
		time.Sleep(199 * time.Millisecond)
		synctest.Wait()
		if w, _ := fb.points(); w != 2 {
			t.Fatalf("flushed before the flush interval")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if w, p := fb.points(); w != 3 || p != 2500 {
			t.Fatalf("after the flush interval: %d writes, %d points", w, p)
		}
		// Close flushes what is pending before the handler returns.
		fmt.Fprintf(c, "put m 1709290000 1 host=z\n")
		c.Close()
		synctest.Wait()
		if w, p := fb.points(); w != 4 || p != 2501 {
			t.Fatalf("after close: %d writes, %d points", w, p)
		}
		stop()
	})
}

func TestTelnet_IdleConnectionIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := NewTelnetServer(&fakeBackend{}, &httpapi.Config{}, TelnetOptions{IdleTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		stop := startTelnet(t, srv, l)
		c := l.dial()
		time.Sleep(59 * time.Second)
		fmt.Fprintf(c, "put m 1709290000 1 h=a\n") // activity resets the clock
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if srv.cfg.Stats.Get("opentsdb_telnet_idle_closed") != 0 {
			t.Fatal("closed although active")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read after the idle timeout: %v, want EOF", err)
		}
		if srv.cfg.Stats.Get("opentsdb_telnet_idle_closed") != 1 {
			t.Fatal("idle close not counted")
		}
		stop()
	})
}

func TestTelnet_OverloadedWritesAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBackend{fail: []error{model.ErrOverloaded, model.ErrOverloaded}}
		srv, err := NewTelnetServer(fb, &httpapi.Config{}, TelnetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		stop := startTelnet(t, srv, l)
		c := l.dial()
		fmt.Fprintf(c, "put m 1709290000 1 h=a\n")
		c.Close()
		synctest.Wait()
		if _, p := fb.points(); p != 0 {
			t.Fatalf("%d points written by an overloaded backend", p)
		}
		time.Sleep(time.Second) // the retries back off 50 ms, then 100 ms
		synctest.Wait()
		if _, p := fb.points(); p != 1 {
			t.Fatalf("%d points written after two overloaded attempts, want 1", p)
		}
		// A bad request is not retried: the point is dropped and counted.
		fb.mu.Lock()
		fb.fail = []error{fmt.Errorf("test refusal: %w", model.ErrBadRequest)}
		fb.mu.Unlock()
		c = l.dial()
		rd := bufio.NewReader(c)
		fmt.Fprintf(c, "put m 1709290001 1 h=a\nexit\n")
		if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, "put: unable to store 1 data points") {
			t.Fatalf("reply %q", line)
		}
		stop()
	})
}

func TestTelnet_ConnectionLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := NewTelnetServer(&fakeBackend{}, &httpapi.Config{}, TelnetOptions{MaxConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		stop := startTelnet(t, srv, l)
		c1 := l.dial()
		go fmt.Fprintf(c1, "version\n")
		if line, _ := bufio.NewReader(c1).ReadString('\n'); !strings.HasPrefix(line, "tributary:") {
			t.Fatalf("first connection: %q", line)
		}
		c2 := l.dial()
		b, _ := io.ReadAll(c2)
		if !strings.HasPrefix(string(b), "put: too many connections (limit 1)") {
			t.Fatalf("second connection got %q", b)
		}
		stop()
		c1.Close()
	})
}

func TestTelnet_Authentication(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBackend{}
		srv, err := NewTelnetServer(fb, &httpapi.Config{}, TelnetOptions{Authenticate: func(tok string) bool { return tok == "sesame-0123456789" }})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		stop := startTelnet(t, srv, l)
		c := l.dial()
		rd := bufio.NewReader(c)
		go fmt.Fprintf(c, "put m 1709290000 1 h=a\nauth sesame-0123456789\nput m 1709290000 2 h=a\nexit\n")
		if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, "put: authentication required") {
			t.Fatalf("reply %q", line)
		}
		synctest.Wait()
		if _, p := fb.points(); p != 1 {
			t.Fatalf("%d points written, want only the one after auth", p)
		}
		c = l.dial()
		rd = bufio.NewReader(c)
		go fmt.Fprintf(c, "auth wrong\n")
		if line, _ := rd.ReadString('\n'); !strings.HasPrefix(line, "auth: the token is not valid") {
			t.Fatalf("reply %q", line)
		}
		if _, err := rd.ReadString('\n'); err != io.EOF {
			t.Fatalf("connection still open after a bad token: %v", err)
		}
		stop()
	})
}

func TestTelnet_ShutdownFinishesReceivedLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBackend{}
		srv, err := NewTelnetServer(fb, &httpapi.Config{}, TelnetOptions{FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(l) }()
		c := l.dial()
		fmt.Fprintf(c, "put m 1709290000 1 h=a\nput m 1709290001 2 h=a\n")
		synctest.Wait()
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, p := fb.points(); p != 2 {
			t.Fatalf("%d points written by Shutdown, want 2", p)
		}
		if err := <-errc; !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve: %v", err)
		}
		if err := srv.Serve(newPipeListener()); !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
		c.Close()
	})
}

func TestParsePut(t *testing.T) {
	cases := []struct {
		line    string
		wantErr string
		tMs     int64
		v       float64
		tags    string
	}{
		{"sys.cpu 1709290000 42 host=a cpu=0", "", 1709290000_000, 42, "[{host a} {cpu 0}]"},
		{"sys.cpu 1709290000123 -1.5e2 host=a", "", 1709290000123, -150, "[{host a}]"},
		{"sys.cpu 1709290000.5 1", "", 1709290000500, 1, "[]"},
		{"sys/cpu.é 1709290000 1 a/b=x=y", "", 1709290000000, 1, "[{a_b x=y}]"},
		{"sys.cpu 1709290000", "not enough arguments", 0, 0, ""},
		{"sys.cpu -1 1 h=a", "must be positive", 0, 0, ""},
		{"sys.cpu 0 1 h=a", "must be positive", 0, 0, ""},
		{"sys.cpu 12345678901234 1 h=a", "too large", 0, 0, ""},
		{"sys.cpu 1709290000.1234 1 h=a", "at most 3 decimals", 0, 0, ""},
		{"sys.cpu 1709290000 NaN h=a", `value "NaN" is not a number`, 0, 0, ""},
		{"sys.cpu 1709290000 inf h=a", "is not a number", 0, 0, ""},
		{"sys.cpu 1709290000 0x10 h=a", "is not a number", 0, 0, ""},
		{"sys.cpu 1709290000 1e400 h=a", "out of range", 0, 0, ""},
		{"sys.cpu 1709290000 1 host", `invalid tag "host"`, 0, 0, ""},
		{"sys.cpu 1709290000 1 host=", `invalid tag "host="`, 0, 0, ""},
		{"sys.cpu 1709290000 1 =a", `invalid tag "=a"`, 0, 0, ""},
		{"sys.cpu 1709290000 1 h$=a", "character '$' at byte 1", 0, 0, ""},
		{"sys,cpu 1709290000 1 h=a", "metric name \"sys,cpu\": character ','", 0, 0, ""},
		{"sys.cpu 1709290000 1 h=a\x01", "control character", 0, 0, ""},
	}
	for _, c := range cases {
		f, n := splitFields(c.line, nil, -1)
		metric, tags, tMs, v, err := parsePut(f, n, 31, nil)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: error %v, want %q", c.line, err, c.wantErr)
			}
			continue
		}
		if err != nil || metric != f[0] || tMs != c.tMs || v != c.v || fmt.Sprint(tags) != c.tags {
			t.Errorf("%q: %q %v %d %g %v, want %d %g %s", c.line, metric, tags, tMs, v, err, c.tMs, c.v, c.tags)
		}
	}
}

func TestTelnet_ShutdownDrainsForABoundedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBackend{}
		srv, err := NewTelnetServer(fb, &httpapi.Config{}, TelnetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(l) }()
		c := l.dial()
		sent := make(chan int)
		go func() {
			// A sender that never stops on its own.
			n := 0
			for ; ; n++ {
				if _, err := fmt.Fprintf(c, "put m %d 1 h=a\n", 1709290000+n); err != nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			sent <- n
		}()
		time.Sleep(time.Second)
		began := time.Now()
		if err := srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(began); d > drainMax+drainIdle {
			t.Fatalf("Shutdown took %s with a sender that never pauses", d)
		}
		n := <-sent
		if _, p := fb.points(); p != n {
			t.Fatalf("%d points written, %d lines sent before the connection closed", p, n)
		}
		if err := <-errc; !errors.Is(err, ErrServerClosed) {
			t.Fatalf("Serve: %v", err)
		}
	})
}
