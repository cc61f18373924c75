package coordinator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/tributarydb/tributary/internal/vfs"
)

// A coordinator's data directory:
//
//	<DataDir>/LOCK      flock(2)ed while a process uses the directory
//	<DataDir>/member    "node_id=<id>\nraft_id=<n>\n": the raft member
//	                    this directory belongs to, written once raft has
//	                    opened it (vfs.WriteFileAtomic: temp file,
//	                    fsync, rename, fsync dir)
//	<DataDir>/raft/     the raft log (coordinator/internal/raftlog)
//	<DataDir>/replica/  the replica store, whose identity is recorded in
//	                    it (replica.Store.ID)
//
// The member file makes a restarted coordinator use the raft id its log
// was written under, also when that is not the one its flags or host name
// give (a member that rejoined under a new raft id after losing its disk).

const (
	lockFile   = "LOCK"
	memberFile = "member"
	// maxMemberBytes bounds what ReadMember reads: a member file is two
	// short lines.
	maxMemberBytes = 64 << 10
)

// ErrDataDirInUse: another process holds the data directory's lock.
var ErrDataDirInUse = errors.New("data directory in use by another process")

// lockDataDir creates dir if needed and takes an exclusive lock on its
// LOCK file, held while the returned file stays open.
func lockDataDir(dir string) (*os.File, error) {
	if err := vfs.MkdirAllDurable(vfs.OS{}, dir, 0o755); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is locked (another tributary coordinator runs on this directory)", ErrDataDirInUse, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// RaftLogPresent reports whether the data directory holds a raft log
// (segments or a snapshot). A directory without one is fresh: a new
// member, or one that lost its disk.
func RaftLogPresent(dataDir string) (bool, error) {
	for _, d := range []string{filepath.Join(dataDir, "raft"), filepath.Join(dataDir, "raft", "snap")} {
		ents, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("read %s: %w", d, err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".rlog") || strings.HasSuffix(e.Name(), ".snap") {
				return true, nil
			}
		}
	}
	return false, nil
}

// Member is what a data directory's member file records.
type Member struct {
	NodeID string
	RaftID uint64
}

// ReadMember reads the data directory's member file (ok false when there
// is none).
func ReadMember(dataDir string) (m Member, ok bool, err error) {
	path := filepath.Join(dataDir, memberFile)
	b, err := vfs.ReadFile(vfs.OS{}, path, maxMemberBytes)
	if errors.Is(err, os.ErrNotExist) {
		return Member{}, false, nil
	}
	if err != nil {
		return Member{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, found := strings.Cut(line, "=")
		switch {
		case !found:
			return Member{}, false, fmt.Errorf("%s: line %q is not key=value", path, line)
		case k == "node_id":
			m.NodeID = v
		case k == "raft_id":
			if m.RaftID, err = strconv.ParseUint(v, 10, 64); err != nil || m.RaftID == 0 {
				return Member{}, false, fmt.Errorf("%s: raft_id %q is not a positive number", path, v)
			}
		default:
			return Member{}, false, fmt.Errorf("%s: unknown key %q", path, k)
		}
	}
	if m.NodeID == "" || m.RaftID == 0 {
		return Member{}, false, fmt.Errorf("%s: node_id and raft_id are both required", path)
	}
	return m, true, nil
}

// writeMember records m in the data directory, durably
// (vfs.WriteFileAtomic: a temp file, fsynced, renamed over the member
// file, then the directory fsynced; without the last a power cut can undo
// the rename).
func writeMember(dataDir string, m Member) error {
	path := filepath.Join(dataDir, memberFile)
	data := fmt.Sprintf("node_id=%s\nraft_id=%d\n", m.NodeID, m.RaftID)
	if err := vfs.WriteFileAtomic(vfs.OS{}, path, 0o644, []byte(data)); err != nil {
		return fmt.Errorf("write member file: %w", err)
	}
	return nil
}
