package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tributarydb/tributary/internal/loopback"
	"github.com/tributarydb/tributary/internal/promtext"
)

// Options describe a fleet of coordinators and one edge.
type Options struct {
	Bin           string        // the tributary binary (required)
	Dir           string        // data directories and logs go under it (required)
	Coordinators  int           // raft members; default 3
	EdgeID        string        // default "edge-1"
	WALSegmentAge time.Duration // the edge's --wal-segment-age; default 1s
	ReadyTimeout  time.Duration // wait for a ready line; default 30s
	LogLevel      string        // --log-level of every process; default "info"
	Logger        *slog.Logger  // progress messages; default: discarded
	// EdgeTargets maps the coordinators' intake addresses to the edge's
	// --replicate-to list (for instance, fault proxies in front of them);
	// nil ships to the intakes directly. It is called once, by New.
	EdgeTargets func(intakes []string) ([]string, error)
	// EdgeArgs are appended to the edge's command line (later flags win).
	EdgeArgs []string
	// ClusterTargets maps the coordinators' cluster listen addresses to the
	// addresses the others dial (--peers and --cluster-advertise; for
	// instance, fault proxies in front of them); nil: the listen
	// addresses. It is called once, by New.
	ClusterTargets func(clusterAddrs []string) ([]string, error)
	// Security, when set, runs the fleet as production runs it (see
	// PKI): TLS and tokens everywhere; nil: plaintext on loopback.
	Security *PKI
}

// WithDefaults returns o with every unset field given its default.
func (o Options) WithDefaults() Options {
	if o.Coordinators == 0 {
		o.Coordinators = 3
	}
	if o.EdgeID == "" {
		o.EdgeID = "edge-1"
	}
	if o.WALSegmentAge == 0 {
		o.WALSegmentAge = time.Second
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 30 * time.Second
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Validate reports every bad field of o (after defaults).
func (o Options) Validate() error {
	bad := o.processProblems()
	if o.Coordinators < 1 {
		bad = append(bad, fmt.Sprintf("Coordinators %d is below 1", o.Coordinators))
	}
	if len(bad) > 0 {
		return fmt.Errorf("cluster options: %s", strings.Join(bad, "; "))
	}
	return nil
}

// processProblems lists what is wrong with the fields that say how every
// process of a fleet runs (those HostsOptions shares).
func (o Options) processProblems() []string {
	var bad []string
	if o.Bin == "" {
		bad = append(bad, "Bin is empty")
	}
	if o.Dir == "" {
		bad = append(bad, "Dir is empty")
	}
	if o.WALSegmentAge < 0 || o.ReadyTimeout < 0 {
		bad = append(bad, "WALSegmentAge and ReadyTimeout must not be negative")
	}
	return bad
}

// Coordinator is one coordinator process and its addresses.
type Coordinator struct {
	*Process
	ID      string
	RaftID  uint64
	Cluster string // --cluster-listen
	Intake  string // --intake-listen
	GRPC    string // --listen (QueryService)
	HTTP    string // --http-listen (GET /api/v1/fleet)
}

// Edge is one edge node process and its addresses.
type Edge struct {
	*Process
	ID   string
	GRPC string // --listen (WriteService, QueryService)
	HTTP string // --http-listen (GET /metrics)
}

// Cluster is a running fleet.
type Cluster struct {
	Opts         Options
	Coordinators []*Coordinator
	Edge         *Edge
	// More are the edges added by AddEdge.
	More []*Edge
	// Edges lists every edge of a fleet of several (NewHosts); Edge is
	// then the first. Nil for a fleet of one edge.
	Edges []*Edge
	http  *http.Client
	hosts *hostLayout // NewHosts only: how to lay out more coordinators
}

// New lays out the fleet's command lines and ports; nothing is started.
func New(o Options) (*Cluster, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	n := o.Coordinators
	addrs, err := loopback.FreePorts(4*n + 2)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Opts: o, http: &http.Client{Timeout: 10 * time.Second}}
	if o.Security != nil {
		c.http.Transport = &http.Transport{TLSClientConfig: o.Security.ClientTLS()}
	}
	var peers, intakes, clusterAddrs []string
	for i := range n {
		clusterAddrs = append(clusterAddrs, addrs[4*i])
		intakes = append(intakes, addrs[4*i+1])
	}
	advertised := clusterAddrs
	if o.ClusterTargets != nil {
		if advertised, err = o.ClusterTargets(slices.Clone(clusterAddrs)); err != nil {
			return nil, fmt.Errorf("cluster: cluster targets: %w", err)
		}
		if len(advertised) != n {
			return nil, fmt.Errorf("cluster: cluster targets: %d addresses for %d coordinators", len(advertised), n)
		}
	}
	for i := range n {
		peers = append(peers, fmt.Sprintf("%d=c%d@%s", i+1, i+1, advertised[i]))
	}
	for i := range n {
		co := &Coordinator{ID: fmt.Sprintf("c%d", i+1), RaftID: uint64(i + 1),
			Cluster: addrs[4*i], Intake: addrs[4*i+1], GRPC: addrs[4*i+2], HTTP: addrs[4*i+3]}
		co.Process = &Process{Name: co.ID, Bin: o.Bin, LogPath: filepath.Join(o.Dir, co.ID+".log"),
			Ready: `msg="coordinator ready"`, Args: []string{"coordinator",
				"--id", co.ID, "--raft-id", fmt.Sprint(co.RaftID), "--data-dir", filepath.Join(o.Dir, co.ID),
				"--peers", strings.Join(peers, ","),
				"--cluster-listen", co.Cluster, "--cluster-advertise", advertised[i], "--intake-listen", co.Intake,
				"--listen", co.GRPC, "--http-listen", co.HTTP, "--log-level", o.LogLevel}}
		if o.Security != nil {
			co.Args = append(co.Args, o.Security.coordinatorArgs(co.ID)...)
		} else {
			co.Args = append(co.Args, "--insecure-cluster")
		}
		c.Coordinators = append(c.Coordinators, co)
	}
	targets := intakes
	if o.EdgeTargets != nil {
		if targets, err = o.EdgeTargets(slices.Clone(intakes)); err != nil {
			return nil, fmt.Errorf("cluster: edge targets: %w", err)
		}
		if len(targets) == 0 {
			return nil, errors.New("cluster: edge targets: empty list")
		}
	}
	c.Edge = c.newEdge(o.EdgeID, addrs[4*n], addrs[4*n+1], targets)
	return c, nil
}

// newEdge lays out an edge's process with the fleet's options.
func (c *Cluster) newEdge(id, grpcAddr, httpAddr string, targets []string) *Edge {
	o := c.Opts
	e := &Edge{ID: id, GRPC: grpcAddr, HTTP: httpAddr}
	e.Process = &Process{Name: e.ID, Bin: o.Bin, LogPath: filepath.Join(o.Dir, e.ID+".log"),
		Ready: `msg="node ready"`, Args: []string{"node",
			"--data-dir", filepath.Join(o.Dir, e.ID), "--node-id", e.ID,
			"--listen", e.GRPC, "--http-listen", e.HTTP,
			"--replicate-to", strings.Join(targets, ","),
			"--advertise-query-addr", e.GRPC, "--wal-segment-age", o.WALSegmentAge.String(),
			"--log-level", o.LogLevel}}
	if o.Security != nil {
		e.Args = append(e.Args, o.Security.edgeArgs(e.ID)...)
	} else {
		e.Args = append(e.Args, "--replicate-insecure")
	}
	e.Args = append(e.Args, o.EdgeArgs...)
	return e
}

// Processes lists every process of the fleet, coordinators first.
func (c *Cluster) Processes() []*Process {
	var ps []*Process
	for _, co := range c.Coordinators {
		ps = append(ps, co.Process)
	}
	for _, e := range c.allEdges() {
		ps = append(ps, e.Process)
	}
	for _, e := range c.More {
		ps = append(ps, e.Process)
	}
	return ps
}

// allEdges is Edges, or the one Edge.
func (c *Cluster) allEdges() []*Edge {
	if len(c.Edges) > 0 {
		return c.Edges
	}
	return []*Edge{c.Edge}
}

// Start starts the coordinators together (a member waits for a quorum) and
// then the edges.
func (c *Cluster) Start() error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Coordinators))
	for i, co := range c.Coordinators {
		wg.Go(func() { errs[i] = co.Start(c.Opts.ReadyTimeout) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	edges := c.allEdges()
	errs = make([]error, len(edges))
	for i, e := range edges {
		wg.Go(func() { errs[i] = e.Start(c.Opts.ReadyTimeout) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// KillAll kills every process still running.
func (c *Cluster) KillAll() {
	for _, p := range c.Processes() {
		p.Kill()
	}
}

// Fleet is the part of GET /api/v1/fleet the tests read.
type Fleet struct {
	Coordinator string `json:"coordinator"`
	Raft        struct {
		ID     uint64 `json:"id"`
		Leader uint64 `json:"leader"`
		Term   uint64 `json:"term"`
	} `json:"raft"`
	Nodes []FleetNode `json:"nodes"`
}

// FleetNode is one node of a Fleet.
type FleetNode struct {
	ID              string     `json:"id"`
	Role            string     `json:"role"`
	Replicas        []string   `json:"replicas"`
	AckedThrough    uint64     `json:"acked_through"`
	WatermarkTimeMs int64      `json:"watermark_time_ms"`
	HeldPoints      uint64     `json:"held_points"`
	Held            []HeldRun  `json:"held"`
	Gaps            []FleetGap `json:"gaps"`
}

// FleetGap is a run of segments the edge declared it will not ship.
type FleetGap struct {
	AfterSeq   uint64 `json:"after_seq"`
	ThroughSeq uint64 `json:"through_seq"`
	Reason     string `json:"reason"`
	Segments   uint64 `json:"segments"`
	Points     int64  `json:"points"` // -1: unknown
	MinTimeMs  int64  `json:"min_time_ms"`
	MaxTimeMs  int64  `json:"max_time_ms"`
}

// HeldRun is a run of segments the cloud holds for an edge.
type HeldRun struct {
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Points   uint64 `json:"points"`
}

// Node returns the fleet's entry for id.
func (f Fleet) Node(id string) (FleetNode, bool) {
	return first(f.Nodes, func(n FleetNode) bool { return n.ID == id })
}

// Fleet asks co for GET /api/v1/fleet.
func (c *Cluster) Fleet(ctx context.Context, co *Coordinator) (Fleet, error) {
	req, err := c.newRequest(ctx, co.HTTP, "/api/v1/fleet")
	if err != nil {
		return Fleet{}, fmt.Errorf("fleet of %s: %w", co.ID, err)
	}
	return getFleet(c.http, req, co.ID)
}

// getFleet sends req, a GET /api/v1/fleet to the coordinator named who,
// and decodes its answer.
func getFleet(hc *http.Client, req *http.Request, who string) (Fleet, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return Fleet{}, fmt.Errorf("fleet of %s: %w", who, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Fleet{}, fmt.Errorf("fleet of %s: read: %w", who, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Fleet{}, fmt.Errorf("fleet of %s: %s: %s", who, resp.Status, strings.TrimSpace(string(body)))
	}
	var f Fleet
	if err := json.Unmarshal(body, &f); err != nil {
		return Fleet{}, fmt.Errorf("fleet of %s: decode: %w", who, err)
	}
	return f, nil
}

// AnyFleet asks the running coordinators in turn and returns the first
// answer.
func (c *Cluster) AnyFleet(ctx context.Context) (Fleet, *Coordinator, error) {
	var errs []error
	for _, co := range c.Coordinators {
		if !co.Running() {
			continue
		}
		f, err := c.Fleet(ctx, co)
		if err == nil {
			return f, co, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return Fleet{}, nil, errors.New("fleet: no coordinator is running")
	}
	return Fleet{}, nil, errors.Join(errs...)
}

// Leader waits up to timeout for a running coordinator to name a leader
// that is itself running, and returns that leader's process.
func (c *Cluster) Leader(ctx context.Context, timeout time.Duration) (*Coordinator, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error = errNoLeader
	for {
		for _, co := range c.Coordinators {
			if !co.Running() {
				continue
			}
			f, err := c.Fleet(ctx, co)
			if err != nil {
				last = err
				continue
			}
			for _, l := range c.Coordinators {
				if f.Raft.Leader != 0 && l.RaftID == f.Raft.Leader && l.Running() {
					return l, nil
				}
			}
			last = fmt.Errorf("%s names leader %d, not a running member", co.ID, f.Raft.Leader)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("find the raft leader within %v: %w", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// WaitFleet polls the running coordinators every 100 ms until ok accepts an
// answer or timeout passes; it returns the last answer.
func (c *Cluster) WaitFleet(ctx context.Context, timeout time.Duration, ok func(Fleet) bool) (Fleet, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last Fleet
	var lastErr error
	for {
		f, _, err := c.AnyFleet(ctx)
		if err == nil {
			last = f
			if ok(f) {
				return f, nil
			}
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil && last.Coordinator == "" {
				return last, fmt.Errorf("wait for the fleet: %w", lastErr)
			}
			return last, fmt.Errorf("wait for the fleet: condition not met within %v", timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// EdgeMetrics scrapes GET /metrics of the edge and returns the samples
// whose metric name starts with prefix (labels are kept in the key).
func (c *Cluster) EdgeMetrics(ctx context.Context, prefix string) (map[string]float64, error) {
	req, err := c.newRequest(ctx, c.Edge.HTTP, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", c.Edge.ID, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", c.Edge.ID, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: read: %w", c.Edge.ID, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics of %s: %s", c.Edge.ID, resp.Status)
	}
	return parseMetrics(string(body), prefix)
}

// parseMetrics reads a /metrics answer and keeps the samples whose series
// starts with prefix.
func parseMetrics(text, prefix string) (map[string]float64, error) {
	all, err := promtext.Parse(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	for k := range all {
		if !strings.HasPrefix(k, prefix) {
			delete(all, k)
		}
	}
	return all, nil
}
