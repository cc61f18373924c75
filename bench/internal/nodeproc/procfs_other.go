//go:build !linux

package nodeproc

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// errNoProc is returned where /proc does not exist.
var errNoProc = errors.New("process statistics need Linux /proc")

func readUsage(int) (Usage, error) { return Usage{}, errNoProc }

func sysProcAttr() *syscall.SysProcAttr { return nil }

func maxRSSBytes(*os.ProcessState) int64 { return 0 }

// SelfCPU is the user plus system CPU time this process (the benchmark
// driver) has used so far.
func SelfCPU() (time.Duration, error) { return 0, errNoProc }

// MachineCPU is the busy and total CPU time of the whole machine; it needs
// Linux /proc.
func MachineCPU() (busy, total time.Duration, err error) { return 0, 0, errNoProc }
