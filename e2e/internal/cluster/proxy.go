package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/tributarydb/tributary/internal/loopback"
)

// FaultProxy is an in-process TCP proxy (toxiproxy, used as a library) in
// front of one upstream address, for link faults between an edge and a
// coordinator's intake: Cut closes the listener and every connection
// through it, Heal listens again on the same address, and toxics (named
// by the toxiproxy toxic types: "timeout", "limit_data", "reset_peer",
// "latency", ...) act on the connections that pass, including those
// already open.
//
// Its methods are safe for concurrent use. Close it when the test ends.
type FaultProxy struct {
	Name     string
	Listen   string // the address to dial instead of Upstream
	Upstream string

	mu    sync.Mutex
	proxy *toxiproxy.Proxy
	cut   bool
}

// NewFaultProxy starts a proxy on a free loopback port that forwards to
// upstream.
func NewFaultProxy(name, upstream string) (*FaultProxy, error) {
	addrs, err := loopback.FreePorts(1)
	if err != nil {
		return nil, fmt.Errorf("fault proxy %s: %w", name, err)
	}
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, name, addrs[0], upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("fault proxy %s: listen on %s: %w", name, addrs[0], err)
	}
	return &FaultProxy{Name: name, Listen: p.Listen, Upstream: upstream, proxy: p}, nil
}

// Cut stops accepting and closes every open connection: the peer sees a
// refused dial until Heal.
func (f *FaultProxy) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proxy.Stop()
	f.cut = true
}

// Heal listens again on the same address after Cut.
func (f *FaultProxy) Heal() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.cut {
		return nil
	}
	if err := f.proxy.Start(); err != nil {
		return fmt.Errorf("fault proxy %s: listen again on %s: %w", f.Name, f.Listen, err)
	}
	f.cut = false
	return nil
}

// AddToxic adds a toxic of type typ (a toxiproxy toxic type) named name on
// stream "upstream" (towards Upstream) or "downstream" (back to the
// client), with the toxic's attributes (for instance {"timeout": 0} or
// {"bytes": 4096}).
func (f *FaultProxy) AddToxic(name, typ, stream string, attrs map[string]any) error {
	if stream != "upstream" && stream != "downstream" {
		return fmt.Errorf("fault proxy %s: toxic %s: stream %q is neither upstream nor downstream", f.Name, name, stream)
	}
	body, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs})
	if err != nil {
		return fmt.Errorf("fault proxy %s: toxic %s: %w", f.Name, name, err)
	}
	if _, err := f.proxy.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
		return fmt.Errorf("fault proxy %s: add toxic %s (%s, %s): %w", f.Name, name, typ, stream, err)
	}
	return nil
}

// RemoveToxic removes the toxic named name.
func (f *FaultProxy) RemoveToxic(name string) error {
	if err := f.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("fault proxy %s: remove toxic %s: %w", f.Name, name, err)
	}
	return nil
}

// Close removes every toxic and stops the proxy.
func (f *FaultProxy) Close() {
	f.proxy.Toxics.ResetToxics(context.Background())
	f.mu.Lock()
	defer f.mu.Unlock()
	f.proxy.Stop()
	f.cut = true
}
