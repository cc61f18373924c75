//go:build !unix

package prom

import "time"

// processCPU is 0 where getrusage does not exist: no cpu-ns/op.
func processCPU() time.Duration { return 0 }
