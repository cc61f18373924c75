package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
)

func runFanout(ctx context.Context, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	return errors.New("not built yet")
}
