//go:build !unix

package replica

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
