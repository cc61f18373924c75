package fanoutbench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/tick"
	"github.com/tributarydb/tributary/internal/loopback"
)

// proc is one server process of the fleet, restartable with the same
// command line, and its addresses.
type proc struct {
	nodeproc.Restartable
	grpcAddr string
	httpAddr string
	intake   string // coordinators only
	raftID   uint64 // coordinators only
}

// cluster is the fleet under test: coordinators and edges as processes.
type cluster struct {
	coords []*proc
	edges  []*proc
	hc     *http.Client
}

// newCluster lays out the processes (addresses, data directories, logs)
// without starting any.
func newCluster(o Options, binary, dir string, logger *slog.Logger) (*cluster, error) {
	c := &cluster{hc: &http.Client{Timeout: 5 * time.Second}}
	base := nodeproc.Options{Binary: binary, Env: o.Env, ReadyTimeout: o.ReadyTimeout, Logger: logger}
	cs, err := nodeproc.PlanCoordinators(o.Coordinators)
	if err != nil {
		return nil, err
	}
	for _, co := range cs {
		p := &proc{Restartable: nodeproc.Restartable{Name: co.Name}, grpcAddr: co.GRPC, httpAddr: co.HTTP, intake: co.Intake, raftID: uint64(co.RaftID)}
		extra := []string{"--peers", nodeproc.Peers(cs)}
		if o.simEdges() > 0 {
			// The simulated edges all stream from 127.0.0.1, as a fleet
			// behind one NAT would.
			extra = append(extra, "--intake-max-conns-per-ip", strconv.Itoa(2*o.Edges+256))
		}
		p.Opts = co.Options(base, dir, append(extra, o.CoordinatorArgs...)...)
		c.coords = append(c.coords, p)
	}
	for i := range o.procEdges() {
		addrs, err := loopback.FreePorts(2)
		if err != nil {
			return nil, err
		}
		p := &proc{Restartable: nodeproc.Restartable{Name: fmt.Sprintf("edge-%02d", i)}, grpcAddr: addrs[0], httpAddr: addrs[1]}
		p.Opts = nodeproc.ReplicatingEdge(base, dir, p.Name, p.grpcAddr, p.httpAddr, nodeproc.Intakes(cs), o.SegmentAge, o.NodeArgs...)
		c.edges = append(c.edges, p)
	}
	for _, p := range append(cloneProcs(c.coords), c.edges...) {
		if err := os.MkdirAll(p.Opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("make data dir of %s: %w", p.Name, err)
		}
	}
	return c, nil
}

func cloneProcs(ps []*proc) []*proc { return append([]*proc(nil), ps...) }

// stopAll stops every process that runs, concurrently.
func (c *cluster) stopAll(timeout time.Duration) error {
	return nodeproc.StopAll(timeout, append(cloneProcs(c.edges), c.coords...))
}

// fleet is the part of GET /api/v1/fleet the benchmark reads.
type fleet struct {
	Raft struct {
		Leader  uint64 `json:"leader"`
		Applied uint64 `json:"applied"`
	} `json:"raft"`
	Series int `json:"series"`
	Nodes  []struct {
		ID              string `json:"id"`
		Role            string `json:"role"`
		AckedThrough    uint64 `json:"acked_through"`
		WatermarkTimeMs int64  `json:"watermark_time_ms"`
		HeldPoints      int64  `json:"held_points"`
	} `json:"nodes"`
}

func (f fleet) heldPoints() int64 {
	var n int64
	for _, e := range f.Nodes {
		n += e.HeldPoints
	}
	return n
}

// fleetOf asks coordinator p for the fleet.
func (c *cluster) fleetOf(ctx context.Context, p *proc) (fleet, error) {
	var f fleet
	url := "http://" + p.httpAddr + "/api/v1/fleet"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return f, fmt.Errorf("get %s: %w", url, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return f, fmt.Errorf("get fleet from %s: %w", p.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return f, fmt.Errorf("get fleet from %s: status %s", p.Name, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&f); err != nil {
		return f, fmt.Errorf("decode fleet from %s: %w", p.Name, err)
	}
	return f, nil
}

// anyFleet asks the running coordinators in turn until one answers.
func (c *cluster) anyFleet(ctx context.Context) (fleet, error) {
	var errs []error
	for _, p := range c.coords {
		if p.Current() == nil {
			continue
		}
		f, err := c.fleetOf(ctx, p)
		if err == nil {
			return f, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return fleet{}, errors.New("get fleet: no coordinator runs")
	}
	return fleet{}, errors.Join(errs...)
}

// waitFleet polls the fleet every period until cond holds, ctx ends or
// timeout passes; it returns the last fleet seen and when cond held.
func (c *cluster) waitFleet(ctx context.Context, period, timeout time.Duration, what string, cond func(fleet) bool) (fleet, time.Time, error) {
	var (
		last    fleet
		lastErr error
		at      time.Time
	)
	err := tick.Until(ctx, period, timeout, func() bool {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		f, err := c.anyFleet(cctx)
		cancel()
		at, lastErr = time.Now(), err
		if err != nil {
			return false
		}
		last = f
		return cond(f)
	})
	var te *tick.TimeoutError
	switch {
	case errors.As(err, &te):
		return last, at, fmt.Errorf("wait for %s: not after %v (last error: %v)", what, timeout, lastErr)
	case err != nil:
		return last, at, fmt.Errorf("wait for %s: %w", what, err)
	}
	return last, at, nil
}

// ackedThroughMetric is the edge's gauge of the last WAL segment the cloud
// holds.
const ackedThroughMetric = "tributary_replication_acked_through_seq"

// ackedThrough reads the edge's acked-through sequence from its /metrics.
func (c *cluster) ackedThrough(ctx context.Context, p *proc) (uint64, error) {
	url := "http://" + p.httpAddr + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", url, err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("get metrics of %s: %w", p.Name, err)
	}
	defer resp.Body.Close()
	v, err := parseGauge(bufio.NewScanner(resp.Body), ackedThroughMetric)
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", p.Name, err)
	}
	return uint64(v), nil
}

// parseGauge finds an unlabelled sample of name in Prometheus text format.
func parseGauge(sc *bufio.Scanner, name string) (float64, error) {
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
			continue
		}
		fields := strings.Fields(rest)
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s value %q: %w", name, fields[0], err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	return 0, fmt.Errorf("no sample of %s", name)
}
