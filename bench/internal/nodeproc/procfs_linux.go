package nodeproc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// readUsage reads /proc/PID/stat and /proc/PID/status.
func readUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("read node cpu time: %w", err)
	}
	cpu, err := parseStatCPU(stat, clockTicks)
	if err != nil {
		return Usage{}, fmt.Errorf("read node cpu time: %w", err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, fmt.Errorf("read node memory: %w", err)
	}
	hwm, err := statusKB(status, "VmHWM")
	if err != nil {
		return Usage{}, fmt.Errorf("read node memory: %w", err)
	}
	rss, err := statusKB(status, "VmRSS")
	if err != nil {
		return Usage{}, fmt.Errorf("read node memory: %w", err)
	}
	return Usage{CPU: cpu, HWMBytes: hwm * 1024, RSSBytes: rss * 1024}, nil
}

// parseStatCPU returns utime+stime from the contents of /proc/PID/stat.
// The command name (field 2) is in parentheses and may itself contain
// spaces and parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat []byte, ticksPerSecond int64) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	// After ')' come fields 3 (state), 4, ...; utime and stime are fields
	// 14 and 15, so indices 11 and 12 here.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the command name, want at least 13", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed utime/stime %q %q", f[11], f[12])
	}
	ticks := utime + stime
	return time.Duration(ticks) * time.Second / time.Duration(ticksPerSecond), nil
}

// statusKB returns the value in kB of a "Key:   123 kB" line of
// /proc/PID/status.
func statusKB(status []byte, key string) (int64, error) {
	for line := range strings.SplitSeq(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed %s line %q", key, line)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no %s line in status", key)
}

// clockTicks is USER_HZ, the unit of utime and stime: AT_CLKTCK from the
// auxiliary vector, or 100, its value on every architecture Tributary builds
// for, if that cannot be read.
var clockTicks = readClockTicks()

func readClockTicks() int64 {
	const atClkTck = 17
	auxv, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	word := strconv.IntSize / 8
	for i := 0; i+2*word <= len(auxv); i += 2 * word {
		var key, val uint64
		if word == 8 {
			key = binary.NativeEndian.Uint64(auxv[i:])
			val = binary.NativeEndian.Uint64(auxv[i+word:])
		} else {
			key = uint64(binary.NativeEndian.Uint32(auxv[i:]))
			val = uint64(binary.NativeEndian.Uint32(auxv[i+word:]))
		}
		if key == atClkTck && val > 0 {
			return int64(val)
		}
		if key == 0 {
			break
		}
	}
	return 100
}

// sysProcAttr puts the node in its own process group, so that a Ctrl-C at
// the terminal reaches only the benchmark, which then stops the node with
// SIGTERM; and asks the kernel to SIGTERM the node if the benchmark dies
// first, so that no node outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// maxRSSBytes is ru_maxrss of the exited process; Linux reports it in KiB.
func maxRSSBytes(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return int64(ru.Maxrss) * 1024
	}
	return 0
}

// SelfCPU is the user plus system CPU time this process (the benchmark
// driver) has used so far.
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("read own cpu time: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// MachineCPU reads the first line of /proc/stat: the CPU time every process
// on the machine has used (busy) and the time that passed on all CPUs
// together (total), both since boot. Comparing two readings with a process's
// own CPU time says how much of the machine other work took meanwhile.
func MachineCPU() (busy, total time.Duration, err error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("read machine cpu time: %w", err)
	}
	return parseMachineCPU(stat, clockTicks)
}

// parseMachineCPU reads the "cpu" line of /proc/stat: user nice system idle
// iowait irq softirq steal guest guest_nice, in clock ticks. Idle and iowait
// are not busy; steal (time the hypervisor gave to other guests) is, as it
// is time this machine's work could not run; guest time is already counted
// in user and nice.
func parseMachineCPU(stat []byte, ticksPerSecond int64) (busy, total time.Duration, err error) {
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("malformed /proc/stat cpu line %q", line)
	}
	var idle, sum int64
	for i, v := range f[1:min(len(f), 9)] { // through steal
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("malformed /proc/stat cpu line %q", line)
		}
		sum += n
		if i == 3 || i == 4 { // idle, iowait
			idle += n
		}
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / time.Duration(ticksPerSecond) }
	return tick(sum - idle), tick(sum), nil
}
