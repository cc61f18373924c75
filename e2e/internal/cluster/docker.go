package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DockerAvailable reports why containers cannot be run here (nil: they
// can): no docker command or no daemon answering.
func DockerAvailable() error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("no docker command: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Errorf("the docker daemon does not answer: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// docker runs the docker command and returns its standard output; a
// failure quotes its error output.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// BuildImage builds the FROM-scratch image of deploy/Dockerfile (found
// under root, the module root) around staticBin, a static linux/amd64
// tributary binary, and tags it tag. Nothing is pulled.
func BuildImage(ctx context.Context, root, staticBin, tag string) error {
	dir, err := os.MkdirTemp("", "tributary-e2e-image-")
	if err != nil {
		return fmt.Errorf("image context: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o750); err != nil {
		return fmt.Errorf("image context: %w", err)
	}
	src, err := os.Open(staticBin)
	if err != nil {
		return fmt.Errorf("image context: %w", err)
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(dir, "tributary-linux-amd64"), os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("image context: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fmt.Errorf("image context: copy %s: %w", staticBin, err)
	}
	if err := dst.Close(); err != nil {
		return fmt.Errorf("image context: %w", err)
	}
	_, err = docker(ctx, "build", "-q", "-f", filepath.Join(root, "deploy", "Dockerfile"),
		"--build-arg", "TARGETARCH=amd64", "--build-arg", "VERSION=e2e", "-t", tag, dir)
	return err
}

// DockerOptions describe a fleet of containers: three coordinators and
// one edge on a private network with a fixed subnet (a container keeps its
// address when it is disconnected and connected again).
type DockerOptions struct {
	Image        string        // built by BuildImage (required)
	Coordinators int           // default 3
	ReadyTimeout time.Duration // default 60s
}

// DockerNode is one container of a DockerFleet.
type DockerNode struct {
	Name  string // container name and host name on the network
	IP    string
	Ready string // the log line that says it is ready
	f     *DockerFleet
}

// GRPC is the node's gRPC address as the test process reaches it.
func (n *DockerNode) GRPC() string { return n.IP + ":7070" }

// HTTP is the node's HTTP address as the test process reaches it.
func (n *DockerNode) HTTP() string { return n.IP + ":7071" }

// DockerFleet is a running fleet of containers.
type DockerFleet struct {
	Opts         DockerOptions
	Network      string
	Coordinators []*DockerNode
	Edge         *DockerNode
	prefix       string
	http         *http.Client
}

// StartDockerFleet creates the network and runs the containers, waiting
// for every ready line. On error everything made is removed.
func StartDockerFleet(ctx context.Context, o DockerOptions) (f *DockerFleet, err error) {
	if o.Image == "" {
		return nil, errors.New("docker fleet: Image is empty")
	}
	if o.Coordinators == 0 {
		o.Coordinators = 3
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	var id [4]byte
	rand.Read(id[:])
	f = &DockerFleet{Opts: o, prefix: "tributary-e2e-" + hex.EncodeToString(id[:]), http: &http.Client{Timeout: 5 * time.Second}}
	f.Network = f.prefix
	defer func() {
		if err != nil {
			f.Remove()
		}
	}()
	// A /24 no other docker network uses: docker refuses an overlap.
	var subnet string
	for range 20 {
		n, _ := rand.Int(rand.Reader, big.NewInt(250))
		subnet = fmt.Sprintf("10.213.%d", n.Int64()+1)
		if _, err = docker(ctx, "network", "create", "--driver", "bridge", "--subnet", subnet+".0/24", f.Network); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("docker fleet: create a network: %w", err)
	}
	var peers, intakes []string
	for i := range o.Coordinators {
		name := fmt.Sprintf("c%d", i+1)
		peers = append(peers, fmt.Sprintf("%d=%s@%s:7444", i+1, name, name))
		intakes = append(intakes, name+":7443")
	}
	run := func(n *DockerNode, args ...string) error {
		full := append([]string{"run", "-d", "--name", f.prefix + "-" + n.Name, "--hostname", n.Name,
			"--network", f.Network, "--network-alias", n.Name, "--ip", n.IP, o.Image}, args...)
		_, err := docker(ctx, full...)
		return err
	}
	for i := range o.Coordinators {
		n := &DockerNode{Name: fmt.Sprintf("c%d", i+1), IP: fmt.Sprintf("%s.%d", subnet, 10+i), Ready: `msg="coordinator ready"`, f: f}
		f.Coordinators = append(f.Coordinators, n)
		if err := run(n, "coordinator", "--id", n.Name, "--raft-id", fmt.Sprint(i+1), "--data-dir", "/data",
			"--insecure-cluster", "--insecure-listen", "--peers", strings.Join(peers, ","),
			"--cluster-listen", "0.0.0.0:7444", "--cluster-advertise", n.Name+":7444",
			"--intake-listen", "0.0.0.0:7443", "--listen", "0.0.0.0:7070", "--http-listen", "0.0.0.0:7071"); err != nil {
			return nil, fmt.Errorf("docker fleet: %w", err)
		}
	}
	f.Edge = &DockerNode{Name: "edge-1", IP: subnet + ".100", Ready: `msg="node ready"`, f: f}
	if err := run(f.Edge, "node", "--data-dir", "/data", "--node-id", "edge-1", "--insecure-listen",
		"--listen", "0.0.0.0:7070", "--http-listen", "0.0.0.0:7071",
		"--replicate-to", strings.Join(intakes, ","), "--replicate-insecure", "--replicate-insecure-anywhere",
		"--advertise-query-addr", "edge-1:7070", "--wal-segment-age", "1s",
		"--replication-backoff-max", "1s"); err != nil {
		return nil, fmt.Errorf("docker fleet: %w", err)
	}
	for _, n := range f.Nodes() {
		if err := n.WaitReady(ctx, 1, o.ReadyTimeout); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Nodes lists the containers, coordinators first.
func (f *DockerFleet) Nodes() []*DockerNode {
	return append(append([]*DockerNode{}, f.Coordinators...), f.Edge)
}

// Container is the node's container name.
func (n *DockerNode) Container() string { return n.f.prefix + "-" + n.Name }

// Logs returns the node's log (every start), at most the last tail lines
// when tail > 0.
func (n *DockerNode) Logs(ctx context.Context, tail int) string {
	args := []string{"logs"}
	if tail > 0 {
		args = append(args, "--tail", fmt.Sprint(tail))
	}
	cmd := exec.CommandContext(ctx, "docker", append(args, n.Container())...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(docker logs %s: %v) %s", n.Container(), err, out)
	}
	return string(out)
}

// WaitReady waits until the node's log holds its ready line at least
// times times (once per start).
func (n *DockerNode) WaitReady(ctx context.Context, times int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Count(n.Logs(ctx, 0), n.Ready) >= times {
			return nil
		}
		if out, err := docker(ctx, "inspect", "-f", "{{.State.Running}}", n.Container()); err != nil || strings.TrimSpace(out) != "true" {
			return fmt.Errorf("container %s: not running (%v); log ends:\n%s", n.Container(), err, n.Logs(ctx, 20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container %s: ready line %d not seen within %v; log ends:\n%s", n.Container(), times, timeout, n.Logs(ctx, 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Pause freezes every process of the container (docker pause).
func (n *DockerNode) Pause(ctx context.Context) error {
	_, err := docker(ctx, "pause", n.Container())
	return err
}

// Unpause thaws it.
func (n *DockerNode) Unpause(ctx context.Context) error {
	_, err := docker(ctx, "unpause", n.Container())
	return err
}

// Disconnect takes the container off the fleet's network.
func (n *DockerNode) Disconnect(ctx context.Context) error {
	_, err := docker(ctx, "network", "disconnect", "--force", n.f.Network, n.Container())
	return err
}

// Connect puts it back, with its address and alias.
func (n *DockerNode) Connect(ctx context.Context) error {
	_, err := docker(ctx, "network", "connect", "--ip", n.IP, "--alias", n.Name, n.f.Network, n.Container())
	return err
}

// KillAndStart kills the containers (SIGKILL to each, all at once) and
// starts them again, waiting for their ready lines.
func (f *DockerFleet) KillAndStart(ctx context.Context, nodes ...*DockerNode) error {
	var names []string
	counts := make([]int, len(nodes))
	for i, n := range nodes {
		names = append(names, n.Container())
		counts[i] = strings.Count(n.Logs(ctx, 0), n.Ready)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, n := range nodes {
		wg.Go(func() { _, errs[i] = docker(ctx, "kill", n.Container()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if _, err := docker(ctx, append([]string{"start"}, names...)...); err != nil {
		return err
	}
	for i, n := range nodes {
		if err := n.WaitReady(ctx, counts[i]+1, f.Opts.ReadyTimeout); err != nil {
			return err
		}
	}
	return nil
}

// Remove removes the containers (with their volumes) and the network.
func (f *DockerFleet) Remove() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range f.Nodes() {
		if n != nil {
			docker(ctx, "unpause", n.Container())
			docker(ctx, "rm", "-f", "-v", n.Container())
		}
	}
	docker(ctx, "network", "rm", f.Network)
}

// Fleet asks the coordinator n for GET /api/v1/fleet.
func (f *DockerFleet) Fleet(ctx context.Context, n *DockerNode) (Fleet, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.HTTP()+"/api/v1/fleet", nil)
	if err != nil {
		return Fleet{}, err
	}
	return getFleet(f.http, req, n.Name)
}

// WaitFleet polls the coordinators, except those in skip, every 200 ms
// until ok accepts an answer or timeout passes; it returns the last
// answer.
func (f *DockerFleet) WaitFleet(ctx context.Context, timeout time.Duration, ok func(Fleet) bool, skip ...*DockerNode) (Fleet, error) {
	deadline := time.Now().Add(timeout)
	var last Fleet
	var lastErr error
	for {
		for _, n := range f.Coordinators {
			if contains(skip, n) {
				continue
			}
			fl, err := f.Fleet(ctx, n)
			if err != nil {
				lastErr = err
				continue
			}
			last = fl
			if ok(fl) {
				return fl, nil
			}
		}
		if time.Now().After(deadline) {
			return last, fmt.Errorf("wait for the fleet: condition not met within %v (last error: %v)", timeout, lastErr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Leader waits for the coordinators (except skip) to agree on a raft
// leader and returns it.
func (f *DockerFleet) Leader(ctx context.Context, timeout time.Duration, skip ...*DockerNode) (*DockerNode, error) {
	var leader *DockerNode
	_, err := f.WaitFleet(ctx, timeout, func(fl Fleet) bool {
		for i, n := range f.Coordinators {
			if fl.Raft.Leader == uint64(i+1) && !contains(skip, n) {
				leader = n
				return true
			}
		}
		return false
	}, skip...)
	if err != nil {
		return nil, fmt.Errorf("find the raft leader: %w", err)
	}
	return leader, nil
}

func contains(ns []*DockerNode, n *DockerNode) bool {
	for _, x := range ns {
		if x == n {
			return true
		}
	}
	return false
}

// KillAndStop kills the containers and leaves them stopped.
func (f *DockerFleet) KillAndStop(ctx context.Context, nodes ...*DockerNode) error {
	for _, n := range nodes {
		if _, err := docker(ctx, "kill", n.Container()); err != nil {
			return err
		}
	}
	return nil
}
