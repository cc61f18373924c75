// Command pause is the sandbox ("pause") image of the make k8s-e2e cluster:
// it holds a pod's namespaces and sleeps until SIGTERM or SIGINT, like the
// upstream pause container, and reaps the orphans it inherits as PID 1.
// Built static (CGO_ENABLED=0) into a FROM-scratch image, so nothing is
// pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every exited child: as PID 1 the orphans of the pod are ours.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
