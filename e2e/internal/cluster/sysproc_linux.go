package cluster

import "syscall"

// sysProcAttr makes the kernel kill a child when the test process dies
// (a go test timeout, a panic), so no coordinator outlives its test.
// NB: the signal fires when the thread that started the child exits; the
// Go runtime keeps its threads unless a goroutine locked to one ends, which
// the harness never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
