// Command loadgen is the load generator pod of make k8s-e2e. It writes
// InfluxDB line protocol to an edge node at a fixed rate and keeps a
// ledger of every point: acknowledged (the edge answered 2xx, so the point
// is durable) or in doubt (the request failed or timed out, so the point
// may or may not be stored). The harness reads the ledger over HTTP and
// compares it with what the coordinators answer.
//
// Every series gets one point per tick, with a timestamp strictly larger
// than its previous one, so a (series, timestamp) pair names one point.
//
//	GET  /ledger  the ledger as JSON (see ledger)
//	POST /stop    stop writing; the ledger is final once it answers
//	GET  /healthz 200 while the process runs
//
// Built static (CGO_ENABLED=0) into a FROM-scratch image.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// ledger is what GET /ledger answers. Timestamps are milliseconds.
type ledger struct {
	Acked    map[string][]int64 `json:"acked"`
	InDoubt  map[string][]int64 `json:"in_doubt"`
	Requests int                `json:"requests"`
	Failed   int                `json:"failed"`
	Stopped  bool               `json:"stopped"`
	LastErr  string             `json:"last_error,omitempty"`
	// Errors counts the failed requests by error message, at most
	// maxErrorKinds messages (further ones count under "other").
	Errors map[string]int `json:"errors,omitempty"`
}

// maxErrorKinds bounds the ledger's Errors map.
const maxErrorKinds = 32

type generator struct {
	url    string
	client *http.Client
	series int
	tick   time.Duration

	mu      sync.Mutex
	led     ledger
	stopped chan struct{}
	done    chan struct{}
	once    sync.Once
}

func main() {
	url := flag.String("url", "", "write URL of the edge, e.g. https://edge:7071/api/v2/write?bucket=e2e&precision=ms")
	caFile := flag.String("ca", "", "CA certificate that signs the edge's certificate (empty: plaintext or system roots)")
	serverName := flag.String("server-name", "", "name to verify in the edge's certificate")
	series := flag.Int("series", 10, "number of series; each gets one point per tick")
	tick := flag.Duration("tick", 100*time.Millisecond, "interval between writes")
	listen := flag.String("listen", ":8080", "address of the ledger API")
	flag.Parse()
	if *url == "" {
		log.Fatal("loadgen: -url is required")
	}
	tc := &tls.Config{ServerName: *serverName}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			log.Fatalf("loadgen: read CA: %v", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			log.Fatalf("loadgen: no certificate in %s", *caFile)
		}
	}
	g := &generator{
		url:     *url,
		client:  &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}},
		series:  *series,
		tick:    *tick,
		led:     ledger{Acked: map[string][]int64{}, InDoubt: map[string][]int64{}},
		stopped: make(chan struct{}),
		done:    make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /ledger", g.serveLedger)
	mux.HandleFunc("POST /stop", func(w http.ResponseWriter, r *http.Request) {
		g.stop()
		<-g.done
		io.WriteString(w, "stopped\n")
	})
	srv := &http.Server{Addr: *listen, Handler: mux}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Fatalf("loadgen: %v", err)
		}
	}()
	go g.run()
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	<-ctx.Done()
	g.stop()
	<-g.done
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	srv.Shutdown(sctx)
}

func (g *generator) stop() { g.once.Do(func() { close(g.stopped) }) }

// run writes one point per series per tick until stopped. Requests are
// sequential: a slow edge slows the generator instead of piling up
// requests, and the ledger stays exact.
func (g *generator) run() {
	defer close(g.done)
	t := time.NewTicker(g.tick)
	defer t.Stop()
	var lastMs int64
	for {
		select {
		case <-g.stopped:
			g.mu.Lock()
			g.led.Stopped = true
			g.mu.Unlock()
			return
		case <-t.C:
		}
		ms := time.Now().UnixMilli()
		if ms <= lastMs {
			ms = lastMs + 1
		}
		lastMs = ms
		var body bytes.Buffer
		for s := range g.series {
			// The value is the timestamp: a point answered under the wrong
			// timestamp is visible.
			fmt.Fprintf(&body, "k8se2e,series=s%03d v=%d %d\n", s, ms, ms)
		}
		err := g.post(body.Bytes())
		g.mu.Lock()
		g.led.Requests++
		m := g.led.Acked
		if err != nil {
			g.led.Failed++
			g.led.LastErr = err.Error()
			g.led.countError(err.Error())
			m = g.led.InDoubt
			// The pod log says when each failure happened.
			log.Printf("loadgen: write of %d points at %d failed: %v", g.series, ms, err)
		}
		for s := range g.series {
			k := fmt.Sprintf("s%03d", s)
			m[k] = append(m[k], ms)
		}
		g.mu.Unlock()
	}
}

// countError counts one failed request under its message.
func (l *ledger) countError(msg string) {
	if l.Errors == nil {
		l.Errors = map[string]int{}
	}
	if _, ok := l.Errors[msg]; !ok && len(l.Errors) >= maxErrorKinds {
		msg = "other"
	}
	l.Errors[msg]++
}

func (g *generator) post(body []byte) error {
	resp, err := g.client.Post(g.url, "text/plain; charset=utf-8", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("write: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

func (g *generator) serveLedger(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(&g.led)
}
