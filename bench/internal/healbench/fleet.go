package healbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	var peers, intakes []string
	for k := 1; k <= o.Coordinators; k++ {
		h := base + strconv.Itoa(k)
		p := &proc{Restartable: nodeproc.Restartable{Name: fmt.Sprintf("c%d", k)}, cluster: net.JoinHostPort(h, ports[0]), intake: net.JoinHostPort(h, ports[1]),
			grpc: net.JoinHostPort(h, ports[2]), http: net.JoinHostPort(h, ports[3])}
		peers = append(peers, fmt.Sprintf("%d=%s@%s", k, p.Name, p.cluster))
		intakes = append(intakes, p.intake)
		f.coords = append(f.coords, p)
	}
	for k, p := range f.coords {
		p.Opts = nodeproc.Options{Binary: o.Binary, Command: "coordinator", ListenAddr: p.grpc,
			DataDir: filepath.Join(dir, p.Name), LogPath: filepath.Join(dir, p.Name+".log"), LogLevel: "info",
			ExtraArgs: append([]string{"--id", p.Name, "--raft-id", strconv.Itoa(k + 1), "--insecure-cluster",
				"--cluster-listen", p.cluster, "--intake-listen", p.intake, "--http-listen", p.http,
				"--peers", strings.Join(peers, ","), "--dead-after", o.DeadAfter.String()}, o.CoordinatorArgs...),
			Env: o.Env, ReadyTimeout: o.ReadyTimeout, Logger: logger}
	}
	addrs, err := loopback.FreePorts(2 * o.Edges)
	if err != nil {
		return nil, err
	}
	for i := range o.Edges {
		p := &proc{Restartable: nodeproc.Restartable{Name: fmt.Sprintf("edge-%02d", i+1)}, grpc: addrs[2*i], http: addrs[2*i+1]}
		rot := append(slices.Clone(intakes[i%len(intakes):]), intakes[:i%len(intakes)]...)
		p.Opts = nodeproc.Options{Binary: o.Binary, NodeID: p.Name, ListenAddr: p.grpc, LogLevel: "info",
			DataDir: filepath.Join(dir, p.Name), LogPath: filepath.Join(dir, p.Name+".log"),
			ExtraArgs: append([]string{"--http-listen", p.http, "--replicate-to", strings.Join(rot, ","),
				"--replicate-insecure", "--advertise-query-addr", p.grpc, "--wal-segment-age", o.SegmentAge.String()}, o.NodeArgs...),
			Env: o.Env, ReadyTimeout: o.ReadyTimeout, Logger: logger}
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
