package pibench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ErrNoDocker says the docker daemon does not answer: the profile is
// skipped, not failed.
var ErrNoDocker = errors.New("docker is not available")

// docker runs the docker CLI and returns its trimmed stdout.
func docker(ctx context.Context, args ...string) (string, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// checkDocker fails with ErrNoDocker unless the docker CLI finds a daemon.
func checkDocker(ctx context.Context) error {
	if _, err := exec.LookPath("docker"); err != nil {
		return fmt.Errorf("%w: no docker command on PATH", ErrNoDocker)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := docker(cctx, "info", "--format", "{{.ServerVersion}}"); err != nil {
		return fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	return nil
}

// buildImage builds the FROM-scratch node image of deploy/Dockerfile from
// the static amd64 binary, in a fresh context directory under dir.
func buildImage(ctx context.Context, dockerfile, binary, tag, dir string) error {
	ctxDir := filepath.Join(dir, "image")
	if err := os.MkdirAll(filepath.Join(ctxDir, "data"), 0o750); err != nil {
		return err
	}
	// The image's data volume is owned by its user; scratch has no shell
	// to chown it, so the mode travels with the directory.
	if err := os.Chmod(filepath.Join(ctxDir, "data"), 0o750); err != nil {
		return err
	}
	b, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("static binary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "tributary-linux-amd64"), b, 0o755); err != nil {
		return err
	}
	_, err = docker(ctx, "build", "-q", "-f", dockerfile, "--build-arg", "TARGETARCH=amd64",
		"--build-arg", "VERSION=bench", "-t", tag, ctxDir)
	return err
}

// container is a running node container.
type container struct {
	id       string
	grpcAddr string
}

// runContainer starts image with the CPU and memory limits (swap off: the
// memory limit is all the node gets) and returns where its gRPC port is
// published on loopback.
func runContainer(ctx context.Context, image, cpus, memory string, nodeArgs []string) (*container, error) {
	args := []string{"run", "-d", "--cpus", cpus, "--memory", memory, "--memory-swap", memory,
		"-p", "127.0.0.1::7070", image}
	if len(nodeArgs) > 0 {
		args = append(args, append([]string{"node", "--data-dir", "/data", "--listen", "0.0.0.0:7070",
			"--http-listen", "0.0.0.0:7071", "--insecure-listen"}, nodeArgs...)...)
	}
	id, err := docker(ctx, args...)
	if err != nil {
		return nil, err
	}
	c := &container{id: id}
	port, err := docker(ctx, "port", id, "7070/tcp")
	if err != nil {
		c.remove()
		return nil, err
	}
	c.grpcAddr = strings.TrimSpace(strings.Split(port, "\n")[0])
	return c, nil
}

// remove stops the container (SIGTERM, 60 s to flush) and removes it with
// its anonymous data volume.
func (c *container) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, _ = docker(ctx, "stop", "-t", "60", c.id)
	_, _ = docker(ctx, "rm", "-f", "-v", c.id)
}

// state is what docker inspect says of the container.
type state struct {
	Running   bool
	OOMKilled bool
	Restarts  int
}

func (c *container) state(ctx context.Context) (state, error) {
	out, err := docker(ctx, "inspect", "-f", "{{.State.Running}} {{.State.OOMKilled}} {{.RestartCount}}", c.id)
	if err != nil {
		return state{}, err
	}
	var s state
	if _, err := fmt.Sscan(out, &s.Running, &s.OOMKilled, &s.Restarts); err != nil {
		return s, fmt.Errorf("docker inspect %q: %w", out, err)
	}
	return s, nil
}

// statsSample is one `docker stats` reading.
type statsSample struct {
	MemBytes   int64
	LimitBytes int64
	CPUPct     float64
}

var memUsage = regexp.MustCompile(`^\s*([0-9.]+)\s*([KMGT]?i?B)\s*/\s*([0-9.]+)\s*([KMGT]?i?B)\s*$`)

// parseStats parses `docker stats --format '{{.MemUsage}}|{{.CPUPerc}}'`,
// such as "123.4MiB / 512MiB|87.25%".
func parseStats(line string) (statsSample, error) {
	mem, cpu, ok := strings.Cut(strings.TrimSpace(line), "|")
	if !ok {
		return statsSample{}, fmt.Errorf("docker stats line %q: want MemUsage|CPUPerc", line)
	}
	m := memUsage.FindStringSubmatch(mem)
	if m == nil {
		return statsSample{}, fmt.Errorf("docker stats memory %q", mem)
	}
	used, err := sizeBytes(m[1], m[2])
	if err != nil {
		return statsSample{}, err
	}
	limit, err := sizeBytes(m[3], m[4])
	if err != nil {
		return statsSample{}, err
	}
	pct, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(cpu), "%"), 64)
	if err != nil {
		return statsSample{}, fmt.Errorf("docker stats CPU %q: %w", cpu, err)
	}
	return statsSample{MemBytes: used, LimitBytes: limit, CPUPct: pct}, nil
}

func sizeBytes(num, unit string) (int64, error) {
	x, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", num, err)
	}
	mult := map[string]float64{"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size unit %q", unit)
	}
	return int64(x * mult), nil
}

// stats reads one `docker stats` sample (it takes about a second: docker
// measures CPU over an interval).
func (c *container) stats(ctx context.Context) (statsSample, error) {
	out, err := docker(ctx, "stats", "--no-stream", "--format", "{{.MemUsage}}|{{.CPUPerc}}", c.id)
	if err != nil {
		return statsSample{}, err
	}
	return parseStats(out)
}

// cgroupMaxUsage reads the memory cgroup's own peak (cgroup v1
// memory.max_usage_in_bytes, or v2 memory.peak), which includes the page
// cache the node's files occupy; -1 when neither is readable.
func (c *container) cgroupMaxUsage() int64 {
	for _, p := range []string{
		"/sys/fs/cgroup/memory/docker/" + c.id + "/memory.max_usage_in_bytes",
		"/sys/fs/cgroup/system.slice/docker-" + c.id + ".scope/memory.peak",
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return n
		}
	}
	return -1
}
