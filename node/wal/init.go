package wal

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/tributarydb/tributary/internal/vfs"
)

// InitSequence prepares the empty log directory dir so that the first
// segment Open creates is numbered next, with prevSeq next-1: it writes
// the state file (see "Files" in the package doc) and nothing else. A
// node restored from the cloud starts its log this way, after every
// sequence number the cloud has recorded for it, so that its new
// segments neither collide with the cloud's numbers nor leave a hole
// below them.
//
// dir is created (durably) if missing. A directory that holds anything
// (a segment, a state file, quarantine/) is refused: sequence numbers
// never go back, and a log that was used has its own. fsys nil is the
// real file system. Durable when it returns nil.
func InitSequence(fsys FS, dir string, next uint64) error {
	if fsys == nil {
		fsys = vfs.OS{}
	}
	if next == 0 {
		return fmt.Errorf("init wal %s: sequence numbers start at 1, not 0", dir)
	}
	names, err := fsys.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := vfs.MkdirAllDurable(fsys, dir, 0o755); err != nil {
			return fmt.Errorf("init wal %s: create directory: %w", dir, err)
		}
	case err != nil:
		return fmt.Errorf("init wal %s: list directory: %w", dir, err)
	case len(names) > 0:
		return fmt.Errorf("init wal %s: the directory is not empty (holds %q): a used log keeps its own sequence numbers", dir, names[0])
	}
	l := &Log{opts: Options{Dir: dir}, fs: fsys}
	if err := l.writeState(next, next-1); err != nil {
		return fmt.Errorf("init wal %s at sequence %d: %w", dir, next, err)
	}
	return nil
}
