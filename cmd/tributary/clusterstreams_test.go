package main

import (
	"flag"
	"io"
	"testing"

	"github.com/tributarydb/tributary/coordinator"
)

// TestCoordinatorFlags_ClusterMaxStreams: --cluster-max-streams sets the
// cluster listener's streams per connection; left out, Options.Validate
// puts the default in; zero and non-numbers are refused.
func TestCoordinatorFlags_ClusterMaxStreams(t *testing.T) {
	parse := func(args ...string) (coordinator.Options, error) {
		var o coordinator.Options
		var f coordinatorFlags
		fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs, &o, false)
		return o, fs.Parse(args)
	}
	o, err := parse("--cluster-max-streams", "64")
	if err != nil || o.ClusterLimits.MaxStreams != 64 {
		t.Fatalf("--cluster-max-streams 64: MaxStreams %d, err %v", o.ClusterLimits.MaxStreams, err)
	}
	o, err = parse()
	if err != nil {
		t.Fatal(err)
	}
	if o.ClusterLimits.MaxStreams != 0 {
		t.Fatalf("without the flag MaxStreams %d, want 0 (the default comes from Validate)", o.ClusterLimits.MaxStreams)
	}
	for _, bad := range []string{"0", "-1", "many"} {
		if _, err := parse("--cluster-max-streams", bad); err == nil {
			t.Errorf("--cluster-max-streams %s accepted", bad)
		}
	}
}
