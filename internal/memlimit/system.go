package memlimit

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
)

// System returns the memory this process may use, in bytes: the machine's
// memory (MemTotal of /proc/meminfo) or, when smaller, the memory limit of
// a cgroup the process is in (cgroup v2 memory.max, or v1
// memory.limit_in_bytes, of its own group and every group above it). ok
// is false where none of these can be read (not Linux).
func System() (n int64, ok bool) {
	return systemMemory(os.ReadFile)
}

// systemMemory is System reading files through read (tests give a fake
// /proc and /sys).
func systemMemory(read func(string) ([]byte, error)) (int64, bool) {
	best := int64(-1)
	take := func(v int64) {
		if v > 0 && (best < 0 || v < best) {
			best = v
		}
	}
	if b, err := read("/proc/meminfo"); err == nil {
		take(memTotal(b))
	}
	if b, err := read("/proc/self/cgroup"); err == nil {
		for _, g := range cgroupPaths(b) {
			dir := "/sys/fs/cgroup"
			if g.v1 {
				dir = "/sys/fs/cgroup/memory"
			}
			// The limit of every group from the process's own up to the
			// root: a parent's (a systemd slice's) bounds the child too.
			for p := path.Clean("/" + g.path); ; p = path.Dir(p) {
				file := "memory.max"
				if g.v1 {
					file = "memory.limit_in_bytes"
				}
				if b, err := read(path.Join(dir, p, file)); err == nil {
					take(limitValue(b))
				}
				if p == "/" {
					break
				}
			}
		}
	}
	if best <= 0 {
		return 0, false
	}
	return best, true
}

// memTotal returns MemTotal of /proc/meminfo in bytes, or 0.
func memTotal(meminfo []byte) int64 {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb <= 0 || kb > 1<<50 {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// limitValue parses a cgroup memory limit file: a number of bytes; "max"
// (v2) or a number beyond any machine's memory (v1's "no limit") is 0.
func limitValue(b []byte) int64 {
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v >= 1<<60 {
		return 0
	}
	return v
}

// cgroupGroup is one line of /proc/self/cgroup that can hold a memory
// limit: the unified hierarchy (v2) or v1's memory controller.
type cgroupGroup struct {
	path string
	v1   bool
}

// cgroupPaths returns the groups of /proc/self/cgroup that can limit
// memory.
func cgroupPaths(b []byte) []cgroupGroup {
	var out []cgroupGroup
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			out = append(out, cgroupGroup{path: f[2]})
		case hasController(f[1], "memory"):
			out = append(out, cgroupGroup{path: f[2], v1: true})
		}
	}
	return out
}

// hasController reports whether the comma-separated list names c.
func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}
