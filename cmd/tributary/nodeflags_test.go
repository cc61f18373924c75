package main

import (
	"flag"
	"io"
	"testing"

	"github.com/tributarydb/tributary/node"
)

// TestNodeFlags_IdleCompact: the idle compaction is on unless
// --idle-compact=false turns it off.
func TestNodeFlags_IdleCompact(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool // NoIdleCompact
	}{
		{nil, false},
		{[]string{"--idle-compact"}, false},
		{[]string{"--idle-compact=true"}, false},
		{[]string{"--idle-compact=false"}, true},
	} {
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o node.Options
		nf := nodeFlags(fs, &o)
		if _, err := nf.parse(fs, tc.args, io.Discard); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if o.NoIdleCompact != tc.want {
			t.Errorf("%q: NoIdleCompact = %v, want %v", tc.args, o.NoIdleCompact, tc.want)
		}
	}
}
