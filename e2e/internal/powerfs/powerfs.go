// Package powerfs is a FUSE file system for power-cut tests of real
// processes: a passthrough to a backing directory that remembers what the
// processes made durable, and Cut, which unmounts and rewrites the backing
// directory to exactly that durable state.
//
// Durable state follows POSIX strictly:
//
//   - a file's contents are those of its last fsync or fdatasync (the
//     contents it had at mount time if it was never synced since);
//   - a directory's entries (creates, renames, unlinks, hard links) are
//     those of its last fsync (its entries at mount time if it was never
//     synced since; none for a directory made after the mount).
//
// So a write without fsync, a new file whose directory was not synced, and
// a rename without a directory fsync are all forgotten by Cut. With
// Options.TornTail, Cut keeps a random prefix of a file's unsynced
// appends, as a disk that wrote some sectors of them before the power went
// out.
//
// Files are identified across renames by their backing inode number; a
// file created while mounted gets a new identity even when the backing file
// system reuses an inode number. Symbolic links, special files and extended
// attributes are passed through but not remembered: Cut fails on a durable
// entry that is neither a regular file nor a directory.
//
// Mounting needs /dev/fuse and permission to mount (root or fusermount);
// Available says whether this process has them.
//
// Concurrency: an FS is safe for concurrent use by the processes that use
// its mount point. Cut, Remount and Unmount must not run concurrently with
// each other.
package powerfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options configure an FS.
type Options struct {
	// TornTail makes Cut keep a random prefix of each file's unsynced
	// appends (bytes written past its synced length, the synced part
	// unchanged) instead of none of them.
	TornTail bool
	// Seed seeds the random prefixes of TornTail; 0 picks one from the
	// clock.
	Seed uint64
}

// Available reports why this process cannot mount a FUSE file system, or
// nil when it can.
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("powerfs: cannot open /dev/fuse: %w", err)
	}
	f.Close()
	if os.Geteuid() == 0 {
		return nil
	}
	for _, name := range []string{"fusermount3", "fusermount"} {
		if _, err := exec.LookPath(name); err == nil {
			return nil
		}
	}
	return errors.New("powerfs: not root and no fusermount in PATH: cannot mount")
}

// FS is a mounted power-cut file system.
type FS struct {
	Backing    string // the directory that holds the files
	Mountpoint string // where the processes see them

	opts   Options
	rng    *rand.Rand
	server *fuse.Server
	st     *state
	cuts   int
}

// CutStats describe what a Cut forgot.
type CutStats struct {
	Files        int   // regular files kept
	Dirs         int   // directories kept
	Reverted     int   // files whose contents went back to their last sync
	DroppedBytes int64 // bytes of contents forgotten over every file
	TornKept     int64 // bytes of unsynced appends kept by TornTail
	Forgotten    int   // directory entries that were not durable
	Resurrected  int   // durable entries whose unlink or rename was not durable
}

func (s CutStats) String() string {
	return fmt.Sprintf("%d files and %d directories kept, %d files reverted (%d bytes dropped, %d torn bytes kept), %d entries forgotten, %d resurrected",
		s.Files, s.Dirs, s.Reverted, s.DroppedBytes, s.TornKept, s.Forgotten, s.Resurrected)
}

// Mount mounts a passthrough of backing (an existing directory) on
// mountpoint (made if missing). Everything in backing at this moment is
// durable.
func Mount(backing, mountpoint string, o Options) (*FS, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, fmt.Errorf("powerfs: backing %q: %w", backing, err)
	}
	if fi, err := os.Stat(backing); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("powerfs: backing %q is not a directory (%v)", backing, err)
	}
	if err := os.MkdirAll(mountpoint, 0o755); err != nil {
		return nil, fmt.Errorf("powerfs: mount point: %w", err)
	}
	seed := o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	f := &FS{Backing: backing, Mountpoint: mountpoint, opts: o, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	return f, f.mount()
}

func (f *FS) mount() error {
	st, err := snapshot(f.Backing)
	if err != nil {
		return err
	}
	var bst syscall.Stat_t
	if err := syscall.Stat(f.Backing, &bst); err != nil {
		return fmt.Errorf("powerfs: stat %s: %w", f.Backing, err)
	}
	root := &gofs.LoopbackRoot{Path: f.Backing, Dev: uint64(bst.Dev)}
	root.NewNode = func(r *gofs.LoopbackRoot, _ *gofs.Inode, _ string, _ *syscall.Stat_t) gofs.InodeEmbedder {
		return &node{LoopbackNode: gofs.LoopbackNode{RootData: r}, st: st}
	}
	rn := &node{LoopbackNode: gofs.LoopbackNode{RootData: root}, st: st}
	root.RootNode = rn
	zero := time.Duration(0)
	server, err := gofs.Mount(f.Mountpoint, rn, &gofs.Options{
		// No kernel caching of names or attributes: a file's size and a
		// directory's entries always come from the backing directory.
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{FsName: "powerfs", Name: "powerfs", AllowOther: os.Geteuid() == 0},
	})
	if err != nil {
		return fmt.Errorf("powerfs: mount %s on %s: %w", f.Backing, f.Mountpoint, err)
	}
	f.server, f.st = server, st
	return nil
}

// Unmount unmounts the file system and leaves the backing directory as it
// is (everything written stays). It does nothing when not mounted.
func (f *FS) Unmount() error {
	if f.server == nil {
		return nil
	}
	var err error
	for range 50 {
		if err = f.server.Unmount(); err == nil {
			f.server.Wait()
			f.server = nil
			return nil
		}
		time.Sleep(100 * time.Millisecond) // busy: a process is still exiting
	}
	return fmt.Errorf("powerfs: unmount %s: %w", f.Mountpoint, err)
}

// Remount mounts the backing directory again after Cut or Unmount; what
// it holds now is durable.
func (f *FS) Remount() error {
	if f.server != nil {
		return fmt.Errorf("powerfs: %s is mounted", f.Mountpoint)
	}
	return f.mount()
}

// Cut is a power cut: it unmounts the file system (every process using it
// must have exited) and rewrites the backing directory to its durable
// state. Call Remount to use it again.
func (f *FS) Cut() (CutStats, error) {
	if f.server == nil {
		return CutStats{}, fmt.Errorf("powerfs: cut %s: not mounted", f.Mountpoint)
	}
	if err := f.Unmount(); err != nil {
		return CutStats{}, err
	}
	f.cuts++
	st := f.st
	st.mu.Lock()
	defer st.mu.Unlock()
	// What the backing directory holds now, by identity: the contents of
	// every file (for the statistics and torn tails) and every entry.
	cur, err := scan(f.Backing, st)
	if err != nil {
		return CutStats{}, err
	}
	var cs CutStats
	plan := &tree{}
	if err := st.plan(st.root, plan, cur, &cs, f, 0); err != nil {
		return cs, err
	}
	// Entries that exist now but not in the durable state.
	for id, names := range cur.entries {
		durable := st.dirs[id]
		for name := range names {
			if _, ok := durable[name]; !ok {
				cs.Forgotten++
			}
		}
		for name := range durable {
			if _, ok := names[name]; !ok {
				cs.Resurrected++
			}
		}
	}
	ents, err := os.ReadDir(f.Backing)
	if err != nil {
		return cs, fmt.Errorf("powerfs: cut: %w", err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(f.Backing, e.Name())); err != nil {
			return cs, fmt.Errorf("powerfs: cut: %w", err)
		}
	}
	if err := plan.write(f.Backing); err != nil {
		return cs, err
	}
	return cs, nil
}

// tree is a directory to write.
type tree struct {
	files map[string][]byte
	dirs  map[string]*tree
}

func (t *tree) write(dir string) error {
	for name, b := range t.files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("powerfs: cut: %w", err)
		}
	}
	for name, sub := range t.dirs {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			return fmt.Errorf("powerfs: cut: %w", err)
		}
		if err := sub.write(p); err != nil {
			return err
		}
	}
	return nil
}

// plan fills t with the durable contents of directory id.
func (s *state) plan(id int, t *tree, cur *current, cs *CutStats, f *FS, depth int) error {
	if depth > 256 {
		return errors.New("powerfs: cut: directories nested too deep (a cycle?)")
	}
	t.files, t.dirs = map[string][]byte{}, map[string]*tree{}
	for name, child := range s.dirs[id] {
		if s.isDir[child] {
			sub := &tree{}
			cs.Dirs++
			if err := s.plan(child, sub, cur, cs, f, depth+1); err != nil {
				return err
			}
			t.dirs[name] = sub
			continue
		}
		if !s.isFile[child] {
			return fmt.Errorf("powerfs: cut: durable entry %q is neither a regular file nor a directory", name)
		}
		cs.Files++
		durable := s.files[child]
		now, known := cur.contents[child]
		out := durable
		if known && string(now) != string(durable) {
			cs.Reverted++
			if f.opts.TornTail && len(now) > len(durable) && string(now[:len(durable)]) == string(durable) {
				keep := f.rng.IntN(len(now) - len(durable) + 1)
				out = now[:len(durable)+keep]
				cs.TornKept += int64(keep)
			}
			if d := int64(len(now) - len(out)); d > 0 {
				cs.DroppedBytes += d
			}
		}
		t.files[name] = out
	}
	return nil
}

// state is what was made durable, by identity.
type state struct {
	mu     sync.Mutex
	next   int
	root   int
	ids    map[uint64]int         // backing inode number → identity
	isDir  map[int]bool           // identities of directories
	isFile map[int]bool           // identities of regular files
	files  map[int][]byte         // durable contents
	dirs   map[int]map[string]int // durable entries
}

func (s *state) idOf(ino uint64, mode uint32) int {
	if id, ok := s.ids[ino]; ok {
		return id
	}
	return s.fresh(ino, mode)
}

// fresh gives ino a new identity (a file made while mounted).
func (s *state) fresh(ino uint64, mode uint32) int {
	s.next++
	id := s.next
	s.ids[ino] = id
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		s.isDir[id] = true
	case syscall.S_IFREG:
		s.isFile[id] = true
	}
	return id
}

// snapshot makes every file and directory under dir durable.
func snapshot(dir string) (*state, error) {
	s := &state{ids: map[uint64]int{}, isDir: map[int]bool{}, isFile: map[int]bool{},
		files: map[int][]byte{}, dirs: map[int]map[string]int{}}
	var rst syscall.Stat_t
	if err := syscall.Lstat(dir, &rst); err != nil {
		return nil, fmt.Errorf("powerfs: %w", err)
	}
	s.root = s.fresh(rst.Ino, rst.Mode)
	cur, err := scan(dir, s)
	if err != nil {
		return nil, err
	}
	s.files, s.dirs = cur.contents, cur.entries
	return s, nil
}

// current is what a backing directory holds now.
type current struct {
	contents map[int][]byte
	entries  map[int]map[string]int
}

// scan reads the tree under dir, giving unknown inodes identities.
func scan(dir string, s *state) (*current, error) {
	c := &current{contents: map[int][]byte{}, entries: map[int]map[string]int{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		id := s.idOf(st.Ino, st.Mode)
		if p != dir {
			parent, err := lstatID(filepath.Dir(p), s)
			if err != nil {
				return err
			}
			if c.entries[parent] == nil {
				c.entries[parent] = map[string]int{}
			}
			c.entries[parent][d.Name()] = id
		}
		switch {
		case d.IsDir():
			if c.entries[id] == nil {
				c.entries[id] = map[string]int{}
			}
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			c.contents[id] = b
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("powerfs: scan %s: %w", dir, err)
	}
	return c, nil
}

func lstatID(p string, s *state) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return 0, err
	}
	return s.idOf(st.Ino, st.Mode), nil
}

// node is a loopback node that records fsyncs and new inodes.
type node struct {
	gofs.LoopbackNode
	st *state
}

var (
	_ gofs.NodeFsyncer = (*node)(nil)
	_ gofs.NodeCreater = (*node)(nil)
	_ gofs.NodeMkdirer = (*node)(nil)
	_ gofs.NodeMknoder = (*node)(nil)

	_ gofs.NodeOpendirHandler = (*node)(nil)
)

// dirStream is what the loopback's directory handle implements.
type dirStream interface {
	gofs.FileReaddirenter
	gofs.FileSeekdirer
	gofs.FileReleasedirer
	gofs.FileFsyncdirer
}

// dirHandle is an open directory whose fsync records its entries.
type dirHandle struct {
	dirStream
	n *node
}

// Fsyncdir syncs the directory: its entries become durable.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if errno := d.dirStream.Fsyncdir(ctx, flags); errno != 0 {
		return errno
	}
	return d.n.syncDir()
}

// OpendirHandle opens a directory with a handle whose fsync is recorded.
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	fh, ff, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return fh, ff, errno
	}
	ds, ok := fh.(dirStream)
	if !ok {
		return nil, 0, syscall.EIO
	}
	return &dirHandle{dirStream: ds, n: n}, ff, 0
}

func (n *node) backingPath() string {
	return filepath.Join(n.RootData.Path, n.Path(n.RootData.RootNode.EmbeddedInode()))
}

// born gives a just-made backing inode a new identity.
func (n *node) born(out *fuse.EntryOut) {
	n.st.mu.Lock()
	n.st.fresh(out.Attr.Ino, out.Attr.Mode)
	n.st.mu.Unlock()
}

// Create creates a file; it is a new identity.
func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	in, fh, ff, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno == 0 {
		n.born(out)
	}
	return in, fh, ff, errno
}

// Mkdir makes a directory; it is a new identity with no durable entries.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	in, errno := n.LoopbackNode.Mkdir(ctx, name, mode, out)
	if errno == 0 {
		n.born(out)
	}
	return in, errno
}

// Mknod makes a file node; it is a new identity.
func (n *node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	in, errno := n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	if errno == 0 {
		n.born(out)
	}
	return in, errno
}

// Fsync syncs a file (its contents become durable) or a directory (its
// entries become durable).
func (n *node) Fsync(ctx context.Context, f gofs.FileHandle, flags uint32) syscall.Errno {
	if n.IsDir() { // reached only for a handle without Fsyncdir
		return n.syncDir()
	}
	if fs, ok := f.(gofs.FileFsyncer); ok {
		if errno := fs.Fsync(ctx, flags); errno != 0 {
			return errno
		}
	}
	pf, ok := f.(interface{ PassthroughFd() (int, bool) })
	if !ok {
		return syscall.EIO
	}
	fd, ok := pf.PassthroughFd()
	if !ok {
		return syscall.EIO
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return gofs.ToErrno(err)
	}
	// The handle may be write-only: read the same file (even an
	// unlinked one) through a new descriptor.
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return gofs.ToErrno(err)
	}
	n.st.mu.Lock()
	defer n.st.mu.Unlock()
	id := n.st.idOf(st.Ino, st.Mode)
	n.st.files[id] = b
	return 0
}

func (n *node) syncDir() syscall.Errno {
	p := n.backingPath()
	ents, err := os.ReadDir(p)
	if err != nil {
		return gofs.ToErrno(err)
	}
	n.st.mu.Lock()
	defer n.st.mu.Unlock()
	id, err := lstatID(p, n.st)
	if err != nil {
		return gofs.ToErrno(err)
	}
	m := map[string]int{}
	for _, e := range ents {
		cid, err := lstatID(filepath.Join(p, e.Name()), n.st)
		if err != nil {
			continue // removed meanwhile
		}
		m[e.Name()] = cid
	}
	n.st.dirs[id] = m
	return 0
}

// Durable maps the path (relative to the mount point) of every durable
// regular file to its durable size.
func (f *FS) Durable() map[string]int {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	out := map[string]int{}
	var walk func(id int, prefix string, depth int)
	walk = func(id int, prefix string, depth int) {
		if depth > 256 {
			return
		}
		names := make([]string, 0, len(f.st.dirs[id]))
		for name := range f.st.dirs[id] {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			c := f.st.dirs[id][name]
			p := filepath.Join(prefix, name)
			if f.st.isDir[c] {
				walk(c, p, depth+1)
			} else {
				out[p] = len(f.st.files[c])
			}
		}
	}
	walk(f.st.root, "", 0)
	return out
}
