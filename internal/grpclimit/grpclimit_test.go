package grpclimit

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/internal/h2test"
	"github.com/tributarydb/tributary/internal/testcert"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	check = "/grpc.health.v1.Health/Check"
	watch = "/grpc.health.v1.Health/Watch"
	small = 1 << 10
)

// limits limits Check to 1 KiB and leaves Watch to the server.
func limits(method string) int {
	if method == check {
		return small
	}
	return 0
}

// chunkConn returns its bytes in reads of the given sizes (cycling).
type chunkConn struct {
	net.Conn
	data   []byte
	chunks []int
	i      int
}

func (c *chunkConn) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(b), len(c.data), c.chunks[c.i%len(c.chunks)])
	c.i++
	copy(b, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1} }

// wire builds a client's side of a connection and records where the
// length bytes of each stream's first message header lie.
type wire struct {
	buf bytes.Buffer
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder
}

func newWire() *wire {
	w := &wire{}
	w.buf.WriteString(http2.ClientPreface)
	w.fr = http2.NewFramer(&w.buf, nil)
	w.enc = hpack.NewEncoder(&w.hb)
	w.fr.WriteSettings()
	return w
}

// headers opens stream id for method; with split > 0 the block is cut
// into a HEADERS and CONTINUATION frames of split bytes.
func (w *wire) headers(id uint32, method string, split int, padded, priority bool) {
	w.hb.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "x"},
		{"content-type", "application/grpc"}, {"authorization", "Bearer " + strings.Repeat("t", 40)}} {
		w.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	block := w.hb.Bytes()
	first := block
	if split > 0 && split < len(block) {
		first = block[:split]
	}
	p := http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(first) == len(block)}
	if padded {
		p.PadLength = 7
	}
	if priority {
		p.Priority = http2.PriorityParam{StreamDep: 0, Weight: 15}
	}
	w.fr.WriteHeaders(p)
	for rest := block[len(first):]; len(rest) > 0; {
		n := min(split, len(rest))
		w.fr.WriteContinuation(id, n == len(rest), rest[:n])
		rest = rest[n:]
	}
}

// data sends payload on id, padded or not, and returns the connection
// offset of payload[0].
func (w *wire) data(id uint32, payload []byte, end, padded bool) int64 {
	at := int64(w.buf.Len()) + 9
	if padded {
		at++
		w.fr.WriteDataPadded(id, end, payload, make([]byte, 5))
	} else {
		w.fr.WriteData(id, end, payload)
	}
	return at
}

func message(flag byte, announced uint32, body int) []byte {
	return append([]byte{flag, byte(announced >> 24), byte(announced >> 16), byte(announced >> 8), byte(announced)}, make([]byte, body)...)
}

// mixedConnection interleaves allowed and refused requests of limited
// and unlimited methods, with padding, priorities and CONTINUATION frames.
// It returns the bytes and those the guard must turn into 0xff.
func mixedConnection() ([]byte, []int64, []string) {
	w := newWire()
	var rewritten []int64
	refuse := func(at int64) {
		for j := int64(1); j <= 4; j++ {
			rewritten = append(rewritten, at+j)
		}
	}
	w.headers(1, check, 0, false, false)
	w.headers(3, check, 5, true, true)
	w.headers(5, watch, 0, false, true)
	w.data(1, message(0, 10, 10), true, false)             // allowed
	refuse(w.data(3, message(0, 1<<20, 100), false, true)) // announces 1 MiB
	w.data(5, message(0, 1<<20, 2000), false, false)       // unlimited method
	w.headers(7, check, 3, false, false)
	refuse(w.data(7, message(1, 10, 10), true, false)) // compressed
	w.data(5, make([]byte, 3000), false, true)
	w.fr.WriteRSTStream(3, http2.ErrCodeCancel)
	w.headers(9, check, 0, false, false)
	w.data(9, message(0, small, small), true, true) // exactly the limit
	return w.buf.Bytes(), rewritten, []string{check, check}
}

func guardedRead(t testing.TB, data []byte, chunks []int, readSize int, refused *[]string) ([]byte, error) {
	c := newConn(&chunkConn{data: data, chunks: chunks}, func() Options {
		o := Options{Limit: limits, OnRefuse: func(m string) { *refused = append(*refused, m) }}
		o.Validate()
		return o
	}())
	var out []byte
	buf := make([]byte, readSize)
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
	}
}

func TestConn_RewritesOnlyRefusedHeadersWhateverTheReadSizes(t *testing.T) {
	data, rewritten, wantRefused := mixedConnection()
	want := bytes.Clone(data)
	for _, at := range rewritten {
		want[at] = 0xff
	}
	rng := rand.New(rand.NewPCG(1, 2))
	cases := [][]int{{1}, {2}, {3}, {5}, {7}, {4096}, {bufSize}}
	for range 200 {
		cs := make([]int, 1+rng.IntN(8))
		for i := range cs {
			cs[i] = 1 + rng.IntN(64)
		}
		cases = append(cases, cs)
	}
	for _, chunks := range cases {
		for _, readSize := range []int{1, 9, 1 << 10, 32 << 10} {
			var refused []string
			got, err := guardedRead(t, data, chunks, readSize, &refused)
			if err != nil {
				t.Fatalf("chunks %v, reads of %d: %v", chunks, readSize, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("chunks %v, reads of %d: output differs from the expected rewrite at byte %d", chunks, readSize, firstDiff(got, want))
			}
			if strings.Join(refused, ",") != strings.Join(wantRefused, ",") {
				t.Fatalf("chunks %v: refused %v, want %v", chunks, refused, wantRefused)
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestConn_ClosesWhenARefusedHeaderWasSplitAcrossFrames(t *testing.T) {
	w := newWire()
	w.headers(1, check, 0, false, false)
	hdr := message(0, 1<<20, 0)
	w.data(1, hdr[:3], false, false)
	w.data(1, hdr[3:], false, false)
	data := w.buf.Bytes()
	// Read in frame-sized pieces: the first DATA frame is passed on
	// before the second arrives.
	var refused []string
	_, err := guardedRead(t, data, []int{len(data) - 9 - 2}, 64, &refused)
	if !errors.Is(err, ErrRequestTooLarge) || len(refused) != 1 {
		t.Fatalf("read error %v, refused %v; want ErrRequestTooLarge once", err, refused)
	}
}

func TestConn_ClosesWhenALimitedStreamCarriesMoreThanOneMessage(t *testing.T) {
	w := newWire()
	w.headers(1, check, 0, false, false)
	w.data(1, message(0, 10, 10), false, false)
	w.data(1, message(0, small, small), false, false)
	var refused []string
	if _, err := guardedRead(t, w.buf.Bytes(), []int{100}, 1<<10, &refused); !errors.Is(err, ErrRequestTooLarge) {
		t.Fatalf("read error %v; want ErrRequestTooLarge", err)
	}
}

func FuzzConn_NeverPanicsAndOnlyRewritesLengthBytes(f *testing.F) {
	data, _, _ := mixedConnection()
	f.Add(data, uint8(7))
	f.Add([]byte(http2.ClientPreface+"\x00\x00\x05\x01\x04\x00\x00\x00\x01\x82\x86\x44\x01a"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		var refused []string
		got, _ := guardedRead(t, data, []int{1 + int(chunk)}, 512, &refused)
		if len(got) > len(data) {
			t.Fatalf("output of %d bytes from %d", len(got), len(data))
		}
		for i := range got {
			if got[i] != data[i] && got[i] != 0xff {
				t.Fatalf("byte %d changed from %#x to %#x", i, data[i], got[i])
			}
		}
	})
}

// server serves the health service behind the guard with a 64 MiB
// server-wide limit.
func server(t *testing.T, inner credentials.TransportCredentials) string {
	t.Helper()
	var refused []string
	g := grpc.NewServer(grpc.MaxRecvMsgSize(64<<20),
		grpc.Creds(Credentials(inner, Options{Limit: limits, OnRefuse: func(m string) { refused = append(refused, m) }})))
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

func TestCredentials_RefusesAnOversizedRequestBeforeItsBodyArrives(t *testing.T) {
	addr := server(t, insecure.NewCredentials())
	// 1 MiB announced, none of it sent: grpc-go alone would wait for it.
	code, msg, err := h2test.Call(addr, check, nil, message(0, 1<<20, 0), 5*time.Second)
	if err != nil || code != codes.ResourceExhausted {
		t.Fatalf("oversized announcement: %v %q, %v; want ResourceExhausted at once", code, msg, err)
	}
	code, msg, err = h2test.Call(addr, check, nil, message(1, 10, 0), 5*time.Second)
	if err != nil || code != codes.ResourceExhausted {
		t.Fatalf("compressed request: %v %q, %v; want ResourceExhausted", code, msg, err)
	}
	// An unlimited method keeps the server-wide limit: it waits for the
	// announced body.
	if _, _, err := h2test.Call(addr, watch, nil, message(0, 1<<20, 0), 300*time.Millisecond); !errors.Is(err, h2test.ErrNoStatus) {
		t.Fatalf("unlimited method: %v; want it to wait for the message", err)
	}
}

func TestCredentials_ServesRealClientsOverTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	srv := &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "spiffe://test/server")}, MinVersion: tls.VersionTLS12}
	addr := server(t, credentials.NewTLS(srv))
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 20 {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("small request: %v", err)
		}
	}
	_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("s", 2*small)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("request over the method's limit: %v; want ResourceExhausted", err)
	}
	// The connection survives a refusal, and an unlimited method takes a
	// request far over the limited one's limit.
	st, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("w", 1<<20)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatalf("large request to an unlimited method: %v", err)
	}
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}
}

// BenchmarkConn_WriteTraffic measures the guard on what it mostly sees:
// large write messages of an unlimited method in 16 KiB DATA frames.
func BenchmarkConn_WriteTraffic(b *testing.B) {
	w := newWire()
	w.headers(1, watch, 0, false, false)
	frame := make([]byte, 16<<10)
	for range 256 {
		w.data(1, frame, false, false)
	}
	data := w.buf.Bytes()
	for _, guarded := range []bool{false, true} {
		b.Run(map[bool]string{false: "raw", true: "guarded"}[guarded], func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			buf := make([]byte, 32<<10)
			o := Options{Limit: limits}
			o.Validate()
			for b.Loop() {
				var r io.Reader = &chunkConn{data: data, chunks: []int{32 << 10}}
				if guarded {
					r = newConn(r.(*chunkConn), o)
				}
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
			}
		})
	}
}
