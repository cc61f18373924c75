package main

import (
	"io"
	"os"
	"runtime/debug"
	"testing"
)

// TestNodeCmd_GoMemoryLimit: the node's Go memory budget defaults to twice
// --head-max-bytes plus the base, follows --go-memory-limit, and is off
// with a negative value; the limit put in place is at least the budget
// (more while the test process's own live heap is larger), and stopping
// it puts the previous limit back.
func TestNodeCmd_GoMemoryLimit(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set: the flag is ignored")
	}
	prev := debug.SetMemoryLimit(-1)
	for _, tt := range []struct {
		name string
		args []string
		want int64 // the budget; <= 0: none, the limit stays prev
	}{
		{"default", nil, 2*(32<<20) + nodeGoMemoryBase},
		{"from the head bound", []string{"--head-max-bytes", "8388608"}, 2*(8<<20) + nodeGoMemoryBase},
		{"set", []string{"--go-memory-limit", "268435456"}, 256 << 20},
		{"off", []string{"--go-memory-limit", "-1"}, -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseNodeArgs(append([]string{"--data-dir", t.TempDir()}, tt.args...), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.goMemoryBudget(); got != tt.want {
				t.Errorf("budget %d, want %d", got, tt.want)
			}
			stop := c.startMemoryLimit()
			got := debug.SetMemoryLimit(-1)
			stop()
			switch {
			case tt.want <= 0 && got != prev:
				t.Errorf("soft memory limit %d with no budget, want the previous %d", got, prev)
			case tt.want > 0 && got < tt.want:
				t.Errorf("soft memory limit %d, below the budget %d", got, tt.want)
			}
			if after := debug.SetMemoryLimit(-1); after != prev {
				t.Errorf("limit after stop %d, want the previous %d", after, prev)
			}
		})
	}
}
