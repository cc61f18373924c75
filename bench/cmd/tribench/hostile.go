package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/tributarydb/tributary/bench/internal/hostilebench"
	"github.com/tributarydb/tributary/internal/hostile"
)

func runHostile(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	o := hostilebench.Options{Sizes: hostile.DefaultSizes()}
	s := &o.Sizes
	fs := newFlagSet("tribench hostile", stderr)
	procFlags(fs, &o.Procs, "the coordinator and the node", "keep")
	fs.IntVar(&s.Writes, "writes", s.Writes, "unauthenticated Write calls on each gRPC client listener")
	fs.IntVar(&s.WriteBytes, "write-bytes", s.WriteBytes, "message size of each")
	fs.IntVar(&s.Streams, "streams", s.Streams, "raft streams, replica calls (per certificate) and ship streams on each coordinator")
	fs.IntVar(&s.StreamBytes, "stream-bytes", s.StreamBytes, "first message size of each")
	fs.IntVar(&s.Lines, "lines", s.Lines, "concurrent single-line bodies on the node's /write, with a valid token")
	fs.IntVar(&s.LineFields, "line-fields", s.LineFields, "fields of each line (ten bytes a field)")
	fs.IntVar(&s.HalfOpen, "half-open", s.HalfOpen, "half-open TLS handshakes, spread over every TLS listener")
	fs.DurationVar(&s.Hold, "hold", s.Hold, "how long the half-open connections wait for the servers to close them")
	fs.DurationVar(&o.Quiet, "quiet", 0, "quiet window before the attacks whose peaks are the baseline (default 10s)")
	fs.BoolVar(&o.AttackerNice, "attacker-nice", true, "run the attacker at nice 19, as if it were another machine")
	inProcess := fs.Bool("attacker-in-process", false, "run the attacks in this process (at this process's priority) instead of a child process")
	if err := parseRun(ctx, fs, args, &o.Output, stdout, logger); err != nil {
		return err
	}
	if !*inProcess {
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this executable for the attacker process: %w", err)
		}
		o.AttackerCmd = []string{self, "hostile-attacker"}
	}
	_, err := hostilebench.Run(ctx, o)
	return err
}

// runHostileAttacker is the attacker process of tribench hostile: it runs
// the plan its parent wrote (hostile.ServePlan).
func runHostileAttacker(ctx context.Context) error {
	served, err := hostile.ServePlan(ctx)
	if err != nil {
		return err
	}
	if !served {
		return fmt.Errorf("hostile-attacker is started by tribench hostile (no %s in the environment)", hostile.PlanEnv)
	}
	return nil
}
