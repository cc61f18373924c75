package nodeproc

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/internal/loopback"
)

// Coordinator is one coordinator of a benchmark's fleet: its raft
// identity and its four listeners. The benchmarks' fleets link their
// coordinators in plaintext (--insecure-cluster).
type Coordinator struct {
	// Name is --id ("c1", ...); RaftID is --raft-id.
	Name   string
	RaftID int
	// Cluster, Intake, GRPC and HTTP are --cluster-listen,
	// --intake-listen, --listen and --http-listen.
	Cluster, Intake, GRPC, HTTP string
}

// PlanCoordinators lays out n coordinators, c1 to cn with raft ids 1 to
// n, each on four ports of 127.0.0.1 that were free a moment ago.
func PlanCoordinators(n int) ([]Coordinator, error) {
	cs := make([]Coordinator, n)
	for i := range cs {
		addrs, err := loopback.FreePorts(4)
		if err != nil {
			return nil, err
		}
		cs[i] = Coordinator{Name: fmt.Sprintf("c%d", i+1), RaftID: i + 1,
			Cluster: addrs[0], Intake: addrs[1], GRPC: addrs[2], HTTP: addrs[3]}
	}
	return cs, nil
}

// Peer is the coordinator's member of --peers: RAFTID=NAME@CLUSTER.
func (c Coordinator) Peer() string { return fmt.Sprintf("%d=%s@%s", c.RaftID, c.Name, c.Cluster) }

// Peers is --peers of a fleet of cs, the same on every member.
func Peers(cs []Coordinator) string {
	ps := make([]string, len(cs))
	for i, c := range cs {
		ps[i] = c.Peer()
	}
	return strings.Join(ps, ",")
}

// Intakes are the intake addresses of cs, an edge's --replicate-to list
// in that order.
func Intakes(cs []Coordinator) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Intake
	}
	return out
}

// Options are base, which says how to run the binary (Binary, Env,
// ReadyTimeout, Logger, ...), made to start the coordinator: its data
// directory and log under dir (dir/NAME and dir/NAME.log), its identity
// and listeners, then extra (--peers and the rest).
func (c Coordinator) Options(base Options, dir string, extra ...string) Options {
	o := base
	o.Command, o.ListenAddr = "coordinator", c.GRPC
	o.DataDir, o.LogPath = filepath.Join(dir, c.Name), filepath.Join(dir, c.Name+".log")
	o.ExtraArgs = append([]string{"--id", c.Name, "--raft-id", strconv.Itoa(c.RaftID), "--insecure-cluster",
		"--cluster-listen", c.Cluster, "--intake-listen", c.Intake, "--http-listen", c.HTTP}, extra...)
	return o
}

// ReplicatingEdge is base, which says how to run the binary (Binary, Env,
// ReadyTimeout, Logger, ...), made to start an edge node named name
// logging at info: its data directory and log under dir (dir/NAME and
// dir/NAME.log), listening on grpcAddr and httpAddr, replicating in
// plaintext to intakes (tried in that order), advertising grpcAddr for
// queries through its tunnel and sealing WAL segments at segmentAge, then
// extra.
func ReplicatingEdge(base Options, dir, name, grpcAddr, httpAddr string, intakes []string, segmentAge time.Duration, extra ...string) Options {
	o := base
	o.NodeID, o.ListenAddr, o.LogLevel = name, grpcAddr, "info"
	o.DataDir, o.LogPath = filepath.Join(dir, name), filepath.Join(dir, name+".log")
	o.ExtraArgs = append([]string{"--http-listen", httpAddr, "--replicate-to", strings.Join(intakes, ","),
		"--replicate-insecure", "--advertise-query-addr", grpcAddr, "--wal-segment-age", segmentAge.String()}, extra...)
	return o
}
