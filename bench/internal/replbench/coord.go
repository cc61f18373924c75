package replbench

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
)

// coordSpec is how to start one coordinator; restarts reuse it (same data
// directory and ports).
type coordSpec struct {
	Binary                      string
	ID                          string // --id, "c1" …
	RaftID                      int
	DataDir                     string
	Peers                       string // --peers, the same on every member
	Cluster, Intake, GRPC, HTTP string
	LogPath                     string
}

func (s coordSpec) options(timeout time.Duration, logger *slog.Logger) nodeproc.Options {
	return nodeproc.Options{Binary: s.Binary, Command: "coordinator", DataDir: s.DataDir, ListenAddr: s.GRPC,
		ExtraArgs: []string{"--id", s.ID, "--raft-id", strconv.Itoa(s.RaftID), "--insecure-cluster", "--peers", s.Peers,
			"--cluster-listen", s.Cluster, "--intake-listen", s.Intake, "--http-listen", s.HTTP},
		LogPath: s.LogPath, ReadyTimeout: timeout, Logger: logger}
}

// coordProc is a running coordinator process.
type coordProc struct {
	*nodeproc.Node
	id string
}

// startCoord starts a coordinator and waits for its ready line.
func startCoord(ctx context.Context, spec coordSpec, timeout time.Duration, logger *slog.Logger) (*coordProc, error) {
	n, err := nodeproc.Start(ctx, spec.options(timeout, logger))
	if err != nil {
		return nil, fmt.Errorf("coordinator %s: %w", spec.ID, err)
	}
	return &coordProc{Node: n, id: spec.ID}, nil
}

// kill SIGKILLs the coordinator, as a crash or a lost site would end it,
// and waits for it to exit.
func (p *coordProc) kill() { _, _ = p.Kill() }

// stop sends SIGTERM and waits up to timeout, then SIGKILLs.
func (p *coordProc) stop(timeout time.Duration) error {
	if _, err := p.Stop(timeout); err != nil {
		return fmt.Errorf("coordinator %s: %w", p.id, err)
	}
	return nil
}
