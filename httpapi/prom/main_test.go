package prom

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine (a handler, the
// node, an HTTP server) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
