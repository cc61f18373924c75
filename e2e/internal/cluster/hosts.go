package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tributarydb/tributary/internal/loopback"
)

// HostsOptions describe a fleet laid out as the Helm chart lays out its
// pods: every coordinator on a loopback address of its own (127.A.B.k in
// a block chosen at random per fleet) and all on the same four ports, so
// that a coordinator finds another's client listener at its own --listen
// port, which is what --auto-join and --rejoin do; and several edges.
type HostsOptions struct {
	Bin string // the tributary binary (required)
	Dir string // data directories and logs go under it (required)
	// Coordinators are the bootstrap members c1..cN (raft ids 1..N);
	// default 3.
	Coordinators int
	// MaxCoordinators is how many coordinator addresses are reserved,
	// for members added later (AddCoordinator); default Coordinators+4.
	MaxCoordinators int
	// Edges are edge-01..edge-NN; default 1.
	Edges         int
	WALSegmentAge time.Duration // the edges' --wal-segment-age; default 1s
	ReadyTimeout  time.Duration // wait for a ready line; default 30s
	LogLevel      string        // default "info"
	Logger        *slog.Logger  // default: discarded
	// CoordinatorArgs are appended to every coordinator's command line,
	// added members' included; EdgeArgs to every edge's.
	CoordinatorArgs []string
	EdgeArgs        []string
	// EdgeTargets maps an edge's --replicate-to list (every bootstrap
	// member's intake, rotated so that edge i starts with coordinator
	// i mod N) to the list it is given; nil: the list itself.
	EdgeTargets func(edge string, intakes []string) ([]string, error)
}

// WithDefaults returns o with every unset field given its default; the
// fields every process shares take Options' defaults.
func (o HostsOptions) WithDefaults() HostsOptions {
	if o.Coordinators == 0 {
		o.Coordinators = 3
	}
	if o.MaxCoordinators == 0 {
		o.MaxCoordinators = o.Coordinators + 4
	}
	if o.Edges == 0 {
		o.Edges = 1
	}
	f := o.fleet().WithDefaults()
	o.WALSegmentAge, o.ReadyTimeout, o.LogLevel, o.Logger = f.WALSegmentAge, f.ReadyTimeout, f.LogLevel, f.Logger
	return o
}

// fleet is the Options of the Cluster that NewHosts lays out.
func (o HostsOptions) fleet() Options {
	return Options{Bin: o.Bin, Dir: o.Dir, Coordinators: o.Coordinators, EdgeID: "edge-01",
		WALSegmentAge: o.WALSegmentAge, ReadyTimeout: o.ReadyTimeout, LogLevel: o.LogLevel, Logger: o.Logger}
}

// Validate reports every bad field of o (after defaults).
func (o HostsOptions) Validate() error {
	bad := o.fleet().processProblems()
	if o.Coordinators < 1 || o.MaxCoordinators < o.Coordinators || o.MaxCoordinators > 200 {
		bad = append(bad, fmt.Sprintf("Coordinators %d and MaxCoordinators %d: want 1 <= Coordinators <= MaxCoordinators <= 200", o.Coordinators, o.MaxCoordinators))
	}
	if o.Edges < 1 || o.Edges > 99 {
		bad = append(bad, fmt.Sprintf("Edges %d: want 1 to 99", o.Edges))
	}
	if len(bad) > 0 {
		return fmt.Errorf("hosts options: %s", strings.Join(bad, "; "))
	}
	return nil
}

// hostLayout is how NewHosts lays out coordinators, kept to add more.
type hostLayout struct {
	o     HostsOptions
	base  string    // "127.A.B."
	ports [4]string // cluster, intake, client gRPC, HTTP
	peers string    // the bootstrap --peers list

	mu   sync.Mutex
	next int // host number of the next coordinator laid out
}

// host is the address of coordinator host number k (1-based).
func (l *hostLayout) host(k int) string { return l.base + strconv.Itoa(k) }

// coordinator lays out coordinator ck on host k with raft id raftID;
// membership flags (--peers or --join) are the caller's.
func (l *hostLayout) coordinator(k int, raftID uint64) *Coordinator {
	h := l.host(k)
	co := &Coordinator{ID: fmt.Sprintf("c%d", k), RaftID: raftID,
		Cluster: net.JoinHostPort(h, l.ports[0]), Intake: net.JoinHostPort(h, l.ports[1]),
		GRPC: net.JoinHostPort(h, l.ports[2]), HTTP: net.JoinHostPort(h, l.ports[3])}
	co.Process = &Process{Name: co.ID, Bin: l.o.Bin, LogPath: filepath.Join(l.o.Dir, co.ID+".log"),
		Ready: `msg="coordinator ready"`, Args: []string{"coordinator",
			"--id", co.ID, "--raft-id", fmt.Sprint(raftID), "--data-dir", filepath.Join(l.o.Dir, co.ID),
			"--insecure-cluster", "--cluster-listen", co.Cluster, "--intake-listen", co.Intake,
			"--listen", co.GRPC, "--http-listen", co.HTTP, "--log-level", l.o.LogLevel}}
	return co
}

// NewHosts lays out a fleet of HostsOptions; nothing is started. The
// Cluster's Edges lists every edge and Edge is the first; Opts carries
// Bin, Dir, the first edge's id and the timeouts.
func NewHosts(o HostsOptions) (*Cluster, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	base, ports, err := loopback.ReserveHosts(o.MaxCoordinators)
	if err != nil {
		return nil, err
	}
	l := &hostLayout{o: o, base: base, ports: ports, next: o.Coordinators + 1}
	c := &Cluster{Opts: o.fleet(), http: newHTTPClient(), hosts: l}
	var peers, intakes []string
	for k := 1; k <= o.Coordinators; k++ {
		co := l.coordinator(k, uint64(k))
		peers = append(peers, fmt.Sprintf("%d=%s@%s", co.RaftID, co.ID, co.Cluster))
		intakes = append(intakes, co.Intake)
		c.Coordinators = append(c.Coordinators, co)
	}
	l.peers = strings.Join(peers, ",")
	for _, co := range c.Coordinators {
		co.Args = append(co.Args, "--peers", l.peers)
		co.Args = append(co.Args, o.CoordinatorArgs...)
	}
	addrs, err := loopback.FreePorts(2 * o.Edges)
	if err != nil {
		return nil, err
	}
	for i := range o.Edges {
		id := fmt.Sprintf("edge-%02d", i+1)
		rot := o.Coordinators
		targets := append(slices.Clone(intakes[i%rot:]), intakes[:i%rot]...)
		if o.EdgeTargets != nil {
			if targets, err = o.EdgeTargets(id, targets); err != nil {
				return nil, fmt.Errorf("cluster: edge targets of %s: %w", id, err)
			}
			if len(targets) == 0 {
				return nil, fmt.Errorf("cluster: edge targets of %s: empty list", id)
			}
		}
		e := &Edge{ID: id, GRPC: addrs[2*i], HTTP: addrs[2*i+1]}
		e.Process = &Process{Name: id, Bin: o.Bin, LogPath: filepath.Join(o.Dir, id+".log"),
			Ready: `msg="node ready"`, Args: []string{"node",
				"--data-dir", filepath.Join(o.Dir, id), "--node-id", id,
				"--listen", e.GRPC, "--http-listen", e.HTTP,
				"--replicate-to", strings.Join(targets, ","), "--replicate-insecure",
				"--advertise-query-addr", e.GRPC, "--wal-segment-age", o.WALSegmentAge.String(),
				"--log-level", o.LogLevel}}
		e.Args = append(e.Args, o.EdgeArgs...)
		c.Edges = append(c.Edges, e)
	}
	c.Edge = c.Edges[0]
	return c, nil
}

// newHTTPClient is the client of the fleet and metrics calls.
func newHTTPClient() *http.Client { return &http.Client{Timeout: 10 * time.Second} }

// AddCoordinator lays out one more coordinator of a NewHosts fleet, on
// the next reserved address, with the next raft id above every
// coordinator's, started with --join (the running members) and
// --auto-join: started, it asks the leader to add it as a learner and to
// promote it. It is appended to Coordinators; Start it.
func (c *Cluster) AddCoordinator() (*Coordinator, error) {
	l := c.hosts
	if l == nil {
		return nil, errors.New("add a coordinator: only a fleet made by NewHosts can")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next > l.o.MaxCoordinators {
		return nil, fmt.Errorf("add a coordinator: all %d reserved addresses are used", l.o.MaxCoordinators)
	}
	var raftID uint64
	var join []string
	for _, co := range c.Coordinators {
		raftID = max(raftID, co.RaftID)
		if co.Running() {
			join = append(join, fmt.Sprintf("%d=%s@%s", co.RaftID, co.ID, co.Cluster))
		}
	}
	if len(join) == 0 {
		return nil, errors.New("add a coordinator: no coordinator runs to join")
	}
	co := l.coordinator(l.next, raftID+1)
	l.next++
	co.Args = append(co.Args, "--join", strings.Join(join, ","), "--auto-join")
	co.Args = append(co.Args, l.o.CoordinatorArgs...)
	c.Coordinators = append(c.Coordinators, co)
	return co, nil
}

// Arg returns the value of the last --name VALUE on p's command line.
func (p *Process) Arg(name string) (string, bool) {
	v, ok := "", false
	for i := 0; i+1 < len(p.Args); i++ {
		if p.Args[i] == name {
			v, ok = p.Args[i+1], true
		}
	}
	return v, ok
}

// DataDir is the coordinator's --data-dir.
func (co *Coordinator) DataDir() string {
	d, _ := co.Arg("--data-dir")
	return d
}

// Wipe deletes the coordinator's data directory (a lost disk). It must
// not be running.
func (co *Coordinator) Wipe() error {
	if co.Running() {
		return fmt.Errorf("wipe %s: it is running", co.ID)
	}
	d := co.DataDir()
	if d == "" {
		return fmt.Errorf("wipe %s: no --data-dir on its command line", co.ID)
	}
	if err := os.RemoveAll(d); err != nil {
		return fmt.Errorf("wipe %s: %w", co.ID, err)
	}
	return nil
}

var readyRaftID = regexp.MustCompile(`msg="coordinator ready".* raft_id=(\d+)`)

// RefreshRaftID sets RaftID to the raft id the coordinator's newest
// ready line names (a coordinator that rejoined with --rejoin took a new
// one) and returns it. Call it from the goroutine that reads RaftID.
func (co *Coordinator) RefreshRaftID() (uint64, error) {
	b, err := os.ReadFile(co.LogPath)
	if err != nil {
		return 0, fmt.Errorf("raft id of %s: %w", co.ID, err)
	}
	m := readyRaftID.FindAllSubmatch(b, -1)
	if len(m) == 0 {
		return 0, fmt.Errorf("raft id of %s: no ready line in its log", co.ID)
	}
	id, err := strconv.ParseUint(string(m[len(m)-1][1]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("raft id of %s: %w", co.ID, err)
	}
	co.RaftID = id
	return id, nil
}

// StartExit starts the process and waits up to timeout for it to exit by
// itself (a process that refuses to start); it returns the exit error
// (nil for exit status 0) and what the process wrote in this start. A
// process still running after timeout is killed and reported.
func (p *Process) StartExit(timeout time.Duration) (exitErr error, out string, err error) {
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		return nil, "", fmt.Errorf("start %s: already running", p.Name)
	}
	p.mu.Unlock()
	before, _ := os.Stat(p.LogPath)
	var off int64
	if before != nil {
		off = before.Size()
	}
	startErr := make(chan error, 1)
	go func() { startErr <- p.Start(timeout) }()
	serr := <-startErr
	b, _ := os.ReadFile(p.LogPath)
	if int64(len(b)) >= off {
		out = string(b[off:])
	}
	if serr == nil {
		p.Kill()
		return nil, out, fmt.Errorf("start %s: it became ready; it was expected to refuse", p.Name)
	}
	p.mu.Lock()
	exitErr = p.err
	p.mu.Unlock()
	if !strings.Contains(serr.Error(), "exited before") {
		return exitErr, out, serr
	}
	return exitErr, out, nil
}
