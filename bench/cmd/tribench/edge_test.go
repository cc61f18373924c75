package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRun_EdgeWorkloadFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{"iotdb flags", []string{"iotdb", "-h"}, 0, "-out-of-order-ratio"},
		{"iotdb bad clients", []string{"iotdb", "--clients", "1,x"}, 2, "not a list of integers"},
		{"iotdb too many clients", []string{"iotdb", "--clients", "1,10", "--binary", "/bin/sh", "--commit", "test"}, 1, "client count 10"},
		{"tsbs flags", []string{"tsbs-cpu", "-h"}, 0, "-query-clients"},
		{"tsbs short span", []string{"tsbs-cpu", "--span", "1h", "--binary", "/bin/sh", "--commit", "test"}, 1, "span must exceed 12 hours"},
		{"canbus flags", []string{"canbus", "-h"}, 0, "-points-per-request"},
		{"canbus missing binary", []string{"canbus", "--binary", "/nonexistent/tributary", "--commit", "test"}, 1, "find tributary binary"},
		{"bad profile", []string{"canbus", "--profile", "medium", "--binary", "/bin/sh", "--commit", "test"}, 1, "profile must be short or full"},
		{"rollup bad profile", []string{"rollup", "--profile", "medium"}, 2, "--profile must be short or full"},
		{"rollup-cold without a query", []string{"rollup-cold"}, 2, "usage: tribench rollup-cold"},
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
