package fleetbench

import (
	"os"
	"strings"
	"sync"

	"github.com/tributarydb/tributary/internal/vfs"
)

// fewFDs is the file system of the simulated edges: the real one, except
// that a file opened for appending (a replicator's segment summaries,
// which a real edge keeps open for its whole life) holds its descriptor
// only from a Write to the Sync after it. A real edge holds one such
// descriptor; 10,000 simulated edges in one process would hold 10,000,
// and with their 10,000 connections pass the machine's open-file limit
// (20,000 here). Reopening costs an open and a close per segment an edge
// seals, a few hundred a second across the fleet.
type fewFDs struct{ vfs.OS }

var _ vfs.FS = fewFDs{}

// OpenFile implements vfs.FS.
func (f fewFDs) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&os.O_APPEND == 0 || flag&(os.O_WRONLY|os.O_RDWR) == 0 || !strings.HasSuffix(name, ".segments") {
		return f.OS.OpenFile(name, flag, perm)
	}
	// Open once now, so that an error (a missing directory, say) comes
	// where the caller expects it; later opens drop O_CREATE, O_EXCL and
	// O_TRUNC, which only the first may act on.
	file, err := f.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if err := file.Close(); err != nil {
		return nil, err
	}
	return &reopened{fs: f.OS, name: name, flag: flag &^ (os.O_CREATE | os.O_EXCL | os.O_TRUNC), perm: perm}, nil
}

// reopened is an append-only file whose descriptor is open from a Write
// (or any other call) until the next Sync or Close.
type reopened struct {
	fs   vfs.OS
	name string
	flag int
	perm os.FileMode

	mu sync.Mutex
	f  vfs.File // nil while closed
}

// with calls fn with the file open, opening it if needed.
func (r *reopened) with(fn func(vfs.File) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		f, err := r.fs.OpenFile(r.name, r.flag, r.perm)
		if err != nil {
			return err
		}
		r.f = f
	}
	return fn(r.f)
}

// release closes the descriptor, if open.
func (r *reopened) release() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

func (r *reopened) Write(p []byte) (n int, err error) {
	err = r.with(func(f vfs.File) error {
		n, err = f.Write(p)
		return err
	})
	return n, err
}

func (r *reopened) ReadAt(p []byte, off int64) (n int, err error) {
	err = r.with(func(f vfs.File) error {
		n, err = f.ReadAt(p, off)
		return err
	})
	return n, err
}

// Sync makes the file durable and lets its descriptor go.
func (r *reopened) Sync() error {
	if err := r.with(func(f vfs.File) error { return f.Sync() }); err != nil {
		return err
	}
	return r.release()
}

func (r *reopened) Truncate(size int64) error {
	return r.with(func(f vfs.File) error { return f.Truncate(size) })
}

func (r *reopened) Size() (size int64, err error) {
	err = r.with(func(f vfs.File) error {
		size, err = f.Size()
		return err
	})
	return size, err
}

func (r *reopened) Close() error { return r.release() }
