package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRun_ExitCodes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"no workload", nil, 2, "usage: tribench"},
		{"help", []string{"-h"}, 0, "workloads:"},
		{"unknown workload", []string{"no-such-workload"}, 2, `unknown workload "no-such-workload"`},
		{"ingest flags", []string{"ingest", "-h"}, 0, "-points-per-series-per-batch"},
		{"demo flags", []string{"demo", "-h"}, 0, "-vehicles"},
		{"bad flag", []string{"ingest", "--nope"}, 2, "flag provided but not defined"},
		{"stray argument", []string{"demo", "extra"}, 2, "unexpected arguments: extra"},
		{"invalid options", []string{"demo", "--vehicles", "0"}, 1, "vehicles must be positive"},
		{"missing binary", []string{"ingest", "--binary", "/nonexistent/tributary", "--commit", "test"}, 1, "find tributary binary"},
		{"restart flags", []string{"restart", "-h"}, 0, "-wal-mib"},
		{"restart invalid options", []string{"restart", "--wal-mib", "0", "--max-load", "20m", "--commit", "test"}, 1, "wal size must be positive"},
		{"lp flags", []string{"lp", "-h"}, 0, "-batch-lines"},
		{"lp invalid options", []string{"lp", "--hosts", "0", "--commit", "test"}, 1, "hosts must be positive"},
		{"demo http flag", []string{"demo", "-h"}, 0, "-http-addr"},
		{"restart missing binary", []string{"restart", "--binary", "/nonexistent/tributary", "--commit", "test"}, 1, "find tributary binary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.wantStderr, stderr.String())
			}
		})
	}
}

// TestWorkloads_UsageListsEveryWorkload holds the usage text and the
// workloads table to each other: every workload the usage names runs, and
// every workload that runs is in the usage, but the child processes of
// hostile and rollup.
func TestWorkloads_UsageListsEveryWorkload(t *testing.T) {
	_, list, ok := strings.Cut(usage, "workloads:\n")
	if !ok {
		t.Fatal("no workloads: section in the usage")
	}
	list, _, _ = strings.Cut(list, "\n\n")
	listed := map[string]bool{}
	for _, line := range strings.Split(list, "\n") {
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") {
			listed[strings.Fields(line)[0]] = true
		}
	}
	for name := range listed {
		if workloads[name] == nil {
			t.Errorf("the usage lists %q, which does not run", name)
		}
	}
	for name := range workloads {
		if !listed[name] && name != "hostile-attacker" && name != "rollup-cold" {
			t.Errorf("workload %q is not in the usage", name)
		}
	}
}
