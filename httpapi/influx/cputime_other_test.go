//go:build !unix

package influx

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
