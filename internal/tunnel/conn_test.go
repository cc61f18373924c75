package tunnel

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pipeStream is one end of an in-memory message pipe: what one end sends,
// the other receives, message by message. cancel ends both directions.
type pipeStream struct {
	in, out chan []byte
	done    chan struct{}
	once    *sync.Once
	sizes   *[]int // sizes of the messages this end sent
	mu      *sync.Mutex
}

func newPipe() (a, b *pipeStream) {
	ab, ba := make(chan []byte), make(chan []byte)
	done := make(chan struct{})
	once := &sync.Once{}
	a = &pipeStream{in: ba, out: ab, done: done, once: once, sizes: new([]int), mu: &sync.Mutex{}}
	b = &pipeStream{in: ab, out: ba, done: done, once: once, sizes: new([]int), mu: &sync.Mutex{}}
	return a, b
}

func (p *pipeStream) cancel() { p.once.Do(func() { close(p.done) }) }

func (p *pipeStream) Send(m []byte) error {
	p.mu.Lock()
	*p.sizes = append(*p.sizes, len(m))
	p.mu.Unlock()
	select {
	case p.out <- m:
		return nil
	case <-p.done:
		return errors.New("stream canceled")
	}
}

func (p *pipeStream) Recv() ([]byte, error) {
	select {
	case m := <-p.in:
		return m, nil
	case <-p.done:
		return nil, io.EOF
	}
}

func connPair() (a, b *Conn, sa, sb *pipeStream) {
	sa, sb = newPipe()
	a = NewConn(sa, sa.cancel, Addr("a"), Addr("b"))
	b = NewConn(sb, sb.cancel, Addr("b"), Addr("a"))
	return a, b, sa, sb
}

func TestConn_BytesBothWays(t *testing.T) {
	a, b, _, _ := connPair()
	defer a.Close()
	go func() {
		a.Write([]byte("hello "))
		a.Write([]byte("coordinator"))
	}()
	got := make([]byte, len("hello coordinator"))
	if _, err := io.ReadFull(b, got); err != nil || string(got) != "hello coordinator" {
		t.Fatalf("edge to coordinator: %q, %v", got, err)
	}
	go b.Write([]byte("pong"))
	small := make([]byte, 3) // a read shorter than the message keeps the rest
	if n, err := a.Read(small); err != nil || string(small[:n]) != "pon" {
		t.Fatalf("first read: %q, %v", small[:n], err)
	}
	if n, err := a.Read(small); err != nil || string(small[:n]) != "g" {
		t.Fatalf("second read: %q, %v", small[:n], err)
	}
	if a.LocalAddr().String() != "a" || a.RemoteAddr().Network() != "tunnel" {
		t.Fatalf("addresses %v %v", a.LocalAddr(), a.RemoteAddr())
	}
}

func TestConn_LargeWriteIsChunked(t *testing.T) {
	a, b, sa, _ := connPair()
	defer a.Close()
	want := make([]byte, 1<<20+123)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	errc := make(chan error, 1)
	go func() {
		_, err := a.Write(want)
		errc <- err
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(b, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes differ")
	}
	sa.mu.Lock()
	defer sa.mu.Unlock()
	if len(*sa.sizes) != 17 {
		t.Errorf("%d messages, want 17", len(*sa.sizes))
	}
	for i, n := range *sa.sizes {
		if n > MaxChunkBytes {
			t.Errorf("message %d has %d bytes, over %d", i, n, MaxChunkBytes)
		}
	}
}

func TestConn_CloseUnblocksReadAndEndsWrites(t *testing.T) {
	a, b, _, _ := connPair()
	readErr := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 10))
		readErr <- err
	}()
	a.Close()
	if err := <-readErr; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v, want net.ErrClosed", err)
	}
	<-a.Done()
	if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	// The peer sees the end of its stream.
	if _, err := b.Read(make([]byte, 10)); err != io.EOF {
		t.Fatalf("peer read: %v, want io.EOF", err)
	}
	<-b.Done()
	if !errors.Is(b.Err(), io.EOF) {
		t.Fatalf("peer Err: %v", b.Err())
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestListener_YieldsTheConnOnce(t *testing.T) {
	a, _, _, _ := connPair()
	defer a.Close()
	l := NewListener(a)
	c, err := l.Accept()
	if err != nil || c != a {
		t.Fatalf("first accept: %v, %v", c, err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := l.Accept()
		errc <- err
	}()
	l.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second accept: %v, want net.ErrClosed", err)
	}
	l.Close()
}
