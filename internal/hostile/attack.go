package hostile

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The attacks below play a client on the network against the listeners
// of real processes (the e2e scenarios and tribench hostile): each sends
// what a hostile client would and judges what came back against the
// refusal the listener documents. They run from a local address of their
// own (a loopback alias such as 127.0.0.2), so that the per-address
// connection caps count them apart from the legitimate clients.

// Verdict is how a hostile request ended, seen from the client.
type Verdict int

const (
	// Refused: the server refused it the way its limit documents (the
	// expected status code and a message that names the reason).
	Refused Verdict = iota
	// Accepted: the server took it. A hostile request never should be.
	Accepted
	// Unclear: it failed, but not with the documented refusal (a time
	// out, a reset connection, another code or message).
	Unclear
)

func (v Verdict) String() string {
	switch v {
	case Refused:
		return "refused"
	case Accepted:
		return "accepted"
	default:
		return "unclear"
	}
}

// Outcome is one hostile request's end.
type Outcome struct {
	Attack  string // the attack's name, e.g. "unauthenticated-write"
	Target  string // the address attacked
	Verdict Verdict
	Detail  string        // what the client saw: status and message, HTTP status and body
	Took    time.Duration // from the start of the request to its end
}

// Tally adds up the outcomes of one attack on one target.
type Tally struct {
	Attack, Target             string
	Refused, Accepted, Unclear int
	Slowest                    time.Duration
	// Example is the detail of the first accepted or unclear outcome, or
	// else of the first refusal.
	Example string
}

// Total is the number of outcomes counted.
func (t Tally) Total() int { return t.Refused + t.Accepted + t.Unclear }

// Summarize tallies outcomes by attack and target, in the order first
// seen.
func Summarize(outs []Outcome) []Tally {
	var tallies []Tally
	idx := map[[2]string]int{}
	for _, o := range outs {
		k := [2]string{o.Attack, o.Target}
		i, ok := idx[k]
		if !ok {
			i = len(tallies)
			idx[k] = i
			tallies = append(tallies, Tally{Attack: o.Attack, Target: o.Target})
		}
		t := &tallies[i]
		switch o.Verdict {
		case Refused:
			t.Refused++
			if t.Example == "" {
				t.Example = o.Detail
			}
		case Accepted:
			if t.Accepted+t.Unclear == 0 {
				t.Example = o.Detail
			}
			t.Accepted++
		default:
			if t.Accepted+t.Unclear == 0 {
				t.Example = o.Detail
			}
			t.Unclear++
		}
		t.Slowest = max(t.Slowest, o.Took)
	}
	return tallies
}

// Refusal is the refusal an attack expects: one of Codes, with a message
// containing one of Words (case-insensitive; no Words: any message).
// Handshake, when set, also accepts a connection the server refused in
// the TLS handshake (gRPC reports it as UNAVAILABLE naming the TLS alert
// or the certificate).
type Refusal struct {
	Codes     []codes.Code
	Words     []string
	Handshake bool
}

// Judge classifies a call's error.
func (r Refusal) Judge(err error) (Verdict, string) {
	if err == nil {
		return Accepted, "OK"
	}
	st, _ := status.FromError(err)
	detail := st.Code().String() + ": " + st.Message()
	msg := strings.ToLower(st.Message())
	if r.Handshake && st.Code() == codes.Unavailable {
		switch {
		case strings.Contains(msg, "tls:") || strings.Contains(msg, "certificate"):
			return Refused, detail
		case strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset"):
			// TLS 1.3: the client's side of the handshake ends before the
			// server has checked the client's certificate, so the client
			// writes its first frames while the server's alert and close
			// are on their way, and meets a closed connection.
			return Refused, detail + " (closed in the TLS handshake before the client read the server's alert)"
		}
	}
	if !slices.Contains(r.Codes, st.Code()) {
		return Unclear, detail
	}
	if len(r.Words) == 0 {
		return Refused, detail
	}
	for _, w := range r.Words {
		if strings.Contains(msg, strings.ToLower(w)) {
			return Refused, detail
		}
	}
	return Unclear, detail
}

// Refusals of the listeners, as documented in docs/security.md.
var (
	// NoToken: a call without a token on a client listener.
	NoToken = Refusal{Codes: []codes.Code{codes.Unauthenticated}, Words: []string{"token"}}
	// NotAMember: a stream on the cluster listener from a certificate the
	// peer CA did not sign (refused in the handshake) or that names no
	// member (refused by the tap).
	NotAMember = Refusal{Codes: []codes.Code{codes.PermissionDenied, codes.Unauthenticated}, Words: []string{"member", "certificate"}, Handshake: true}
	// TooLarge: a message over the method's limit, refused from its header.
	TooLarge = Refusal{Codes: []codes.Code{codes.ResourceExhausted}, Words: []string{"larger than max"}}
	// Revoked: a stream from a revoked edge on the intake.
	Revoked = Refusal{Codes: []codes.Code{codes.PermissionDenied}, Words: []string{"revoked"}}
)

// Call is a gRPC method a hostile client calls with one message of any
// size (a client stream's first message).
type Call struct {
	Name       string // for outcomes
	FullMethod string
	Stream     *grpc.StreamDesc // nil: unary
}

// The methods the attacks call.
var (
	CallWrite        = Call{"write", pb.WriteService_Write_FullMethodName, nil}
	CallRaftSend     = Call{"raft-send", clusterv1.RaftService_Send_FullMethodName, &clusterv1.RaftService_ServiceDesc.Streams[0]}
	CallReplicaStore = Call{"replica-store", clusterv1.ReplicaService_Store_FullMethodName, nil}
	CallShip         = Call{"ship", pb.ReplicationService_Ship_FullMethodName, &grpc.StreamDesc{StreamName: "Ship", ClientStreams: true, ServerStreams: true}}
)

// Target is a listener and how a hostile client reaches it.
type Target struct {
	Addr string
	// TLS is the client configuration (nil: plaintext). Its Certificates
	// are what the attacker presents.
	TLS *tls.Config
	// LocalIP is the address the client dials from ("": any).
	LocalIP string
	// Conns is how many connections the calls are spread over (default
	// 1; at most the server's streams per connection are in flight on
	// each).
	Conns int
	// Metadata is sent with every call (for example a token).
	Metadata map[string]string
}

func (t Target) dialer() *net.Dialer {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if t.LocalIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(t.LocalIP)}
	}
	return d
}

func (t Target) conns() ([]*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if t.TLS != nil {
		creds = credentials.NewTLS(t.TLS)
	}
	d := t.dialer()
	out := make([]*grpc.ClientConn, max(t.Conns, 1))
	for i := range out {
		c, err := grpc.NewClient(t.Addr, grpc.WithTransportCredentials(creds),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return d.DialContext(ctx, "tcp", addr)
			}))
		if err != nil {
			for _, c := range out[:i] {
				c.Close()
			}
			return nil, fmt.Errorf("dial %s: %w", t.Addr, err)
		}
		out[i] = c
	}
	return out, nil
}

// GRPC makes n concurrent calls of c on t, each sending one message of
// size bytes (from one shared buffer: the client holds almost nothing),
// and judges each end with want. Each call is given timeout.
func GRPC(ctx context.Context, name string, t Target, c Call, n, size int, want Refusal, timeout time.Duration) ([]Outcome, error) {
	conns, err := t.conns()
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	outs := make([]Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			for k, v := range t.Metadata {
				cctx = metadata.AppendToOutgoingContext(cctx, k, v)
			}
			start := time.Now()
			err := call(cctx, conns[i%len(conns)], c, size)
			v, detail := want.Judge(err)
			outs[i] = Outcome{Attack: name, Target: t.Addr, Verdict: v, Detail: detail, Took: time.Since(start)}
		})
	}
	wg.Wait()
	return outs, nil
}

// call sends one message of size bytes on c and returns how the call
// ended (nil: the server answered OK).
func call(ctx context.Context, conn *grpc.ClientConn, c Call, size int) error {
	if c.Stream == nil {
		return conn.Invoke(ctx, c.FullMethod, struct{}{}, struct{}{}, CallOption(size))
	}
	s, err := conn.NewStream(ctx, c.Stream, c.FullMethod, CallOption(size))
	if err != nil {
		return err
	}
	if err := s.SendMsg(struct{}{}); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	s.CloseSend()
	for {
		if err := s.RecvMsg(struct{}{}); err != nil {
			if errors.Is(err, io.EOF) {
				return nil // the server ended the stream OK
			}
			return err
		}
	}
}

// LongLineBody is a line of line protocol of fields fields ("m
// 0000000=0,0000001=0,..."), ten bytes a field: 2,000,000 fields make a
// 20 MB line.
func LongLineBody(fields int) []byte {
	var b bytes.Buffer
	b.Grow(fields*10 + 16)
	b.WriteString("hostile_line ")
	for i := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%07d=0", i%10_000_000)
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// HTTPTarget is an HTTP endpoint and how a hostile client reaches it.
type HTTPTarget struct {
	URL     string // e.g. https://127.0.0.1:7071/write?db=x
	TLS     *tls.Config
	LocalIP string
	Token   string // sent as Authorization: Bearer
}

// HTTPPosts sends n concurrent POSTs of body to t, each on a connection
// of its own, and judges each answer: a status in refuse whose body
// contains one of words is Refused, a 2xx Accepted, anything else
// Unclear.
func HTTPPosts(ctx context.Context, name string, t HTTPTarget, n int, body []byte, refuse []int, words []string, timeout time.Duration) []Outcome {
	d := (&Target{LocalIP: t.LocalIP}).dialer()
	tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: t.TLS, DisableKeepAlives: true,
		MaxIdleConns: -1, ForceAttemptHTTP2: false}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: timeout}
	outs := make([]Outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			v, detail := post(ctx, client, t, body, refuse, words)
			outs[i] = Outcome{Attack: name, Target: t.URL, Verdict: v, Detail: detail, Took: time.Since(start)}
		})
	}
	wg.Wait()
	return outs
}

func post(ctx context.Context, client *http.Client, t HTTPTarget, body []byte, refuse []int, words []string) (Verdict, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return Unclear, err.Error()
	}
	if t.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Unclear, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	detail := fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	switch {
	case resp.StatusCode/100 == 2:
		return Accepted, detail
	case !slices.Contains(refuse, resp.StatusCode):
		return Unclear, detail
	}
	lower := strings.ToLower(string(b))
	for _, w := range words {
		if strings.Contains(lower, strings.ToLower(w)) {
			return Refused, detail
		}
	}
	return Unclear, detail
}

// HalfOpen describes connections opened to a TLS listener that send the
// first bytes of a ClientHello and then nothing.
type HalfOpen struct {
	Addr     string
	LocalIPs []string // dialled from in turn ("" or none: any)
	Conns    int
	// Parallel dials at once (default 64).
	Parallel int
	// Hold is how long they are held after the last was opened, waiting
	// for the server to close them (it should within its handshake
	// timeout).
	Hold time.Duration
	// AtOnce is the time within which a close counts as "at accept"
	// (default 1s).
	AtOnce time.Duration
}

// HalfOpenResult is what became of the connections.
type HalfOpenResult struct {
	Addr       string
	Dialled    int // connections asked for
	DialFailed int // the connection itself failed (refused, timed out)
	// ClosedAtOnce: the server closed them within AtOnce of the dial (a
	// connection cap); ClosedLater: after that (its handshake timeout).
	ClosedAtOnce, ClosedLater int
	// StillOpen: the server kept them past Hold.
	StillOpen int
	// PeakHeld is the most connections held open by the server at one
	// time (open for longer than AtOnce).
	PeakHeld int
	// LongestHeld is the longest time the server kept one before closing.
	LongestHeld  time.Duration
	FirstDialErr string
}

// Refused is the number of connections the server closed.
func (r HalfOpenResult) Refused() int { return r.ClosedAtOnce + r.ClosedLater }

// clientHelloStart is a TLS record header announcing a 512-byte
// handshake record and the first bytes of a ClientHello: the server's TLS
// stack waits for the rest.
var clientHelloStart = []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}

// HalfOpenHandshakes opens o.Conns connections as o describes and
// reports what the server did with them. It returns when every
// connection was closed by the server, or Hold after the last dial, or
// when ctx ends; it closes whatever is left.
func HalfOpenHandshakes(ctx context.Context, o HalfOpen) HalfOpenResult {
	if o.Parallel <= 0 {
		o.Parallel = 64
	}
	if o.AtOnce <= 0 {
		o.AtOnce = time.Second
	}
	h := &halfOpen{o: o, res: HalfOpenResult{Addr: o.Addr, Dialled: o.Conns}, closed: make(chan struct{}, o.Conns)}
	h.dialAll(ctx)
	h.wait(ctx)
	h.closeRest()
	return h.res
}

// halfOpen is one run of HalfOpenHandshakes: the dialers and the watchers
// of the connections open, and what they saw.
type halfOpen struct {
	o HalfOpen

	mu   sync.Mutex
	res  HalfOpenResult // REQUIRES: mu held
	open []net.Conn     // REQUIRES: mu held
	held int            // open for longer than AtOnce, not yet closed; REQUIRES: mu held
	// stopped is set when Hold ended: what is open then is closed by us
	// and counted in StillOpen. REQUIRES: mu held.
	stopped bool
	// closed gets one value per connection that ended before Hold: closed
	// by the server, refused, or not dialled.
	closed chan struct{}
	wg     sync.WaitGroup // the watchers
}

// dialAll dials o.Conns connections, o.Parallel at a time, and starts a
// watcher on each one opened.
func (h *halfOpen) dialAll(ctx context.Context) {
	dialers := make([]*net.Dialer, max(len(h.o.LocalIPs), 1))
	for i := range dialers {
		ip := ""
		if i < len(h.o.LocalIPs) {
			ip = h.o.LocalIPs[i]
		}
		dialers[i] = (&Target{LocalIP: ip}).dialer()
	}
	sem := make(chan struct{}, h.o.Parallel)
	var dials sync.WaitGroup
	for i := range h.o.Conns {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		dials.Go(func() {
			defer func() { <-sem }()
			h.dial(ctx, dialers[i%len(dialers)])
		})
	}
	dials.Wait()
}

// dial opens one connection and sends the start of a ClientHello on it.
func (h *halfOpen) dial(ctx context.Context, d *net.Dialer) {
	start := time.Now()
	c, err := d.DialContext(ctx, "tcp", h.o.Addr)
	if err == nil {
		if _, err = c.Write(clientHelloStart); err != nil {
			// Closed at accept before our first bytes arrived.
			c.Close()
			h.mu.Lock()
			h.res.ClosedAtOnce++
			h.mu.Unlock()
			h.closed <- struct{}{}
			return
		}
	}
	if err != nil {
		h.mu.Lock()
		h.res.DialFailed++
		if h.res.FirstDialErr == "" {
			h.res.FirstDialErr = err.Error()
		}
		h.mu.Unlock()
		h.closed <- struct{}{}
		return
	}
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		c.Close()
		return
	}
	h.open = append(h.open, c)
	h.mu.Unlock()
	h.wg.Add(1)
	go h.watch(c, start)
}

// watch reads c until the server closes it (or we do, after Hold), and
// counts how long the server kept it.
func (h *halfOpen) watch(c net.Conn, opened time.Time) {
	defer h.wg.Done()
	// Counted as held once it outlives AtOnce.
	heldTimer := time.AfterFunc(h.o.AtOnce, func() {
		h.mu.Lock()
		h.held++
		h.res.PeakHeld = max(h.res.PeakHeld, h.held)
		h.mu.Unlock()
	})
	var b [64]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			break // EOF, reset, or closed by us at the end
		}
	}
	took := time.Since(opened)
	wasHeld := !heldTimer.Stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	if wasHeld {
		h.held--
	}
	if h.stopped {
		return // closed by us: still open when Hold ended
	}
	if took <= h.o.AtOnce {
		h.res.ClosedAtOnce++
	} else {
		h.res.ClosedLater++
		h.res.LongestHeld = max(h.res.LongestHeld, took)
	}
	h.closed <- struct{}{}
}

// wait returns once every connection has ended, Hold has passed, or ctx
// has ended.
func (h *halfOpen) wait(ctx context.Context) {
	deadline := time.NewTimer(h.o.Hold)
	defer deadline.Stop()
	for done := 0; done < h.o.Conns; done++ {
		select {
		case <-h.closed:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// closeRest counts what is still open, closes it and waits for the
// watchers.
func (h *halfOpen) closeRest() {
	h.mu.Lock()
	h.stopped = true
	h.res.StillOpen = h.o.Conns - h.res.DialFailed - h.res.ClosedAtOnce - h.res.ClosedLater
	conns := h.open
	h.open = nil
	h.mu.Unlock()
	// Whatever is left is closed by us: mark the watchers' reads as ours.
	for _, c := range conns {
		c.SetReadDeadline(time.Now())
	}
	h.wg.Wait()
	for _, c := range conns {
		c.Close()
	}
}
