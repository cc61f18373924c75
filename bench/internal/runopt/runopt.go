// Package runopt holds the options every system benchmark that starts
// tributary processes shares, so that each benchmark's Options embeds them
// instead of declaring, defaulting and checking them again: which binary
// it starts and how (Procs), and where its figures go (Output).
//
// tribench fills both from the same flags for every workload.
package runopt

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"time"
)

// Procs says how a benchmark starts its tributary processes.
type Procs struct {
	// Binary is the tributary executable.
	Binary string
	// WorkDir is where the run's temporary work directory (data
	// directories and process logs) is made; "" means the system temp
	// directory.
	WorkDir string
	// KeepDataDir keeps the work directory after a successful run (a
	// failed run always keeps it).
	KeepDataDir bool
	// NodeArgs are extra arguments for every `tributary node` start;
	// CoordinatorArgs for every `tributary coordinator` start.
	NodeArgs        []string
	CoordinatorArgs []string
	// Env is added to the environment of every process.
	Env []string
	// ReadyTimeout bounds each process start; StopTimeout each process's
	// exit after SIGTERM (a node flushes its head to RocksDB first).
	ReadyTimeout time.Duration
	StopTimeout  time.Duration
}

// Problems lists what is wrong with p; a benchmark's Validate joins them
// with its own.
func (p Procs) Problems() []error {
	var errs []error
	if p.Binary == "" {
		errs = append(errs, errors.New("--binary is required (build it with make build)"))
	}
	if p.ReadyTimeout <= 0 || p.StopTimeout <= 0 {
		errs = append(errs, errors.New("ready and stop timeouts must be positive"))
	}
	return errs
}

// Output says where a benchmark's figures go.
type Output struct {
	// Commit names the code measured, for the JSON line.
	Commit string
	// Out receives the table and, last, the JSON line.
	Out io.Writer
	// Logger reports progress; nil discards.
	Logger *slog.Logger
}

// DefaultOutput writes to standard output for code of unknown commit.
func DefaultOutput() Output { return Output{Commit: "unknown", Out: os.Stdout} }

// Problems lists what is wrong with o.
func (o Output) Problems() []error {
	if o.Out == nil {
		return []error{errors.New("out is required")}
	}
	return nil
}

// Log is o's Logger, or one that discards when it is nil.
func (o Output) Log() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}
