// Command tributary is Tributary's single binary: the storage node, the
// coordinator, both in one process (local), and the client commands. Run `tributary help` for the list.
//
// This is the only package that calls os.Exit: each subcommand parses its
// flags into an Options struct and returns an error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/tributarydb/tributary/internal/telemetry"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name, summary string
	run           func(args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"node", "run a storage node (gRPC, InfluxDB, OpenTSDB and Prometheus APIs), optionally replicating to coordinators; `node repair` checks and repairs a stopped node's store; `node restore` brings a replaced node's history back from the coordinators", runNode},
		{"coordinator", "run a cloud coordinator: raft catalog member, replica store, segment intake, fleet-wide queries", runCoordinator},
		{"local", "run a coordinator and an edge node in one process on a local data dir (writes to the edge, queries fleet-wide)", runLocal},
		{"write", "write points from a file or stdin (line protocol or CSV) and print a summary", runWrite},
		{"query", "query a server: raw, downsampled, grouped or last point (table, CSV or JSON)", runQuery},
		{"series", "list the series matching a selector", runSeries},
		{"labels", "list label names, or the values of one label", runLabels},
		{"status", "print a server's state (also a connection and token check)", runStatus},
		{"cluster", "the coordinators' cluster and the fleet's placement: members, add, promote, remove, transfer, config, edges, place, rebalance, drain, revoke-edge, decommission-edge", runCluster},
		{"rules", "`rules check FILE...` validates Prometheus rule files as promtool does; `rules backfill` evaluates recording rules over history into a node", runRules},
		{"compact", "compact a stopped node's store and print its size as JSON", runCompact},
		{"version", "print the version", func(_ []string, out, _ io.Writer) error {
			_, err := fmt.Fprintln(out, "tributary", version)
			return err
		}},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(args[1:], stdout, stderr)
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				fmt.Fprintf(stderr, "tributary %s: %v\n", c.name, err)
				return 2
			default:
				fmt.Fprintf(stderr, "tributary %s: %v\n", c.name, err)
				return 1
			}
		}
	}
	fmt.Fprintf(stderr, "tributary: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprintln(w, "Tributary: an edge-to-cloud time-series database.")
	fmt.Fprintln(w, "\nUsage: tributary <command> [flags]  (tributary <command> -h for its flags)")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	l, err := telemetry.NewLogger(w, level, format)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	return l, nil
}
