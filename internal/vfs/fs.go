package vfs

import (
	"io"
	"os"
)

// FS is what the project's durable files need from a file system.
type FS interface {
	// OpenFile opens name with os.OpenFile flags. Writers open with
	// os.O_APPEND: every Write goes to the end of the file.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Rename moves oldpath to newpath, replacing newpath. The change is
	// durable only after SyncDir of both parent directories.
	Rename(oldpath, newpath string) error
	// Remove deletes a file. Durable only after SyncDir of its directory.
	Remove(name string) error
	// ReadDir lists the names in dir, files and directories, sorted.
	ReadDir(dir string) ([]string, error)
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes the entries of dir (creations, renames, removals)
	// durable.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.Writer
	io.ReaderAt
	io.Closer
	// Sync makes the file's contents durable (fsync).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Size returns the file's current size.
	Size() (int64, error)
}

// OS is the real file system.
type OS struct{}

var _ FS = OS{}

// OpenFile implements FS.
func (OS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Rename implements FS.
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// ReadDir implements FS.
func (OS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// MkdirAll implements FS.
func (OS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// SyncDir implements FS.
func (OS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
