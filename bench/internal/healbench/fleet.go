package healbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/tick"
	"github.com/tributarydb/tributary/internal/loopback"
)

// proc is one process of the fleet, restartable, and its addresses.
type proc struct {
	nodeproc.Restartable
	// Coordinators: cluster listener, intake, client gRPC and HTTP.
	cluster, intake, grpc, http string
}

// fleet is the benchmark's processes: coordinators laid out as the Helm
// chart lays out its pods (each on its own loopback address, all on the
// same ports, so that --rejoin finds the members' client listeners) and
// edges on 127.0.0.1.
type fleet struct {
	coords []*proc
	edges  []*proc
}

// newFleet lays out the processes without starting any.
func newFleet(o Options, dir string, logger *slog.Logger) (*fleet, error) {
	base, ports, err := loopback.ReserveHosts(o.Coordinators)
	if err != nil {
		return nil, err
	}
	f := &fleet{}
	run := nodeproc.Options{Binary: o.Binary, Env: o.Env, ReadyTimeout: o.ReadyTimeout, Logger: logger}
	cs := make([]nodeproc.Coordinator, o.Coordinators)
	for i := range cs {
		h := base + strconv.Itoa(i+1)
		cs[i] = nodeproc.Coordinator{Name: fmt.Sprintf("c%d", i+1), RaftID: i + 1, Cluster: net.JoinHostPort(h, ports[0]),
			Intake: net.JoinHostPort(h, ports[1]), GRPC: net.JoinHostPort(h, ports[2]), HTTP: net.JoinHostPort(h, ports[3])}
	}
	coordRun := run
	coordRun.LogLevel = "info"
	for _, co := range cs {
		p := &proc{Restartable: nodeproc.Restartable{Name: co.Name}, cluster: co.Cluster, intake: co.Intake, grpc: co.GRPC, http: co.HTTP}
		p.Opts = co.Options(coordRun, dir, append([]string{"--peers", nodeproc.Peers(cs), "--dead-after", o.DeadAfter.String()}, o.CoordinatorArgs...)...)
		f.coords = append(f.coords, p)
	}
	intakes := nodeproc.Intakes(cs)
	addrs, err := loopback.FreePorts(2 * o.Edges)
	if err != nil {
		return nil, err
	}
	for i := range o.Edges {
		p := &proc{Restartable: nodeproc.Restartable{Name: fmt.Sprintf("edge-%02d", i+1)}, grpc: addrs[2*i], http: addrs[2*i+1]}
		rot := append(slices.Clone(intakes[i%len(intakes):]), intakes[:i%len(intakes)]...)
		p.Opts = nodeproc.ReplicatingEdge(run, dir, p.Name, p.grpc, p.http, rot, o.SegmentAge, o.NodeArgs...)
		f.edges = append(f.edges, p)
	}
	for _, p := range append(slices.Clone(f.coords), f.edges...) {
		if err := os.MkdirAll(p.Opts.DataDir, 0o755); err != nil {
			return nil, fmt.Errorf("make data dir of %s: %w", p.Name, err)
		}
	}
	return f, nil
}

// killAll SIGKILLs every process still running.
func (f *fleet) killAll() {
	for _, p := range append(slices.Clone(f.edges), f.coords...) {
		p.Kill()
	}
}

// coordinator returns the coordinator named id, or nil.
func (f *fleet) coordinator(id string) *proc {
	for _, p := range f.coords {
		if p.Name == id {
			return p
		}
	}
	return nil
}

// waitFor polls cond every period until it returns "" (done) or timeout
// passes; it returns when cond was met, or the last reason with an error.
func waitFor(ctx context.Context, period, timeout time.Duration, what string, cond func(context.Context) string) (time.Time, error) {
	last := "not asked yet"
	var metAt time.Time
	err := tick.Until(ctx, period, timeout, func() bool {
		last, metAt = cond(ctx), time.Now()
		return last == ""
	})
	var te *tick.TimeoutError
	switch {
	case errors.As(err, &te):
		return time.Time{}, fmt.Errorf("%s: %v: %s", what, err, last)
	case err != nil:
		return time.Time{}, fmt.Errorf("%s: %w", what, err)
	}
	return metAt, nil
}
