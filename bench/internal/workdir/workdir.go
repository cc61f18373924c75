// Package workdir holds a system benchmark run's work directory: a fresh
// temporary directory with the node's data directory in it, beside which the
// run writes its node logs. When the run is over the directory is removed,
// unless the run failed or the user asked to keep it (--keep): a failed
// run's data directory and node logs are what a post-mortem needs.
//
// A Dir is not safe for concurrent use.
package workdir

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// Dir is one run's work directory.
type Dir struct {
	// Path is the work directory.
	Path string
	// DataDir is the empty directory Path/data, for the node's --data-dir.
	DataDir string

	keep   bool
	logger *slog.Logger
}

// Make makes a work directory named prefix and a random suffix in parent
// ("" means the system temp directory), with an empty data directory in it.
// With keep set, Finish always keeps it. logger, which must not be nil, says
// where a kept directory is.
func Make(parent, prefix string, keep bool, logger *slog.Logger) (*Dir, error) {
	path, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, fmt.Errorf("make work dir: %w", err)
	}
	d := &Dir{Path: path, DataDir: filepath.Join(path, "data"), keep: keep, logger: logger}
	if err := os.Mkdir(d.DataDir, 0o755); err != nil {
		err = fmt.Errorf("make data dir: %w", err)
		d.Finish(err)
		return nil, err
	}
	return d, nil
}

// Finish ends the run that returned runErr: it removes the work directory if
// the run succeeded and Make was not asked to keep it, and otherwise logs
// where the directory is kept.
func (d *Dir) Finish(runErr error) {
	if d.keep || runErr != nil {
		d.logger.Info("kept work directory", "dir", d.Path)
		return
	}
	if err := os.RemoveAll(d.Path); err != nil {
		d.logger.Warn("remove work directory", "dir", d.Path, "err", err)
	}
}
