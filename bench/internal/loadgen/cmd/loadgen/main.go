// Command loadgen is `tribench load` on its own: the continuous sensor write
// load of the docker-compose cluster. Unlike tribench it links no RocksDB,
// so it builds with CGO_ENABLED=0 into a static binary for a FROM-scratch
// image.
//
//	loadgen --targets e1:7070,e2:7070,e3:7070 [--series 64] [--interval 1s]
//
// It runs until SIGINT or SIGTERM and exits 0, or 2 on bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tributarydb/tributary/bench/internal/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	options := loadgen.Flags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	o, err := options()
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(2)
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	if _, err := loadgen.Run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
}
