package walfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// MkdirAllDurable is MkdirAll whose result survives a power cut: the
// parent of every directory it creates is synced, so that the new entries
// are durable. (A directory made and filled but never named in a synced
// parent may be gone, with everything in it, after a power cut.) A
// directory that exists already costs one ReadDir.
func MkdirAllDurable(fsys FS, dir string, perm os.FileMode) error {
	var created []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		_, err := fsys.ReadDir(p)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break // not a directory, no permission: MkdirAll says so
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		parent := filepath.Dir(created[i])
		if err := fsys.SyncDir(parent); err != nil {
			return fmt.Errorf("sync %s after creating %s: %w", parent, filepath.Base(created[i]), err)
		}
	}
	return nil
}
