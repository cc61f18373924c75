package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/tributarydb/tributary/bench/internal/loadgen"
)

// runLoad writes the sensor workload to running edge nodes until ctx ends.
func runLoad(ctx context.Context, args []string, stderr io.Writer, logger *slog.Logger) error {
	fs := newFlagSet("tribench load", stderr)
	options := loadgen.Flags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	o, err := options()
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	o.Logger = logger
	_, err = loadgen.Run(ctx, o)
	return err
}
