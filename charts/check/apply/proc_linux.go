package apply

import "syscall"

// sysProcAttr has the kernel kill a child when the test binary dies (a
// test timeout panics without running Stop), so no etcd or kube-apiserver
// is left behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
