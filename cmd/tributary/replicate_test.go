package main

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestReplicateInsecureTargets checks which plaintext replication targets the
// edge accepts: loopback always, other hosts only with
// --replicate-insecure-anywhere, which itself needs --replicate-insecure.
func TestReplicateInsecureTargets(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cases := []struct {
		args    []string
		wantErr string // empty: accepted
	}{
		{[]string{"--replicate-to", "127.0.0.1:7443,localhost:7443", "--replicate-insecure"}, ""},
		{[]string{"--replicate-to", "c1:7443", "--replicate-insecure"}, "only to loopback coordinators"},
		{[]string{"--replicate-to", "127.0.0.1:7443,10.0.0.2:7443", "--replicate-insecure"}, `"10.0.0.2"`},
		{[]string{"--replicate-to", "c1:7443,c2:7443", "--replicate-insecure", "--replicate-insecure-anywhere"}, ""},
		{[]string{"--replicate-to", "c1:7443", "--replicate-insecure-anywhere"}, "needs --replicate-insecure"},
		{[]string{"--replicate-insecure-anywhere"}, "without --replicate-to"},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var rf replicateFlags
		rf.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%q: parse: %v", c.args, err)
		}
		o, err := rf.options(t.TempDir(), log)
		if c.wantErr == "" {
			if err != nil {
				t.Errorf("%q: %v", c.args, err)
			} else if o == nil || !o.Insecure || o.TLS != nil {
				t.Errorf("%q: options %+v, want plaintext replication", c.args, o)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: accepted, want an error mentioning %q", c.args, c.wantErr)
			continue
		}
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%q: error %v, want a usage error mentioning %q", c.args, err, c.wantErr)
		}
	}
}
