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
