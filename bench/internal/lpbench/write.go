package lpbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/workload"
)

// batch is one prepared write request body.
type batch struct {
	body  []byte
	lines int
}

// buildBatches renders the whole workload before the timed phase: client c
// gets the lines of its own contiguous group of hosts, in time order, cut
// into bodies of batchLines lines. Each body is allocated once at its final
// size, so the ~350 bytes a line cost nothing more.
func buildBatches(g *workload.TSBSCPU, clients, batchLines int) [][]batch {
	out := make([][]batch, clients)
	for c := range clients {
		s := g.Stream(c*g.Hosts()/clients, (c+1)*g.Hosts()/clients)
		maxLine := s.MaxLineBytes()
		for s.Remaining() > 0 {
			n := int(min(int64(batchLines), s.Remaining()))
			body, k := s.AppendLines(make([]byte, 0, n*maxLine), n)
			if k != n {
				panic(fmt.Sprintf("BUG: stream gave %d lines, want %d", k, n))
			}
			out[c] = append(out[c], batch{body: body, lines: n})
		}
	}
	return out
}

// newHTTPClient is one benchmark client: its own transport, so its own
// keep-alive connection, no proxy, and no gzip, so that neither side spends
// CPU on compression.
func newHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        1,
			MaxIdleConnsPerHost: 1,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
			// Large writes: fewer, larger write syscalls for multi-MiB bodies.
			WriteBufferSize: 256 << 10,
			ReadBufferSize:  64 << 10,
		},
	}
}

// closeClients closes the clients' idle connections.
// newHTTPClients is n clients of newHTTPClient, each with its own
// connection; closeClients releases them.
func newHTTPClients(n int, timeout time.Duration) []*http.Client {
	cs := make([]*http.Client, n)
	for c := range cs {
		cs[c] = newHTTPClient(timeout)
	}
	return cs
}

func closeClients(cs []*http.Client) {
	for _, c := range cs {
		c.CloseIdleConnections()
	}
}

// writeConfig describes the write phase.
type writeConfig struct {
	// URL is the full write URL, query string included.
	URL string
	// Batches[c] is sent by client c, in order.
	Batches [][]batch
	// CallTimeout bounds one request.
	CallTimeout time.Duration
	// NodeExited, when closed, ends the phase at once with errNodeExited.
	NodeExited <-chan struct{}
}

// writeStats is what the write phase measured.
type writeStats struct {
	Lines    int64
	Requests int64
	Elapsed  time.Duration
	// Latencies holds every request's round trip.
	Latencies []time.Duration
	// WaitTime is the clients' total time inside requests.
	WaitTime time.Duration
}

// errNodeExited ends a phase whose node died.
var errNodeExited = errors.New("the node process exited")

// maxErrorBody is how much of a failed response's body an error quotes.
const maxErrorBody = 2 << 10

// runWrites sends every batch, each client on its own connection, and
// fails on the first response that is not 204 No Content.
func runWrites(ctx context.Context, cfg writeConfig) (writeStats, error) {
	ctx, stop := watchNode(ctx, cfg.NodeExited)
	defer stop(nil)
	var (
		mu       sync.Mutex
		total    writeStats
		firstErr error
		wg       sync.WaitGroup
	)
	clients := newHTTPClients(len(cfg.Batches), cfg.CallTimeout)
	defer closeClients(clients)
	start := time.Now()
	for c := range cfg.Batches {
		wg.Go(func() {
			st, err := writeClient(ctx, clients[c], cfg.URL, c, cfg.Batches[c])
			mu.Lock()
			defer mu.Unlock()
			total.Lines += st.Lines
			total.Requests += st.Requests
			total.Latencies = append(total.Latencies, st.Latencies...)
			total.WaitTime += st.WaitTime
			if err != nil && firstErr == nil {
				firstErr = err
				stop(err)
			}
		})
	}
	wg.Wait()
	total.Elapsed = time.Since(start)
	return total, phaseError(ctx, firstErr)
}

func writeClient(ctx context.Context, hc *http.Client, url string, c int, batches []batch) (writeStats, error) {
	var st writeStats
	for i, b := range batches {
		if ctx.Err() != nil {
			return st, nil // another client failed, or the node died
		}
		t0 := time.Now()
		err := Post(ctx, hc, url, b.body)
		lat := time.Since(t0)
		st.WaitTime += lat
		if err != nil {
			if ctx.Err() != nil {
				return st, nil
			}
			return st, fmt.Errorf("client %d, request %d of %d (%d lines, %d bytes): %w", c, i+1, len(batches), b.lines, len(b.body), err)
		}
		st.Lines += int64(b.lines)
		st.Requests++
		st.Latencies = append(st.Latencies, lat)
	}
	return st, nil
}

// Post sends one line-protocol body to url and requires 204 No Content.
func Post(ctx context.Context, hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", req.URL.Path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return fmt.Errorf("POST %s: status %s, want 204 No Content: %s", req.URL.Path, resp.Status, bytes.TrimSpace(msg))
	}
	// Drain so the connection is reused.
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// watchNode returns a context that ends when nodeExited closes (with cause
// errNodeExited) or stop is called.
func watchNode(ctx context.Context, nodeExited <-chan struct{}) (context.Context, func(error)) {
	ctx, cancel := context.WithCancelCause(ctx)
	if nodeExited == nil {
		return ctx, cancel
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-nodeExited:
			cancel(errNodeExited)
		case <-ctx.Done():
		}
	}()
	var once sync.Once
	return ctx, func(err error) {
		cancel(err)
		once.Do(func() { <-done })
	}
}

// phaseError is the error a phase ends with: the first client error, or
// why the context ended early.
func phaseError(ctx context.Context, firstErr error) error {
	if firstErr != nil {
		return firstErr
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	}
	return nil
}
