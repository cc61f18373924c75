package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The hostile-client tests start a token-protected node in this process,
// send it many huge requests without a token, and watch this process's
// heap: the requests must be refused Unauthenticated (401) without the
// server buffering their bodies.

const (
	hostileToken    = "hostile-test-token-0123456789"
	hostileCalls    = 100
	hostileBodySize = 64 << 20
	// heapBound is the growth allowed while the calls run; one buffered
	// body alone exceeds it.
	heapBound = 64 << 20
)

// heapWatch samples the heap's object bytes (live and not yet swept)
// every few milliseconds until stopped, and calls over once if it grows
// past bound above its baseline, so that a failing run is stopped before
// it exhausts the machine's memory.
type heapWatch struct {
	base, peak uint64
	stop       chan struct{}
	done       chan struct{}
}

func heapObjectBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func watchHeap(t *testing.T, bound uint64, over func()) *heapWatch {
	t.Helper()
	// A low GC target keeps garbage from counting as growth.
	old := debug.SetGCPercent(10)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	runtime.GC()
	w := &heapWatch{base: heapObjectBytes(), stop: make(chan struct{}), done: make(chan struct{})}
	w.peak = w.base
	go func() {
		defer close(w.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		fired := false
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			if h := heapObjectBytes(); h > w.peak {
				w.peak = h
				if !fired && h > w.base+bound {
					fired = true
					over()
				}
			}
		}
	}()
	return w
}

// growth stops the watch and returns the peak growth over the baseline.
func (w *heapWatch) growth() uint64 {
	close(w.stop)
	<-w.done
	return w.peak - w.base
}

// rawCodec sends a pre-encoded message without copying it, so that the
// client side of the test holds one body for all its calls.
type rawCodec struct{}

type rawMessage []byte

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawMessage); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (rawCodec) Name() string { return "proto" }

var _ encoding.CodecV2 = rawCodec{}

// hugeWriteRequest is a valid WriteRequest of about size bytes: one
// unknown length-delimited field.
func hugeWriteRequest(size int) rawMessage {
	const field = 1000
	n := size - protowire.SizeTag(field) - protowire.SizeVarint(uint64(size))
	b := protowire.AppendTag(make([]byte, 0, size), field, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	return append(b, make([]byte, n)...)
}

func startHostileTarget(t *testing.T, sf *serveFlags) map[string]string {
	t.Helper()
	t.Setenv("TRIBUTARY_TOKEN", hostileToken)
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	fe, err := sf.start(n, testNodeAPI(n, "test").Register, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fe.stop(time.Second) })
	addr := map[string]string{}
	for i := 0; i+1 < len(fe.addrs); i += 2 {
		addr[fe.addrs[i].(string)] = fe.addrs[i+1].(string)
	}
	return addr
}

func TestServe_UnauthenticatedHugeGRPCWritesAreRefusedBeforeTheyAreRead(t *testing.T) {
	if testing.Short() {
		t.Skip("moves gigabytes over loopback")
	}
	addr := startHostileTarget(t, &serveFlags{grpcListen: "127.0.0.1:0"})
	body := hugeWriteRequest(hostileBodySize - 1024)
	const conns = 10
	ccs := make([]*grpc.ClientConn, conns)
	for i := range ccs {
		cc, err := grpc.NewClient(addr["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(hostileBodySize), grpc.ForceCodecV2(rawCodec{})))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ccs[i] = cc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := watchHeap(t, heapBound, cancel)
	start := time.Now()
	codesSeen := make([]error, hostileCalls)
	var wg sync.WaitGroup
	for i := range hostileCalls {
		wg.Go(func() {
			codesSeen[i] = ccs[i%conns].Invoke(ctx, pb.WriteService_Write_FullMethodName, body, &pb.WriteResponse{})
		})
	}
	wg.Wait()
	took := time.Since(start)
	grew := w.growth()
	if grew > heapBound {
		t.Errorf("heap grew by %d MiB while %d unauthenticated %d MiB writes ran; want at most %d MiB",
			grew>>20, hostileCalls, hostileBodySize>>20, heapBound>>20)
	}
	for i, err := range codesSeen {
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("call %d: %v; want Unauthenticated", i, err)
			break
		}
	}
	if took > 10*time.Second {
		t.Errorf("the refusals took %v; want them quick", took)
	}
	t.Logf("%d calls refused in %v; heap growth %.1f MiB", hostileCalls, took, float64(grew)/(1<<20))
}

// zeroReader yields n zero bytes without holding them.
type zeroReader struct{ n int64 }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), z.n)]
	clear(p)
	z.n -= int64(len(p))
	return len(p), nil
}

func TestServe_UnauthenticatedHugeHTTPWritesAreRefusedBeforeTheyAreRead(t *testing.T) {
	if testing.Short() {
		t.Skip("moves gigabytes over loopback")
	}
	sf := &serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0"}
	sf.limits.MaxBodyBytes = hostileBodySize
	// One connection per request, all from loopback: the per-address
	// bound is another test's subject.
	sf.conn.maxConnsPerIP = 2 * hostileCalls
	addr := startHostileTarget(t, sf)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, ExpectContinueTimeout: 10 * time.Second}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := watchHeap(t, heapBound, cancel)
	paths := []string{"/write?db=x", "/api/v1/write", "/api/v2/write?bucket=x", "/api/put"}
	results := make([]error, hostileCalls)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range hostileCalls {
		wg.Go(func() {
			path := paths[i%len(paths)]
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr["http"]+path, &zeroReader{n: hostileBodySize})
			if err != nil {
				results[i] = err
				return
			}
			req.ContentLength = hostileBodySize
			req.Header.Set("Content-Encoding", []string{"", "gzip"}[i/len(paths)%2])
			// A polite client waits for "100 Continue" and must be told
			// 401 without sending its body; an impolite one may instead
			// see the connection closed under its upload.
			polite := i/(2*len(paths))%2 == 0
			if polite {
				req.Header.Set("Expect", "100-continue")
			}
			resp, err := hc.Do(req)
			if err != nil {
				if !polite && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
					return
				}
				results[i] = fmt.Errorf("%s: %w", path, err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				results[i] = fmt.Errorf("%s: status %d, want 401", path, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	grew := w.growth()
	if grew > heapBound {
		t.Errorf("heap grew by %d MiB while %d unauthenticated %d MiB bodies were posted; want at most %d MiB",
			grew>>20, hostileCalls, hostileBodySize>>20, heapBound>>20)
	}
	if err := errors.Join(results...); err != nil {
		t.Errorf("requests not refused 401: %v", err)
	}
	if took > 10*time.Second {
		t.Errorf("the refusals took %v; want them quick", took)
	}
	t.Logf("%d requests refused in %v; heap growth %.1f MiB", hostileCalls, took, float64(grew)/(1<<20))
}
