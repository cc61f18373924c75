//go:build !linux

package cluster

import "syscall"

// sysProcAttr: without Pdeathsig, children of a test process that dies
// must be killed by hand.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
