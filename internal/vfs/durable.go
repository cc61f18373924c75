package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// TempSuffix is appended to a file's name to make the name of the
// temporary file WriteFileAtomic writes before renaming it into place.
const TempSuffix = ".tmp"

// ErrTooLarge is returned (wrapped) by ReadFile for a file larger than
// its bound.
var ErrTooLarge = errors.New("file larger than its bound")

// WriteFileAtomic replaces the file name with the concatenation of data,
// atomically and durably: it writes name+TempSuffix (created with perm,
// truncated if it exists), fsyncs it, renames it over name and fsyncs
// name's directory. When it returns nil the new contents survive a power
// cut; whatever it returns, name holds either the old contents or the new
// ones, whole. (Several slices spare a caller the copy of joining them.)
//
// NB: both fsyncs are needed. Without the file's, a power cut can keep the
// rename but not the data, leaving name empty or torn; without the
// directory's, it can undo the rename and bring the old contents back
// after the caller reported them replaced.
//
// On an error the temporary file may be left behind; it is a write that
// never happened.
func WriteFileAtomic(fsys FS, name string, perm os.FileMode, data ...[]byte) error {
	tmp := name + TempSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	for _, b := range data {
		if _, err := f.Write(b); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", tmp, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	dir := filepath.Dir(name)
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// ReadFile returns the contents of name. A file larger than maxBytes is
// refused with an error wrapping ErrTooLarge, before anything is
// allocated for it.
func ReadFile(fsys FS, name string, maxBytes int64) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > maxBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than %d: %w", name, size, maxBytes, ErrTooLarge)
	}
	data := make([]byte, size)
	n, err := f.ReadAt(data, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, err
	}
	return data, nil
}

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
