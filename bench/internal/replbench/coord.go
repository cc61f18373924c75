package replbench

import (
	"context"
	"fmt"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
)

// coordSpec is how to start one coordinator; restarts reuse it (same data
// directory and ports).
type coordSpec struct {
	id   string // --id, "c1" …
	opts nodeproc.Options
}

// coordProc is a running coordinator process.
type coordProc struct {
	*nodeproc.Node
	id string
}

// startCoord starts a coordinator and waits for its ready line.
func startCoord(ctx context.Context, spec coordSpec) (*coordProc, error) {
	n, err := nodeproc.Start(ctx, spec.opts)
	if err != nil {
		return nil, fmt.Errorf("coordinator %s: %w", spec.id, err)
	}
	return &coordProc{Node: n, id: spec.id}, nil
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
