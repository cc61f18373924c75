package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// ErrCrashed is returned by every method of a CrashFS, and of the files
// opened through it, after Crash: the process that used it died with the
// machine.
var ErrCrashed = errors.New("vfs: file system crashed")

// ErrSkipSync, returned by a fault function for OpSync or OpSyncDir, makes
// the Sync or SyncDir report success without making anything durable, as a
// disk that acknowledges a flush it did not do. Crash tests use it to show
// that they notice a missing fsync. For any other operation it is an
// ordinary error.
var ErrSkipSync = errors.New("vfs: sync skipped")

// Op names a CrashFS operation for fault injection.
type Op string

// Operations passed to a fault function.
const (
	OpOpen     Op = "open"
	OpWrite    Op = "write"
	OpRead     Op = "read"
	OpSync     Op = "sync"
	OpTruncate Op = "truncate"
	OpRename   Op = "rename"
	OpRemove   Op = "remove"
	OpSyncDir  Op = "syncdir"
)

// CrashFS is an in-memory FS that keeps, for every file, which bytes were
// fsynced and, for every directory, which entries were synced, so that
// Crash can drop everything a power cut may drop.
//
// Model:
//   - File contents become durable at File.Sync. Writes always append.
//     Truncating below the synced size is itself not durable until the
//     next Sync.
//   - A creation, rename or removal becomes durable at SyncDir of the
//     directory holding the entry (both directories for a rename; each
//     directory independently, as on a real file system).
//   - Directories themselves, once made with MkdirAll, never vanish:
//     the model covers losing files, entries and bytes, not directories.
//
// After Crash or CrashTorn the CrashFS value and every file opened through
// it return ErrCrashed, like a process killed by the power cut; the returned
// CrashFS is the machine after reboot. A CrashFS is safe for concurrent use.
type CrashFS struct {
	d   *disk
	gen uint64
	// fault is called before each operation; a non-nil error fails it.
	// REQUIRES: d.mu held to read or write.
	fault func(op Op, path string) error
}

var _ FS = (*CrashFS)(nil)

type disk struct {
	mu   sync.Mutex
	gen  uint64
	dirs map[string]*dirNode
}

type dirNode struct {
	entries map[string]*inode // as the running process sees them
	synced  map[string]*inode // as they stand after a crash
}

type inode struct {
	data      []byte
	syncedLen int
	// syncedData holds the durable contents when they are no longer a
	// prefix of data (the file was truncated below syncedLen since the
	// last Sync). nil otherwise.
	syncedData []byte
}

// NewCrashFS returns an empty CrashFS holding only the root directory.
func NewCrashFS() *CrashFS {
	d := &disk{dirs: map[string]*dirNode{}}
	d.dirs[string(filepath.Separator)] = newDirNode()
	d.dirs["."] = newDirNode()
	return &CrashFS{d: d}
}

func newDirNode() *dirNode {
	return &dirNode{entries: map[string]*inode{}, synced: map[string]*inode{}}
}

// SetFault installs f, called before every operation with the operation and
// the path it applies to; a non-nil error is returned instead of doing the
// operation (a failed Sync makes nothing durable; a failed Write writes
// nothing), except ErrSkipSync (see there). f may sleep to simulate a slow
// disk, or call Crash to cut the power in the middle of an operation. nil
// removes the fault.
func (c *CrashFS) SetFault(f func(op Op, path string) error) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.fault = f
}

// check reports ErrCrashed or the injected fault for op on path.
// REQUIRES: c.d.mu held. It drops the lock while calling the fault function
// so that the function may sleep without stalling other callers.
func (c *CrashFS) check(op Op, path string) error {
	if c.gen != c.d.gen {
		return ErrCrashed
	}
	if c.fault == nil {
		return nil
	}
	f := c.fault
	c.d.mu.Unlock()
	err := f(op, path)
	c.d.mu.Lock()
	if c.gen != c.d.gen {
		return ErrCrashed
	}
	return err
}

func clean(name string) string { return filepath.Clean(name) }

func (c *CrashFS) lookupDir(op, name string) (*dirNode, string, error) {
	name = clean(name)
	dn := c.d.dirs[filepath.Dir(name)]
	if dn == nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return dn, filepath.Base(name), nil
}

// OpenFile implements FS. O_CREATE, O_EXCL and O_TRUNC are honoured; every
// Write appends, whatever the flags.
func (c *CrashFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if err := c.check(OpOpen, name); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	name = clean(name)
	if c.d.dirs[name] != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	}
	dn, base, err := c.lookupDir("open", name)
	if err != nil {
		return nil, err
	}
	ino := dn.entries[base]
	switch {
	case ino == nil && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case ino == nil:
		ino = &inode{}
		dn.entries[base] = ino
	case flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	writable := flag&(os.O_WRONLY|os.O_RDWR) != 0
	if flag&os.O_TRUNC != 0 && writable {
		ino.truncate(0)
	}
	return &crashFile{fs: c, ino: ino, name: name, writable: writable}, nil
}

// Rename implements FS.
func (c *CrashFS) Rename(oldpath, newpath string) error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if err := c.check(OpRename, oldpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	odn, obase, err := c.lookupDir("rename", oldpath)
	if err != nil {
		return err
	}
	ndn, nbase, err := c.lookupDir("rename", newpath)
	if err != nil {
		return err
	}
	ino := odn.entries[obase]
	if ino == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrNotExist}
	}
	if c.d.dirs[clean(newpath)] != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: errors.New("is a directory")}
	}
	delete(odn.entries, obase)
	ndn.entries[nbase] = ino
	return nil
}

// Remove implements FS. Directories cannot be removed.
func (c *CrashFS) Remove(name string) error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if err := c.check(OpRemove, name); err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	dn, base, err := c.lookupDir("remove", name)
	if err != nil {
		return err
	}
	if dn.entries[base] == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(dn.entries, base)
	return nil
}

// ReadDir implements FS.
func (c *CrashFS) ReadDir(dir string) ([]string, error) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if err := c.check(OpRead, dir); err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: err}
	}
	dir = clean(dir)
	dn := c.d.dirs[dir]
	if dn == nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	names := slices.Collect(maps.Keys(dn.entries))
	for p := range c.d.dirs {
		if p != dir && filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll implements FS. Directories are durable as soon as they exist.
func (c *CrashFS) MkdirAll(dir string, perm os.FileMode) error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if err := c.check(OpOpen, dir); err != nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	return c.mkdirAll(clean(dir))
}

func (c *CrashFS) mkdirAll(dir string) error {
	if c.d.dirs[dir] != nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := c.mkdirAll(parent); err != nil {
			return err
		}
	}
	if dn := c.d.dirs[parent]; dn != nil && dn.entries[filepath.Base(dir)] != nil {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: errors.New("not a directory")}
	}
	c.d.dirs[dir] = newDirNode()
	return nil
}

// SyncDir implements FS.
func (c *CrashFS) SyncDir(dir string) error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	err := c.check(OpSyncDir, dir)
	if err != nil && !errors.Is(err, ErrSkipSync) {
		return &fs.PathError{Op: "sync", Path: dir, Err: err}
	}
	dn := c.d.dirs[clean(dir)]
	if dn == nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: fs.ErrNotExist}
	}
	if err == nil {
		dn.synced = maps.Clone(dn.entries)
	}
	return nil
}

// ReadFile returns the current contents of name (a test helper).
func (c *CrashFS) ReadFile(name string) ([]byte, error) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.gen != c.d.gen {
		return nil, ErrCrashed
	}
	dn, base, err := c.lookupDir("read", name)
	if err != nil {
		return nil, err
	}
	ino := dn.entries[base]
	if ino == nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return slices.Clone(ino.data), nil
}

// WriteFile replaces the contents of name with data and makes the file and
// its directory entry durable, as if the disk had always held them (a test
// helper: set up or damage files). The file's directory must exist.
func (c *CrashFS) WriteFile(name string, data []byte) error {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.gen != c.d.gen {
		return ErrCrashed
	}
	dn, base, err := c.lookupDir("write", name)
	if err != nil {
		return err
	}
	ino := &inode{data: slices.Clone(data), syncedLen: len(data)}
	dn.entries[base] = ino
	dn.synced[base] = ino
	return nil
}

// Crash simulates a power cut: every byte not fsynced and every directory
// change not synced is lost. It returns the file system as the rebooted
// machine sees it; c and its open files fail with ErrCrashed from now on.
func (c *CrashFS) Crash() *CrashFS { return c.crash(nil) }

// CrashTorn is Crash with torn writes, drawn from rng: each file keeps a
// random prefix of its unsynced bytes, and each unsynced directory change
// is randomly kept or undone, as a real disk may have written some of them
// back before the power went.
func (c *CrashFS) CrashTorn(rng *rand.Rand) *CrashFS { return c.crash(rng) }

func (c *CrashFS) crash(rng *rand.Rand) *CrashFS {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.gen++
	// Visit directories and names in sorted order so that a seeded rng
	// always makes the same choices.
	paths := slices.Sorted(maps.Keys(c.d.dirs))
	seen := map[*inode]bool{}
	for _, p := range paths {
		dn := c.d.dirs[p]
		var entries map[string]*inode
		if rng == nil {
			entries = maps.Clone(dn.synced)
		} else {
			entries = map[string]*inode{}
			names := slices.Collect(maps.Keys(dn.entries))
			names = append(names, slices.Collect(maps.Keys(dn.synced))...)
			slices.Sort(names)
			for _, name := range slices.Compact(names) {
				ino := dn.synced[name]
				if cur := dn.entries[name]; cur != ino && rng.IntN(2) == 0 {
					ino = cur
				}
				if ino != nil {
					entries[name] = ino
				}
			}
		}
		dn.entries, dn.synced = entries, maps.Clone(entries)
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			if ino := entries[name]; !seen[ino] {
				seen[ino] = true
				ino.crash(rng)
			}
		}
	}
	return &CrashFS{d: c.d, gen: c.d.gen}
}

func (ino *inode) crash(rng *rand.Rand) {
	durable := ino.syncedData
	if durable == nil {
		n := ino.syncedLen
		if rng != nil && len(ino.data) > n {
			n += rng.IntN(len(ino.data) - n + 1)
		}
		durable = ino.data[:n]
	}
	ino.data = slices.Clone(durable)
	ino.syncedLen = len(ino.data)
	ino.syncedData = nil
}

func (ino *inode) truncate(size int64) {
	if int(size) < ino.syncedLen && ino.syncedData == nil {
		ino.syncedData = slices.Clone(ino.data[:ino.syncedLen])
	}
	if int(size) <= len(ino.data) {
		// Clip capacity so a later append cannot write into bytes that a
		// caller of ReadFile might still share.
		ino.data = ino.data[:size:size]
		return
	}
	ino.data = append(ino.data, make([]byte, int(size)-len(ino.data))...)
}

// Files returns the paths of every file, sorted (a test helper).
func (c *CrashFS) Files() []string {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	var out []string
	for p, dn := range c.d.dirs {
		for name := range dn.entries {
			out = append(out, filepath.Join(p, name))
		}
	}
	slices.Sort(out)
	return out
}

type crashFile struct {
	fs       *CrashFS
	ino      *inode
	name     string
	writable bool
	closed   bool
}

func (f *crashFile) begin(op Op) error {
	if f.closed {
		return fs.ErrClosed
	}
	if err := f.fs.check(op, f.name); err != nil {
		return err
	}
	if f.closed {
		return fs.ErrClosed
	}
	if (op == OpWrite || op == OpTruncate) && !f.writable {
		return errors.New("file not open for writing")
	}
	return nil
}

func (f *crashFile) Write(p []byte) (int, error) {
	f.fs.d.mu.Lock()
	defer f.fs.d.mu.Unlock()
	if err := f.begin(OpWrite); err != nil {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: err}
	}
	f.ino.data = append(f.ino.data, p...)
	return len(p), nil
}

func (f *crashFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.d.mu.Lock()
	defer f.fs.d.mu.Unlock()
	if err := f.begin(OpRead); err != nil {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fmt.Errorf("negative offset %d", off)}
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *crashFile) Sync() error {
	f.fs.d.mu.Lock()
	defer f.fs.d.mu.Unlock()
	if err := f.begin(OpSync); errors.Is(err, ErrSkipSync) {
		return nil
	} else if err != nil {
		return &fs.PathError{Op: "sync", Path: f.name, Err: err}
	}
	f.ino.syncedLen = len(f.ino.data)
	f.ino.syncedData = nil
	return nil
}

func (f *crashFile) Truncate(size int64) error {
	f.fs.d.mu.Lock()
	defer f.fs.d.mu.Unlock()
	if err := f.begin(OpTruncate); err != nil {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: err}
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fmt.Errorf("negative size %d", size)}
	}
	f.ino.truncate(size)
	return nil
}

func (f *crashFile) Size() (int64, error) {
	f.fs.d.mu.Lock()
	defer f.fs.d.mu.Unlock()
	if f.closed {
		return 0, &fs.PathError{Op: "stat", Path: f.name, Err: fs.ErrClosed}
	}
	if f.fs.gen != f.fs.d.gen {
		return 0, &fs.PathError{Op: "stat", Path: f.name, Err: ErrCrashed}
	}
	return int64(len(f.ino.data)), nil
}

func (f *crashFile) Close() error {
	f.fs.d.mu.Lock()
	defer f.fs.d.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	if f.fs.gen != f.fs.d.gen {
		return &fs.PathError{Op: "close", Path: f.name, Err: ErrCrashed}
	}
	return nil
}

// String describes the file system for debugging: every file with its
// current and durable sizes.
func (c *CrashFS) String() string {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(c.d.dirs)) {
		dn := c.d.dirs[p]
		for _, name := range slices.Sorted(maps.Keys(dn.entries)) {
			ino := dn.entries[name]
			fmt.Fprintf(&b, "%s size=%d synced=%d entrySynced=%v\n", filepath.Join(p, name), len(ino.data), ino.syncedLen, dn.synced[name] == ino)
		}
	}
	return b.String()
}
