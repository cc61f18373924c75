//go:build !linux

package apply

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal; Stop ends
// the children.
func sysProcAttr() *syscall.SysProcAttr { return nil }
